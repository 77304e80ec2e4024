"""One replay table of the replay server (`ReplayShard`): storage, FIFO removal, a uniform or prioritized
sampler; and what the tables and their client (`pearl.runtime.replay_server`) share: the rows' fields, the
index encoding, what a shard reports and what a read returns.

Tables
------
A `ReplayShard` is one table: host numpy storage of transitions, FIFO removal (a ring: the newest write
overwrites the oldest), and a sampler that is uniform or proportional to priority. Slots and priorities are
kept by `pearl.replay.ReplayIndex` (its sum tree), so a shard follows the single buffer's conventions
exactly: a new transition gets the largest priority stored so far, a priority is ``(|td| + eps) ** alpha``,
a repeated slot in one update takes its last TD error.

Index encoding
--------------
`SampleBatch.indices` holds ``shard << SHARD_SHIFT | slot`` (int64, ``SHARD_SHIFT = 40``): slots below
2**40, up to 2**23 shards. With one shard an index is the plain slot, as in the single buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pearl.adapters.base import check_state
from pearl.algos.base import OffPolicyConfig
from pearl.errors import ConfigError
from pearl.replay import ReplayIndex
from pearl.types import EnvSpec, Params, TransitionBatch

__all__ = ["FIELDS", "MAX_SHARDS", "SHARD_SHIFT", "SLOT_MASK", "ReplayShard", "ShardSample", "ShardStats",
           "check_count", "decode_indices", "encode_indices"]

FIELDS = ("obs", "action", "reward", "next_obs", "terminated")
SHARD_SHIFT = 40
SLOT_MASK = (1 << SHARD_SHIFT) - 1
MAX_SHARDS = 1 << (63 - SHARD_SHIFT)


def encode_indices(shard: int | np.ndarray, slots: np.ndarray) -> np.ndarray:
    """(shard, slot) as one int64 each: ``shard << SHARD_SHIFT | slot``."""
    return (np.asarray(shard, dtype=np.int64) << SHARD_SHIFT) | np.asarray(slots, dtype=np.int64)


def decode_indices(indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (shard, slot) arrays that `encode_indices` packed."""
    idx = np.asarray(indices, dtype=np.int64)
    return idx >> SHARD_SHIFT, idx & SLOT_MASK


@dataclass(frozen=True)
class ShardStats:
    """What the client needs from a shard before it samples: rows stored and total priority."""

    size: int
    total: float  # sum of the stored priorities; ``size`` for uniform replay (every row weighs 1)


@dataclass
class ShardSample:
    """Rows read from one shard: their slots, their priorities (1.0 for uniform) and the rows themselves."""

    slots: np.ndarray  # (n,) int64
    priorities: np.ndarray  # (n,) float64
    rows: dict[str, np.ndarray] = field(default_factory=dict)  # FIELDS -> (n, ...) arrays

    def part(self, lo: int, hi: int) -> "ShardSample":
        """Entries lo .. hi - 1 (views)."""
        return ShardSample(self.slots[lo:hi], self.priorities[lo:hi], {k: v[lo:hi] for k, v in self.rows.items()})


def check_count(name: str, value: object, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < lo:
        raise ConfigError(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(value)


class ReplayShard:
    """One replay table: host storage of ``capacity`` transitions, FIFO removal, uniform or prioritized sampling.

    Every method takes and returns numpy arrays and plain dataclasses, so the object can live in another
    process (a Ray actor) unchanged; arrays handed in may be read-only (Ray's object store) and are only
    read, never written.
    """

    def __init__(self, capacity: int, spec: EnvSpec, prioritized: bool = False, alpha: float = 0.6,
                 eps: float = 1e-6, arity: int = 16) -> None:
        capacity = check_count("replay shard capacity", capacity, 1)
        self.spec = spec
        try:
            self.index = ReplayIndex(capacity, prioritized=prioritized, alpha=alpha, eps=eps, arity=arity)
        except ValueError as exc:
            raise ConfigError(f"replay shard: {exc}") from None
        self.shapes = {"obs": (spec.obs_dim,), "action": spec.action_shape, "reward": (),
                       "next_obs": (spec.obs_dim,), "terminated": ()}
        dtypes = {"obs": np.float32, "action": spec.action_dtype, "reward": np.float32, "next_obs": np.float32,
                  "terminated": np.float32}
        self.store = {k: np.zeros((capacity, *self.shapes[k]), dtype=dtypes[k]) for k in FIELDS}

    @classmethod
    def from_config(cls, config: OffPolicyConfig, spec: EnvSpec, capacity: int) -> "ReplayShard":
        """A shard of ``capacity`` slots with the config's kind of replay and priority exponents."""
        return cls(capacity, spec, prioritized=config.prioritized, alpha=config.alpha, eps=config.priority_eps)

    # ------------------------------------------------------------------ state
    @property
    def capacity(self) -> int:
        return self.index.capacity

    @property
    def size(self) -> int:
        return self.index.size

    @property
    def prioritized(self) -> bool:
        return self.index.prioritized

    @property
    def total_priority(self) -> float:
        """Sum of the stored priorities; for uniform replay the row count (each row weighs 1)."""
        tree = self.index.tree
        return float(tree.total) if tree is not None else float(self.index.size)

    def stats(self) -> ShardStats:
        """Size and total priority in one call (one round trip when the shard is remote)."""
        return ShardStats(self.size, self.total_priority)

    # ------------------------------------------------------------------ writing
    def check_batch(self, batch: TransitionBatch) -> int:
        """Row count of a batch whose fields have this table's shapes (ConfigError naming the first that has not)."""
        m = int(np.shape(batch.reward)[0]) if np.ndim(batch.reward) else -1
        for name in FIELDS:
            got = tuple(np.shape(getattr(batch, name)))
            want = (m, *self.shapes[name])
            if m < 0 or got != want:
                raise ConfigError(f"transition batch field {name!r} has shape {got}, this replay table stores "
                                  f"{want} (env {self.spec.env_id})")
        return m

    def insert(self, batch: TransitionBatch) -> np.ndarray:
        """Write a batch at the ring position (overwriting the oldest rows) with the current max priority.

        Returns the slots written, one per surviving row; a batch longer than the table keeps its newest
        ``capacity`` rows.
        """
        m = self.check_batch(batch)
        slots = self.index.reserve(m)
        keep = slice(max(0, m - self.capacity), None)
        slots = slots[keep]
        for name in FIELDS:
            self.store[name][slots] = getattr(batch, name)[keep]
        return slots

    def update_priorities(self, slots: np.ndarray, td_errors: np.ndarray) -> None:
        """Priorities of ``slots`` <- (|td| + eps) ** alpha; a no-op for uniform replay.

        The learner calls this without waiting for it (a Ray actor runs it in submission order, so the next
        sample it serves sees it).
        """
        try:
            self.index.update_priorities(np.asarray(slots, dtype=np.int64), np.asarray(td_errors))
        except ValueError as exc:
            raise ConfigError(f"priority update: {exc}") from None

    # ------------------------------------------------------------------ reading
    def gather(self, slots: np.ndarray) -> ShardSample:
        """The rows at ``slots`` (copies) with their priorities."""
        slots = np.asarray(slots, dtype=np.int64)
        if slots.size and (slots.min() < 0 or slots.max() >= self.size):
            raise ConfigError(f"replay slots must lie in [0, {self.size}), got [{slots.min()}, {slots.max()}]")
        tree = self.index.tree
        prio = tree.get(slots) if tree is not None else np.ones(slots.size)
        return ShardSample(slots, prio, {name: self.store[name][slots] for name in FIELDS})

    def lookup(self, values: np.ndarray) -> ShardSample:
        """The rows whose prefix-sum ranges hold ``values`` (in [0, total_priority]; clamped to it).

        Prioritized: the sum tree's prefix-sum rule. Uniform: row ``floor(v)`` (each row's range has width 1).
        Clamping keeps a value drawn against a slightly larger total (a remote shard whose priorities fell
        since the client read them) inside this table.
        """
        vals = np.asarray(values, dtype=np.float64)
        total = self.total_priority
        if not total > 0.0:
            raise ConfigError("cannot sample an empty replay shard")
        vals = np.clip(vals, 0.0, total)
        tree = self.index.tree
        if tree is not None:
            slots = tree.find_prefix_sum(vals)
        else:
            slots = np.minimum(vals.astype(np.int64), self.size - 1)
        return self.gather(slots)

    def sample(self, count: int, rng: np.random.Generator) -> tuple[ShardSample, np.ndarray]:
        """``count`` rows drawn from this table alone, and their probabilities ``p / total_priority``.

        Prioritized draws are stratified (`pearl.replay.SumTree.sample`), uniform ones independent.
        """
        count = check_count("sample count", count, 1)
        if self.size == 0:
            raise ConfigError("cannot sample an empty replay shard")
        tree = self.index.tree
        slots = tree.sample(count, rng) if tree is not None else rng.integers(0, self.size, count, dtype=np.int64)
        got = self.gather(slots)
        return got, got.priorities / self.total_priority

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> Params:
        """The first ``size`` rows of every field and the index (``index.*``: ring position, size, priorities),
        all as arrays, the layout of `pearl.adapters.base.ReplayKernels.state_dict` less the sampler, which the
        client owns."""
        n = self.size
        out: Params = {name: self.store[name][:n].copy() for name in FIELDS}
        out.update({f"index.{k}": np.asarray(v) for k, v in self.index.state_dict().items()})
        return out

    def load_state_dict(self, state: Params) -> None:
        """Restore a `state_dict` of a table of the same capacity, kind and shapes (checked before any change)."""
        if "index.size" not in state:
            raise ConfigError("replay shard state lacks 'index.size'")
        n = int(state["index.size"])
        try:
            check_state(state, {name: (n, *self.shapes[name]) for name in FIELDS}, "replay shard")
            self.index.load_state_dict({k[len("index."):]: v for k, v in state.items() if k.startswith("index.")})
        except ValueError as exc:
            raise ConfigError(f"replay shard state: {exc}") from None
        for name in FIELDS:
            self.store[name][:n] = np.asarray(state[name])
