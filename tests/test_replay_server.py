"""The replay server role: shards, the sharded client, its sampling distribution and weights."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from pearl.algos import DQNConfig
from pearl.errors import ConfigError
from pearl.replay import ReplayIndex
from pearl.runtime.replay_server import ShardedReplay, sampler_rng, shard_for
from pearl.runtime.replay_shard import FIELDS, ReplayShard, decode_indices, encode_indices
from pearl.types import EnvSpec, TransitionBatch

SPEC = EnvSpec("Counter-v0", obs_dim=3, action_kind="discrete", action_dim=2)
CONT = EnvSpec("Cont-v0", obs_dim=2, action_kind="continuous", action_dim=2, action_low=(-1, -1),
               action_high=(1, 1))


def rows(start: int, count: int, spec: EnvSpec = SPEC) -> TransitionBatch:
    """Transitions whose every field carries its global row number, so each row is recognisable anywhere."""
    k = np.arange(start, start + count)
    obs = np.repeat(k[:, None], spec.obs_dim, axis=1).astype(np.float32)
    action = k.astype(np.int64) if spec.discrete else np.repeat(k[:, None], spec.action_dim, 1).astype(np.float32)
    return TransitionBatch(obs, action, k.astype(np.float32), obs + 0.5, (k % 2).astype(np.float32))


def fill(replay: ShardedReplay, sizes: list[int]) -> int:
    """Insert batches of the given sizes with consecutive row numbers; returns the rows inserted."""
    start = 0
    for m in sizes:
        replay.insert(rows(start, m, replay.spec))
        start += m
    return start


def stored_rows(replay: ShardedReplay) -> np.ndarray:
    """Row numbers stored across all shards (reward carries the row number)."""
    return np.concatenate([s.store["reward"][:s.size] for s in replay.shards]).astype(np.int64)


# ---------------------------------------------------------------------------- exactly once
@pytest.mark.parametrize("shards", [1, 3, 4])
def test_every_inserted_row_is_stored_exactly_once(shards: int) -> None:
    replay = ShardedReplay(1200, SPEC, shards, prioritized=True)
    batch_sizes = [7, 13, 1, 40, 25, 9, 3, 30]
    n = fill(replay, batch_sizes)
    got = stored_rows(replay)
    np.testing.assert_array_equal(np.sort(got), np.arange(n))
    for s in replay.shards:  # every field of a row came along with it
        k = s.store["reward"][:s.size]
        np.testing.assert_array_equal(s.store["obs"][:s.size], np.repeat(k[:, None], 3, 1))
        np.testing.assert_array_equal(s.store["action"][:s.size], k.astype(np.int64))
        np.testing.assert_array_equal(s.store["next_obs"][:s.size], np.repeat(k[:, None], 3, 1) + 0.5)
    # round-robin: batch i went whole to shard i % S
    for i, m in enumerate(batch_sizes):
        start = sum(batch_sizes[:i])
        held = replay.shards[i % shards].store["reward"][:replay.shards[i % shards].size]
        assert np.isin(np.arange(start, start + m), held).all()


def test_a_named_shard_takes_the_batch() -> None:
    replay = ShardedReplay(300, SPEC, 3)
    for seq in range(3):  # actor 2's batches: shards 2, 0, 1, whatever else arrives in between
        assert replay.insert(rows(10 * seq, 10), shard=shard_for(2, seq, 3)) == (2 + seq) % 3
        replay.insert(rows(100 + seq, 1))  # round-robin ones keep their own order
    np.testing.assert_array_equal(replay.shards[2].store["reward"][:11], np.r_[0:10, 102])
    np.testing.assert_array_equal(replay.shards[0].store["reward"][:11], np.r_[100, 10:20])
    for bad in (3, -1, 1.0, True):
        with pytest.raises(ConfigError, match="does not exist"):
            replay.insert(rows(0, 1), shard=bad)


def test_fifo_removal_keeps_the_newest_rows_of_each_shard() -> None:
    replay = ShardedReplay(40, SPEC, 2)  # 20 per shard
    fill(replay, [10] * 8)  # shard 0 gets batches 0, 2, 4, 6; shard 1 gets 1, 3, 5, 7
    assert replay.size == 40
    np.testing.assert_array_equal(np.sort(replay.shards[0].store["reward"]), np.r_[40:50, 60:70])
    np.testing.assert_array_equal(np.sort(replay.shards[1].store["reward"]), np.r_[50:60, 70:80])
    big = ShardedReplay(40, SPEC, 2)
    big.insert(rows(0, 25))  # longer than a shard: its newest 20 rows survive
    np.testing.assert_array_equal(np.sort(big.shards[0].store["reward"]), np.arange(5, 25))


def test_a_shard_alone_samples_by_its_own_priorities() -> None:
    shard = ReplayShard(10, SPEC, prioritized=True, alpha=1.0, eps=1e-12)
    np.testing.assert_array_equal(shard.insert(rows(0, 4)), np.arange(4))
    shard.update_priorities(np.arange(4), np.array([1.0, 0.0, 3.0, 4.0]))
    got, probs = shard.sample(64, np.random.default_rng(0))
    assert 1 not in got.slots  # zero priority: never drawn
    np.testing.assert_allclose(probs, np.array([1.0, 0.0, 3.0, 4.0])[got.slots] / 8.0)
    np.testing.assert_array_equal(got.rows["reward"], got.slots.astype(np.float32))
    assert shard.stats().size == 4 and shard.total_priority == pytest.approx(8.0)
    # a value past the total (a client that read an older, larger total) is clamped into the table
    np.testing.assert_array_equal(shard.lookup(np.array([0.5, 99.0])).slots, [0, 3])


def test_continuous_actions_are_stored() -> None:
    replay = ShardedReplay(50, CONT, 2, seed=3)
    fill(replay, [10, 10])
    batch = replay.sample(16)
    np.testing.assert_array_equal(batch.action, np.repeat(batch.reward[:, None], 2, 1))
    assert batch.action.dtype == np.float32


# ---------------------------------------------------------------------------- the sampled distribution
def set_priorities(replay: ShardedReplay, prio_of_row: np.ndarray, alpha: float = 1.0) -> None:
    """Give every stored row the priority ``prio_of_row[row]`` (alpha=1, eps≈0, so p = |td|)."""
    for s, shard in enumerate(replay.shards):
        k = shard.store["reward"][:shard.size].astype(np.int64)
        replay.update_priorities(encode_indices(s, np.arange(shard.size)), prio_of_row[k])


def draw_counts(replay: ShardedReplay, n_rows: int, batches: int = 200, b: int = 1000) -> np.ndarray:
    counts = np.zeros(n_rows, dtype=np.int64)
    for _ in range(batches):
        counts += np.bincount(replay.sample(b).reward.astype(np.int64), minlength=n_rows)
    return counts


@pytest.mark.parametrize("batch_sizes", [[10] * 5, [30, 3, 12, 1, 4]], ids=["equal-fill", "unequal-fill"])
@pytest.mark.parametrize("shards", [2, 5])
def test_sharded_prioritized_sampling_matches_the_union_chi_square(shards: int, batch_sizes: list[int]) -> None:
    # As tests/test_sumtree.py: 200 000 draws, priorities over ~3 orders of magnitude, p > 1e-3 at a fixed seed.
    rng = np.random.default_rng(1234)
    replay = ShardedReplay(1000, SPEC, shards, prioritized=True, alpha=1.0, eps=1e-12, seed=5)
    n = fill(replay, batch_sizes)
    prio = rng.uniform(0.05, 1.0, n) * 10.0 ** rng.integers(0, 3, n)
    set_priorities(replay, prio)
    counts = draw_counts(replay, n)
    expected = prio / prio.sum() * counts.sum()
    assert expected.min() > 5
    assert chisquare(counts, expected).pvalue > 1e-3


def test_chi_square_rejects_sampling_each_shard_equally() -> None:
    # The test has power: unequal shard totals drawn as if each shard had an equal share must be rejected.
    rng = np.random.default_rng(1234)
    replay = ShardedReplay(1000, SPEC, 2, prioritized=True, alpha=1.0, eps=1e-12, seed=5)
    n = fill(replay, [30, 20])
    prio = rng.uniform(0.05, 1.0, n) * 10.0 ** rng.integers(0, 3, n)
    set_priorities(replay, prio)
    counts = draw_counts(replay, n)
    shard_of_row = np.r_[np.zeros(30), np.ones(20)].astype(int)
    share = np.array([prio[shard_of_row == s].sum() for s in (0, 1)])
    wrong = prio / share[shard_of_row] * 0.5 * counts.sum()  # each shard half the draws
    assert chisquare(counts, wrong).pvalue < 1e-3


def test_sharded_uniform_sampling_is_uniform_over_the_union() -> None:
    replay = ShardedReplay(1000, SPEC, 3, seed=2)
    n = fill(replay, [40, 3, 17, 25])
    counts = draw_counts(replay, n, batches=100)
    assert chisquare(counts).pvalue > 1e-3


def test_one_shard_is_the_single_buffer_bit_for_bit() -> None:
    # Same generator state -> the same slots and weights as pearl.replay.ReplayIndex over the same priorities.
    for prioritized in (True, False):
        replay = ShardedReplay(500, SPEC, 1, prioritized=prioritized, rng=np.random.default_rng(9))
        index = ReplayIndex(500, prioritized=prioritized)
        index.reserve(fill(replay, [100, 200, 37]))
        td = np.random.default_rng(1).normal(size=337)
        replay.update_priorities(np.arange(337), td)
        index.update_priorities(np.arange(337), td)
        rng = np.random.default_rng(9)
        for beta in (0.4, 1.0):
            got, want = replay.sample(128, beta), index.sample(128, rng, beta)
            np.testing.assert_array_equal(got.indices, want.indices)
            np.testing.assert_array_equal(got.weights, want.weights)
            np.testing.assert_array_equal(got.reward, want.indices.astype(np.float32))


@pytest.mark.parametrize("prioritized", [True, False])
def test_sample_many_equals_successive_samples(prioritized: bool) -> None:
    a = ShardedReplay(600, SPEC, 3, prioritized=prioritized, seed=8)
    b = ShardedReplay(600, SPEC, 3, prioritized=prioritized, seed=8)
    for replay in (a, b):
        fill(replay, [50, 20, 90, 10])
        replay.update_priorities(encode_indices(0, np.arange(60)), np.linspace(0.1, 9, 60))
    many = a.sample_many(5, 48, 0.6)
    assert len(many) == 5
    for got in many:
        want = b.sample(48, 0.6)
        for name in ("indices", "weights", *FIELDS):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    with pytest.raises(ConfigError, match="count"):
        a.sample_many(0, 8)


def naive_weights(prio_by_shard: list[np.ndarray], shard: np.ndarray, slot: np.ndarray, beta: float) -> np.ndarray:
    """The single-buffer formula over the union, from scratch: w = (N * p / Σp) ** -β, divided by the batch max."""
    union = np.concatenate(prio_by_shard)
    start = np.cumsum([0] + [len(p) for p in prio_by_shard])[:-1]
    p = union[start[shard] + slot] / union.sum()
    w = (len(union) * p) ** -beta
    return w / w.max()


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_importance_weights_equal_the_single_buffer_formula(beta: float) -> None:
    replay = ShardedReplay(900, SPEC, 3, prioritized=True, seed=4)
    fill(replay, [50, 20, 90, 10])
    rng = np.random.default_rng(0)
    for _ in range(3):
        batch = replay.sample(64, beta)
        replay.update_priorities(batch.indices, rng.normal(size=64) * 10.0 ** rng.integers(-2, 2, 64))
    batch = replay.sample(64, beta)
    prio = [s.index.tree.get(np.arange(s.size)) for s in replay.shards]
    shard, slot = decode_indices(batch.indices)
    want = naive_weights(prio, shard, slot, beta)
    np.testing.assert_allclose(batch.weights, want.astype(np.float32), rtol=1e-6)
    assert batch.weights.max() == 1.0 and batch.weights.dtype == np.float32


# ---------------------------------------------------------------------------- priority routing
def test_priority_updates_reach_the_shard_and_slot_they_name() -> None:
    replay = ShardedReplay(300, SPEC, 3, prioritized=True, alpha=1.0, eps=1e-12, seed=1)
    fill(replay, [20, 20, 20])
    batch = replay.sample(48)
    shard, slot = decode_indices(batch.indices)
    # the index names where the row lives
    for s, j, k in zip(shard, slot, batch.reward):
        assert replay.shards[s].store["reward"][j] == k
    before = [s.index.tree.get(np.arange(s.size)).copy() for s in replay.shards]
    td = np.arange(1, 49, dtype=np.float32) * 3.0
    replay.update_priorities(batch.indices, td)
    for s, shard_obj in enumerate(replay.shards):
        after = shard_obj.index.tree.get(np.arange(shard_obj.size))
        want = before[s].copy()
        for j, t in zip(slot[shard == s], td[shard == s]):  # in order: a repeated slot keeps the last
            want[j] = t + 1e-12
        np.testing.assert_allclose(after, want, rtol=1e-12)


def test_index_encoding_round_trips() -> None:
    shard = np.array([0, 1, 7, 2 ** 20])
    slot = np.array([0, 5, 2 ** 40 - 1, 12345])
    got_shard, got_slot = decode_indices(encode_indices(shard, slot))
    np.testing.assert_array_equal(got_shard, shard)
    np.testing.assert_array_equal(got_slot, slot)
    np.testing.assert_array_equal(encode_indices(0, slot), slot)  # one shard: indices are slots


# ---------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("prioritized", [True, False])
def test_state_dict_round_trip_samples_as_the_original(prioritized: bool) -> None:
    a = ShardedReplay(200, SPEC, 4, prioritized=prioritized, seed=11)
    fill(a, [30, 12, 50, 7, 9])
    a.update_priorities(a.sample(32).indices, np.linspace(-3, 3, 32))
    state = a.state_dict()
    assert all(isinstance(v, np.ndarray) for v in state.values())
    b = ShardedReplay(200, SPEC, 4, prioritized=prioritized, seed=999)
    b.load_state_dict({k: v.copy() for k, v in state.items()})
    for _ in range(3):
        x, y = a.sample(32), b.sample(32)
        for name in ("indices", "weights", *FIELDS):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name))
        a.insert(rows(1000, 5))
        b.insert(rows(1000, 5))
    assert a.next_shard == b.next_shard


def test_state_of_another_shape_is_refused_before_any_change() -> None:
    a = ShardedReplay(200, SPEC, 4, prioritized=True)
    fill(a, [10])
    with pytest.raises(ConfigError, match="shards"):
        ShardedReplay(200, SPEC, 2, prioritized=True).load_state_dict(a.state_dict())
    other = ShardedReplay(200, CONT, 4, prioritized=True)
    with pytest.raises(ConfigError, match="replay shard state"):
        other.load_state_dict(a.state_dict())
    assert other.size == 0


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("capacity, shards, match", [
    (100, 0, "replay shards must be an integer >= 1"),
    (100, -2, "replay shards"),
    (10, 11, "11 replay shards cannot split a buffer of 10"),
    (0, 1, "buffer_size"),
    (100, 2.0, "replay shards"),
])
def test_bad_shard_counts_raise_config_error(capacity: int, shards: int, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ShardedReplay(capacity, SPEC, shards)


def test_wrong_shapes_raise_config_error_naming_the_field() -> None:
    replay = ShardedReplay(100, SPEC, 2)
    good = rows(0, 4)
    with pytest.raises(ConfigError, match="'obs' has shape \\(4, 5\\)"):
        replay.insert(TransitionBatch(np.zeros((4, 5), np.float32), good.action, good.reward, good.next_obs,
                                      good.terminated))
    with pytest.raises(ConfigError, match="'terminated'"):
        replay.insert(TransitionBatch(good.obs, good.action, good.reward, good.next_obs, np.zeros(3, np.float32)))
    with pytest.raises(ConfigError, match="'action'"):
        replay.insert(TransitionBatch(good.obs, np.zeros((4, 2)), good.reward, good.next_obs, good.terminated))
    assert replay.size == 0


def test_bad_sampling_and_update_inputs_raise_config_error() -> None:
    replay = ShardedReplay(100, SPEC, 2, prioritized=True)
    with pytest.raises(ConfigError, match="empty"):
        replay.sample(8)
    fill(replay, [10, 10])
    with pytest.raises(ConfigError, match="batch_size"):
        replay.sample(0)
    with pytest.raises(ConfigError, match="beta"):
        replay.sample(8, beta=-1.0)
    with pytest.raises(ConfigError, match="names shard 5"):
        replay.update_priorities(encode_indices(5, np.array([0])), np.ones(1))
    with pytest.raises(ConfigError, match="equal length"):
        replay.update_priorities(np.arange(3), np.ones(2))
    with pytest.raises(ConfigError, match="never been written"):
        replay.update_priorities(np.array([15]), np.ones(1))
    with pytest.raises(ConfigError, match="finite"):
        replay.update_priorities(np.array([1]), np.array([np.nan]))


def test_from_config_splits_the_buffer() -> None:
    replay = ShardedReplay.from_config(DQNConfig(buffer_size=1001, prioritized=True), SPEC, 4, seed=0)
    assert (replay.shard_capacity, replay.capacity, replay.prioritized) == (250, 1000, True)


def test_sampler_rng_depends_on_seed_role_and_counter_only() -> None:
    draw = [sampler_rng(*key).random() for key in ((0, "replay", 0), (0, "replay", 0), (1, "replay", 0),
                                                   (0, "learner", 0), (0, "replay", 1))]
    assert draw[0] == draw[1] and len(set(draw)) == 4


def test_ray_launcher_without_ray_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from pearl.runtime.ray import session

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError, as when it is absent
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # start_local_ray sets it; restored after
    for call in (session.require_ray, session.start_local_ray, lambda: session.connect("x:1")):
        with pytest.raises(ConfigError, match='pip install "pearl\\[ray\\]"'):
            call()


def test_only_the_ray_package_and_cluster_profiling_import_ray() -> None:
    # Ray is an optional extra: every other module of pearl must import without it.
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "pearl"
    importers = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "ray" or n.startswith("ray.") for n in names):
                importers.add(path.relative_to(root.parent).as_posix())
    in_package = {p for p in importers if p.startswith("pearl/runtime/ray/")}
    assert in_package and importers - in_package == {"pearl/profiler/cluster_nodes.py"}


def test_the_replay_server_and_launcher_modules_import_no_ray_nor_torch() -> None:
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, pearl.runtime.replay_server, pearl.runtime.ray.launcher, pearl.profiler.cluster_nodes; "
            "print(sorted(m for m in ('ray', 'torch', 'pyopencl') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"


class CountingReplay(ShardedReplay):
    """The in-process client, counting its reads of the shards' stats (over Ray, each starts two round trips)."""

    def __init__(self, *args, **kwargs) -> None:
        self.reads = 0
        super().__init__(*args, **kwargs)

    def _stats(self):
        self.reads += 1
        return super()._stats()


@pytest.mark.parametrize("prioritized", [False, True])
def test_a_learner_on_the_replay_server_reads_uniform_shards_once_a_segment_and_learns_the_same(
        prioritized: bool) -> None:
    """The learner role fetches a segment's uniform batches in one read of the shards (two round trips over Ray,
    not two an update) and learns exactly what batch-by-batch sampling learns; prioritized batches stay one
    read an update, since each must see the priority update before it."""
    from pearl.adapters.base import ReplayKernels
    from pearl.envs import env_spec
    from pearl.device import HOST_DEVICE
    from pearl.runtime.job import Job, Placement
    from pearl.runtime.learner_role import LearnerRole
    from pearl.runtime.ray.replay_client import ShardedReplayKernels

    class OneByOne(ShardedReplayKernels):
        def samples(self, count, batch_size, beta):
            return ReplayKernels.samples(self, count, batch_size, beta)

    spec = env_spec("CartPole-v1")
    cfg = DQNConfig(batch_size=16, buffer_size=600, hidden=(16, 16), learning_starts=0, prioritized=prioritized)
    job = Job.of(cfg, spec, Placement.single(HOST_DEVICE), seed=3, threads=1)
    rng = np.random.default_rng(0)
    batch = TransitionBatch(rng.normal(size=(200, 4)).astype(np.float32), rng.integers(0, 2, 200),
                            rng.normal(size=200).astype(np.float32), rng.normal(size=(200, 4)).astype(np.float32),
                            (rng.random(200) < 0.1).astype(np.float32))
    replays, roles = [], []
    for kernels in (ShardedReplayKernels, OneByOne):
        replay = CountingReplay(cfg.buffer_size, spec, 2, prioritized, seed=9)
        role = LearnerRole(job, [HOST_DEVICE], replay_kernels=kernels(replay))
        role.insert(batch)
        assert role.train(12, 0.4) == 12
        replays.append(replay)
        roles.append(role)
    assert [r.reads for r in replays] == ([12, 12] if prioritized else [1, 12])
    for name, value in roles[0].state(False)[0].items():
        np.testing.assert_array_equal(value, roles[1].state(False)[0][name], err_msg=name)
