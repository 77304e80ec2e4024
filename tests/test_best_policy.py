"""The in-training evaluations keep the policy whose mean less its standard error is highest."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pearl.runtime.evaluate import BestPolicy, Evaluation


def _evaluation(steps: int, returns: list[float]) -> Evaluation:
    return Evaluation(steps, steps, float(np.mean(returns)), returns)


def _keeper() -> BestPolicy:
    return BestPolicy(act=None, spec=None, every=10, episodes=4, seed=0)  # consider() touches neither


def test_score_is_the_mean_less_its_standard_error() -> None:
    returns = [300.0, 280.0, -500.0, 260.0]
    want = np.mean(returns) - np.std(returns, ddof=1) / math.sqrt(4)
    assert _evaluation(1, returns).score == pytest.approx(want)
    assert _evaluation(1, [500.0] * 10).score == 500.0  # no spread: the bound is the mean
    assert _evaluation(1, [42.0]).score == 42.0  # one episode has no standard error


def test_a_steady_policy_beats_a_lucky_one_with_a_higher_mean() -> None:
    keeper = _keeper()
    lucky = _evaluation(70, [400.0, 390.0, -300.0, 380.0])  # mean 217.5, one crash
    steady = _evaluation(100, [205.0, 200.0, 198.0, 203.0])  # mean 201.5
    assert lucky.mean > steady.mean
    keeper.consider(lucky, {"w": np.array([1.0])})
    keeper.consider(steady, {"w": np.array([2.0])})
    assert keeper.best_eval is steady and keeper.best["w"][0] == 2.0
    assert [e.steps for e in keeper.history] == [70, 100]


def test_a_worse_later_policy_does_not_replace_the_best_and_a_tie_goes_to_the_later() -> None:
    keeper = _keeper()
    params = {"w": np.array([1.0])}
    keeper.consider(_evaluation(10, [500.0] * 4), params)
    params["w"][0] = 5.0  # the caller reuses its arrays: the kept policy must be a copy
    keeper.consider(_evaluation(20, [480.0, 500.0, 500.0, 500.0]), params)
    assert keeper.best_eval.steps == 10 and keeper.best["w"][0] == 1.0
    keeper.consider(_evaluation(30, [500.0] * 4), {"w": np.array([3.0])})
    assert keeper.best_eval.steps == 30 and keeper.best["w"][0] == 3.0
