"""Shared memory between the learner process and the actor processes: rings, counters and a weight board.

One run owns one shared-memory segment, a file in ``/dev/shm`` named ``pearl-<pid>-<token>``, holding
every array the processes share, laid out by a `Layout` (names, shapes, dtypes) small enough to pickle to
a child, which then maps the same file. Nothing is pickled per step: an actor writes transitions straight
into its ring's rows and the learner reads them from there. The file is mapped directly (not through
multiprocessing's SharedMemory) so that no resource tracker of a child process can remove it under the
learner; the learner unlinks it when the run ends, and an actor that finds its learner gone unlinks it too.

Ordering. Each ring has one writer (its actor) and one reader (the learner); each side only ever advances
its own counter, after the rows it covers are written or read. Numpy writes each array with one memcpy, and
x86-64 makes stores visible to other cores in program order, so a reader that sees a counter also sees the
rows before it. (A weakly ordered CPU would need fences that Python does not expose; pearl's runtime is
built and tested on x86-64.)

Wake-ups. A role that waits for the other (an actor for a segment's weights, the learner for the actors'
shares) sleeps in `await_wake` on a Linux eventfd that the other side writes once it has published: it wakes
at once, and costs no core while it waits. Where os.eventfd is missing (not Linux), it sleeps for the poll
interval it is given instead.

A weight board is a seqlock: the learner makes the sequence number odd, writes, then makes it even; an
actor copies only when the number is even, the board's version is the one it wants, and neither changed
across its copy. The learner never waits for readers; the schedule (see `pearl.runtime.local`) makes sure
a board is not rewritten while an actor still needs what it holds.
"""

from __future__ import annotations

import mmap
import os
import secrets
import select
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from pearl.algos.params import ParamLayout
from pearl.types import EnvSpec, Params

_ALIGN = 64  # each array starts on its own cache line
SEGMENT_PREFIX = "pearl-"
SHM_DIR = Path("/dev/shm")


@dataclass(frozen=True)
class Layout:
    """Named arrays and their offsets in one segment; picklable, so a child rebuilds the same views."""

    arrays: tuple[tuple[str, tuple[int, ...], str, int], ...]  # (name, shape, dtype, offset)
    nbytes: int

    @classmethod
    def of(cls, specs: list[tuple[str, tuple[int, ...], str]]) -> "Layout":
        offset, out = 0, []
        for name, shape, dtype in specs:
            out.append((name, tuple(shape), np.dtype(dtype).str, offset))
            size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            offset += -(-max(size, 1) // _ALIGN) * _ALIGN
        return cls(tuple(out), max(offset, _ALIGN))


class Segment:
    """A shared-memory segment and numpy views of the arrays its layout names."""

    def __init__(self, layout: Layout, name: str | None = None) -> None:
        self.layout = layout
        self.owner = name is None
        self.name = name or f"{SEGMENT_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.path = SHM_DIR / self.name
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if self.owner else 0)
        fd = os.open(self.path, flags, 0o600)
        try:
            if self.owner:
                os.ftruncate(fd, layout.nbytes)  # a new file reads as zeros
            self._map = mmap.mmap(fd, layout.nbytes)
        finally:
            os.close(fd)
        self.arrays: dict[str, np.ndarray] = {
            array_name: np.ndarray(shape, dtype=np.dtype(dtype), buffer=self._map, offset=offset)
            for array_name, shape, dtype, offset in layout.arrays}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def close(self) -> None:
        """Drop this process's mapping (views must not be used afterwards)."""
        self.arrays.clear()
        try:
            self._map.close()
        except BufferError:  # a view is still referenced somewhere; the mapping goes with the process
            pass

    def unlink(self) -> None:
        """Remove the segment's file from /dev/shm (safe to call twice, from any process)."""
        self.path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------- rings
RING_FIELDS = ("obs", "action", "reward", "next_obs", "terminated")
HEAD, TAIL = 0, 1


def ring_specs(prefix: str, capacity: int, spec: EnvSpec) -> list[tuple[str, tuple[int, ...], str]]:
    return [(f"{prefix}.obs", (capacity, spec.obs_dim), "f4"),
            (f"{prefix}.action", (capacity, *spec.action_shape), spec.action_dtype.str),
            (f"{prefix}.reward", (capacity,), "f4"),
            (f"{prefix}.next_obs", (capacity, spec.obs_dim), "f4"),
            (f"{prefix}.terminated", (capacity,), "f4"),
            (f"{prefix}.ctl", (2,), "i8")]


class Ring:
    """Single-producer single-consumer ring of transitions (or of any fixed-width rows) in a segment."""

    def __init__(self, segment: Segment, prefix: str, fields: tuple[str, ...] = RING_FIELDS) -> None:
        self.rows = {f: segment[f"{prefix}.{f}"] for f in fields}
        self.ctl = segment[f"{prefix}.ctl"]
        self.capacity = next(iter(self.rows.values())).shape[0]

    def free(self) -> int:
        return self.capacity - int(self.ctl[HEAD] - self.ctl[TAIL])

    def pending(self) -> int:
        return int(self.ctl[HEAD] - self.ctl[TAIL])

    def push(self, values: dict[str, np.ndarray], wait: Callable[[], bool] | None = None) -> bool:
        """Append rows (all fields the same length). When the ring is full, calls wait() until there is
        room; wait returning False abandons the push (returns False)."""
        n = len(next(iter(values.values())))
        if n > self.capacity:
            raise ValueError(f"{n} rows do not fit a ring of {self.capacity}")
        while self.free() < n:
            if wait is None or not wait():
                return False
        head = int(self.ctl[HEAD])
        start = head % self.capacity
        first = min(n, self.capacity - start)
        for name, rows in self.rows.items():
            src = values[name]
            rows[start:start + first] = src[:first]
            if first < n:
                rows[:n - first] = src[first:]
        self.ctl[HEAD] = head + n  # publish after the rows are written
        return True

    def pop(self, consume: Callable[[dict[str, np.ndarray]], None], limit: int | None = None) -> int:
        """Hand the pending rows to consume() as views (one or two contiguous pieces), then free them."""
        tail = int(self.ctl[TAIL])
        n = int(self.ctl[HEAD]) - tail
        if limit is not None:
            n = min(n, limit)
        if n <= 0:
            return 0
        start = tail % self.capacity
        first = min(n, self.capacity - start)
        consume({name: rows[start:start + first] for name, rows in self.rows.items()})
        if first < n:
            consume({name: rows[:n - first] for name, rows in self.rows.items()})
        self.ctl[TAIL] = tail + n  # the rows may be overwritten from now on
        return n


# ---------------------------------------------------------------------------------------- weight board
SEQ, VERSION = 0, 1


class WeightBoard:
    """Versioned policy weights in shared memory (a seqlock; see the module docstring). The version is the
    schedule's segment tag, which may be negative (the starting policy)."""

    def __init__(self, segment: Segment, params: ParamLayout, prefix: str = "weights") -> None:
        self.flat = segment[f"{prefix}.flat"]
        self.ctl = segment[f"{prefix}.ctl"]
        self.params = params
        self.views = params.views(self.flat)

    @staticmethod
    def specs(params: ParamLayout, prefix: str = "weights") -> list[tuple[str, tuple[int, ...], str]]:
        return [(f"{prefix}.flat", (max(params.size, 1),), "f4"), (f"{prefix}.ctl", (2,), "i8")]

    def publish(self, params: Params | Callable[[Params], None], version: int) -> None:
        """Write a snapshot: params by name, or a function that fills the board's views in place (so a
        device's weights can land here without an intermediate host copy)."""
        seq = int(self.ctl[SEQ])
        self.ctl[SEQ] = seq + 1  # odd: a write is in progress
        if callable(params):
            params(self.views)
        else:
            for name, view in self.views.items():
                view[...] = params[name]
        self.ctl[VERSION] = version
        self.ctl[SEQ] = seq + 2

    def sequence(self) -> int:
        return int(self.ctl[SEQ])

    def read_tag(self, tag: int) -> Params | None:
        """A copy of the params when the board holds the complete snapshot published as version `tag`."""
        seq = int(self.ctl[SEQ])
        if seq == 0 or seq % 2 or int(self.ctl[VERSION]) != tag:
            return None
        copy = self.flat.copy()
        if int(self.ctl[SEQ]) != seq or int(self.ctl[VERSION]) != tag:  # overwritten while copying
            return None
        return self.params.views(copy)


def sweep_stale(directory: Path = SHM_DIR) -> list[str]:
    """Remove segments whose creating process is gone (a learner killed before its actors could clean up);
    returns their names. The pid is in the name; a live pid, even a reused one, keeps its segment."""
    removed = []
    for path in directory.glob(f"{SEGMENT_PREFIX}*-*"):
        pid = path.name[len(SEGMENT_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def make_wake() -> int | None:
    """A wake-up channel (an eventfd, non-blocking), or None where the OS has none."""
    if not hasattr(os, "eventfd"):
        return None
    return os.eventfd(0, os.EFD_NONBLOCK)


def wake(fd: int | None) -> None:
    """Wake whoever waits on fd (a no-op for None)."""
    if fd is not None:
        os.eventfd_write(fd, 1)


def await_wake(fd: int | None, timeout: float, poll: float) -> None:
    """Sleep until fd is woken or `timeout` seconds pass, and clear it; without a channel, sleep `poll` seconds."""
    if fd is None:
        time.sleep(poll)
        return
    if select.select([fd], [], [], timeout)[0]:
        try:
            os.eventfd_read(fd)
        except BlockingIOError:  # another reader cleared it first
            pass


def wait_briefly(seconds: float = 50e-6) -> None:
    """Yield the core for a moment (Linux rounds so short a sleep up to its timer slack)."""
    time.sleep(seconds)


# Per-actor counters: each actor writes only its own row, the learner reads them all.
ACTOR_INTS = ("produced", "status", "act_calls", "env_calls", "syncs", "policy_version", "episodes", "dropped",
              "loads", "load_bytes")
ACTOR_FLOATS = ("act", "env_step", "weight_sync", "ring_wait", "weights_wait")
RUN_INTS = ("stop", "updates", "go")
ERROR_BYTES = 1024
STARTING, RUNNING, FINISHED, FAILED = 0, 1, 2, 3


def counter_specs(actors: int) -> list[tuple[str, tuple[int, ...], str]]:
    return [("run", (len(RUN_INTS),), "i8"), ("actor.ints", (actors, len(ACTOR_INTS)), "i8"),
            ("actor.floats", (actors, len(ACTOR_FLOATS)), "f8"), ("actor.error", (actors, ERROR_BYTES), "u1")]


def write_error(segment: Segment, actor: int, message: str) -> None:
    data = message.encode("utf-8", "replace")[:ERROR_BYTES - 1]
    row = segment["actor.error"][actor]
    row[:] = 0
    row[:len(data)] = np.frombuffer(data, dtype=np.uint8)


def read_error(segment: Segment, actor: int) -> str:
    return bytes(segment["actor.error"][actor]).rstrip(b"\0").decode("utf-8", "replace")
