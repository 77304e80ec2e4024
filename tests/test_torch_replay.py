"""Replay kernels of the torch adapter: what is inserted is what is sampled, slot for slot."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pearl.adapters.torch import TorchAdapter
from pearl.algos import DDPGConfig, DQNConfig
from pearl.types import EnvSpec, PriorityUpdate, TransitionBatch

DISCRETE = EnvSpec("test", obs_dim=3, action_kind="discrete", action_dim=4)
CONTINUOUS = EnvSpec("test", obs_dim=3, action_kind="continuous", action_dim=2, action_low=(-1, -1),
                     action_high=(1, 1))


def transitions(start: int, count: int, spec: EnvSpec) -> TransitionBatch:
    """Transition n carries n in every field, so a sampled row tells which transition it is."""
    n = np.arange(start, start + count)
    obs = np.repeat(n[:, None], spec.obs_dim, axis=1).astype(np.float32)
    action = n % spec.action_dim if spec.discrete else np.repeat(n[:, None], spec.action_dim, 1).astype(np.float32)
    return TransitionBatch(obs, action, n.astype(np.float32), obs + 0.5, (n % 2).astype(np.float32))


@pytest.mark.parametrize(("config", "spec"), [(DQNConfig(buffer_size=50, batch_size=16), DISCRETE),
                                              (DDPGConfig(buffer_size=50, batch_size=16), CONTINUOUS)])
def test_sampled_rows_are_whole_stored_transitions(config, spec) -> None:
    replay = TorchAdapter("cpu").make_replay(config, spec, seed=0)
    for start in range(0, 80, 8):  # 80 transitions into 50 slots: the ring wraps
        replay.insert(transitions(start, 8, spec))
    assert replay.size == 50
    batch = replay.sample(16, beta=0.4)
    n = batch.reward.numpy()
    assert np.all(n >= 30), "the 30 oldest transitions were overwritten"
    np.testing.assert_array_equal(batch.obs.numpy(), np.repeat(n[:, None], spec.obs_dim, 1))
    np.testing.assert_array_equal(batch.next_obs.numpy(), batch.obs.numpy() + 0.5)
    np.testing.assert_array_equal(batch.terminated.numpy(), n % 2)
    if spec.discrete:
        np.testing.assert_array_equal(batch.action.numpy(), n.astype(np.int64) % spec.action_dim)
    else:
        np.testing.assert_array_equal(batch.action.numpy()[:, 0], n)
    np.testing.assert_array_equal(batch.weights.numpy(), np.ones(16, dtype=np.float32))
    # the slot a transition went to is where the ring put it
    np.testing.assert_array_equal(batch.indices, n.astype(np.int64) % 50)


def test_oversized_insert_keeps_the_newest() -> None:
    replay = TorchAdapter("cpu").make_replay(DQNConfig(buffer_size=10, batch_size=64), DISCRETE, seed=0)
    replay.insert(transitions(0, 25, DISCRETE))
    assert replay.size == 10
    assert set(replay.sample(64, 0.4).reward.numpy().tolist()) <= set(range(15, 25))


def test_prioritized_sampling_follows_td_errors() -> None:
    config = DQNConfig(buffer_size=8, batch_size=256, prioritized=True, alpha=1.0, priority_eps=1e-6)
    replay = TorchAdapter("cpu").make_replay(config, DISCRETE, seed=1)
    replay.insert(transitions(0, 8, DISCRETE))
    td = np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=np.float32)
    replay.update_priorities(PriorityUpdate(np.arange(8), -td))  # the sign of δ does not matter
    counts = np.zeros(8)
    for _ in range(40):
        batch = replay.sample(256, beta=1.0)
        counts += np.bincount(batch.indices, minlength=8)
        w = batch.weights.numpy()
        assert w.max() == pytest.approx(1.0) and np.all(w > 0)
    expected = td.astype(np.float64) / td.sum(dtype=np.float64) * counts.sum()
    assert stats.chisquare(counts, expected).pvalue > 1e-3


def test_uniform_priority_update_is_a_no_op() -> None:
    replay = TorchAdapter("cpu").make_replay(DQNConfig(buffer_size=8, batch_size=4), DISCRETE, seed=0)
    replay.insert(transitions(0, 8, DISCRETE))
    replay.update_priorities(PriorityUpdate(np.arange(4), np.ones(4, dtype=np.float32)))
    assert replay.size == 8
