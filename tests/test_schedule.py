"""The training schedule's arithmetic: shares, global step indices, updates, weights, and refused layouts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pearl.algos import DDPGConfig, DQNConfig, preset
from pearl.errors import ConfigError
from pearl.schedule import ActorShare, Schedule
from pearl.types import WeightSnapshot


@settings(max_examples=200, deadline=None)
@given(total=st.integers(1, 3000), train_freq=st.integers(1, 64), gradient_steps=st.integers(1, 64),
       actors=st.integers(1, 5), n_envs=st.integers(1, 6), lag=st.integers(0, 3), starts=st.integers(0, 500))
def test_every_env_step_has_exactly_one_owner_and_index(total, train_freq, gradient_steps, actors, n_envs, lag,
                                                        starts) -> None:
    cfg = DQNConfig(total_steps=total, train_freq=train_freq, gradient_steps=gradient_steps, n_envs=n_envs,
                    learning_starts=starts, buffer_size=10**6)
    s = Schedule.for_config(cfg, actors, lag)
    assert s.segment_steps % train_freq == 0 and s.segment_steps >= actors * n_envs
    assert sum(s.size(k) for k in range(s.segments)) == total
    for k in range(s.segments):
        assert sum(s.share(k, a) for a in range(actors)) == s.size(k)
        assert [s.offset(k, a) for a in range(actors)] == [sum(s.share(k, b) for b in range(a)) for a in range(actors)]
    indices = []
    for a in range(actors):
        assert s.actor_total(a) == sum(s.share(k, a) for k in range(s.segments))
        for j in range(s.actor_total(a)):
            k, within = s.locate(a, j)
            assert 0 <= within < s.share(k, a) and s.steps_before(k, a) + within == j
            indices.append(s.global_step(a, j))
    assert sorted(indices) == list(range(total))  # a permutation: each index once, none beyond the budget


def test_the_dqn_cartpole_preset_schedule() -> None:
    s = Schedule.for_config(preset("dqn", "CartPole-v1"), actors=1, lag=1)
    assert (s.segment_steps, s.updates_per_segment, s.segments) == (256, 128, 196)  # 195 whole + 80 steps
    assert [s.updates_after(k) for k in range(5)] == [0, 0, 0, 128, 128]  # ends 256, 512, 768 ≤ 1,000 < 1,024
    assert s.updates_after(195) == 0  # the short last segment makes no updates, as train_freq's round is not full
    assert s.updates_through(195) == 192 * 128
    assert s.weights_for(0) == -2 and s.weights_for(10) == 8  # lag 1: two segments back
    assert Schedule.for_config(preset("dqn", "CartPole-v1"), actors=1, lag=0).weights_for(10) == 9


def test_ddpg_rounds_grow_to_fit_every_actor() -> None:
    cfg = preset("ddpg", "Pendulum-v1")
    assert Schedule.for_config(cfg, actors=1).segment_steps == 1
    two = Schedule.for_config(cfg, actors=2)
    assert (two.segment_steps, two.updates_per_segment) == (2, 2)
    assert Schedule.for_config(cfg.replace(weight_sync_interval=8), actors=1).segment_steps == 8


@pytest.mark.parametrize("change,fragment", [
    (dict(lag=-1), "--policy-lag must be an integer >= 0"),
    (dict(segment_steps=100), "multiple of 256"),
    (dict(segment_steps=256, actors=3, n_envs=100), "does not divide among 3 actor(s)"),
    (dict(lag=400), "more than replay holds"),
])
def test_layouts_that_cannot_work_are_refused(change, fragment) -> None:
    cfg = preset("dqn", "CartPole-v1").replace(n_envs=change.pop("n_envs", 1))
    args = {"actors": 1, "lag": 1, "segment_steps": None, **change}
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        Schedule.for_config(cfg, args["actors"], args["lag"], args["segment_steps"])


def test_a_resume_starts_at_the_next_segment_boundary() -> None:
    s = Schedule.for_config(DDPGConfig(total_steps=1000, learning_starts=10), actors=1)
    assert s.segment_at(0) == 0 and s.segment_at(37) == 37
    d = Schedule.for_config(preset("dqn", "CartPole-v1"), actors=2)
    assert d.segment_at(512) == 2 and d.segment_at(600) == 3  # mid-segment: the rest of it is skipped
    assert d.steps_before(2, 0) == d.steps_before(2, 1) == 256


def _version(s: Schedule, tag: int) -> int:
    """The oracle: how many updates the weights published after segment `tag` have seen (0: the starting policy)."""
    return sum(s.updates_after(j) for j in range(tag + 1))


@settings(max_examples=100, deadline=None)
@given(total=st.integers(1, 600), train_freq=st.integers(1, 16), actors=st.integers(1, 3), lag=st.integers(0, 3),
       starts=st.integers(0, 300))
def test_two_tags_carry_the_same_weights_when_no_updates_fall_between(total, train_freq, actors, lag,
                                                                       starts) -> None:
    cfg = DDPGConfig(total_steps=total, train_freq=train_freq, gradient_steps=train_freq, learning_starts=starts,
                     buffer_size=10**6)
    s = Schedule.for_config(cfg, actors, lag)
    tags = range(-1 - lag, s.segments)
    for a in tags:
        for b in range(a, min(a + lag + 3, s.segments)):
            assert s.same_weights(a, b) == s.same_weights(b, a) == (_version(s, a) == _version(s, b)), (a, b)


class _Held:
    """A ScheduledActor that only records what it was given to load."""

    actor_id = 0

    def __init__(self) -> None:
        self.loaded: list[int] = []

    def load_weights(self, snapshot) -> None:
        self.loaded.append(snapshot.version)


def test_an_actor_loads_no_weights_before_learning_starts_and_each_segment_after() -> None:
    cfg = DDPGConfig(total_steps=40, train_freq=1, gradient_steps=1, learning_starts=10, buffer_size=1000)
    s = Schedule.for_config(cfg, actors=1, lag=1)
    actor = _Held()
    share = ActorShare(actor, s, cfg)
    assert share.to_load() == -2  # nothing held yet: the starting policy, segment 0's
    share.load(-2, WeightSnapshot(-2, {}))
    loads = []
    for k in range(s.segments):
        share.collected = s.steps_before(k, 0)
        tag = share.to_load()
        assert share.needs() == s.weights_for(k)
        if tag is not None:
            loads.append(k)
            share.load(tag, WeightSnapshot(tag, {}))
        assert share.weights == s.weights_for(k)  # held under the needed tag, loaded or not
    # segment 9 ends at 10 steps (no updates), segment 10 makes the first; segment k acts with W(k − 2)
    assert loads == list(range(12, s.segments))
    assert actor.loaded == [-2, *(s.weights_for(k) for k in loads)]  # the actor got those loads and no others
