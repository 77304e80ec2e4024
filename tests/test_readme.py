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
