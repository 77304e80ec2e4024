"""The Python processes pearl starts beside a run's own (the local launcher's actors, the other learners of a
learner group): a fresh interpreter running one entry point, given its arguments pickled on stdin, so the user's
script is never imported again in the child; its stderr kept in a temporary file for the error message of a
child that dies (`stderr_tail`)."""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from typing import Any, Mapping


def start_child(entry: str, payload: Any, env: Mapping[str, str] | None = None,
                pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """Start `python -c entry` with `payload` pickled on its stdin (and `env`, and the file descriptors `pass_fds`
    kept open in it); its stdout is discarded, its stderr goes to a temporary file."""
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-c", entry], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=err, env=None if env is None else dict(env), pass_fds=pass_fds)
    proc.stderr_file = err  # type: ignore[attr-defined]
    assert proc.stdin is not None
    proc.stdin.write(pickle.dumps(payload))
    proc.stdin.close()
    return proc


def read_payload() -> Any:
    """In the child: what `start_child` pickled on its stdin."""
    return pickle.load(sys.stdin.buffer)


def stderr_tail(proc: subprocess.Popen, limit: int = 2000, last_line: bool = False) -> str:
    """': ' and the end of what the child printed to stderr (its last `limit` characters, or the first `limit`
    of its last line), for an error message; '' when it printed nothing."""
    err = getattr(proc, "stderr_file", None)
    if err is None:
        return ""
    err.seek(0)
    text = err.read().decode("utf-8", "replace").strip()
    if not text:
        return ""
    return f": {text.splitlines()[-1][:limit]}" if last_line else f": {text[-limit:]}"


def close_stderr(proc: subprocess.Popen) -> None:
    """Close the child's stderr file (once it has exited and its message, if any, was read)."""
    err = getattr(proc, "stderr_file", None)
    if err is not None:
        err.close()
