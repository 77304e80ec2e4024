"""Does exploration alone reach MountainCarContinuous's goal? Gaussian against Ornstein-Uhlenbeck noise.

    python benchmarks/ou_exploration.py [--episodes 100] [--envs 20] [--sigma 0.5] [--seed 0]

No learning: the DDPG MountainCarContinuous-v0 preset's untrained initial policy (init_params, --seed) plus each
noise of σ --sigma acts in --envs envs (the actor role's VectorActor, so an env's OU process restarts with its
episodes) until --episodes episodes have ended; prints how many of the first --episodes to end reached the goal
(ended before the 999-step limit) and their mean return. The goal needs the car pushed one way for many steps;
this measures whether the noise alone does that.
"""

from __future__ import annotations

import argparse

import numpy as np

from pearl.adapters.torch import TorchAdapter
from pearl.algos import preset
from pearl.algos.params import init_params
from pearl.envs import env_spec
from pearl.runtime.protocol import VectorActor
from pearl.runtime.seeds import Seeds

ENV = "MountainCarContinuous-v0"


def explore(noise: str, episodes: int, envs: int, sigma: float, seed: int) -> tuple[int, float]:
    """(episodes that reached the goal, mean return) over the first `episodes` to end."""
    spec = env_spec(ENV)
    config = preset("ddpg", ENV).replace(noise_type=noise, n_envs=envs)
    seeds = Seeds(seed)  # as a run of this seed seeds its weights and actor 0
    act = TorchAdapter("cpu").make_act(config, spec, init_params(config, spec, seed=seeds.learner), seeds.actor(0).act)
    actor = VectorActor(0, ENV, spec, envs, act, seed=seeds.actor(0).env)
    ended = []
    try:
        while len(ended) < episodes:
            actor.step(sigma)
            ended += actor.drain_episodes()
    finally:
        actor.close()
    ended = ended[:episodes]
    return sum(e.length < 999 for e in ended), float(np.mean([e.ret for e in ended]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--envs", type=int, default=20)
    parser.add_argument("--sigma", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for noise in ("gaussian", "ornstein-uhlenbeck"):
        goals, mean = explore(noise, args.episodes, args.envs, args.sigma, args.seed)
        print(f"{noise:>18}: goal reached in {goals} of {args.episodes} episodes, mean return {mean:.1f}")


if __name__ == "__main__":
    main()
