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
