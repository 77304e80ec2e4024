"""Replay on an OpenCL device: the float32 device sum tree against the numpy SumTree, device sampling against
pearl.rng, and insert / sample / priority update behaving like the torch adapter's replay.

Skipped cleanly where pyopencl or an OpenCL device is missing. Priorities in the parity tests are multiples
of 1/8 with totals far below 2**21, so every float32 sum (and every v - prefix in a lookup) is exact and the
float32 and float64 trees must agree leaf for leaf.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

cl = pytest.importorskip("pyopencl")

from opencl_support import first_opencl_device  # noqa: E402

DEVICE_ID = first_opencl_device()  # the first that works, else the module skips, saying why

import pyopencl.array as cla  # noqa: E402 - only once pyopencl is known to work

from pearl import rng as prng  # noqa: E402
from pearl.adapters.opencl.replay import DeviceSumTree, OpenCLReplay  # noqa: E402
from pearl.adapters.opencl.runtime import CLRuntime  # noqa: E402
from pearl.algos import DDPGConfig, DQNConfig  # noqa: E402
from pearl.replay import SumTree  # noqa: E402
from pearl.types import EnvSpec, PriorityUpdate, TransitionBatch  # noqa: E402

DISCRETE = EnvSpec("test", obs_dim=3, action_kind="discrete", action_dim=4)
CONTINUOUS = EnvSpec("test", obs_dim=3, action_kind="continuous", action_dim=2, action_low=(-1, -1),
                     action_high=(1, 1))


@pytest.fixture(scope="module")
def rt() -> CLRuntime:
    return CLRuntime.open(DEVICE_ID)


def transitions(start: int, count: int, spec: EnvSpec) -> TransitionBatch:
    """Transition n carries n in every field, so a sampled row tells which transition it is."""
    n = np.arange(start, start + count)
    obs = np.repeat(n[:, None], spec.obs_dim, axis=1).astype(np.float32)
    action = n % spec.action_dim if spec.discrete else np.repeat(n[:, None], spec.action_dim, 1).astype(np.float32)
    return TransitionBatch(obs, action, n.astype(np.float32), obs + 0.5, (n % 2).astype(np.float32))


def eighths(rng: np.random.Generator, n: int, zero_fraction: float = 0.3) -> np.ndarray:
    """Priorities that are multiples of 1/8 in [0, 8), about zero_fraction of them exactly 0."""
    p = rng.integers(1, 64, n) / 8.0
    p[rng.random(n) < zero_fraction] = 0.0
    return p


def lookup_values(leaves: np.ndarray, total: float, rng: np.random.Generator) -> np.ndarray:
    """Every exact boundary (each running sum, 0 and total included), the float32 values just below the
    total, and random float32 values in [0, total]."""
    f32 = np.float32
    boundaries = np.concatenate([[0.0], np.cumsum(leaves)])
    near_total = [total - 1 / 8, total - 1 / 16, float(np.nextafter(f32(total), f32(0))), total]
    random = (rng.random(500) * total).astype(np.float32).astype(np.float64)
    values = np.concatenate([boundaries, near_total, random])
    return values[(values >= 0) & (values <= total)]


# ---------------------------------------------------------------------------------------------- sum tree
@pytest.mark.parametrize(("capacity", "arity"), [(1, 2), (2, 2), (7, 2), (100, 4), (1000, 16), (4097, 16)])
def test_device_tree_matches_numpy_tree(rt, capacity: int, arity: int) -> None:
    rng = np.random.default_rng(capacity * 31 + arity)
    dev, ref = DeviceSumTree(rt, capacity, arity), SumTree(capacity, arity)
    assert dev.depth == ref.depth
    everything = np.arange(capacity)
    for _ in range(6):
        n = int(rng.integers(1, 2 * capacity + 2))
        idx = rng.integers(0, capacity, n)
        idx = np.concatenate([idx, idx[: n // 3]])  # guaranteed duplicates: the last occurrence must win
        prio = eighths(rng, idx.size)
        dev.update(idx, prio)
        ref.update(idx, prio)
        assert dev.total == ref.total
        leaves = ref.get(everything)
        np.testing.assert_array_equal(dev.get(everything), leaves)
        if ref.total == 0:
            continue
        values = lookup_values(leaves, ref.total, rng)
        found = dev.find_prefix_sum(values)
        np.testing.assert_array_equal(found, ref.find_prefix_sum(values))
        assert found.dtype == np.int64
        assert (leaves[found] > 0).all(), "a zero-priority leaf was returned"


@pytest.mark.parametrize("group", [1, 3, 64])
def test_every_group_size_refreshes_like_numpy(rt, group: int) -> None:
    """A write is one work-group whose work-items take every group-th slot, a barrier between levels: with one
    work-item (as an FPGA single-work-item build would run it) or a group smaller than the batch, every
    level must still equal the numpy tree's, the last duplicate winning."""
    rng = np.random.default_rng(group)
    dev, ref = DeviceSumTree(rt, 300, 4, max_group=group), SumTree(300, 4)
    for n in (1, 5, 200, 700):
        idx = rng.integers(0, 300, n)
        idx = np.concatenate([idx, idx[: n // 2]])
        prio = eighths(rng, idx.size)
        dev.update(idx, prio)
        ref.update(idx, prio)
        flat = dev.buffer.get()
        for d, level in enumerate(ref.levels):
            np.testing.assert_array_equal(flat[dev.offsets[d]: dev.offsets[d] + level.size], level)


def test_device_tree_levels_match_numpy_levels(rt) -> None:
    rng = np.random.default_rng(3)
    dev, ref = DeviceSumTree(rt, 300, 4), SumTree(300, 4)
    idx = rng.integers(0, 300, 700)
    prio = eighths(rng, 700)
    dev.update(idx, prio)
    ref.update(idx, prio)
    flat = dev.buffer.get()
    for d, level in enumerate(ref.levels):
        np.testing.assert_array_equal(flat[dev.offsets[d]: dev.offsets[d] + level.size], level)


def test_update_device_writes_in_order(rt) -> None:
    dev = DeviceSumTree(rt, 10, 2)
    dev.update_device(rt.to_device(np.array([3, 3, 5, 3], dtype=np.int32)),
                      rt.to_device(np.array([1.0, 2.0, 4.0, 0.5], dtype=np.float32)))
    np.testing.assert_array_equal(dev.get(np.array([3, 5])), [0.5, 4.0])
    assert dev.total == 4.5
    # int64 / float64 device arrays are converted on the device; invalid device entries are skipped
    dev.update_device(rt.to_device(np.array([5, 11, -1, 2])), rt.to_device(np.array([1.0, 9.0, 9.0, np.nan])))
    np.testing.assert_array_equal(dev.get(np.arange(10)), [0, 0, 0, 0.5, 0, 1.0, 0, 0, 0, 0])
    assert dev.total == 1.5


def test_tree_validates_like_numpy(rt) -> None:
    dev = DeviceSumTree(rt, 10)
    with pytest.raises(ValueError):
        dev.find_prefix_sum(np.array([0.0]))  # empty tree
    for idx, prio in [([10], [1.0]), ([-1], [1.0]), ([1.5], [1.0]), ([1], [-1.0]), ([1], [np.nan]),
                      ([1], [np.inf]), ([1], [1e39]), ([1, 2], [1.0, 2.0, 3.0]), ([[1]], [1.0])]:
        with pytest.raises(ValueError):
            dev.update(np.array(idx), np.array(prio))
    dev.update(np.array([1, 2]), 2.0)  # a scalar is broadcast
    assert dev.total == 4.0
    for values in ([4.5], [-0.1], [np.nan], [[1.0]]):
        with pytest.raises(ValueError):
            dev.find_prefix_sum(np.array(values))
    with pytest.raises(ValueError):
        dev.get(np.array([10]))
    with pytest.raises(ValueError):
        dev.update_device(np.array([1], dtype=np.int32), rt.to_device(np.ones(1, np.float32)))
    with pytest.raises(ValueError):
        DeviceSumTree(rt, 0)


@pytest.mark.parametrize("batch", [1, 100, 128])
def test_device_sampling_is_the_lookup_of_the_philox_values(rt, batch: int) -> None:
    rng = np.random.default_rng(batch)
    capacity, arity = 1000, 16
    dev, ref = DeviceSumTree(rt, capacity, arity), SumTree(capacity, arity)
    prio = eighths(rng, capacity, zero_fraction=0.5)
    dev.update(np.arange(capacity), prio)
    ref.update(np.arange(capacity), prio)
    key = 12345
    for call in (0, 1, 7, 2**32 - 1):
        got = dev.sample_device(batch, key, call)
        assert isinstance(got, cla.Array) and got.dtype == np.int32
        # the values the kernel uses, in float32 exactly as it computes them
        i = np.arange(batch)
        u = prng.uniform(prng.philox2x32(key, i, np.uint32(call))[0])
        total = np.float32(dev.total)
        step = total * np.float32(1.0 / batch)
        values = np.minimum((i.astype(np.float32) + u) * step, total)
        expected = ref.find_prefix_sum(values.astype(np.float64))
        np.testing.assert_array_equal(got.get(), expected)


def test_device_sampling_follows_priorities(rt) -> None:
    capacity = 40
    prio = np.arange(capacity, dtype=np.float64) % 9  # 0..8, zeros included
    dev = DeviceSumTree(rt, capacity, 4)
    dev.update(np.arange(capacity), prio)
    out = cla.empty(rt.queue, 256, np.int32)
    counts = np.zeros(capacity)
    for call in range(200):
        counts += np.bincount(dev.sample_device(256, key=99, call=call, out=out).get(), minlength=capacity)
    assert counts[prio == 0].sum() == 0, "zero-priority slots were sampled"
    positive = prio > 0
    expected = prio[positive] / prio.sum() * counts.sum()
    assert stats.chisquare(counts[positive], expected).pvalue > 1e-3


# ---------------------------------------------------------------------------------------------- replay
@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize(("config", "spec"), [(DQNConfig(buffer_size=50, batch_size=16), DISCRETE),
                                              (DDPGConfig(buffer_size=50, batch_size=16), CONTINUOUS)])
def test_sampled_rows_are_whole_stored_transitions(rt, config, spec, prioritized: bool) -> None:
    config = type(config)(buffer_size=50, batch_size=16, prioritized=prioritized)
    replay = OpenCLReplay(rt, config, spec, seed=0)
    for start in range(0, 80, 8):  # 80 transitions into 50 slots: the ring wraps
        replay.insert(transitions(start, 8, spec))
    assert replay.size == 50
    batch = replay.sample(16, beta=0.4)
    assert batch.device == rt.device_id and len(batch) == 16
    for a in (batch.indices, batch.obs, batch.action, batch.reward, batch.next_obs, batch.terminated,
              batch.weights):
        assert isinstance(a, cla.Array) and a.context == rt.ctx
    assert batch.indices.dtype == np.int32
    n = batch.reward.get()
    assert np.all(n >= 30), "the 30 oldest transitions were overwritten"
    obs = batch.obs.get()
    assert obs.shape == (16, spec.obs_dim) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs, np.repeat(n[:, None], spec.obs_dim, 1))
    np.testing.assert_array_equal(batch.next_obs.get(), obs + 0.5)
    np.testing.assert_array_equal(batch.terminated.get(), n % 2)
    if spec.discrete:
        assert batch.action.dtype == np.int32 and batch.action.shape == (16,)
        np.testing.assert_array_equal(batch.action.get(), n.astype(np.int64) % spec.action_dim)
    else:
        assert batch.action.dtype == np.float32 and batch.action.shape == (16, spec.action_dim)
        np.testing.assert_array_equal(batch.action.get(), np.repeat(n[:, None], spec.action_dim, 1))
    # every slot has the max priority 1, so prioritized weights are all 1 too
    np.testing.assert_array_equal(batch.weights.get(), np.ones(16, dtype=np.float32))
    # the slot a transition went to is where the ring put it
    np.testing.assert_array_equal(batch.indices.get(), n.astype(np.int64) % 50)


@pytest.mark.parametrize("prioritized", [False, True])
def test_oversized_insert_keeps_the_newest(rt, prioritized: bool) -> None:
    replay = OpenCLReplay(rt, DQNConfig(buffer_size=10, batch_size=64, prioritized=prioritized), DISCRETE, seed=0)
    replay.insert(transitions(0, 25, DISCRETE))
    assert replay.size == 10
    batch = replay.sample(64, 0.4)
    assert set(batch.reward.get().tolist()) <= set(range(15, 25))
    # transition n sits in slot n % 10, even though the batch was longer than the ring
    np.testing.assert_array_equal(batch.indices.get(), batch.reward.get().astype(np.int64) % 10)


@pytest.mark.parametrize(("config", "spec"), [(DQNConfig(buffer_size=20, batch_size=8), DISCRETE),
                                              (DDPGConfig(buffer_size=20, batch_size=8), CONTINUOUS)])
def test_insert_owns_its_upload(rt, config, spec) -> None:
    """insert returns before the device has copied anything: what it stores must not change when the caller
    reuses its arrays straight away, nor when the next insert of the same size reuses the staging rows."""
    replay = OpenCLReplay(rt, config, spec, seed=0)
    first, second = transitions(0, 8, spec), transitions(8, 8, spec)
    n = 1 << 22  # queue a few ms of work first, so the upload waits behind it
    rt.launch("philox_bits", n, np.uint32(1), np.uint32(2), rt.zeros(n, np.uint32), rt.zeros(n, np.uint32))
    replay.insert(first)
    for a in (first.obs, first.action, first.reward, first.next_obs, first.terminated):
        a[...] = -7  # the caller's buffers, overwritten before any device work is waited for
    replay.insert(second)
    stored = replay.state_dict()  # slot n holds transition n
    n = np.arange(16)
    np.testing.assert_array_equal(stored["reward"], n)
    np.testing.assert_array_equal(stored["obs"], np.repeat(n[:, None], spec.obs_dim, 1))
    np.testing.assert_array_equal(stored["next_obs"], stored["obs"] + 0.5)
    np.testing.assert_array_equal(stored["terminated"], n % 2)
    want = n % spec.action_dim if spec.discrete else np.repeat(n[:, None], spec.action_dim, 1)
    np.testing.assert_array_equal(stored["action"], want)


def test_uniform_sampling_is_rng_below_of_philox(rt) -> None:
    replay = OpenCLReplay(rt, DQNConfig(buffer_size=100, batch_size=32), DISCRETE, seed=77)
    replay.insert(transitions(0, 37, DISCRETE))
    for call in range(3):
        got = replay.sample(32, 0.4).indices.get()
        expected = prng.below(prng.philox2x32(77, np.arange(32), np.uint32(call))[0], 37)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("prioritized", [False, True])
def test_sampling_is_reproducible_and_buffers_are_reused(rt, prioritized: bool) -> None:
    config = DQNConfig(buffer_size=64, batch_size=32, prioritized=prioritized)
    first, second = (OpenCLReplay(rt, config, DISCRETE, seed=5) for _ in range(2))
    for replay in (first, second):
        replay.insert(transitions(0, 64, DISCRETE))
    a = [first.sample(32, 0.4).indices.get() for _ in range(3)]
    b = [second.sample(32, 0.4).indices.get() for _ in range(3)]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], a[1]), "each sample call draws new slots"
    assert first.sample(32, 0.4).obs is first.sample(32, 0.4).obs  # preallocated per batch size


def test_prioritized_sampling_follows_td_errors(rt) -> None:
    config = DQNConfig(buffer_size=8, batch_size=256, prioritized=True, alpha=1.0, priority_eps=1e-6)
    replay = OpenCLReplay(rt, config, DISCRETE, seed=1)
    replay.insert(transitions(0, 8, DISCRETE))
    td = np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=np.float32)
    replay.update_priorities(PriorityUpdate(np.arange(8), -td))  # the sign of δ does not matter
    counts = np.zeros(8)
    for _ in range(40):
        batch = replay.sample(256, beta=1.0)
        slots = batch.indices.get()
        counts += np.bincount(slots, minlength=8)
        w = batch.weights.get()
        assert w.dtype == np.float32 and w.max() == 1.0 and np.all(w > 0) and np.all(w <= 1)
        p = replay.tree.get(slots).astype(np.float64)
        np.testing.assert_allclose(w, (p / p.min()) ** -1.0, rtol=1e-5)
    expected = td.astype(np.float64) / td.sum(dtype=np.float64) * counts.sum()
    assert stats.chisquare(counts, expected).pvalue > 1e-3


def test_weights_are_priority_ratios_to_the_power_minus_beta(rt) -> None:
    config = DQNConfig(buffer_size=32, batch_size=64, prioritized=True, alpha=0.6, priority_eps=1e-6)
    replay = OpenCLReplay(rt, config, DISCRETE, seed=2)
    replay.insert(transitions(0, 32, DISCRETE))
    replay.update_priorities(PriorityUpdate(np.arange(32), np.linspace(0.01, 5.0, 32)))
    for beta in (0.0, 0.4, 1.0):
        batch = replay.sample(64, beta)
        p = replay.tree.get(batch.indices.get()).astype(np.float64)
        w = batch.weights.get()
        assert w.max() == 1.0 and np.all(w > 0)
        np.testing.assert_allclose(w, (p / p.min()) ** -beta, rtol=1e-5)


def expected_leaves(slots: np.ndarray, td: np.ndarray, alpha: float, eps: float, before: np.ndarray) -> np.ndarray:
    """Leaf priorities after an update: (|td| + eps)^alpha, the LAST occurrence of a repeated slot winning."""
    out = before.astype(np.float64).copy()
    for s, t in zip(slots, td):
        out[s] = (abs(float(t)) + eps) ** alpha
    return out


@pytest.mark.parametrize("where", ["device", "device64", "numpy", "torch"])
def test_priority_update(rt, where: str) -> None:
    alpha, eps = 0.6, 1e-3
    config = DQNConfig(buffer_size=16, batch_size=64, prioritized=True, alpha=alpha, priority_eps=eps)
    replay = OpenCLReplay(rt, config, DISCRETE, seed=3)
    replay.insert(transitions(0, 12, DISCRETE))
    batch = replay.sample(64, 0.4)  # 64 draws from 12 slots: repeated slots for sure
    slots = batch.indices.get()
    td = np.random.default_rng(0).normal(size=64).astype(np.float32)
    before = replay.tree.get(np.arange(16))
    if where == "device":
        update = PriorityUpdate(batch.indices, rt.to_device(td))  # what a learner on this device hands back
    elif where == "device64":
        update = PriorityUpdate(rt.to_device(slots.astype(np.int64)), rt.to_device(td.astype(np.float64)))
    elif where == "numpy":
        update = PriorityUpdate(slots.astype(np.int64), td)
    else:
        torch = pytest.importorskip("torch")
        update = PriorityUpdate(torch.from_numpy(slots.astype(np.int64)), torch.from_numpy(td))
    replay.update_priorities(update)
    np.testing.assert_allclose(replay.tree.get(np.arange(16)), expected_leaves(slots, td, alpha, eps, before),
                               rtol=1e-5)
    assert replay.tree.total == pytest.approx(replay.tree.get(np.arange(16)).sum(dtype=np.float64), rel=1e-6)
    assert replay.tree.get(np.arange(12, 16)).max() == 0.0, "slots never written stay at 0"


def test_sign_of_td_does_not_matter(rt) -> None:
    config = DQNConfig(buffer_size=16, batch_size=8, prioritized=True, alpha=0.7)
    leaves = []
    for sign in (1.0, -1.0):
        replay = OpenCLReplay(rt, config, DISCRETE, seed=4)
        replay.insert(transitions(0, 16, DISCRETE))
        td = sign * np.linspace(0.5, 3.0, 16).astype(np.float32)
        replay.update_priorities(PriorityUpdate(rt.to_device(np.arange(16, dtype=np.int32)), rt.to_device(td)))
        leaves.append(replay.tree.get(np.arange(16)))
    np.testing.assert_array_equal(leaves[0], leaves[1])


def test_max_priority_only_goes_up_and_seeds_new_slots(rt) -> None:
    config = DQNConfig(buffer_size=8, batch_size=4, prioritized=True, alpha=1.0, priority_eps=0.0)
    replay = OpenCLReplay(rt, config, DISCRETE, seed=0)
    replay.insert(transitions(0, 4, DISCRETE))
    assert replay.max_priority == 1.0
    np.testing.assert_array_equal(replay.tree.get(np.arange(8)), [1, 1, 1, 1, 0, 0, 0, 0])
    replay.update_priorities(PriorityUpdate(rt.to_device(np.array([0, 1], np.int32)),
                                            rt.to_device(np.array([3.0, 0.25], np.float32))))
    assert replay.max_priority == 3.0
    replay.update_priorities(PriorityUpdate(np.array([2]), np.array([0.5])))
    assert replay.max_priority == 3.0, "the running max never falls"
    replay.insert(transitions(4, 2, DISCRETE))
    np.testing.assert_array_equal(replay.tree.get(np.arange(8)), [3, 0.25, 0.5, 1, 3, 3, 0, 0])
    assert replay.tree.total == 10.75


def test_priority_update_checks(rt) -> None:
    config = DQNConfig(buffer_size=8, batch_size=4, prioritized=True, alpha=1.0, priority_eps=0.0)
    replay = OpenCLReplay(rt, config, DISCRETE, seed=0)
    replay.insert(transitions(0, 4, DISCRETE))
    for idx, td in [([4], [1.0]), ([-1], [1.0]), ([0], [np.nan]), ([0, 1], [1.0]), ([0.5], [1.0])]:
        with pytest.raises(ValueError):
            replay.update_priorities(PriorityUpdate(np.array(idx), np.array(td)))
    # device arrays cannot be checked without a read-back: the kernel skips what the host would reject
    replay.update_priorities(PriorityUpdate(rt.to_device(np.array([5, 1, 2], np.int32)),
                                            rt.to_device(np.array([9.0, np.nan, 2.0], np.float32))))
    np.testing.assert_array_equal(replay.tree.get(np.arange(8)), [1, 1, 2, 1, 0, 0, 0, 0])
    assert replay.max_priority == 2.0


def test_uniform_priority_update_is_a_no_op(rt) -> None:
    replay = OpenCLReplay(rt, DQNConfig(buffer_size=8, batch_size=4), DISCRETE, seed=0)
    replay.insert(transitions(0, 8, DISCRETE))
    replay.update_priorities(PriorityUpdate(np.arange(4), np.ones(4, dtype=np.float32)))
    assert replay.size == 8 and replay.tree is None


def test_sample_and_insert_checks(rt) -> None:
    replay = OpenCLReplay(rt, DQNConfig(buffer_size=8, batch_size=4), DISCRETE, seed=0)
    with pytest.raises(ValueError):
        replay.sample(4, 0.4)  # empty
    replay.insert(transitions(0, 3, DISCRETE))
    for batch_size, beta in [(0, 0.4), (1025, 0.4), (4, -1.0), (4, float("nan"))]:
        with pytest.raises(ValueError):
            replay.sample(batch_size, beta)
    bad = transitions(0, 3, DISCRETE)
    bad.obs = bad.obs[:, :2]
    with pytest.raises(ValueError):
        replay.insert(bad)
    assert replay.size == 3
