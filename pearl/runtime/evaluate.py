"""Deterministic evaluation: a policy with no exploration, on fresh seeded environments.

`evaluate` plays whole episodes greedily and returns their returns. `BestPolicy` evaluates the learner's
policy at fixed points of the schedule during training and keeps the best one (Stable-Baselines3's
EvalCallback habit): DQN on CartPole often solves the task and then dips again before the budget ends, so a
run reports both its final policy and its best, labelled. The in-training evaluations use other episode
seeds than the final one, so the best policy is not chosen on the episodes it is finally scored on.

The kept best's in-training mean is the highest of many noisy means, so it overstates that policy (on
LunarLander, a policy kept for 212 on its 10 episodes scored 70 on 20 others). `confirm` therefore plays the
kept best and the final policy on the same fresh episodes, and the run's headline is the one that did better
there; the kept best stays the headline on a tie.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pearl.adapters.base import ActKernel
from pearl.envs import make_env, to_env_action
from pearl.runtime.seeds import Seeds
from pearl.types import EnvSpec, Params


def evaluate(act: ActKernel, spec: EnvSpec, episodes: int, seed: int) -> list[float]:
    """Undiscounted return of each of `episodes` episodes (episode i reset with seed + i), acting greedily
    (explore = 0). The episodes run side by side, so `act` sees a batch of the ones still running."""
    envs = [make_env(spec.env_id) for _ in range(episodes)]
    try:
        obs = np.stack([np.asarray(env.reset(seed=seed + i)[0], dtype=np.float32) for i, env in enumerate(envs)]) \
            if episodes else np.zeros((0, spec.obs_dim), np.float32)
        returns = np.zeros(episodes)
        running = np.ones(episodes, dtype=bool)
        while running.any():
            live = np.flatnonzero(running)
            actions = to_env_action(spec, act.act(obs[live], 0.0))
            for row, i in enumerate(live):
                o, reward, terminated, truncated, _ = envs[i].step(actions[row])
                returns[i] += float(reward)
                obs[i] = o
                running[i] = not (terminated or truncated)
    finally:
        for env in envs:
            env.close()
    return [float(r) for r in returns]


@dataclass
class Evaluation:
    """One in-training evaluation of the learner's policy."""

    steps: int  # env steps in replay when it was taken
    updates: int
    mean: float
    returns: list[float]


@dataclass
class BestPolicy:
    """Evaluates the learner's policy every `every` env steps (at the first segment boundary at or past each
    multiple, once learning has started) over `episodes` episodes and keeps the policy with the highest mean
    (the later one on a tie: it has trained longer)."""

    act: ActKernel  # an act kernel the evaluations load each policy into
    spec: EnvSpec
    every: int
    episodes: int
    seed: int  # the run's: its episodes are `Seeds.selection`'s
    history: list[Evaluation] = field(default_factory=list)
    best: Params | None = None
    best_eval: Evaluation | None = None
    next_at: int = 0

    def __post_init__(self) -> None:
        self.next_at = self.every

    def due(self, steps: int) -> bool:
        return self.every > 0 and self.episodes > 0 and steps >= self.next_at

    def run(self, params: Params, steps: int, updates: int) -> Evaluation:
        """Evaluate params (taken after `updates` updates, with `steps` env steps in replay)."""
        while self.next_at <= steps:
            self.next_at += self.every
        self.act.set_params(params)
        returns = evaluate(self.act, self.spec, self.episodes, Seeds(self.seed).selection)
        result = Evaluation(steps, updates, float(np.mean(returns)), returns)
        self.consider(result, params)
        return result

    def consider(self, result: Evaluation, params: Params) -> None:
        """Record one evaluation and keep a copy of its policy if its mean is at least the best so far."""
        self.history.append(result)
        if self.best_eval is None or result.mean >= self.best_eval.mean:
            self.best_eval = result
            self.best = {k: np.array(v, copy=True) for k, v in params.items()}


@dataclass(frozen=True)
class Confirmation:
    """The kept best and the final policy played on the same fresh episodes."""

    episodes: int
    best_mean: float
    final_mean: float

    @property
    def picked(self) -> str:
        """The headline: "final" only when the final policy did strictly better."""
        return "final" if self.final_mean > self.best_mean else "best"

    def to_dict(self) -> dict[str, float | int | str]:
        return {"episodes": self.episodes, "best_mean": self.best_mean, "final_mean": self.final_mean,
                "picked": self.picked}


def confirm(act: ActKernel, spec: EnvSpec, best: Params, final: Params, episodes: int, seed: int) -> Confirmation:
    """Play `best` and then `final` (loaded into `act`) greedily on the same episodes, those of the run seed
    `seed`'s `Seeds.confirmation`."""
    means = []
    for params in (best, final):
        act.set_params(params)
        means.append(float(np.mean(evaluate(act, spec, episodes, Seeds(seed).confirmation))))
    return Confirmation(episodes, means[0], means[1])
