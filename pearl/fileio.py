"""Writing files so that an interrupted run never leaves half of one, and reading JSON with clear errors.

Every file pearl writes for later stages (profiles, plans, run records, kernel binaries and their
descriptors) goes through `write_atomic`: a temporary file in the same folder, then a rename, which either
happens whole or not at all.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pearl.errors import PearlError


def write_atomic(path: str | Path, data: bytes | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these files are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
    text = read_text(path, error, missing_hint)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON (truncated?) at line {exc.lineno}: {exc.msg}") from None
