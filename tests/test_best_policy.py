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


# A hand-built CartPole Q-network (hidden 2-2): push right when θ + c·θ' > 0. With c = 0.5 it balances the
# pole for 500 steps; with c = 0 it reacts to the angle only and the pole falls within a few dozen steps.
def _cartpole_policy(c: float) -> dict[str, np.ndarray]:
    f32 = np.float32
    return {"q.0.weight": np.array([[0, 0, 1, c], [0, 0, -1, -c]], f32), "q.0.bias": np.zeros(2, f32),
            "q.1.weight": np.eye(2, dtype=f32), "q.1.bias": np.zeros(2, f32),
            "q.2.weight": np.array([[0, 1], [1, 0]], f32), "q.2.bias": np.zeros(2, f32)}


def _cartpole_act():
    from pearl.adapters import open_adapter
    from pearl.algos.presets import preset
    from pearl.envs import env_spec

    spec = env_spec("CartPole-v1")
    config = preset("dqn", "CartPole-v1").replace(hidden=(2, 2))
    return open_adapter("cpu", 1, None).make_act(config, spec, _cartpole_policy(0.5), 0), spec


def test_confirmation_picks_the_final_policy_when_it_does_better_on_fresh_episodes() -> None:
    from pearl.runtime.evaluate import confirm

    act, spec = _cartpole_act()
    check = confirm(act, spec, best=_cartpole_policy(0.0), final=_cartpole_policy(0.5), episodes=5, seed=0)
    assert check.final_mean == 500.0 and check.best_mean < 100 and check.picked == "final"
    swapped = confirm(act, spec, best=_cartpole_policy(0.5), final=_cartpole_policy(0.0), episodes=5, seed=0)
    assert swapped.picked == "best" and swapped.best_mean == 500.0
    assert swapped.to_dict() == {"episodes": 5, "best_mean": 500.0, "final_mean": check.best_mean, "picked": "best"}


def test_a_tie_on_the_confirmation_episodes_keeps_the_best() -> None:
    from pearl.runtime.evaluate import confirm

    act, spec = _cartpole_act()
    check = confirm(act, spec, best=_cartpole_policy(0.5), final=_cartpole_policy(0.5), episodes=3, seed=4)
    assert check.best_mean == check.final_mean == 500.0 and check.picked == "best"


def test_a_run_whose_best_is_not_its_final_policy_chooses_its_headline_on_fresh_episodes(tmp_path) -> None:
    import json

    import pearl

    r = pearl.train("dqn", "CartPole-v1", steps=6000, seed=0, eval_episodes=4, eval_every=1000,
                    launcher="sequential", runs_dir=str(tmp_path))
    assert r.best["steps"] < r.steps, "this seed keeps an earlier policy; the test needs one that does"
    c = r.confirmation
    assert c["episodes"] == 4 and r.headline == c["picked"] == ("final" if c["final_mean"] > c["best_mean"] else "best")
    assert r.eval_return_mean == (r.best if r.headline == "best" else r.final)["return_mean"]
    summary = json.loads((tmp_path / r.run_dir.split("/")[-1] / "summary.json").read_text())
    assert summary["confirmation"] == c
    # the evaluations (and checkpoints) are left out of the learning phase's rates, which a plan predicts
    assert 0 < r.eval_s <= summary["learning_paused_s"] <= r.eval_s + r.checkpoint_s
