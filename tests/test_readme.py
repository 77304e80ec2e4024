"""The README's quick start is what CI runs, and what it shows matches the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the quick start has a bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_is_exactly_two_commands() -> None:
    commands = quick_start_commands()
    assert len(commands) == 2
    assert "pearl train" in commands[0] or "pearl quickstart" in commands[0]
    assert "pytest" in commands[1] and "[dev]" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert quick_start_commands()[1] in ci


def test_readme_has_no_unfilled_placeholders() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"\b[A-Z]+_(OUTPUT|SECTION)\b", readme)


def test_readme_is_short_and_shows_the_quick_start_first() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 150
    head = "\n".join(lines[:40])
    for command in quick_start_commands():
        assert command in head
    # the quick start's output block (what `pearl quickstart` prints) closes within the first 40 lines
    assert "$ pearl quickstart" in head and head.count("```") >= 4


def _anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_readme_links_to_docs_resolve() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", readme)
    assert any(path == "docs/MEASUREMENTS.md" for path, _ in links)
    for path, anchor in links:
        if path.startswith("http"):
            continue
        target = ROOT / path
        assert target.exists(), path
        if anchor:
            headings = [line.lstrip("#") for line in target.read_text(encoding="utf-8").splitlines()
                        if line.startswith("#")]
            assert anchor in {_anchor(h) for h in headings}, f"{path}#{anchor}"
