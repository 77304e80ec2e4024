"""SumTree against a plain oracle: totals, leaf values, the prefix-sum rule, sampling distribution, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chisquare

from pearl.replay import SumTree

CAPACITIES = [1, 5, 17, 300, 4097]
ARITIES = [2, 4, 16]
SEEDS = [0, 1, 2]


class Oracle:
    """Leaf priorities in a flat array; prefix lookup over one global cumulative sum."""

    def __init__(self, capacity: int) -> None:
        self.p = np.zeros(capacity)

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        for i, q in zip(indices, priorities):  # in order, so the last duplicate wins
            self.p[i] = q

    @property
    def total(self) -> float:
        return math.fsum(self.p)

    def find(self, v: float) -> int:
        """First leaf whose cumulative sum is strictly greater than v; past the end: last positive leaf."""
        cs = np.cumsum(self.p)
        i = int(np.searchsorted(cs, v, side="right"))
        if i >= len(self.p):
            i = int(np.flatnonzero(self.p > 0)[-1])
        return i

    def margin(self, v: float) -> float:
        """Distance from v to the nearest cumulative-sum boundary (how well-posed the lookup is)."""
        cs = np.concatenate([[0.0], np.cumsum(self.p)])
        return float(np.min(np.abs(cs - v)))


def random_batch(rng: np.random.Generator, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """A batch of updates with duplicate indices and some zero priorities, spanning magnitudes."""
    n = int(rng.integers(1, 65))
    idx = rng.integers(0, capacity, n)
    if n > 2:
        idx[-1] = idx[0]  # force a duplicate: the later value must win
    prio = rng.random(n) * 10.0 ** rng.integers(-3, 4, n)
    prio[rng.random(n) < 0.2] = 0.0
    return idx, prio


def assert_sums_sequential(tree: SumTree) -> None:
    """Every internal node is exactly the left-to-right sum of its children (the documented rule)."""
    K = tree.arity
    levels = tree.levels
    for d in range(tree.depth):
        children = levels[d + 1].reshape(-1, K)
        np.testing.assert_array_equal(levels[d], np.cumsum(children, axis=1)[:, -1])


# ---------------------------------------------------------------------------- against the oracle
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("arity", ARITIES)
@pytest.mark.parametrize("capacity", CAPACITIES)
def test_random_updates_and_lookups_match_oracle(capacity: int, arity: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    tree, oracle = SumTree(capacity, arity), Oracle(capacity)
    for _ in range(15):
        idx, prio = random_batch(rng, capacity)
        tree.update(idx, prio)
        oracle.update(idx, prio)
        np.testing.assert_allclose(tree.total, oracle.total, rtol=1e-12, atol=0)
        np.testing.assert_array_equal(tree.get(np.arange(capacity)), oracle.p)
        if oracle.total == 0:
            continue
        values = rng.random(200) * tree.total
        # The tree and the oracle round differently; compare only where the answer is clear.
        clear = np.array([oracle.margin(v) > 1e-9 * oracle.total for v in values])
        got = tree.find_prefix_sum(values)
        want = np.array([oracle.find(v) for v in values])
        np.testing.assert_array_equal(got[clear], want[clear])
        assert np.all(tree.get(got) > 0)
    assert_sums_sequential(tree)


@pytest.mark.parametrize("arity", ARITIES)
@pytest.mark.parametrize("capacity", [5, 17, 300])
def test_exact_boundaries_follow_strictly_greater_rule(capacity: int, arity: int) -> None:
    # Small integer priorities make every sum exact, so even values ON a boundary are well-posed:
    # v == cs[k] must go to the next leaf with positive priority, and v == total to the last one.
    rng = np.random.default_rng(7)
    prio = rng.integers(0, 4, capacity).astype(float)
    prio[rng.integers(0, capacity)] = 1.0  # at least one positive
    tree, oracle = SumTree(capacity, arity), Oracle(capacity)
    tree.update(np.arange(capacity), prio)
    oracle.update(np.arange(capacity), prio)
    cs = np.cumsum(prio)
    values = np.unique(np.concatenate([[0.0], cs, cs - 0.5, cs + 0.5]))
    values = values[(values >= 0) & (values <= tree.total)]
    want = np.array([oracle.find(v) for v in values])
    np.testing.assert_array_equal(tree.find_prefix_sum(values), want)
    # One at a time too: a batch is only as good as its hardest value (e.g. 0 or total) lets it be.
    np.testing.assert_array_equal([tree.find_prefix_sum(np.array([v]))[0] for v in values], want)


def test_duplicate_indices_last_occurrence_wins() -> None:
    tree = SumTree(10, arity=4)
    tree.update(np.array([3, 7, 3, 3, 7]), np.array([1.0, 2.0, 5.0, 4.0, 0.5]))
    np.testing.assert_array_equal(tree.get(np.array([3, 7])), [4.0, 0.5])
    assert tree.total == 4.5


def test_scalar_priority_is_broadcast() -> None:
    tree = SumTree(6)
    tree.update(np.array([0, 2, 4]), 2.5)
    np.testing.assert_array_equal(tree.get(np.arange(6)), [2.5, 0, 2.5, 0, 2.5, 0])


def test_tree_is_a_function_of_its_leaves() -> None:
    # Parents are recomputed, not patched with deltas: a tree rebuilt from the same leaves is bitwise equal.
    rng = np.random.default_rng(3)
    a = SumTree(1000, arity=8)
    for _ in range(300):
        a.update(rng.integers(0, 1000, 50), rng.random(50) * 1e3)
    b = SumTree(1000, arity=8)
    b.update(np.arange(1000), a.get(np.arange(1000)))
    for la, lb in zip(a.levels, b.levels):
        np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(a.sample(64, np.random.default_rng(9)), b.sample(64, np.random.default_rng(9)))
    assert_sums_sequential(a)


def test_layout() -> None:
    tree = SumTree(17, arity=4)
    assert (tree.capacity, tree.arity, tree.depth) == (17, 4, 3)
    assert [len(level) for level in tree.levels] == [1, 4, 16, 64]
    assert SumTree(1).depth == 1
    assert SumTree(16, arity=16).depth == 1
    assert SumTree(17, arity=16).depth == 2


# ---------------------------------------------------------------------------- zero priorities
@pytest.mark.parametrize("arity", ARITIES)
def test_zero_priority_leaves_are_never_returned(arity: int) -> None:
    rng = np.random.default_rng(11)
    capacity = 301
    prio = rng.random(capacity)
    prio[rng.random(capacity) < 0.7] = 0.0
    prio[-1] = 0.0  # trailing zeros next to the padding
    prio[0] = 0.0
    tree = SumTree(capacity, arity)
    tree.update(np.arange(capacity), prio)
    cs = np.cumsum(prio)
    values = np.concatenate([rng.random(5000) * tree.total, [0.0, tree.total], np.minimum(cs, tree.total),
                             np.nextafter(np.minimum(cs, tree.total), 0.0)])
    got = tree.find_prefix_sum(values)
    assert got.dtype == np.int64
    assert np.all((got >= 0) & (got < capacity))
    assert np.all(prio[got] > 0)
    drawn = np.concatenate([tree.sample(97, rng) for _ in range(200)])
    assert np.all(prio[drawn] > 0)


@pytest.mark.parametrize("arity", ARITIES)
def test_value_equal_to_total_returns_a_positive_leaf(arity: int) -> None:
    # Inexact float sums: v == total overflows some level and must step back to a child with mass.
    rng = np.random.default_rng(5)
    for capacity in (2, 17, 300, 4097):
        prio = rng.random(capacity) * 10.0 ** rng.integers(-8, 8, capacity)
        prio[capacity // 2 + 1:] = 0.0
        tree = SumTree(capacity, arity)
        tree.update(np.arange(capacity), prio)
        got = tree.find_prefix_sum(np.array([tree.total, np.nextafter(tree.total, 0.0)]))
        assert np.all(prio[got] > 0), (capacity, got)


def test_single_positive_leaf_gets_every_draw() -> None:
    tree = SumTree(4097, arity=16)
    tree.update(np.array([4096]), np.array([1e-300]))
    rng = np.random.default_rng(0)
    assert set(tree.sample(128, rng).tolist()) == {4096}
    assert tree.find_prefix_sum(np.array([0.0, tree.total])).tolist() == [4096, 4096]


def test_setting_back_to_zero_removes_a_leaf() -> None:
    tree = SumTree(20, arity=4)
    tree.update(np.arange(20), np.ones(20))
    tree.update(np.arange(10), np.zeros(10))
    assert tree.total == 10.0
    drawn = tree.sample(1000, np.random.default_rng(1))
    assert drawn.min() >= 10


# ---------------------------------------------------------------------------- sampling
def test_sample_is_stratified_and_sorted() -> None:
    # One value per segment, and lookup is monotone in v, so a batch comes out in leaf order.
    tree = SumTree(1000, arity=16)
    rng = np.random.default_rng(2)
    tree.update(np.arange(1000), rng.random(1000))
    drawn = tree.sample(256, rng)
    assert drawn.shape == (256,) and drawn.dtype == np.int64
    assert np.all(np.diff(drawn) >= 0)


@pytest.mark.parametrize("arity", [4, 16])
def test_sampling_matches_priorities_chi_square(arity: int) -> None:
    rng = np.random.default_rng(1234)
    n = 50
    prio = rng.uniform(0.05, 1.0, n) * 10.0 ** rng.integers(0, 3, n)  # spans ~3 orders of magnitude
    tree = SumTree(n, arity)
    tree.update(np.arange(n), prio)
    drawn = np.concatenate([tree.sample(1000, rng) for _ in range(200)])  # 200 000 draws
    counts = np.bincount(drawn, minlength=n)
    expected = prio / prio.sum() * drawn.size
    assert expected.min() > 5  # chi-square needs enough expected counts per cell
    assert chisquare(counts, expected).pvalue > 1e-3


def test_chi_square_has_power_against_a_wrong_distribution() -> None:
    # The same test must reject when the distribution differs: skewed priorities vs uniform expectation.
    rng = np.random.default_rng(1234)
    n = 50
    prio = np.ones(n)
    prio[:5] = 3.0
    tree = SumTree(n)
    tree.update(np.arange(n), prio)
    drawn = np.concatenate([tree.sample(1000, rng) for _ in range(200)])
    counts = np.bincount(drawn, minlength=n)
    uniform = np.full(n, drawn.size / n)
    assert chisquare(counts, uniform).pvalue < 1e-3


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs", [dict(capacity=0), dict(capacity=-3), dict(capacity=10, arity=1),
                                    dict(capacity=10, arity=0), dict(capacity=2.0), dict(capacity=True)])
def test_bad_construction_raises(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        SumTree(**kwargs)


@pytest.mark.parametrize("indices, priorities", [
    ([0, 1], [1.0, -0.5]),             # negative priority
    ([0, 1], [1.0, np.nan]),           # NaN
    ([0, 1], [np.inf, 1.0]),           # infinite
    ([0, 10], [1.0, 1.0]),             # index == capacity
    ([-1, 2], [1.0, 1.0]),             # negative index
    ([0.0, 1.0], [1.0, 1.0]),          # float indices
    ([0, 1, 2], [1.0, 1.0]),           # length mismatch
    ([[0, 1]], [[1.0, 1.0]]),          # not 1-D
])
def test_bad_update_raises(indices, priorities) -> None:
    tree = SumTree(10)
    with pytest.raises(ValueError):
        tree.update(np.array(indices), np.array(priorities))
    assert tree.total == 0.0  # nothing was written


def test_bad_queries_raise() -> None:
    tree = SumTree(10)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="total"):
        tree.sample(4, rng)  # empty tree
    with pytest.raises(ValueError, match="total"):
        tree.find_prefix_sum(np.array([0.0]))
    tree.update(np.arange(10), np.ones(10))
    for bad in ([-0.1], [10.5], [np.nan], [np.inf]):
        with pytest.raises(ValueError):
            tree.find_prefix_sum(np.array(bad))
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError):
            tree.sample(bad, rng)
    with pytest.raises(ValueError):
        tree.get(np.array([10]))
    with pytest.raises(ValueError):
        tree.get(np.array([-1]))


def test_empty_batches_are_fine() -> None:
    tree = SumTree(10)
    tree.update(np.array([], dtype=np.int64), np.array([]))
    assert tree.get(np.array([], dtype=np.int64)).shape == (0,)
    assert tree.find_prefix_sum(np.array([])).shape == (0,)


# ---------------------------------------------------------------------------- internals against np.cumsum
def assert_cache_matches_cumsum(tree: SumTree) -> None:
    """White-box: each cached row is [0, cs[0], ..., cs[K-2]] of its group, bitwise as np.cumsum makes it."""
    K = tree.arity
    for d in range(1, tree.depth):
        cs = np.cumsum(tree.levels[d].reshape(-1, K), axis=1)
        want = np.concatenate([np.zeros((cs.shape[0], 1)), cs[:, :-1]], axis=1)
        np.testing.assert_array_equal(tree._prefix[d].view(np.uint64), want.view(np.uint64))


def assert_bitwise_sequential(tree: SumTree) -> None:
    """`assert_sums_sequential`, down to the sign of zero."""
    for d in range(tree.depth):
        want = np.cumsum(tree.levels[d + 1].reshape(-1, tree.arity), axis=1)[:, -1]
        np.testing.assert_array_equal(tree.levels[d].view(np.uint64), want.view(np.uint64))


@pytest.mark.parametrize("arity", [2, 3, 4, 16])
@pytest.mark.parametrize("capacity", [5, 300, 4097])
def test_cache_and_parents_match_cumsum_for_every_batch_shape(capacity: int, arity: int) -> None:
    # Small batches take the gather path (one group per written leaf, siblings repeating a group), large
    # ones recompute whole levels; whole groups written in shuffled order repeat every group K times.
    rng = np.random.default_rng(capacity + arity)
    tree = SumTree(capacity, arity)
    for n in (1, 2, 7, 64, capacity // 2 + 1, capacity, 3 * capacity):
        idx = rng.integers(0, capacity, n)
        prio = rng.random(n) * 10.0 ** rng.integers(-5, 6, n)
        prio[rng.random(n) < 0.3] = 0.0
        tree.update(idx, prio)
        assert_cache_matches_cumsum(tree)
        assert_bitwise_sequential(tree)
    group = rng.permutation(np.arange(min(capacity, 3 * arity)))
    tree.update(group, rng.random(group.size))
    assert_cache_matches_cumsum(tree)
    assert_bitwise_sequential(tree)


@pytest.mark.parametrize("arity", [2, 3, 16])
def test_fast_lookup_agrees_with_the_literal_rule(arity: int) -> None:
    # _descend answers from the cache and falls back to _descend_careful only when a leaf of priority 0
    # shows the fast path went astray; wherever it does not fall back it must agree with the rule.
    rng = np.random.default_rng(arity)
    for capacity in (1, 2, 17, 300, 4097):
        prio = rng.random(capacity) * 10.0 ** rng.integers(-8, 8, capacity)
        prio[rng.random(capacity) < 0.5] = 0.0
        prio[rng.integers(0, capacity)] = 1.0
        tree = SumTree(capacity, arity)
        tree.update(np.arange(capacity), prio)
        cs = np.minimum(np.cumsum(prio), tree.total)
        values = np.concatenate([rng.random(500) * tree.total, [0.0, tree.total], cs, np.nextafter(cs, 0.0)])
        np.testing.assert_array_equal(tree._descend(values), tree._descend_careful(values))


@pytest.mark.parametrize("arity", [3, 5, 300])
def test_odd_and_wide_arities_match_oracle(arity: int) -> None:
    # 300 > 256 children: the lookup counts children in a wider integer type.
    rng = np.random.default_rng(arity)
    capacity = 1000
    tree, oracle = SumTree(capacity, arity), Oracle(capacity)
    for _ in range(5):
        idx, prio = random_batch(rng, capacity)
        tree.update(idx, prio)
        oracle.update(idx, prio)
    if oracle.total == 0:
        tree.update(np.array([3]), np.array([1.0]))
        oracle.update([3], [1.0])
    values = rng.random(300) * tree.total
    clear = np.array([oracle.margin(v) > 1e-9 * oracle.total for v in values])
    np.testing.assert_array_equal(tree.find_prefix_sum(values)[clear], [oracle.find(v) for v in values[clear]])
    assert np.all(tree.get(tree.sample(64, rng)) > 0)
    assert_cache_matches_cumsum(tree)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint16, np.uint64])
def test_index_dtypes_give_the_same_tree(dtype: type) -> None:
    rng = np.random.default_rng(4)
    idx = rng.integers(0, 100, 40)
    prio = rng.random(40)
    a, b = SumTree(100, 4), SumTree(100, 4)
    a.update(idx, prio)
    b.update(idx.astype(dtype), prio)
    for la, lb in zip(a.levels, b.levels):
        np.testing.assert_array_equal(la, lb)


def test_batch_sizes_can_change_between_calls() -> None:
    # Scratch buffers are kept per batch size (a batch of one runs as two copies of itself); switching
    # sizes must not leak state from one call into the next.
    rng = np.random.default_rng(8)
    tree = SumTree(5000)
    tree.update(np.arange(5000), rng.random(5000))
    for n in (1, 128, 7, 1, 50, 2):
        assert np.all(tree.get(tree.sample(n, rng)) > 0)
        tree.update(rng.integers(0, 5000, n), rng.random(n))
        fresh = SumTree(5000)
        fresh.update(np.arange(5000), tree.get(np.arange(5000)))
        for la, lb in zip(tree.levels, fresh.levels):
            np.testing.assert_array_equal(la, lb)
        values = rng.random(n) * tree.total
        np.testing.assert_array_equal(tree.find_prefix_sum(values), fresh.find_prefix_sum(values))
        np.testing.assert_array_equal(tree.find_prefix_sum(values), [tree.find_prefix_sum(v[None])[0] for v in values])


def test_negative_zero_priority_is_allowed_and_its_neighbours_are_not() -> None:
    # Validation reads the bits of the priorities; -0.0 (== 0.0) must still pass and the extremes of the
    # finite range must too, while the smallest negative float and a NaN with the sign bit set must not.
    tree = SumTree(4, arity=2)
    tree.update(np.arange(4), np.array([-0.0, 5e-324, np.finfo(np.float64).max, 0.0]))
    assert tree.get(np.array([2]))[0] == np.finfo(np.float64).max
    for bad in (-5e-324, -np.nan, -np.inf):
        with pytest.raises(ValueError):
            tree.update(np.array([0]), np.array([bad]))


def test_sample_clamps_values_that_round_above_total() -> None:
    # With u just below 1 and this total, (B - 1 + u) * (total / B) rounds above total for B = 3.
    class AlmostOne:
        def random(self, n: int) -> np.ndarray:
            return np.full(n, 1.0 - 2.0**-53)

    total = 7.247736687006241
    assert (2.0 + (1.0 - 2.0**-53)) * (total / 3) > total
    tree = SumTree(10, arity=4)
    tree.update(np.array([2, 9]), np.array([0.0, total]))
    seen = []
    descend = tree._descend
    tree._descend = lambda values: seen.append(values.copy()) or descend(values)
    assert tree.sample(3, AlmostOne()).tolist() == [9, 9, 9]
    assert seen[0][-1] == total and seen[0].max() <= total


@pytest.mark.parametrize("bad", [-1, 1000])
@pytest.mark.parametrize("n", [3, 200, 1000])
def test_out_of_range_index_is_caught_in_small_and_big_batches(n: int, bad: int) -> None:
    # Small batches check the range on a sorted copy, big ones on the sorted distinct indices.
    tree = SumTree(1000)
    idx = np.arange(n)
    idx[n // 2] = bad
    with pytest.raises(ValueError, match="out of range"):
        tree.update(idx, np.ones(n))
    assert tree.total == 0.0
