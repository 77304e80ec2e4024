"""A K-ary sum tree over replay priorities, vectorised with numpy.

Layout
------
The tree has ``depth + 1`` levels, stored as one flat float64 array per level, root level first::

    levels[0]      shape (1,)            the root: the total priority
    levels[d]      shape (K**d,)         node i of level d has children
                                         levels[d + 1][i*K : i*K + K]
    levels[depth]  shape (K**depth,)     the leaves; leaf i is slot i, and leaves
                                         capacity .. K**depth - 1 are padding, always 0

``depth`` is the smallest d >= 1 with K**d >= capacity (at least 1, so every lookup descends at least
once and capacity 1 needs no special case). Because each level is a flat array in node order, level
``d + 1`` reshaped to ``(K**d, K)`` has the children of node i in row i: gathering the children of a batch
of nodes is one fancy index. Padding to K**depth costs memory when capacity is just above a power of K
(up to K times the leaves); pick the capacity or the arity accordingly.

Next to each level d >= 1 the tree caches, for every group of K siblings, its running sums shifted right
by one: ``prefix[d][g] = [0, cs[0], ..., cs[K-2]]`` (shape ``(K**(d-1), K)``; cs as defined below, and
cs[K-1] is the parent's value in ``levels[d-1]``). They are the ``cs`` the descent compares against,
computed once per update instead of once per lookup: a sequential ``np.cumsum`` over short rows is the
slowest step of a lookup. The cache changes no result, only where the work is done.

Summation rule (why: exact reproducibility)
-------------------------------------------
Every internal node holds the *sequential, left-to-right* float64 sum of its K children::

    node = ((c[0] + c[1]) + c[2]) + ... + c[K-1]

computed with ``np.cumsum(children, axis=1)[:, -1]`` (accumulation is sequential by definition, unlike
``np.sum``, whose pairwise order is an implementation detail). Parents are always *recomputed* from their
children, never patched with deltas, so rounding error does not build up over millions of updates, and the
whole tree is a pure function of the leaf values: two trees with the same leaves are bitwise identical,
however they got there. An OpenCL or CUDA port that adds in the same order (additions only, so no FMA
contraction can change a result) gets the same bits.

Prefix-sum rule (what ``find_prefix_sum`` returns, exactly)
-----------------------------------------------------------
For a value ``v`` with ``0 <= v <= total``::

    node = 0
    for d in 1 .. depth:
        c[0..K-1]  = levels[d][node*K : node*K + K]
        cs[j]      = c[0] + ... + c[j]                 (sequential, as above)
        j          = #{k : cs[k] <= v}                  (the first k with cs[k] > v, strictly)
        if j == K:                                      (v >= node mass: v == total, or rounding)
            j      = max{k : c[k] > 0}                  (step back to the last child with mass)
        v          = v - (cs[j - 1] if j > 0 else 0.0)
        node       = node*K + j
    return node                                         (a leaf index)

The chosen child always has positive mass: in the normal case cs[j] > cs[j-1] implies c[j] > 0 (adding
an exact 0 cannot change a float), and the fallback picks a positive child by construction. A node with
positive mass has a positive child (it is their sum), and the root is checked to be positive, so the
returned leaf has priority > 0 and, since padding leaves are 0, an index < capacity. ``v`` never goes
negative: cs[j-1] <= v in both branches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SumTree"]

_FLOAT_MAX = float(np.finfo(np.float64).max)


DEFAULT_ARITY = 16


def tree_depth(capacity: int, arity: int = DEFAULT_ARITY) -> int:
    """Levels below the root: the smallest d >= 1 with arity**d >= capacity (integer arithmetic, no log)."""
    depth = 1
    while arity**depth < capacity:
        depth += 1
    return depth


def _check_int(name: str, value: int, minimum: int) -> int:
    """Validate an integer argument (bools and floats are rejected: they are almost always a bug)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _as_indices(indices: np.ndarray, capacity: int) -> np.ndarray:
    """1-D int64 leaf indices, each in [0, capacity)."""
    arr = np.asarray(indices)
    if arr.ndim != 1:
        raise ValueError(f"indices must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"indices must be integers, got dtype {arr.dtype}")
    lo, hi = arr.min(), arr.max()
    if lo < 0 or hi >= capacity:
        bad = lo if lo < 0 else hi
        raise ValueError(f"index {int(bad)} out of range [0, {capacity})")
    return arr.astype(np.int64, copy=False)


def _as_priorities(priorities: np.ndarray, count: int) -> np.ndarray:
    """1-D float64 priorities matching `count` indices (a scalar is broadcast); finite and >= 0."""
    arr = np.asarray(priorities, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(count, float(arr))
    if arr.shape != (count,):
        raise ValueError(f"priorities must have shape ({count},) to match indices, got {arr.shape}")
    # min/max propagate NaN, and NaN fails both comparisons: two reductions check everything.
    if count and not (arr.min() >= 0.0 and arr.max() <= _FLOAT_MAX):
        raise ValueError("priorities must be finite and >= 0")
    return arr


def _last_occurrence(indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique indices and, for each, the position of its LAST occurrence in `indices`.

    A stable argsort keeps equal indices in input order, so the last element of each run of equal keys
    is the last occurrence. Same result as ``np.unique`` on the reversed array with ``return_index``, in
    fewer passes, and deterministic, unlike relying on which write of ``a[idx] = v`` wins for a
    repeated ``idx`` (numpy leaves that unspecified).
    """
    order = np.argsort(indices, kind="stable")
    ordered = indices[order]
    last = np.empty(ordered.size, dtype=bool)
    last[-1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
    return ordered[last], order[last]


def _dedupe_sorted(values: np.ndarray) -> np.ndarray:
    """Unique values of a sorted array (neighbour comparison, no sort)."""
    if values.size < 2:
        return values
    keep = np.empty(values.size, dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


@dataclass
class _Workspace:
    """Scratch arrays for one batch size (reused: batch sizes rarely change)."""

    batch_rows: np.ndarray  # arange(B)
    above: np.ndarray  # (B, K) bool: cached prefix row > v


class SumTree:
    """K-ary sum tree of float64 priorities over ``capacity`` leaves (see the module docstring).

    Not thread-safe: calls reuse scratch buffers (to save allocations in the hot path).
    """

    def __init__(self, capacity: int, arity: int = DEFAULT_ARITY) -> None:
        self._capacity = _check_int("capacity", capacity, 1)
        self._arity = _check_int("arity", arity, 2)
        self._depth = depth = tree_depth(self._capacity, self._arity)
        K = self._arity
        self._levels: list[np.ndarray] = [np.zeros(K**d) for d in range(depth + 1)]
        # Row views (K**(d-1), K) of every level below the root: row g holds the children of node g of
        # level d-1. They share memory with `_levels`.
        self._rows: list[np.ndarray] = [np.zeros((0, K))] + [lvl.reshape(-1, K) for lvl in self._levels[1:]]
        # The cache: prefix[d][g] = [0, cs[0], ..., cs[K-2]] for group g of level d (see module docstring).
        self._prefix: list[np.ndarray] = [np.zeros((0, K))] + [
            np.zeros((K ** (d - 1), K)) for d in range(1, depth + 1)
        ]
        self._scratch = np.zeros((0, K + 1))  # column 0 is always 0; grown on demand
        self._ws: _Workspace | None = None
        # Fast-path child for argmax position k: k - 1, and K - 1 when no cached entry exceeds v (k == 0).
        self._child_of = np.roll(np.arange(K, dtype=np.int64), 1)

    # ------------------------------------------------------------------ properties
    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def arity(self) -> int:
        return self._arity

    @property
    def depth(self) -> int:
        """Number of levels below the root (the leaves are ``levels[depth]``)."""
        return self._depth

    @property
    def total(self) -> float:
        """Sum of all priorities (the root)."""
        return float(self._levels[0][0])

    @property
    def levels(self) -> list[np.ndarray]:
        """The level arrays, root first, as read-only views (for tests and for uploading to a device)."""
        out = []
        for lvl in self._levels:
            view = lvl.view()
            view.flags.writeable = False
            out.append(view)
        return out

    # ------------------------------------------------------------------ updates
    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of leaves ``indices`` (batched).

        If an index appears more than once in one call, its LAST occurrence wins, deterministically.
        ``priorities`` may be a scalar, applied to every index. Ancestors of the touched leaves are
        recomputed from their children, level by level (see the module docstring).
        """
        idx = _as_indices(indices, self._capacity)
        prio = _as_priorities(priorities, idx.size)
        if idx.size == 0:
            return
        leaves, pos = _last_occurrence(idx)
        self._levels[self._depth][leaves] = prio[pos]
        self._refresh(leaves)

    def _refresh(self, nodes: np.ndarray) -> None:
        """Recompute the cached rows and values of all ancestors of the sorted unique leaf ``nodes``."""
        for d in range(self._depth, 0, -1):
            if self._prefix[d].shape[0] <= nodes.size:
                # Near the root a level has no more groups than there are touched nodes: recomputing
                # all of them is cheaper than gather + dedupe + scatter and gives the same bits
                # (an untouched group recomputes to its current values). Levels above are smaller still.
                for e in range(d, 0, -1):
                    self._recompute(e, None)
                return
            # Sorted input gives sorted parents, so a neighbour comparison dedupes them.
            nodes = _dedupe_sorted(nodes // self._arity)
            self._recompute(d, nodes)

    def _recompute(self, d: int, groups: np.ndarray | None) -> None:
        """Sequential running sums of groups ``groups`` of level d (None: all), into the cache and parents."""
        K = self._arity
        children = self._rows[d] if groups is None else self._rows[d].take(groups, axis=0)
        if self._scratch.shape[0] < children.shape[0]:
            self._scratch = np.zeros((children.shape[0], K + 1))
        buf = self._scratch[: children.shape[0]]  # [0, cs[0], ..., cs[K-1]]
        np.cumsum(children, axis=1, out=buf[:, 1:])
        if groups is None:
            self._prefix[d][:] = buf[:, :K]
            self._levels[d - 1][:] = buf[:, K]
        else:
            self._prefix[d][groups] = buf[:, :K]
            self._levels[d - 1][groups] = buf[:, K]

    # ------------------------------------------------------------------ queries
    def get(self, indices: np.ndarray) -> np.ndarray:
        """Priorities of leaves ``indices`` (a new float64 array)."""
        idx = _as_indices(indices, self._capacity)
        return self._levels[self._depth].take(idx)

    def find_prefix_sum(self, values: np.ndarray) -> np.ndarray:
        """Leaf index for each prefix-sum value ``v`` in [0, total] (int64; rule in the module docstring)."""
        vals = np.asarray(values, dtype=np.float64)
        if vals.ndim != 1:
            raise ValueError(f"values must be 1-D, got shape {vals.shape}")
        if vals.size == 0:
            return np.zeros(0, dtype=np.int64)
        total = self._checked_total()
        lo, hi = vals.min(), vals.max()
        if not (lo >= 0.0 and hi <= total):  # also rejects NaN
            raise ValueError(f"values must lie in [0, total={total!r}], got range [{lo!r}, {hi!r}]")
        return self._descend(vals)

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Stratified proportional sampling: one leaf per equal segment of [0, total) (int64).

        Value i is ``(i + u_i) * (total / batch_size)`` with ``u = rng.random(batch_size)``, clamped to
        total, then looked up with the prefix-sum rule.
        """
        batch_size = _check_int("batch_size", batch_size, 1)
        total = self._checked_total()
        values = rng.random(batch_size)
        values += self._workspace(batch_size).batch_rows
        values *= total / batch_size
        # (i + u) * total / B can round to just above total; the rule handles v == total.
        np.minimum(values, total, out=values)
        return self._descend(values)

    def _checked_total(self) -> float:
        total = self.total
        if not total > 0.0:
            raise ValueError("cannot sample or search a sum tree whose total priority is 0")
        if not math.isfinite(total):
            raise ValueError(f"sum tree total is not finite ({total!r}); priorities are too large")
        return total

    def _workspace(self, batch_size: int) -> _Workspace:
        ws = self._ws
        if ws is None or ws.batch_rows.size != batch_size:
            ws = self._ws = _Workspace(np.arange(batch_size), np.empty((batch_size, self._arity), dtype=bool))
        return ws

    def _descend(self, values: np.ndarray) -> np.ndarray:
        """The prefix-sum rule, vectorised over the batch (loops over levels only); ``values`` is not modified.

        Fast path. The cached row of a group is ``E = [0, cs[0], ..., cs[K-2]]``, so ``E[k] > v`` first
        holds at k = j + 1 for the rule's child j < K - 1, and ``argmax`` of ``E > v`` finds it. When no
        entry exceeds v (argmax 0, since E[0] = 0 <= v), the rule's child is K - 1, or, on overflow
        (v >= node mass), the last child with positive mass; the fast path takes K - 1 in both cases.
        That agrees with the rule whenever child K - 1 has mass, and otherwise leads into a zero-mass
        subtree and so to a leaf of priority 0. Hence: if every returned leaf has priority > 0, every
        step agreed with the rule; else the batch is redone by the careful path, which applies the rule
        literally (that happens only when v reaches a node's mass, e.g. v == total, next to zero leaves).
        The subtraction is ``v - E[j] = v - cs[j-1]`` in both paths, so the remainders agree bitwise.
        """
        K = self._arity
        ws = self._workspace(values.size)
        v = values.copy()
        v_col = v[:, None]  # a view: in-place updates of v show through
        node = np.zeros(values.size, dtype=np.int64)
        for d in range(1, self._depth + 1):
            rows = self._prefix[d].take(node, axis=0)  # (B, K)
            np.greater(rows, v_col, out=ws.above)
            j = self._child_of.take(ws.above.argmax(axis=1))
            v -= rows[ws.batch_rows, j]
            node *= K
            node += j
        if not (self._levels[self._depth].take(node) > 0.0).all():
            return self._descend_careful(values)
        return node

    def _descend_careful(self, values: np.ndarray) -> np.ndarray:
        """The prefix-sum rule exactly as written in the module docstring, with the overflow repair."""
        K = self._arity
        v = values.copy()
        node = np.zeros(values.size, dtype=np.int64)
        cs = np.zeros((values.size, K + 1))  # [0, cs[0], ..., cs[K-1]]
        for d in range(1, self._depth + 1):
            children = self._rows[d].take(node, axis=0)
            np.cumsum(children, axis=1, out=cs[:, 1:])
            j = np.count_nonzero(cs[:, 1:] <= v[:, None], axis=1)
            over = j == K
            if over.any():
                positive = children[over] > 0.0
                j[over] = K - 1 - np.argmax(positive[:, ::-1], axis=1)
            v -= cs[np.arange(values.size), j]
            node = node * K + j
        return node
