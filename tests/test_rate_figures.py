"""The profile's figures that price a rate (the learner's in-situ iteration, the actor's step) are means of their
calls, not medians: a run's rate is its calls' mean time, and on a shared host a call's time is skewed to the
right (pearl/profiler/timing.py `stats_of`). No timing decides these tests: they feed made-up stats."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pearl.profiler.timing import Stats, rate_s, stats_of


def test_stats_hold_the_mean_beside_the_median() -> None:
    s = stats_of([1.0, 1.0, 1.0, 1.0, 6.0])  # one slow call in five
    assert s.median_s == 1.0 and s.mean_s == pytest.approx(2.0) and s.samples == 5
    assert rate_s(s) == pytest.approx(2.0)
    assert rate_s(Stats(1.0, 0.5, 2.0, 3)) == 1.0  # stats made without a mean: the median


def test_the_in_situ_iteration_and_a_segment_s_first_are_the_means() -> None:
    from pearl.adapters.torch import TorchAdapter
    from pearl.algos import preset
    from pearl.envs import env_spec
    from pearl.profile.format import config_workload
    from pearl.profiler.grids import GRIDS
    from pearl.profiler.learner import IN_SITU_CHAIN, LearnerLoop

    config, spec = preset("dqn", "CartPole-v1"), env_spec("CartPole-v1")
    loop = LearnerLoop(TorchAdapter("cpu"), config, spec, GRIDS["quick"])
    info = SimpleNamespace(id="cpu")  # the figure reads the device's id only
    chains = Stats(4e-3, 3e-3, 6e-3, 10, 5e-3)  # a chain's median 4 ms, its mean 5 ms
    first = Stats(1.2e-3, 1e-3, 2e-3, 5, 1.5e-3)
    t = loop.timing(info, config_workload(config, spec), chains, first)
    assert t.iteration_s == pytest.approx(5e-3 / IN_SITU_CHAIN) and t.first_iteration_s == pytest.approx(1.5e-3)
    assert t.iterations == 10 * IN_SITU_CHAIN


def test_the_actor_step_is_the_mean_iteration() -> None:
    from pearl.algos import preset
    from pearl.envs import env_spec
    from pearl.profile.format import config_workload
    from pearl.profiler.actor import ActorSteps

    config, spec = preset("dqn", "CartPole-v1"), env_spec("CartPole-v1")
    info = SimpleNamespace(id="cpu")
    steps = ActorSteps.__new__(ActorSteps)  # its entries from given stats: no envs to open
    steps.envs = (1, 8)
    timings = steps.timings(info, config_workload(config, spec),
                            [Stats(1e-4, 9e-5, 2e-4, 50, 1.3e-4), Stats(3e-4, 2e-4, 4e-4, 40)])
    assert [(t.envs, t.step_s, t.samples) for t in timings] == [(1, pytest.approx(1.3e-4), 50), (8, 3e-4, 40)]
