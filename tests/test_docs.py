"""docs/ARCHITECTURE.md names every module of pearl/, and no document points at a file the repository lacks."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent

def module_files() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "pearl").rglob("*.py")}


def table_rows() -> list[tuple[str, str]]:
    """(first cell, whole row) of every row of the module table under 'Where each piece lives'."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Where each piece lives", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [(row.split("|")[1], row) for row in rows]


def named_files(first_cell: str, row: str) -> set[str]:
    """The module files a row names: paths in its first cell, siblings listed after a path (`a/b.py`, `c.py`),
    and, for a folder row (`pearl/x/`), every `name.py` of that folder the row mentions."""
    names: set[str] = set()
    folder: PurePosixPath | None = None
    for token in re.findall(r"`([^`]+)`", first_cell):
        if token.endswith("/"):
            folder = PurePosixPath(token)
            names.add(str(folder / "__init__.py"))
        elif "/" in token:
            names.add(token)
            folder = PurePosixPath(token).parent
        elif folder is not None:
            names.add(str(folder / token))
    if first_cell.strip().strip("`").endswith("/") and folder is not None:
        names |= {str(folder / name) for name in re.findall(r"`([\w]+\.py)`", row)}
    return names


def test_every_module_is_in_the_architecture_table() -> None:
    named: set[str] = set()
    for first_cell, row in table_rows():
        named |= named_files(first_cell, row)
    missing = sorted(module_files() - named)
    assert not missing, f"docs/ARCHITECTURE.md's module table does not name {missing}"
    stale = sorted(n for n in named if n.endswith(".py") and not (ROOT / n).exists())
    assert not stale, f"docs/ARCHITECTURE.md's module table names files that do not exist: {stale}"


def test_the_table_check_sees_a_missing_module() -> None:
    # the rule above is not vacuous: a folder row covers only the files it names
    assert named_files(" `pearl/replay/` ", "| `pearl/replay/` | `index.py` only |") == {
        "pearl/replay/__init__.py", "pearl/replay/index.py"}
    assert named_files(" `pearl/profiler/timing.py`, `power.py` ", "") == {
        "pearl/profiler/timing.py", "pearl/profiler/power.py"}


def test_no_document_or_module_cites_design_md() -> None:
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "pearl").rglob("*.py"),
             *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    citing = {f.relative_to(ROOT).as_posix() for f in files if "DESIGN.md" in f.read_text(encoding="utf-8")}
    citing.discard("tests/test_docs.py")
    assert not citing, f"{sorted(citing)} cite DESIGN.md, which the repository does not have"
