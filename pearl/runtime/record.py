"""The run record: runs/<id>/ with config.json, metrics.jsonl (one line per second) and summary.json.

Metric names follow common RL logging keys (charts/SPS, charts/episodic_return, losses/td_loss) so the
lines read like any other RL log. JSON files are written atomically (temp file + rename): a run killed at
any moment leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from pearl.errors import RunDirError
from pearl.fileio import write_json_atomic

SCHEMA = "pearl.run/1"


class RunRecord:
    """Creates runs/<id>/ and writes the run's files into it."""

    def __init__(self, runs_dir: str | os.PathLike[str], algo: str, env_id: str, seed: int) -> None:
        root = Path(runs_dir)
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{algo}-{_slug(env_id)}-s{seed}"
        try:
            root.mkdir(parents=True, exist_ok=True)
            self.dir = _unique_dir(root, stem)
            self._metrics = open(self.dir / "metrics.jsonl", "a", encoding="utf-8")
        except OSError as exc:
            raise RunDirError(f"cannot write the run record under {root}: {exc.strerror or exc}; "
                              "pass --runs-dir with a writable folder") from None
        self.id = self.dir.name

    def write(self, name: str, obj: dict[str, Any]) -> Path:
        return write_json_atomic(self.dir / name, {"schema": SCHEMA, **obj}, indent=2)

    def log(self, metrics: dict[str, Any]) -> None:
        self._metrics.write(json.dumps(metrics) + "\n")
        self._metrics.flush()

    def close(self) -> None:
        self._metrics.close()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def _unique_dir(root: Path, stem: str) -> Path:
    for n in range(1000):
        path = root / (stem if n == 0 else f"{stem}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise OSError(f"too many runs named {stem}")
