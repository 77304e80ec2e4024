"""ReplayIndex: ring slots, priorities, importance weights, checkpoints; linear_beta."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pearl.replay import ReplayIndex, SampledIndices, linear_beta


def filled(capacity: int = 8, count: int | None = None, **kwargs) -> ReplayIndex:
    index = ReplayIndex(capacity, **kwargs)
    index.reserve(capacity if count is None else count)
    return index


# ---------------------------------------------------------------------------- ring
def test_ring_wraps_and_size_caps() -> None:
    index = ReplayIndex(5)
    assert (index.size, index.position) == (0, 0)
    np.testing.assert_array_equal(index.reserve(3), [0, 1, 2])
    assert (index.size, index.position) == (3, 3)
    slots = index.reserve(4)
    np.testing.assert_array_equal(slots, [3, 4, 0, 1])
    assert slots.dtype == np.int64
    assert (index.size, index.position) == (5, 2)
    np.testing.assert_array_equal(index.reserve(1), [2])
    assert (index.size, index.position) == (5, 3)


def test_reserve_more_than_capacity_returns_every_slot_in_order() -> None:
    index = ReplayIndex(4, prioritized=True)
    index.reserve(1)
    slots = index.reserve(10)
    np.testing.assert_array_equal(slots, [1, 2, 3, 0, 1, 2, 3, 0, 1, 2])
    assert (index.size, index.position) == (4, 3)
    # A caller writing in order keeps the newest `capacity` items.
    store = np.full(4, -1)
    for slot, item in zip(slots, range(10)):
        store[slot] = item
    assert sorted(store.tolist()) == [6, 7, 8, 9]
    np.testing.assert_array_equal(index.tree.get(np.arange(4)), np.full(4, index.max_priority))


def test_reserve_zero_is_a_no_op() -> None:
    index = ReplayIndex(4, prioritized=True)
    assert index.reserve(0).shape == (0,)
    assert (index.size, index.position, index.tree.total) == (0, 0, 0.0)


def test_new_slots_get_max_priority() -> None:
    index = ReplayIndex(10, prioritized=True, alpha=0.5, eps=0.0)
    index.reserve(3)
    np.testing.assert_array_equal(index.tree.get(np.arange(3)), [1.0, 1.0, 1.0])
    index.update_priorities(np.array([0, 1]), np.array([16.0, 0.25]))  # priorities 4.0 and 0.5
    assert index.max_priority == 4.0
    new = index.reserve(2)
    np.testing.assert_array_equal(index.tree.get(new), [4.0, 4.0])
    np.testing.assert_array_equal(index.tree.get(np.arange(5)), [4.0, 0.5, 1.0, 4.0, 4.0])
    assert index.tree.total == pytest.approx(13.5, rel=1e-15)


def test_update_priorities_formula_and_max() -> None:
    alpha, eps = 0.6, 1e-6
    index = filled(6, prioritized=True, alpha=alpha, eps=eps)
    td = np.array([-3.0, 0.0, 0.5, 7.0])
    index.update_priorities(np.array([0, 1, 2, 3]), td)
    want = (np.abs(td) + eps) ** alpha
    np.testing.assert_allclose(index.tree.get(np.arange(4)), want, rtol=1e-15)
    assert index.max_priority == pytest.approx(want.max(), rel=1e-15)
    before = index.max_priority
    index.update_priorities(np.array([3]), np.array([0.1]))  # lower: the running max stays
    assert index.max_priority == before
    index.update_priorities(np.array([2, 2]), np.array([100.0, 1.0]))  # last duplicate wins
    assert index.tree.get(np.array([2]))[0] == pytest.approx((1.0 + eps) ** alpha, rel=1e-15)
    assert index.max_priority == pytest.approx((100.0 + eps) ** alpha, rel=1e-15)


def test_uniform_update_priorities_is_accepted_and_ignored() -> None:
    index = filled(6)
    index.update_priorities(np.array([0, 1]), np.array([5.0, 1.0]))
    assert index.max_priority == 1.0 and index.tree is None


# ---------------------------------------------------------------------------- sampling
def test_uniform_sampling_stays_below_size() -> None:
    index = ReplayIndex(100)
    index.reserve(7)
    rng = np.random.default_rng(0)
    picked = index.sample(1000, rng)
    assert isinstance(picked, SampledIndices)
    assert picked.indices.dtype == np.int64 and picked.weights.dtype == np.float32
    assert picked.indices.min() >= 0 and picked.indices.max() < 7
    assert set(picked.indices.tolist()) == set(range(7))
    np.testing.assert_array_equal(picked.weights, np.ones(1000, dtype=np.float32))


def test_prioritized_sampling_stays_below_size() -> None:
    index = ReplayIndex(100, prioritized=True)
    index.reserve(7)
    picked = index.sample(1000, np.random.default_rng(0))
    assert picked.indices.max() < 7


def test_prioritized_weights_in_unit_interval_with_max_one() -> None:
    rng = np.random.default_rng(1)
    index = filled(64, prioritized=True)
    index.update_priorities(np.arange(64), rng.standard_normal(64) * 10.0 ** rng.integers(-3, 3, 64))
    for beta in (0.0, 0.4, 1.0):
        w = index.sample(32, rng, beta).weights
        assert w.dtype == np.float32
        assert np.all(w > 0) and np.all(w <= 1)
        assert w.max() == 1.0


def test_importance_weights_match_direct_computation() -> None:
    rng = np.random.default_rng(2)
    alpha, eps, beta = 0.7, 1e-3, 0.55
    index = ReplayIndex(40, prioritized=True, alpha=alpha, eps=eps)
    index.reserve(30)  # size 30 of 40
    td = rng.standard_normal(30) * 5
    index.update_priorities(np.arange(30), td)
    p = (np.abs(td) + eps) ** alpha  # computed here, not read back from the tree
    picked = index.sample(16, np.random.default_rng(3), beta)
    probs = p[picked.indices] / p.sum()
    w = (30 * probs) ** -beta
    np.testing.assert_allclose(picked.weights, w / w.max(), rtol=1e-6)


def test_prioritized_sampling_follows_priorities() -> None:
    index = filled(4, prioritized=True, alpha=1.0, eps=0.0)
    index.update_priorities(np.arange(4), np.array([1.0, 0.0, 2.0, 7.0]))
    drawn = np.concatenate([index.sample(100, np.random.default_rng(s)).indices for s in range(50)])
    counts = np.bincount(drawn, minlength=4) / drawn.size
    assert counts[1] == 0
    np.testing.assert_allclose(counts, [0.1, 0.0, 0.2, 0.7], atol=0.01)


# ---------------------------------------------------------------------------- linear_beta
def test_linear_beta() -> None:
    assert linear_beta(0.4, 0, 100) == 0.4
    assert linear_beta(0.4, 50, 100) == pytest.approx(0.7)
    assert linear_beta(0.4, 100, 100) == 1.0
    assert linear_beta(0.4, 10_000, 100) == 1.0
    assert linear_beta(1.0, 3, 100) == 1.0
    for bad in ((0.4, -1, 100), (0.4, 0, 0), (-0.1, 0, 10), (1.5, 0, 10), (float("nan"), 0, 10)):
        with pytest.raises(ValueError):
            linear_beta(*bad)


# ---------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("prioritized", [False, True])
def test_state_dict_round_trip_gives_identical_samples(prioritized: bool) -> None:
    rng = np.random.default_rng(4)
    a = ReplayIndex(50, prioritized=prioritized, alpha=0.5, eps=1e-4, arity=4)
    for _ in range(20):
        a.reserve(int(rng.integers(1, 8)))
        picked = a.sample(8, rng)
        a.update_priorities(picked.indices, rng.standard_normal(8) * 3)
    state = a.state_dict()
    b = ReplayIndex(50, prioritized=prioritized, arity=4)  # default alpha/eps: restored from the state
    b.load_state_dict(state)
    assert (b.size, b.position, b.max_priority) == (a.size, a.position, a.max_priority)
    for step in range(5):
        sa, sb = a.sample(16, np.random.default_rng(step), 0.6), b.sample(16, np.random.default_rng(step), 0.6)
        np.testing.assert_array_equal(sa.indices, sb.indices)
        np.testing.assert_array_equal(sa.weights, sb.weights)
        td = np.random.default_rng(100 + step).standard_normal(16)
        a.update_priorities(sa.indices, td)
        b.update_priorities(sb.indices, td)
        np.testing.assert_array_equal(a.reserve(3), b.reserve(3))
    if prioritized:
        for la, lb in zip(a.tree.levels, b.tree.levels):
            np.testing.assert_array_equal(la, lb)


def test_state_dict_survives_npz() -> None:
    a = filled(8, prioritized=True)
    a.update_priorities(np.arange(8), np.linspace(-2, 2, 8))
    buf = io.BytesIO()
    np.savez(buf, **a.state_dict())
    buf.seek(0)
    with np.load(buf) as saved:
        b = ReplayIndex(8, prioritized=True)
        b.load_state_dict(dict(saved))
    np.testing.assert_array_equal(b.tree.get(np.arange(8)), a.tree.get(np.arange(8)))
    assert (b.size, b.position, b.max_priority) == (a.size, a.position, a.max_priority)


def test_state_dict_is_a_copy_and_checks_config() -> None:
    a = filled(8, prioritized=True)
    state = a.state_dict()
    a.update_priorities(np.array([0]), np.array([50.0]))
    assert state["priorities"][0] == 1.0
    with pytest.raises(ValueError):
        ReplayIndex(9, prioritized=True).load_state_dict(state)
    with pytest.raises(ValueError):
        ReplayIndex(8, prioritized=False).load_state_dict(state)
    with pytest.raises(ValueError):
        ReplayIndex(8, prioritized=True).load_state_dict({"capacity": 8})


# ---------------------------------------------------------------------------- bad input
def test_bad_input_raises() -> None:
    rng = np.random.default_rng(0)
    for kwargs in (dict(capacity=0), dict(capacity=4, alpha=-1.0), dict(capacity=4, eps=float("nan")),
                   dict(capacity=4, arity=1)):
        with pytest.raises(ValueError):
            ReplayIndex(**kwargs)
    for prioritized in (False, True):
        empty = ReplayIndex(4, prioritized=prioritized)
        with pytest.raises(ValueError, match="empty"):
            empty.sample(2, rng)
        with pytest.raises(ValueError):
            empty.reserve(-1)
        empty.reserve(2)
        with pytest.raises(ValueError):
            empty.sample(0, rng)
        with pytest.raises(ValueError):
            empty.sample(2, rng, beta=-0.5)
    index = filled(4, count=2, prioritized=True)
    with pytest.raises(ValueError):
        index.update_priorities(np.array([2]), np.array([1.0]))  # never written
    with pytest.raises(ValueError):
        index.update_priorities(np.array([-1]), np.array([1.0]))
    with pytest.raises(ValueError):
        index.update_priorities(np.array([0]), np.array([np.nan]))
    with pytest.raises(ValueError):
        index.update_priorities(np.array([0, 1]), np.array([1.0]))


# ---------------------------------------------------------------------------- property test
reserve_op = st.tuples(st.just("reserve"), st.integers(0, 12))
update_op = st.tuples(st.just("update"), st.lists(st.tuples(st.floats(0, 1, exclude_max=True),
                                                           st.floats(-1e3, 1e3)), min_size=1, max_size=10))
sample_op = st.tuples(st.just("sample"), st.integers(1, 16))


@settings(max_examples=150, deadline=None)
@given(capacity=st.integers(1, 20), arity=st.integers(2, 5), alpha=st.floats(0.0, 1.0),
       ops=st.lists(st.one_of(reserve_op, update_op, sample_op), max_size=30), seed=st.integers(0, 2**32 - 1))
def test_random_operation_sequences_keep_invariants(capacity, arity, alpha, ops, seed) -> None:
    index = ReplayIndex(capacity, prioritized=True, alpha=alpha, eps=1e-6, arity=arity)
    rng = np.random.default_rng(seed)
    # A plain model of the same bookkeeping.
    prio, position, size, max_p = np.zeros(capacity), 0, 0, 1.0
    for op, arg in ops:
        if op == "reserve":
            for _ in range(arg):
                prio[position] = max_p
                position, size = (position + 1) % capacity, min(size + 1, capacity)
            index.reserve(arg)
        elif op == "update" and size > 0:
            slots = np.array([int(frac * size) for frac, _ in arg])
            td = np.array([t for _, t in arg])
            new = (np.abs(td) + 1e-6) ** alpha
            for slot, p in zip(slots, new):
                prio[slot] = p
            max_p = max(max_p, float(new.max()))
            index.update_priorities(slots, td)
        elif op == "sample" and size > 0:
            picked = index.sample(arg, rng, beta=0.5)
            assert picked.indices.shape == (arg,)
            assert np.all(picked.indices < size)
            assert np.all(prio[picked.indices] > 0)
            assert np.all(picked.weights > 0) and picked.weights.max() == 1.0
        assert (index.position, index.size) == (position, size)
        assert index.max_priority == pytest.approx(max_p, rel=1e-12)
        np.testing.assert_allclose(index.tree.get(np.arange(capacity)), prio, rtol=1e-12)
        assert np.all(prio[size:] == 0)
        assert index.tree.total == pytest.approx(prio.sum(), rel=1e-12, abs=0)
