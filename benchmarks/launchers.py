"""The DQN CartPole preset on the local and the Ray launcher, alternating, in one invocation: env steps/s.

    python benchmarks/launchers.py [--steps 20000] [--rounds 2] [--actors 1] [--seed 0]

Each round trains the preset (`pearl.train("dqn", "CartPole-v1", steps=..., eval_every=0, eval_episodes=0,
launcher=L)`) once on each launcher, the order alternating between rounds so that neither always runs on a
warmer or a busier machine. The figure is the run's own env steps/s (training time only: the Ray instance's
and the actor processes' start-up are not counted, as for every launcher). The Ray launcher starts a local
Ray instance for each of its runs (loopback only, no dashboard) and shuts it down after.

The acceptance asks for ray ≥ 0.8 × local on the same machine. Not a test: the numbers depend on the machine
and its load.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile

import pearl
from pearl.hostinfo import cpu_name

LAUNCHERS = ("local", "ray")


def run_once(launcher: str, steps: int, actors: int, seed: int, runs_dir: str) -> float:
    result = pearl.train("dqn", "CartPole-v1", steps=steps, eval_every=0, eval_episodes=0, launcher=launcher,
                         actors=actors, seed=seed, runs_dir=runs_dir)
    return result.env_steps_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--actors", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, "
          f"{platform.platform()}; DQN CartPole-v1 preset, {args.steps:,} env steps, {args.actors} actor(s), "
          f"seed {args.seed}")
    figures: dict[str, list[float]] = {name: [] for name in LAUNCHERS}
    with tempfile.TemporaryDirectory() as runs_dir:
        for r in range(args.rounds):
            order = LAUNCHERS if r % 2 == 0 else LAUNCHERS[::-1]
            for name in order:
                sps = run_once(name, args.steps, args.actors, args.seed, runs_dir)
                figures[name].append(sps)
                print(f"  round {r + 1} {name:5}: {sps:8,.0f} env steps/s", flush=True)
    mean = {name: statistics.mean(v) for name, v in figures.items()}
    for name in LAUNCHERS:
        print(f"{name:5}: mean {mean[name]:8,.0f} env steps/s over {args.rounds} run(s)")
    print(f"ray / local: {mean['ray'] / mean['local']:.2f} (acceptance: >= 0.80)")


if __name__ == "__main__":
    main()
