"""Host-side bookkeeping of a replay buffer: ring slots, sampling, priorities.

The transitions themselves live elsewhere (on a device, in the adapter's tensors); this class only decides
*which slots* to write and to read, and keeps their priorities. So it never sees an observation, and its
cost does not depend on the size of a transition.

Ring
----
Slots are written in order ``position, position + 1, ...`` modulo ``capacity``; once the buffer is full
each write overwrites the oldest transition. ``size`` counts the valid slots (it grows to ``capacity`` and
stays there), and the valid slots are always ``0 .. size - 1``.

Priorities (prioritized replay, Schaul et al. 2016)
---------------------------------------------------
A slot's stored priority is ``p = (|td| + eps) ** alpha`` (already raised to alpha). A new slot gets
``max_priority``, the largest priority ever stored (a running maximum that starts at 1.0 and never falls,
as in the paper), so every transition is likely to be replayed at least once. Slots never written keep
priority 0 in the tree and so can never be sampled.

Sampling draws slot i with probability ``P(i) = p_i / total`` (stratified over the sum tree) and returns
importance-sampling weights ``w_i = (size * P(i)) ** -beta`` divided by the largest ``w`` *in the batch*
(batch-max normalisation, as in the paper), so weights lie in (0, 1] and the max of each batch is 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pearl.replay.sumtree import SumTree, check_int

__all__ = ["ReplayIndex", "Ring", "SampledIndices", "linear_beta"]

_TINY32 = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True)
class SampledIndices:
    """A sampled batch of slots and their importance-sampling weights (all 1 for uniform replay)."""

    indices: np.ndarray  # int64, shape (B,), each in [0, size)
    weights: np.ndarray  # float32, shape (B,), in (0, 1]


def _check_float(name: str, value: float, lo: float, lo_open: bool = False) -> float:
    """A finite float >= lo (> lo when lo_open)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < lo or (lo_open and value == lo):
        raise ValueError(f"{name} must be finite and {'>' if lo_open else '>='} {lo}, got {value}")
    return value


@dataclass
class Ring:
    """The ring of a replay buffer's slots (the module docstring): where the next write goes and how many slots are
    valid. What every replay that keeps its transitions in ``capacity`` slots counts, on the host or a device."""

    capacity: int
    position: int = 0
    size: int = 0

    def advance(self, count: int) -> None:
        """``count`` transitions written from ``position`` on (wrapping; past capacity the oldest are overwritten)."""
        self.position = (self.position + count) % self.capacity
        self.size = min(self.size + count, self.capacity)

    @classmethod
    def restored(cls, capacity: int, position: int, size: int, what: str) -> "Ring":
        """The ring a checkpoint (`what`, for the message) records; ValueError when it cannot be one of capacity."""
        if not (0 <= position < capacity and 0 <= size <= capacity):
            raise ValueError(f"{what} has position={position}, size={size} outside capacity {capacity}")
        return cls(capacity, position, size)

    def check_written(self, indices: np.ndarray) -> None:
        """ValueError when an integer slot of `indices` lies beyond the valid ones (other dtypes are checked by
        whoever converts them)."""
        if indices.size and indices.dtype.kind in "iu" and indices.max() >= self.size:
            raise ValueError(f"slot {int(indices.max())} has never been written (size is {self.size})")


class ReplayIndex:
    """Ring-slot allocation and (optionally prioritized) sampling for a replay buffer of ``capacity`` slots."""

    def __init__(self, capacity: int, prioritized: bool = False, alpha: float = 0.6, eps: float = 1e-6,
                 arity: int = 16) -> None:
        self._capacity = check_int("capacity", capacity, 1)
        self._prioritized = bool(prioritized)
        self._alpha = _check_float("alpha", alpha, 0.0)
        self._eps = _check_float("eps", eps, 0.0)
        self._arity = check_int("arity", arity, 2)
        self._ring = Ring(self._capacity)
        self._max_priority = 1.0
        self._tree = SumTree(self._capacity, self._arity) if self._prioritized else None

    # ------------------------------------------------------------------ properties
    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def prioritized(self) -> bool:
        return self._prioritized

    @property
    def size(self) -> int:
        """Number of valid slots (0 .. size - 1), at most capacity."""
        return self._ring.size

    @property
    def position(self) -> int:
        """The ring slot the next reserved transition goes to."""
        return self._ring.position

    @property
    def max_priority(self) -> float:
        """Largest priority stored so far (already raised to alpha); 1.0 before any update."""
        return self._max_priority

    @property
    def tree(self) -> SumTree | None:
        """The sum tree of slot priorities (None for uniform replay)."""
        return self._tree

    # ------------------------------------------------------------------ writing
    def reserve(self, count: int) -> np.ndarray:
        """Slots for ``count`` new transitions, in order, wrapping around and overwriting the oldest.

        Always returns ``count`` slots (int64), even when ``count > capacity``: the slots then repeat, and a
        caller that writes the transitions in order leaves the last ``capacity`` of them in the buffer
        (the earlier writes are overwritten). New slots get ``max_priority``.
        """
        count = check_int("count", count, 0)
        slots = np.arange(self._ring.position, self._ring.position + count, dtype=np.int64)
        slots %= self._capacity
        self._ring.advance(count)
        if self._tree is not None and count:
            # Only the last `capacity` slots are distinct; all get the same priority anyway.
            self._tree.update(slots[-self._capacity:], self._max_priority)
        return slots

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Set the priorities of sampled slots from their TD errors: ``(|td| + eps) ** alpha``.

        A repeated slot takes its LAST TD error. Raises ``max_priority`` if a new priority exceeds it.
        Slots must be valid (< size) and TD errors finite. For uniform replay this is a no-op.
        """
        if self._tree is None:
            return
        idx = np.asarray(indices)
        td = np.asarray(td_errors, dtype=np.float64)
        if idx.ndim != 1 or td.shape != idx.shape:
            raise ValueError(f"indices and td_errors must be 1-D of equal length, got {idx.shape} and {td.shape}")
        if idx.size == 0:
            return
        self._ring.check_written(idx)
        if not np.isfinite(td).all():
            raise ValueError("td_errors must be finite")
        priorities = (np.abs(td) + self._eps) ** self._alpha
        self._tree.update(idx, priorities)  # validates dtype and range, keeps the last duplicate
        self._max_priority = max(self._max_priority, float(priorities.max()))

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int, rng: np.random.Generator, beta: float = 0.4) -> SampledIndices:
        """Draw ``batch_size`` slots (with replacement) and their importance-sampling weights."""
        batch_size = check_int("batch_size", batch_size, 1)
        beta = _check_float("beta", beta, 0.0)
        size = self._ring.size
        if size == 0:
            raise ValueError("cannot sample from an empty replay index")
        if self._tree is None:
            indices = rng.integers(0, size, batch_size, dtype=np.int64)
            return SampledIndices(indices, np.ones(batch_size, dtype=np.float32))
        indices = self._tree.sample(batch_size, rng)
        probs = self._tree.get(indices) / self._tree.total
        weights = (size * probs) ** -beta
        weights /= weights.max()
        # Keep the documented (0, 1] even if an extreme priority ratio underflows float32.
        weights = np.maximum(weights, _TINY32).astype(np.float32)
        return SampledIndices(indices, weights)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, np.ndarray | int | float]:
        """Everything needed to resume: configuration, ring state and slot priorities (copies)."""
        priorities = self._tree.get(np.arange(self._capacity)) if self._tree is not None else np.zeros(0)
        return {
            "capacity": self._capacity,
            "prioritized": int(self._prioritized),
            "alpha": self._alpha,
            "eps": self._eps,
            "arity": self._arity,
            "position": self._ring.position,
            "size": self._ring.size,
            "max_priority": self._max_priority,
            "priorities": priorities,
        }

    def load_state_dict(self, state: dict[str, np.ndarray | int | float]) -> None:
        """Restore a `state_dict`. Capacity, prioritized and arity must match this index.

        alpha and eps are restored from the checkpoint, so resumed training computes priorities as before.
        The tree is rebuilt from the leaf priorities; since every node is a fixed function of its
        children (see `pearl.replay.sumtree`), it is bitwise the tree that was saved, and samples drawn
        with the same rng state are identical.
        """
        missing = {"capacity", "prioritized", "alpha", "eps", "arity", "position", "size", "max_priority",
                   "priorities"} - set(state)
        if missing:
            raise ValueError(f"state dict lacks {sorted(missing)}")
        for key, mine in (("capacity", self._capacity), ("prioritized", int(self._prioritized)),
                          ("arity", self._arity)):
            if int(state[key]) != mine:
                raise ValueError(f"state dict has {key}={int(state[key])}, this index has {mine}")
        ring = Ring.restored(self._capacity, int(state["position"]), int(state["size"]), "state dict")
        # float() also accepts the 0-d arrays that np.savez / np.load turn scalars into.
        alpha = _check_float("alpha", float(state["alpha"]), 0.0)
        eps = _check_float("eps", float(state["eps"]), 0.0)
        max_priority = _check_float("max_priority", float(state["max_priority"]), 0.0, lo_open=True)
        tree = None
        if self._prioritized:
            priorities = np.asarray(state["priorities"], dtype=np.float64)
            if priorities.shape != (self._capacity,):
                raise ValueError(f"priorities must have shape ({self._capacity},), got {priorities.shape}")
            tree = SumTree(self._capacity, self._arity)
            tree.update(np.arange(self._capacity), priorities)
        self._alpha, self._eps, self._max_priority = alpha, eps, max_priority
        self._ring, self._tree = ring, tree


def linear_beta(beta0: float, step: int, total_steps: int) -> float:
    """IS exponent annealed linearly from ``beta0`` at step 0 to 1.0 at ``total_steps``, then 1.0."""
    beta0 = _check_float("beta0", beta0, 0.0)
    if beta0 > 1.0:
        raise ValueError(f"beta0 must be in [0, 1], got {beta0}")
    step = check_int("step", step, 0)
    total_steps = check_int("total_steps", total_steps, 1)
    frac = min(step / total_steps, 1.0)
    return beta0 + (1.0 - beta0) * frac
