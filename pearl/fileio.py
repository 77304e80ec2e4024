"""Writing files so that an interrupted run never leaves half of one, and reading JSON and TOML with clear errors.

Every file pearl writes for later stages (profiles, plans, run records, kernel binaries and their
descriptors) goes through `write_atomic`: a temporary file in the same folder, then a rename, which either
happens whole or not at all.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, NoReturn

from pearl.errors import PearlError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: the run record's schema (runs/<id>/*.json): written by pearl/runtime/record.py, read by calibration
RUN_SCHEMA = "pearl.run/1"


class WriteError(PearlError):
    """An output file that cannot be written: its folder is a file, it is a folder, no permission, disk full."""


def write_atomic(path: str | Path, data: bytes | str, durable: bool = False) -> Path:
    """durable: also fsync the file before the rename and the folder after it, so the new file survives a
    crash of the machine, not only of the process (checkpoints ask for it)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these files are meant to be shared
        os.replace(tmp, path)
        if durable:
            _fsync_folder(path.parent)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # e.g. the path is a folder: a user error, not a pearl bug
            raise _cannot_write(path, exc) from None
        raise
    return path


def _cannot_write(path: Path, exc: OSError) -> WriteError:
    """The error for an output path that cannot be written, saying why in the user's terms where it can."""
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    why = (f"{blocker} is a file, not a folder" if blocker is not None else
           "it is a folder" if path.is_dir() else exc.strerror or str(exc))
    return WriteError(f"cannot write {path}: {why}; choose another path")


def writable_folder(path: str | Path) -> tuple[Path, str | None]:
    """The nearest existing path at or above path, and why a file cannot be made there (None when it can: it
    is a folder that takes a temporary file). Nothing is left behind."""
    existing = next((p for p in (Path(path), *Path(path).absolute().parents) if p.exists()), Path("/"))
    if not existing.is_dir():
        return existing, "is a file"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return existing, str(exc.strerror or exc)
    return existing, None


def check_writable(path: str | Path) -> Path:
    """WriteError unless path could be written: not a folder, and its nearest existing ancestor a folder that
    takes files. For commands that run a while before they write their output (a profile sweep): they check
    first. Nothing is left behind."""
    path = Path(path)
    if path.is_dir():
        raise WriteError(f"cannot write {path}: it is a folder; choose another path")
    existing, problem = writable_folder(path.absolute().parent)
    if not existing.is_dir():
        raise WriteError(f"cannot write {path}: {existing} is a file, not a folder; choose another path")
    if problem is not None:
        raise WriteError(f"cannot write {path}: {problem} in {existing}; choose another path")
    return path


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: str | Path, obj: Any, indent: int = 1) -> Path:
    return write_atomic(path, json.dumps(obj, indent=indent) + "\n")


def read_text(path: str | Path, error: type[PearlError], missing_hint: str) -> str:
    """The file's text, or `error` naming the file: missing (with missing_hint) or unreadable."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: {missing_hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read it ({exc})") from None


def read_json(path: str | Path, error: type[PearlError], missing_hint: str) -> Any:
    """The parsed file, or `error` naming the file: missing (with missing_hint), unreadable, or not JSON."""
    return _parse(path, read_text(path, error, missing_hint), error, json.loads, "JSON", "arrays or objects")


def read_toml(path: str | Path, error: type[PearlError], missing_hint: str) -> Any:
    """The parsed file, or `error` naming the file: missing (with missing_hint), unreadable, or not TOML."""
    return _parse(path, read_text(path, error, missing_hint), error, tomllib.loads, "TOML", "arrays or tables")


def _parse(path: str | Path, text: str, error: type[PearlError], loads: Callable[[str], Any], fmt: str,
           containers: str) -> Any:
    """loads(text), each way a parser fails as one `error` naming the file."""
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON (truncated?) at line {exc.lineno}: {exc.msg}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML ({exc})") from None
    except ValueError:  # an integer literal longer than Python converts (4300 digits by default)
        raise error(f"{path}: not a usable {fmt} file: it holds a number with thousands of digits") from None
    except RecursionError:
        raise error(f"{path}: not a usable {fmt} file: its {containers} are nested too deeply") from None


def finite_number(value: Any, positive: bool = False) -> float | None:
    """value as a float when it is a finite number >= 0 (> 0 when positive), else None.

    JSON and TOML both allow NaN, infinities and integers too large for a float; none of them is a usable
    time, rate or power figure. Booleans are ints in Python but never a figure.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        return None
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        return None
    return number


#: Integers beyond 2**53 lose digits as floats, which pearl computes in.
MAX_INT = 2**53


class FieldChecker:
    """Checks of the fields of one JSON document (a profile, a plan, a run's config.json): a field that is
    missing or of the wrong kind raises `error` with one line naming the file and the field's path."""

    def __init__(self, where: str, error: type[PearlError]) -> None:
        self.where, self.error = where, error

    def fail(self, path: str, expected: str, got: Any = ...) -> NoReturn:
        shown = "" if got is ... else f", got {got!r}"
        raise self.error(f"{self.where}: field '{path or '<top>'}' must be {expected}{shown}")

    def checked(self, d: dict, key: str, prefix: str, ok: Callable[[Any], bool], expected: str) -> Any:
        """d[key] when ok(it) holds (a missing key is None), else the failure naming the field and `expected`."""
        value = d.get(key)
        if not ok(value):
            self.fail(field_path(prefix, key), expected, value)
        return value

    def text(self, d: dict, key: str, prefix: str = "") -> str:
        return self.checked(d, key, prefix, lambda v: isinstance(v, str) and v != "", "a non-empty string")

    def integer(self, d: dict, key: str, prefix: str = "", minimum: int = 0, maximum: int = MAX_INT) -> int:
        return self.checked(d, key, prefix, lambda v: is_int(v) and minimum <= v <= maximum,
                            f"an integer from {minimum} to {maximum}")

    def number(self, d: dict, key: str, prefix: str = "", positive: bool = False) -> float:
        value = d.get(key)
        number = finite_number(value, positive)
        if number is None:
            self.fail(field_path(prefix, key), "a finite number > 0" if positive else "a finite number >= 0", value)
        return number

    def flag(self, d: dict, key: str, prefix: str = "") -> bool:
        return self.checked(d, key, prefix, lambda v: isinstance(v, bool), "true or false")

    def member(self, d: dict, key: str, prefix: str, allowed: set[str]) -> str:
        # only a string is looked up: a list or object is unhashable, no `in`
        return self.checked(d, key, prefix, lambda v: isinstance(v, str) and v in allowed,
                            f"one of {', '.join(sorted(allowed))}")

    def mapping(self, d: dict, key: str, prefix: str = "") -> dict:
        return self.checked(d, key, prefix, lambda v: isinstance(v, dict), "an object")


def is_int(value: Any) -> bool:
    """An int that is not a bool (JSON's true is no count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def field_path(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
