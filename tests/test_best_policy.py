"""The in-training evaluations keep the policy with the highest mean, the later one on a tie, as a copy."""

from __future__ import annotations

import numpy as np

from pearl.runtime.evaluate import BestPolicy, Evaluation


def _evaluation(steps: int, returns: list[float]) -> Evaluation:
    return Evaluation(steps, steps, float(np.mean(returns)), returns)


def _keeper() -> BestPolicy:
    return BestPolicy(act=None, spec=None, every=10, episodes=4, seed=0)  # consider() touches neither


def test_the_highest_mean_is_kept_and_a_worse_later_policy_does_not_replace_it() -> None:
    keeper = _keeper()
    params = {"w": np.array([1.0])}
    keeper.consider(_evaluation(10, [200.0, 220.0]), params)
    params["w"][0] = 5.0  # the caller reuses its arrays: the kept policy must be a copy
    keeper.consider(_evaluation(20, [150.0, 260.0]), params)  # mean 205 < 210
    assert keeper.best_eval.steps == 10 and keeper.best["w"][0] == 1.0
    keeper.consider(_evaluation(30, [300.0, 100.0, 250.0]), {"w": np.array([3.0])})  # mean 216.7
    assert keeper.best_eval.steps == 30 and keeper.best["w"][0] == 3.0
    assert [e.steps for e in keeper.history] == [10, 20, 30]


def test_a_tie_goes_to_the_later_policy() -> None:
    keeper = _keeper()
    keeper.consider(_evaluation(10, [500.0] * 4), {"w": np.array([1.0])})
    keeper.consider(_evaluation(20, [500.0] * 4), {"w": np.array([2.0])})
    assert keeper.best_eval.steps == 20 and keeper.best["w"][0] == 2.0
