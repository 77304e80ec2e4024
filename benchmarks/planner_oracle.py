"""Does the integer program pick the mapping that is really fastest, and how close are its predictions?

    python benchmarks/planner_oracle.py [--profile profiles/reference.json] [--algo dqn] [--env CartPole-v1]
                                        [--seconds 8] [--passes 2]

Enumerates every feasible mapping of this machine's profile (each placement of act, the replay kernels and
learn × each actor count), trains each for --seconds with that mapping, and prints, per mapping, predicted and
measured env steps/s (over the learning phase); then (i) the measured throughput of the ILP's choice ÷ the best
measured, and (ii) the median |predicted − measured| / measured over all mappings. Not a test: it prints.

A mapping's measured speed moves by 10-20 % from one run to the next on a shared 2-core host, so every
mapping runs --passes times, the passes in alternating order (forward, backward, ...), and its measured figure
is the mean of its passes; the table shows the passes' spread ((max − min) / mean) as the noise floor.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

from pearl.errors import PearlError
from pearl.planner.make import every_plan, make_plan
from pearl.planner.plan import save_plan
from pearl.training import train


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="profiles/reference.json")
    parser.add_argument("--algo", default="dqn")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    if args.passes < 1:
        print("error: --passes must be at least 1", file=sys.stderr)
        return 2
    try:
        chosen = make_plan(args.profile, args.algo, args.env, "throughput")
        plans = every_plan(args.profile, args.algo, args.env)
    except PearlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    key = lambda p: (tuple(sorted(p.mapping.items())), p.actors)  # noqa: E731 - a one-line identity of a mapping
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; profile {args.profile}")
    print(f"{len(plans)} feasible mappings, {args.seconds:g} s each, {args.passes} pass(es); ILP choice: "
          f"{_text(chosen)}")
    runs: dict[int, list[float]] = {i: [] for i in range(len(plans))}
    with tempfile.TemporaryDirectory() as tmp:
        paths = [save_plan(plan, Path(tmp) / f"{i}.json") for i, plan in enumerate(plans)]
        for p in range(args.passes):
            order = range(len(plans)) if p % 2 == 0 else reversed(range(len(plans)))
            for i in order:
                result = train(args.algo, args.env, plan=str(paths[i]), eval_episodes=0,
                               runs_dir=str(Path(tmp) / "runs"), max_seconds=args.seconds)
                runs[i].append(result.learning_env_steps_per_s or result.env_steps_per_s)
                print(f"  pass {p + 1}/{args.passes}: {_text(plans[i])}: {runs[i][-1]:,.0f} env steps/s", flush=True)
    print(f"{'mapping':58} {'predicted/s':>11} {'measured/s':>10} {'spread':>7} {'error':>7}")
    rows = []
    for i, plan in enumerate(plans):
        measured = statistics.fmean(runs[i])
        spread = (max(runs[i]) - min(runs[i])) / measured
        predicted = plan.predicted["env_steps_per_s"]
        rows.append((plan, predicted, measured, spread))
        mark = "  <- ILP" if key(plan) == key(chosen) else ""
        print(f"{_text(plan):58} {predicted:11,.0f} {measured:10,.0f} {spread:7.0%} "
              f"{(predicted - measured) / measured:+7.0%}{mark}")
    best = max(m for _, _, m, _ in rows)
    ilp = next(m for p, _, m, _ in rows if key(p) == key(chosen))
    errors = [abs(p - m) / m for _, p, m, _ in rows]
    print(f"(i)  ILP choice measured / best measured: {ilp / best:.3f}   (aim >= 0.95)")
    print(f"(ii) median |predicted - measured| / measured: {statistics.median(errors):.1%}   (aim <= 15 %)")
    if args.passes > 1:
        print(f"     noise floor: median spread between passes {statistics.median(r[3] for r in rows):.1%}")
    return 0


def _text(plan) -> str:
    m = plan.mapping
    return f"act {m['act']}, replay {m['replay_insert']}, learn {m['learn']}, {plan.actors} actor(s)"


if __name__ == "__main__":
    sys.exit(main())
