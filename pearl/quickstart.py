"""pearl quickstart: the main job end to end on this machine, with no arguments (DQN on CartPole-v1), or for
another algorithm on the env its registry entry profiles (`--algo sac`: SAC on Pendulum-v1).

1. a quick profile of this machine: <runs>/profiles/<host>-quick.json (for an algorithm other than DQN,
   <host>-quick-<algo>.json), reused when it is less than a week old, was measured on this CPU with this many
   cores, and holds the algorithm's preset shapes. It lives in the runs folder beside the run records (git
   ignores runs/), not in the tracked profiles/ folder, so a quickstart in a clone leaves the checkout clean;
2. a throughput plan for the algorithm on its env from it;
3. the algorithm trained on that env with that plan (its preset's steps: DQN's 50,000) on the default
   launcher (actor processes beside the learner, running concurrently as the plan assumes), evaluated
   greedily. The schedule belongs to the protocol, so a seed gives the same result every time (see
   docs/ARCHITECTURE.md);
4. the report: where each kernel ran, predicted against measured, the evaluation return.
"""

from __future__ import annotations

import platform
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from pearl.errors import PearlError
from pearl.progress import Progress

ALGO = "dqn"  # what `pearl quickstart` runs without --algo, on its profile env (CartPole-v1)
FRESH = timedelta(days=7)
LAUNCHER = "local"  # the default launcher: its result for a seed does not depend on timing


def profile_path(runs_dir: str | Path = "runs", algo: str = ALGO) -> Path:
    """Where the quickstart keeps its quick profile of algo: inside the runs folder, which is not tracked."""
    suffix = "" if algo == ALGO else f"-{algo}"
    return Path(runs_dir) / "profiles" / f"{platform.node() or 'host'}-quick{suffix}.json"


def reusable(path: Path, algo: str = ALGO) -> bool:
    """A profile of this machine (CPU model and cores), recent, with algo's preset measurements (in-situ
    iteration included)."""
    from pearl.hostinfo import cpu_lanes, cpu_name
    from pearl.planner.build import preset_workload
    from pearl.envs import env_spec
    from pearl.profile.format import load_profile

    if not path.exists():
        return False
    try:
        profile = load_profile(path)
        created = datetime.fromisoformat(profile.created)
    except (PearlError, ValueError):
        return False  # unreadable: measure again rather than fail
    from pearl.algos import algorithm

    _, key = preset_workload(algo, env_spec(algorithm(algo).profile_env))
    return (datetime.now(timezone.utc) - created < FRESH and profile.host.get("cpu") == cpu_name()
            and profile.host.get("cores") == cpu_lanes() and any(w.key == key for w in profile.workloads)
            # older quick profiles lack the in-situ and weight-sync figures
            and any(t.workload == key for t in profile.in_situ) and any(t.workload == key for t in profile.weight_sync))


def run_quickstart(seed: int = 0, runs_dir: str = "runs", reprofile: bool = False,
                   say: Callable[[str], None] = print, progress: bool | Callable[..., Any] = True,
                   algo: str = ALGO) -> dict:
    """The main job, for algo on its registry entry's profile env (DQN: CartPole-v1). progress: False (quiet),
    True (a bar on a terminal), or a factory progress(total, label, unit) of context managers that take the units
    done so far (the CLI's, which also prints a line now and then when stderr is not a terminal)."""
    from pearl.planner.make import make_plan
    from pearl.planner.plan import save_plan
    from pearl.profile.format import save_profile
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.profiler import count_measurements, run_profile
    from pearl.runtime.local import PROBES
    from pearl.fileio import check_writable
    from pearl.runtime.record import check_runs_dir
    from pearl.algos import algorithm, preset
    from pearl.training import train
    from pearl.run_options import check_positive_int

    check_positive_int("--seed", seed, minimum=0)  # here, not after the profile has run for a while
    env = algorithm(algo).profile_env  # DQN's is CartPole-v1; an unknown algo: ConfigError naming the known ones
    steps = preset(algo, env).total_steps
    check_runs_dir(runs_dir, 0)  # a runs folder that cannot be written, too: the training checks its space
    path = profile_path(runs_dir, algo)
    check_writable(path)
    t0 = time.perf_counter()
    if reprofile or not reusable(path, algo):
        say(f"1/3 profiling this machine (quick) into {path} ...")
        options = ProfileOptions(quick=True, algos=(algo,))
        with _progress(progress, count_measurements(options, PROBES), "profile", "timing") as bar:
            done = [0]

            def step(_label: str) -> None:
                done[0] += 1
                bar(done[0])

            bar(0)  # the rate counts from here
            left_out: list[str] = []  # devices that cannot work: said once the bar is gone
            save_profile(run_profile(options, step, left_out.append, probes=PROBES), path)
        for line in left_out:
            print(f"warning: {line}", file=sys.stderr)
    else:
        say(f"1/3 reusing the profile {path} (measured here less than a week ago; --reprofile measures again)")
    plan = make_plan(path, algo, env, "throughput")
    plan_file = save_plan(plan, Path(runs_dir) / "quickstart-plan.json")
    placed = ", ".join(f"{k} → {v}" for k, v in plan.mapping.items())
    say(f"2/3 plan for throughput: {placed}; {plan.actors} actor(s); predicted "
        f"{plan.predicted['env_steps_per_s']:,.0f} env steps/s; bottleneck {plan.bottleneck}")
    say(f"3/3 training {algo} on {env} with that plan ({steps:,} steps, {LAUNCHER} launcher) ...")
    with _progress(progress, steps, f"{algo} {env}", "env step") as bar:
        result = train(algo, env, plan=str(plan_file), seed=seed, eval_episodes=20, runs_dir=runs_dir,
                       progress=bar, launcher=LAUNCHER)
    measured = result.plan_check["measured"]["env_steps_per_s"]
    say(f"done in {time.perf_counter() - t0:.0f} s: evaluation return {result.eval_return_mean:.1f} ± "
        f"{result.eval_return_std:.1f} over 20 episodes ({result.headline} policy); {measured:,.0f} env steps/s "
        "measured over the learning phase against "
        f"{plan.predicted['env_steps_per_s']:,.0f} predicted; run record {result.run_dir}")
    return {"profile": str(path), "plan": plan.to_dict(), "run": result.to_dict()}


def _progress(progress: bool | Callable[..., Any], total: int, label: str, unit: str) -> Any:
    """The caller's factory's progress, else a bar on a terminal (nothing in a pipe) when progress is True."""
    return progress(total, label, unit) if callable(progress) else Progress(total, progress, label, unit, lines=False)
