"""The run record: runs/<id>/ with config.json, metrics.jsonl (one line per second), TensorBoard event files
(events.out.tfevents.*), summary.json, and the checkpoints/ folder (pearl/runtime/checkpoint.py).

Metric names follow common RL logging keys (charts/SPS, charts/episodic_return, losses/td_loss) so the
lines read like any other RL log. Each metrics line is also written to TensorBoard, every number under its
own key at step = the line's `global_step`, so `tensorboard --logdir runs` shows every run as SB3's and
CleanRL's are shown. The events go through tensorboardX, a maintained writer that needs neither torch nor
TensorFlow (the record stays free of hardware libraries); without it the run keeps its JSON lines and says
once that TensorBoard files are missing. JSON files are written atomically (temp file + rename): a run killed at
any moment leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

from pearl.errors import RunDirError
from pearl.fileio import RUN_SCHEMA, writable_folder, write_json_atomic

SCHEMA = RUN_SCHEMA


class RunRecord:
    """Creates runs/<id>/ and writes the run's files into it."""

    def __init__(self, runs_dir: str | os.PathLike[str], algo: str, env_id: str, seed: int) -> None:
        root = Path(runs_dir)
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{algo}-{_slug(env_id)}-s{seed}"
        try:
            root.mkdir(parents=True, exist_ok=True)
            self.dir = _unique_dir(root, stem)
            self._metrics = open(self.dir / "metrics.jsonl", "a", encoding="utf-8")
            self._events = _event_writer(self.dir)
        except OSError as exc:
            raise RunDirError(f"cannot write the run record under {root}: {exc.strerror or exc}; "
                              "pass --runs-dir with a writable folder") from None
        self.id = self.dir.name

    @classmethod
    def reopen(cls, folder: str | os.PathLike[str]) -> "RunRecord":
        """An existing runs/<id>/ (a resumed run): metrics lines are appended, files rewritten."""
        self = cls.__new__(cls)
        self.dir = Path(folder)
        try:
            self._metrics = open(self.dir / "metrics.jsonl", "a", encoding="utf-8")
            self._events = _event_writer(self.dir)  # a new event file beside the first: TensorBoard reads both
        except OSError as exc:
            raise RunDirError(f"cannot write the run record in {self.dir}: {exc.strerror or exc}") from None
        self.id = self.dir.name
        return self

    def write(self, name: str, obj: dict[str, Any]) -> Path:
        return write_json_atomic(self.dir / name, {"schema": SCHEMA, **obj}, indent=2)

    def log(self, metrics: dict[str, Any]) -> None:
        self._metrics.write(json.dumps(metrics) + "\n")
        self._metrics.flush()
        if self._events is not None and isinstance(metrics.get("global_step"), int):
            step = metrics["global_step"]
            for key, value in metrics.items():
                if key != "global_step" and _scalar(value):
                    self._events.add_scalar(key, float(value), step)
            self._events.flush()  # like the JSON lines: a killed run keeps every line written so far

    def close(self) -> None:
        self._metrics.close()
        if self._events is not None:
            self._events.close()


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_warned = False


def _event_writer(folder: Path) -> Any:
    """A TensorBoard event writer into folder, or None (once warned) when tensorboardX is not installed."""
    global _warned
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        if not _warned:
            _warned = True
            warnings.warn("tensorboardX is not installed: runs write metrics.jsonl but no TensorBoard event "
                          "files (pip install tensorboardX)", stacklevel=3)
        return None
    # no background flushing thread needed: log() flushes each line itself
    return SummaryWriter(logdir=str(folder), flush_secs=3600)


def check_runs_dir(root: str | os.PathLike[str], needed_bytes: int) -> None:
    """RunDirError unless root exists or can be made, can be written, and has needed_bytes free: checked
    before a run starts, so a full disk or a read-only folder stops it before any work is done. Nothing is
    created: the check writes and removes a temporary file in root or its nearest existing ancestor."""
    existing, problem = writable_folder(root)
    if not existing.is_dir():
        raise RunDirError(f"cannot make the runs folder {root}: {existing} is a file; pass --runs-dir with a "
                          "writable folder")
    if problem is not None:
        raise RunDirError(f"cannot write under {existing}: {problem}; pass --runs-dir with a writable folder")
    free = shutil.disk_usage(existing).free
    if free < needed_bytes:
        raise RunDirError(f"{existing} has {free / 2**20:,.0f} MiB free; this run's checkpoints and record need up "
                          f"to {needed_bytes / 2**20:,.0f} MiB: free some space, pass --runs-dir on another disk, "
                          "or --no-checkpoint-replay to leave replay out of checkpoints")


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
