"""Checkpoints: what a killed run needs to go on where it stopped (`pearl train --resume runs/<id>`).

A checkpoint is one file, runs/<id>/checkpoints/step-<env steps>.npz: a numpy archive (read with
allow_pickle=False) holding

- ``meta``: JSON (schema ``pearl.checkpoint/1``): pearl version, algo, env, seed, the hyperparameters, the
  learner group's size (`learners`), env steps and updates so far, whether replay is included, the time it
  was written;
- ``learn/<name>``: the learn kernel's state dict (learner 0's: every learner of a group holds the same):
  every network with its target, each optimiser's moments and step, the extra learned arrays (SAC's log α),
  the update count: what the algorithm's registry entry declares (`Algorithm.state_shapes`; the same names on
  every adapter: `LearnKernel.state_dict`);
- ``replay/<name>``: optionally, the replay's state dict: the stored transitions, ring position, priorities
  and the sampler's random state (`ReplayKernels.state_dict`).

It is written atomically (temp file, fsync, rename): a kill at any moment leaves the previous checkpoints
whole. The newest `KEEP` are kept. On resume the newest that reads back whole is used; a truncated or
corrupted one (the archive's CRC-32 per member catches a flipped byte, its directory a truncation) is
reported and skipped.

What a resume does not restore: the episodes in flight (envs start new episodes, reseeded from the run's
seed and the step count, so a resumed run is repeatable from its checkpoint; DDPG's Ornstein–Uhlenbeck
noise lives with an episode, so it starts again at 0 as at any episode's start, and nothing of it is saved)
and, for the parallel launcher, the transitions still in the actors' rings (at most a ring's worth; the
run's step count says what reached replay). The exploration schedule, the replay-ratio accounting and the
learning-rate state go on from the saved counters. Without replay in the checkpoint, the resumed run first
collects learning_starts transitions with the trained policy before it updates again.
"""

from __future__ import annotations

import io
import re
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pearl._version import __version__
from pearl.adapters.base import decode_json, encode_json
from pearl.errors import CheckpointError
from pearl.fileio import write_atomic
from pearl.types import Params

SCHEMA = "pearl.checkpoint/1"
KEEP = 2  # the newest checkpoints kept: if the last is damaged, the one before it is used
FOLDER = "checkpoints"
_NAME = re.compile(r"^step-(\d{10})\.npz$")
_META_FIELDS = {"schema": str, "pearl_version": str, "algo": str, "env": str, "seed": int, "steps": int,
                "updates": int, "replay": bool, "hyperparameters": dict, "created": str}


@dataclass
class Checkpoint:
    path: Path
    meta: dict[str, Any]
    learn: Params
    replay: Params | None

    @property
    def steps(self) -> int:
        return int(self.meta["steps"])

    @property
    def updates(self) -> int:
        return int(self.meta["updates"])


@dataclass
class Checkpointer:
    """Writes a checkpoint every `every` updates (0: only at the end) into folder, keeping the newest KEEP."""

    folder: Path
    every: int
    meta: dict[str, Any]  # algo, env, seed, hyperparameters: the same in every checkpoint of the run
    include_replay: bool = True
    last_updates: int = 0
    written: list[Path] = field(default_factory=list)
    seconds: float = 0.0  # time spent writing, so a run record can say what checkpoints cost

    def due(self, updates: int) -> bool:
        return self.every > 0 and updates - self.last_updates >= self.every

    def save(self, steps: int, updates: int, learn: Params, replay: Params | None) -> Path:
        """replay: the replay's state, or None (the launchers read it only when include_replay)."""
        t0 = time.perf_counter()
        meta = {**self.meta, "schema": SCHEMA, "pearl_version": __version__, "steps": steps, "updates": updates,
                "replay": replay is not None, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        path = write_checkpoint(self.folder, meta, learn, replay)
        self.last_updates = updates
        self.written.append(path)
        prune(self.folder)
        self.seconds += time.perf_counter() - t0
        return path


def write_checkpoint(folder: Path, meta: dict[str, Any], learn: Params, replay: Params | None) -> Path:
    arrays = {"meta": encode_json(meta)}
    arrays.update({f"learn/{k}": np.asarray(v) for k, v in learn.items()})
    if replay is not None:
        arrays.update({f"replay/{k}": np.asarray(v) for k, v in replay.items()})
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return write_atomic(Path(folder) / f"step-{int(meta['steps']):010d}.npz", buffer.getvalue(), durable=True)


def candidates(folder: Path) -> list[Path]:
    """Checkpoint files in folder, newest (most env steps) first."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if _NAME.match(p.name)), key=lambda p: p.name, reverse=True)


def prune(folder: Path) -> None:
    for old in candidates(folder)[KEEP:]:
        old.unlink(missing_ok=True)


def read_checkpoint(path: str | Path) -> Checkpoint:
    """The checkpoint at path, or CheckpointError naming the file and what is wrong with it."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}  # reading each member checks its CRC
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise CheckpointError(f"{path}: not a readable checkpoint (truncated or corrupted?): {exc}") from None
    if "meta" not in arrays:
        raise CheckpointError(f"{path}: no 'meta' entry: not a pearl checkpoint")
    try:
        meta = decode_json(arrays.pop("meta"))
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    _check_meta(path, meta)
    learn = {k[len("learn/"):]: v for k, v in arrays.items() if k.startswith("learn/")}
    replay = {k[len("replay/"):]: v for k, v in arrays.items() if k.startswith("replay/")}
    if not learn:
        raise CheckpointError(f"{path}: holds no learner state")
    if meta["replay"] and not replay:
        raise CheckpointError(f"{path}: meta says replay is included, but no replay state is there")
    return Checkpoint(path, meta, learn, replay if meta["replay"] else None)


def _check_meta(path: Path, meta: Any) -> None:
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: meta must be a JSON object, got {type(meta).__name__}")
    for name, kind in _META_FIELDS.items():
        value = meta.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise CheckpointError(f"{path}: meta field {name!r} must be {kind.__name__}, got {value!r}")
    if meta["schema"] != SCHEMA:
        raise CheckpointError(f"{path}: schema {meta['schema']!r}; this pearl reads {SCHEMA!r}")
    for name in ("seed", "steps", "updates"):
        if meta[name] < 0:
            raise CheckpointError(f"{path}: meta field {name!r} must be >= 0, got {meta[name]}")


def latest(folder: Path) -> tuple[Checkpoint | None, list[str]]:
    """The newest checkpoint in folder that reads back whole, and why each newer one was skipped."""
    skipped = []
    for path in candidates(folder):
        try:
            return read_checkpoint(path), skipped
        except CheckpointError as exc:
            skipped.append(str(exc))
    return None, skipped


def estimate_bytes(learn_bytes: int, replay_bytes: int, include_replay: bool) -> int:
    """Disk a run's checkpoints can take at once: KEEP files, and one more being written."""
    return (KEEP + 1) * (learn_bytes + (replay_bytes if include_replay else 0))


def describe(checkpoint: Checkpoint) -> str:
    meta = checkpoint.meta
    return (f"{checkpoint.path.name}: {meta['steps']:,} env steps, {meta['updates']:,} updates, "
            f"replay {'included' if meta['replay'] else 'not included'}, written {meta['created']}")


def restore(checkpoint: Checkpoint, learn_kernel: Any, replay_kernels: Any) -> None:
    """Load the checkpoint into a launcher's freshly built learn kernel and replay (CheckpointError when its
    names or shapes do not fit them: another algorithm, network or buffer size)."""
    try:
        learn_kernel.load_state_dict(checkpoint.learn)
        if checkpoint.replay is not None:
            replay_kernels.load_state_dict(checkpoint.replay)
    except (ValueError, TypeError, KeyError) as exc:
        raise CheckpointError(f"{checkpoint.path}: does not fit this run: {exc}") from None


def learning_resumes_at(learning_starts: int, checkpoint: Checkpoint | None) -> int:
    """Env steps after which updates run: learning_starts, or that many past a checkpoint without replay
    (its replay starts empty, and the learner waits until it holds as many transitions as at the start)."""
    if checkpoint is None or checkpoint.replay is not None:
        return learning_starts
    return checkpoint.steps + learning_starts

