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

Next to each level d = 1 .. depth-1 (the groups of K siblings that are internal nodes) the tree caches,
for every group, its running sums shifted right by one: ``prefix[d][g] = [0, cs[0], ..., cs[K-2]]``
(shape ``(K**(d-1), K)``; cs as defined below, and cs[K-1] is the parent's value in ``levels[d-1]``).
They are the ``cs`` the descent compares against, computed once per update instead of once per lookup.
The groups of leaves have no cache: a lookup sums the few leaf groups it visits itself. Their cache
would be as large as the leaves, and writing 128 scattered rows of it costs an update more (in cache
misses) than summing 128 groups costs a lookup. Neither changes a result, only where the work is done.

Summation rule (why: exact reproducibility)
-------------------------------------------
Every internal node holds the *sequential, left-to-right* float64 sum of its K children::

    node = ((c[0] + c[1]) + c[2]) + ... + c[K-1]

computed either with ``np.add.accumulate`` (what ``np.cumsum`` calls; accumulation is sequential by
definition, unlike ``np.sum``, whose pairwise order is an implementation detail) or, for a batch of
groups, as K - 1 vector additions ``cs[k] = cs[k-1] + c[k]``, one per child position, each across all the
groups at once. Both perform the same IEEE additions in the same order, so they give the same bits; the
tests check every node against ``np.cumsum``. Parents are always *recomputed* from their children, never
patched with deltas, so rounding error does not build up over millions of updates, and the whole tree is
a pure function of the leaf values: two trees with the same leaves are bitwise identical, however they
got there. An OpenCL or CUDA port that adds in the same order (additions only, so no FMA contraction can
change a result) gets the same bits.

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

Cost model (why the code is shaped the way it is)
-------------------------------------------------
A batch is small (about 128) and numpy charges a fixed cost per call, far more than the arithmetic of
one call, so both hot paths make a fixed number of calls per level and nothing per item in Python. An
update gathers, per level, the children of the group above each written leaf into a preallocated table
with one row per child position, and sums the rows with the K - 1 additions above (each contiguous, over
all groups at once); a repeated group is simply summed twice. Levels with no more groups than the batch
has leaves are recomputed whole, one ``np.add.accumulate`` each. A lookup compares gathered cache rows
against its values repeated along the row (one contiguous comparison, no broadcast loop), and sums the
visited leaf groups the way an update does.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["SumTree", "SumTreeBase", "as_indices", "as_priorities", "check_int"]

_FLOAT_MAX = float(np.finfo(np.float64).max)
# The bits of the largest finite float64: read as unsigned integers, the bits of +0.0 .. _FLOAT_MAX are
# exactly 0 .. _MAX_FINITE_BITS, while every negative float (sign bit set), inf and NaN lie above.
_MAX_FINITE_BITS = int(np.array(_FLOAT_MAX).view(np.uint64))


DEFAULT_ARITY = 16

# Update batches up to this size take the fast path for distinct indices (see _distinct_indices).
_SMALL_BATCH = 256


def tree_depth(capacity: int, arity: int = DEFAULT_ARITY) -> int:
    """Levels below the root: the smallest d >= 1 with arity**d >= capacity (integer arithmetic, no log)."""
    depth = 1
    while arity**depth < capacity:
        depth += 1
    return depth


def check_int(name: str, value: int, minimum: int) -> int:
    """Validate an integer argument (bools and floats are rejected: they are almost always a bug)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _index_array(indices: np.ndarray) -> np.ndarray:
    """``indices`` as a 1-D array, of an integer dtype unless empty (range not checked yet)."""
    arr = np.asarray(indices)
    if arr.ndim != 1:
        raise ValueError(f"indices must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"indices must be integers, got dtype {arr.dtype}")
    return arr


def _check_range(lo: np.integer, hi: np.integer, capacity: int) -> None:
    """Raise unless the smallest and the largest index lie in [0, capacity)."""
    if lo < 0 or hi >= capacity:
        bad = lo if lo < 0 else hi
        raise ValueError(f"index {int(bad)} out of range [0, {capacity})")


def as_indices(indices: np.ndarray, capacity: int) -> np.ndarray:
    """1-D int64 leaf indices, each in [0, capacity)."""
    arr = _index_array(indices)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    _check_range(arr.min(), arr.max(), capacity)
    return arr.astype(np.int64, copy=False)


def _distinct_indices(arr: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Range-checked int64 leaf indices of a non-empty `_index_array`, with repeats resolved.

    Returns ``(indices, None)`` if no index repeats, else the sorted distinct indices and the position of
    the LAST occurrence of each. Small batches (the hot path) sort a plain copy: its ends give the range
    and equal neighbours the repeats, cheaper than two reductions and a stable argsort, which only a
    batch with repeats then needs. Big batches go straight to the stable argsort, which is timsort, linear
    on the long sorted runs they usually hold (a fill, a restore, a ring of new slots).
    """
    if arr.size <= _SMALL_BATCH:
        ordered = arr.copy()
        ordered.sort()  # in place: np.sort's wrapper costs more than sorting a small batch
        _check_range(ordered[0], ordered[-1], capacity)
        if np.count_nonzero(ordered[1:] - ordered[:-1]) == arr.size - 1:
            return arr.astype(np.int64, copy=False), None
    leaves, last = _last_occurrence(arr)
    _check_range(leaves[0], leaves[-1], capacity)
    return leaves.astype(np.int64, copy=False), last


def as_priorities(priorities: np.ndarray, count: int) -> np.ndarray:
    """1-D float64 priorities matching `count` indices (a scalar is broadcast); finite and >= 0."""
    arr = np.asarray(priorities, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(count, float(arr))
    if arr.shape != (count,):
        raise ValueError(f"priorities must have shape ({count},) to match indices, got {arr.shape}")
    # One reduction over the bits accepts every finite value >= +0.0 (see _MAX_FINITE_BITS). What it
    # rejects is checked again by value, since -0.0 >= 0.0 is allowed. min/max propagate NaN, and NaN
    # fails both comparisons.
    if count and np.maximum.reduce(arr.view(np.uint64)) > _MAX_FINITE_BITS:
        if not (arr.min() >= 0.0 and arr.max() <= _FLOAT_MAX):
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


class _GroupTable:
    """Running sums of the children of n groups, one row per child position (reused for a fixed n).

    ``table`` is (K + 1, n): row 0 stays 0, and rows 1 .. K first receive the children c[0] .. c[K-1]
    (column i: group i), then are summed in place into cs[0] .. cs[K-1], so that every step adds two
    contiguous rows. Read back, rows 0 .. K-1 are the cache rows [0, cs[0], ..., cs[K-2]] of the groups.
    """

    def __init__(self, n: int, arity: int) -> None:
        self.table = np.zeros((arity + 1, n))
        self.children = self.table[1:]
        self.cache_rows = self.table[:arity].T  # (n, K), a view
        self.compared = self.table[1:arity]  # cs[0] .. cs[K-2]: what a lookup compares its value with
        self.totals = self.table[arity]
        self._steps = [(self.table[k], self.table[k + 1]) for k in range(1, arity)]

    def accumulate(self, steps: int) -> None:
        """Turn rows 1 .. steps + 1 into running sums, left to right: cs[k] = cs[k-1] + c[k], in place."""
        add = np.add
        for running, nxt in self._steps[:steps]:
            add(running, nxt, nxt)


class _LookupScratch:
    """Scratch arrays for lookups of one batch size (reused: batch sizes rarely change)."""

    def __init__(self, batch_size: int, arity: int) -> None:
        self.above = np.empty((batch_size, arity), dtype=bool)  # cache row > v, row b for lookup b
        self.above_flat = self.above.reshape(-1)
        self.leaf_sums = _GroupTable(batch_size, arity)  # column b: the leaf group lookup b reached
        self.le = np.empty((arity - 1, batch_size), dtype=bool)  # cs[k] <= v, in leaf_sums' layout
        self.count = np.empty(batch_size, dtype=np.uint8 if arity <= 256 else np.int64)


class SumTreeBase:
    """What every sum tree of this layout shares, wherever its levels live (here in numpy, on an OpenCL device in
    the adapter's DeviceSumTree): its geometry, and the checks of a prefix-sum query, so that every tree accepts
    and refuses the same values. A subclass holds the levels: `total` reads the root, `_find` looks values up."""

    def __init__(self, capacity: int, arity: int) -> None:
        self._capacity = check_int("capacity", capacity, 1)
        self._arity = check_int("arity", arity, 2)
        self._depth = tree_depth(self._capacity, self._arity)

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def arity(self) -> int:
        return self._arity

    @property
    def depth(self) -> int:
        """Number of levels below the root (the leaves are level ``depth``)."""
        return self._depth

    @property
    def total(self) -> float:
        """Sum of all priorities (the root)."""
        raise NotImplementedError

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
        return self._find(vals)

    def _find(self, values: np.ndarray) -> np.ndarray:
        """Leaf indices (int64) of checked values: 1-D, not empty, each in [0, total]."""
        raise NotImplementedError

    def _checked_total(self) -> float:
        total = self.total
        if not total > 0.0:
            raise ValueError("cannot sample or search a sum tree whose total priority is 0")
        if not math.isfinite(total):
            raise ValueError(f"sum tree total is not finite ({total!r}); priorities are too large")
        return total


class SumTree(SumTreeBase):
    """K-ary sum tree of float64 priorities over ``capacity`` leaves (see the module docstring).

    Not thread-safe: calls reuse scratch buffers (to save allocations in the hot path).
    """

    def __init__(self, capacity: int, arity: int = DEFAULT_ARITY) -> None:
        super().__init__(capacity, arity)
        K, depth = self._arity, self._depth
        self._levels: list[np.ndarray] = [np.zeros(K**d) for d in range(depth + 1)]
        # Row views (K**(d-1), K) of every level below the root: row g holds the children of node g of
        # level d-1. They share memory with `_levels`.
        self._rows: list[np.ndarray] = [np.zeros((0, K))] + [lvl.reshape(-1, K) for lvl in self._levels[1:]]
        # The cache, prefix[d][g] = [0, cs[0], ..., cs[K-2]] for group g of level d = 1 .. depth-1 (module
        # docstring; index 0 is a placeholder), and its flat views: entry node*K + j of level d is cs[j-1]
        # of the children of `node`, what a lookup that steps to child node*K + j subtracts.
        self._prefix: list[np.ndarray] = [np.zeros((0, K))] + [np.zeros((K ** (d - 1), K)) for d in range(1, depth)]
        self._prefix_flat: list[np.ndarray] = [p.reshape(-1) for p in self._prefix]
        self._top_cs = self._prefix_flat[1][1:] if depth > 1 else None  # cs[0] .. cs[K-2] of the root's children
        # Child for argmax position k of (cache row > v): k - 1, and K - 1 when no entry exceeds v (k == 0).
        self._child_of = np.roll(np.arange(K, dtype=np.int64), 1)
        self._update_table: _GroupTable | None = None
        self._lookup: _LookupScratch | None = None
        self._offsets = np.zeros(0)  # 0, 1, ..., B-1: where the strata of a sample of B start, in units of total / B
        self._whole_views: dict[int, tuple[np.ndarray, ...]] = {}

    # ------------------------------------------------------------------ properties
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
        arr = _index_array(indices)
        prio = as_priorities(priorities, arr.size)
        if arr.size == 0:
            return
        idx, last = _distinct_indices(arr, self._capacity)
        if last is not None:  # only with repeats does the order of the writes matter
            prio = prio[last]
        self._levels[self._depth][idx] = prio
        self._refresh(idx)

    def _refresh(self, nodes: np.ndarray) -> None:
        """Recompute the cached rows and values of all ancestors of the distinct leaves ``nodes``."""
        if nodes.size == 1:
            # numpy ufuncs take a slower path for one-element arrays than for two,
            # and a refresh makes dozens of calls: a lone leaf goes as two copies of itself, which
            # recompute the same groups to the same bits (see below).
            nodes = nodes.repeat(2)
        for d in range(self._depth, 0, -1):
            if self._rows[d].shape[0] <= nodes.size:
                # Near the root a level has no more groups than there are touched nodes: recomputing
                # all of them is cheaper than gather + scatter and gives the same bits (an untouched
                # group recomputes to its current values). Levels above are smaller still.
                for e in range(d, 0, -1):
                    self._recompute_whole(e)
                return
            # Siblings share a parent, so `nodes` may repeat from here on. Deduplicating would cost more
            # than it saves: a repeated group is recomputed to the same values and written twice.
            nodes = nodes // self._arity
            self._recompute_groups(d, nodes)

    def _recompute_groups(self, d: int, groups: np.ndarray) -> None:
        """Running sums of groups ``groups`` of level d, into the cache (if any) and the parents."""
        table = self._update_table
        if table is None or table.totals.size != groups.size:
            table = self._update_table = _GroupTable(groups.size, self._arity)
        np.copyto(table.children, self._rows[d].take(groups, axis=0).T)
        table.accumulate(self._arity - 1)
        if d < self._depth:
            self._prefix[d][groups] = table.cache_rows
        self._levels[d - 1][groups] = table.totals

    def _recompute_whole(self, d: int) -> None:
        """Running sums of every group of level d, into the cache (if any) and the parents."""
        head, running, last_running, last_child, parents = self._whole_views.get(d) or self._views_for_whole(d)
        np.add.accumulate(head, axis=1, out=running)  # cs[0] .. cs[K-2]
        np.add(last_running, last_child, parents)  # cs[K-1] = cs[K-2] + c[K-1], as cumsum's last step

    def _views_for_whole(self, d: int) -> tuple[np.ndarray, ...]:
        """For `_recompute_whole`: c[0..K-2], where cs[0..K-2] go, cs[K-2], c[K-1], the parents (level d-1).

        Kept for the cached levels (slicing anew costs more than the arithmetic on a small level). The
        leaf groups have no cache, so their running sums go to scratch that is not kept: it would be as
        large as the leaves after an update of every leaf.
        """
        K = self._arity
        children = self._rows[d]
        cached = d < self._depth
        running = self._prefix[d][:, 1:] if cached else np.empty((children.shape[0], K - 1))
        views = (children[:, : K - 1], running, running[:, K - 2], children[:, K - 1], self._levels[d - 1])
        if cached:
            self._whole_views[d] = views
        return views

    # ------------------------------------------------------------------ queries
    def get(self, indices: np.ndarray) -> np.ndarray:
        """Priorities of leaves ``indices`` (a new float64 array)."""
        idx = as_indices(indices, self._capacity)
        return self._levels[self._depth].take(idx)

    def _find(self, values: np.ndarray) -> np.ndarray:
        return self._descend(values)

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Stratified proportional sampling: one leaf per equal segment of [0, total) (int64).

        Value i is ``(i + u_i) * (total / batch_size)`` with ``u = rng.random(batch_size)``, clamped to
        total, then looked up with the prefix-sum rule.
        """
        batch_size = check_int("batch_size", batch_size, 1)
        total = self._checked_total()
        values = rng.random(batch_size)
        if self._offsets.size != batch_size:
            self._offsets = np.arange(batch_size, dtype=np.float64)  # kept: batch sizes rarely change
        values += self._offsets
        values *= total / batch_size
        # (i + u) * total / B can round to just above total (the rule handles v == total). Rounding keeps
        # the order of the values, which increase with i, so only the last one can.
        if values[-1] > total:
            np.minimum(values, total, out=values)
        return self._descend(values)

    def _scratch_for(self, batch_size: int) -> _LookupScratch:
        ws = self._lookup
        if ws is None or ws.count.size != batch_size:
            ws = self._lookup = _LookupScratch(batch_size, self._arity)
        return ws

    def _descend(self, values: np.ndarray) -> np.ndarray:
        """The prefix-sum rule, vectorised over the batch (loops over levels only); ``values`` is not modified.

        Fast path. At each level, ``j = #{k <= K-2 : cs[k] <= v}`` is the rule's child if j < K - 1 (the
        first k with cs[k] > v). If j == K - 1, the rule's child is K - 1 too, or, on overflow (v >= node
        mass), the last child with positive mass; the fast path takes K - 1 in both cases. That agrees
        with the rule whenever child K - 1 has mass, and otherwise leads into a zero-mass subtree and so
        to a leaf of priority 0. Hence: if every returned leaf has priority > 0, every step agreed with
        the rule; else the batch is redone by the careful path, which applies the rule literally (that
        happens only when v reaches a node's mass, e.g. v == total, next to zero leaves). The subtraction
        is ``v - cs[j-1]`` in both paths, so the remainders agree bitwise.

        How j is found: level 1 has a single group, so j is one ``searchsorted`` in its cached row. Below
        it, the cached row is ``E = [0, cs[0], ..., cs[K-2]]``: ``E[k] > v`` first holds at k = j + 1, or
        nowhere when j == K - 1 (argmax 0, since E[0] = 0 <= v), and `_child_of` maps the argmax to j.
        The leaf groups have no cache, so j is counted on running sums made as an update makes them.
        """
        if values.size == 1:  # two copies of one lookup cost less than one (see _refresh)
            return self._descend(values.repeat(2))[:1]
        K, depth = self._arity, self._depth
        ws = self._scratch_for(values.size)
        if depth == 1:
            node, v = np.zeros(values.size, dtype=np.int64), values
        else:
            node = np.searchsorted(self._top_cs, values, side="right")
            v = values - self._prefix_flat[1].take(node)  # v - cs[j-1]: node is now child j (a new array)
        prefix, prefix_flat, child_of = self._prefix, self._prefix_flat, self._child_of
        above, above_flat = ws.above, ws.above_flat
        for d in range(2, depth):
            # Flat, with each value repeated K times: one contiguous comparison (comparing with a
            # broadcast column costs numpy an inner loop per row).
            np.greater(prefix[d].take(node, axis=0).reshape(-1), v.repeat(K), above_flat)
            node *= K
            node += child_of.take(above.argmax(axis=1))
            v -= prefix_flat[d].take(node)
        sums = ws.leaf_sums
        np.copyto(sums.children, self._rows[depth].take(node, axis=0).T)
        sums.accumulate(K - 2)  # cs[0] .. cs[K-2]; cs[K-1] is never compared with
        np.less_equal(sums.compared, v, ws.le)
        node *= K
        node += np.add.reduce(ws.le, axis=0, dtype=ws.count.dtype, out=ws.count)
        if not self._levels[depth].take(node).min() > 0.0:
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
