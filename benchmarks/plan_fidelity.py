"""The planner's scoreboard: on workloads no preset has, is the plan's prediction true and its layout the fastest?

    python benchmarks/plan_fidelity.py [--passes 2] [--seconds 8] [--only N ...] [--out FILE] [--calibrate]
    python benchmarks/plan_fidelity.py --rescore FILE [--root DIR]
    python benchmarks/plan_fidelity.py --loops FILE [--root DIR]

For each workload of WORKLOADS (DQN and DDPG; CartPole, Acrobot, MountainCar, Pendulum, MountainCarContinuous
and two envs of a module of the benchmark's own, benchmarks/fidelity_envs.py; hidden 64-64 to 400-300;
batches 32 to 256; envs per actor fixed at 1 or left to the planner, `auto`):

1. a quick profile of this machine's `cpu` device for that workload (`pearl profile --quick --env ...`);
2. the plan from it (throughput); with `--calibrate`, one run of the plan's layout folded into the profile
   (`pearl profile --from-run`) and the plan made again from that, as a user calibrates; and a stated sample
   of other layouts of the same mapping: 1 and 2 actor processes, the plan's envs per actor and one other (1,
   or 8 when the plan has 1), and the learner's torch threads at 1 and 2 (the plan's own count first). Each
   layout's prediction is the planner's own `evaluate` of it, on the problem built for its thread count (learn
   at its T-thread figure, contention counting T);
3. every layout trained `--passes` times, the passes alternating the order of the layouts (this machine's speed
   drifts 10-25 % over minutes), for learning_starts plus `--seconds` of learning at the predicted speed;
   measured is the learning phase's env steps/s (what a plan predicts), the mean over passes.

Printed per workload: each layout's predicted and measured env steps/s and |predicted − measured| / measured;
then over every (workload, layout), and over the plans alone, the median and worst of that error; each
workload's level (its layouts' median predicted ÷ measured) and the error with it divided out (`summary`); and per
workload the plan's measured speed ÷ the best measured layout's among those the planner could choose (where the
workload fixes the envs per actor, the layouts with that many; the others are trained for the table and the
error figures, and the ratio to the best of them is printed beside it). Beside every run a gauge (`HostGauge`)
times two pieces of the workload's work in this process, before and after the run, against the profile's own
figures for them, and for a layout of more than one learner thread learn's speed-up at the host's lanes as well:
each table's `host` column is the host's speed during the runs ÷ at the profile (for more than one thread, times
the speed-up's ÷ the profile's), and `÷ host` the error with each run's prediction scaled by it. On a machine
whose speed drifts between the profile and the runs, those figures are the model's own error, the others the
model's and the host's together.
`--out` keeps every figure as JSON.
`--rescore FILE` trains nothing: it takes a run's JSON, predicts every layout again from the profile and plan
that run saved (in its workload folders, or under `--root`), and prints the tables and summary anew, so the
model can be judged again on the same measurements after it changes.
`--loops FILE` trains nothing either: from the run records a run saved, it prints where each run's roles spent
time beyond what the profile times (`loop_rows`): the learner per segment, an actor per iteration.
Only the `cpu` device is profiled (PoCL would multiply the layouts; the planner's device choice is tested
elsewhere). A bad option prints one `error:` line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the module envs must import in the actor processes too, which start from the environment
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
sys.path.insert(0, str(HERE))

import fidelity_envs  # noqa: E402,F401  (registers Corridor-v0 and Drift-v0 with gymnasium)

from pearl.errors import ConfigError, PearlError  # noqa: E402


@dataclass(frozen=True)
class Workload:
    algo: str
    env: str
    hidden: tuple[int, ...]
    batch: int
    envs: int | str  # envs per actor: a number, or "auto" (the planner chooses)
    precision: str = "fp32"  # learn's arithmetic the plan is made for (make_plan's precision; "auto" chooses)

    @property
    def name(self) -> str:
        learn = "" if self.precision == "fp32" else f" learn {self.precision}"
        return f"{self.algo} {self.env} h{'x'.join(map(str, self.hidden))} b{self.batch} envs {self.envs}{learn}"


WORKLOADS = [
    Workload("dqn", "CartPole-v1", (64, 64), 256, "auto"),
    Workload("dqn", "Acrobot-v1", (128, 128), 64, 1),
    Workload("dqn", "MountainCar-v0", (256, 256), 128, "auto"),
    Workload("dqn", "fidelity_envs:Corridor-v0", (400, 300), 32, 1),
    Workload("dqn", "fidelity_envs:Corridor-v0", (64, 64), 128, "auto"),
    Workload("ddpg", "Pendulum-v1", (400, 300), 256, 1),
    Workload("ddpg", "MountainCarContinuous-v0", (64, 64), 64, "auto"),
    Workload("ddpg", "fidelity_envs:Drift-v0", (256, 256), 128, 1),
    # learn in bf16-mixed: planned and run only where the profile timed it (a CPU or GPU with bf16 units)
    Workload("ddpg", "Pendulum-v1", (400, 300), 256, 1, "bf16-mixed"),
]


@dataclass(frozen=True)
class Layout:
    actors: int
    envs: int
    threads: int
    predicted: float  # env steps/s, the planner's evaluate of this layout
    binding: str
    plan: bool  # the plan's own layout (its actors, envs per actor and threads)


def config_of(w: Workload):
    from pearl.training.configure import configured

    return configured(w.algo, w.env, settings={"hidden": ",".join(map(str, w.hidden)), "batch_size": str(w.batch)})


def profile_and_plan(w: Workload, folder: Path):
    from pearl.planner.make import make_plan
    from pearl.planner.plan import save_plan
    from pearl.profile.format import save_profile
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.profiler import run_profile
    from pearl.runtime.local import PROBES

    profile = save_profile(run_profile(ProfileOptions(quick=True, algos=(w.algo,), env=w.env, hidden=w.hidden,
                                                      batch_size=w.batch, devices=("cpu",)),
                                       probes=PROBES),
                           folder / "profile.json")
    plan = make_plan(profile, w.algo, w.env, envs=w.envs if w.envs == "auto" else int(w.envs), config=config_of(w),
                     precision=w.precision)
    return profile, plan, save_plan(plan, folder / "plan.json")


def layouts(w: Workload, profile: Path, plan) -> list[Layout]:
    """The plan's layout and the stated sample (module docstring), each with the planner's prediction."""
    other_envs = 8 if plan.envs_per_actor == 1 else 1
    wanted = [(plan.actors, plan.envs_per_actor, plan.threads)]
    for a in (1, 2):
        for e in (plan.envs_per_actor, other_envs):
            for t in (1, 2):
                if (a, e, t) not in wanted and (t == plan.threads or (a, e) == (plan.actors, plan.envs_per_actor)):
                    wanted.append((a, e, t))
    predict = predictor(w, profile, plan)
    return [x for x in (predict(*layout) for layout in wanted) if x is not None]


def predictor(w: Workload, profile: Path, plan):
    """(actors, envs, threads) → the Layout with the planner's `evaluate` of it on the plan's mapping, on the
    problem built for that envs and thread count; None where it is infeasible (more processes than lanes)."""
    from pearl.envs import env_spec
    from pearl.planner.cluster_problem import build_cluster_problem
    from pearl.planner.ilp import evaluate
    from pearl.kernels import Precision
    from pearl.planner.problem import PLACED, ActorOption
    from pearl.profile.cluster import load_cluster

    cfg, cluster, spec = config_of(w), load_cluster(profile), env_spec(w.env)
    placement = {k: plan.mapping[k] for k in PLACED}
    problems: dict[tuple[int, int], tuple] = {}

    def predict(a: int, e: int, t: int) -> Layout | None:
        if (e, t) not in problems:
            problems[(e, t)] = build_cluster_problem(cluster, w.algo, spec, e, cfg, threads=t,
                                                     precision=Precision.parse(plan.precision))
        problem, facts = problems[(e, t)]
        result = evaluate(problem, placement, ActorOption(a, e))
        if result is None:
            return None
        period, _, binding = result
        return Layout(a, e, t, facts.steps_per_iteration / period, binding,
                      (a, e, t) == (plan.actors, plan.envs_per_actor, plan.threads))

    return predict


def layout_plan(plan_file: Path, layout: Layout) -> Path:
    """The plan file with this layout's actors, envs per actor and predicted speed (the same mapping), so the
    run follows the layout and its record compares with the layout's prediction."""
    data = json.loads(plan_file.read_text())
    scale = layout.predicted / data["predicted"]["env_steps_per_s"]
    data.update(actors=layout.actors, envs_per_actor=layout.envs, threads=layout.threads)
    for key in ("env_steps_per_s", "updates_per_s", "learner_samples_per_s"):
        data["predicted"][key] *= scale
    data["predicted"]["period_s"] /= scale
    out = plan_file.with_name(f"plan-{layout.actors}x{layout.envs}-t{layout.threads}.json")
    out.write_text(json.dumps(data, indent=1))
    return out


@dataclass(frozen=True)
class GaugeReading:
    """One reading of `HostGauge`: `host`, the workload's one-thread work now ÷ at the profile; `lanes`, learn's
    time at the host's lanes as threads ÷ at one thread now, against the same ratio at the profile (None where the
    profile has no figure at more than one thread)."""

    host: float
    lanes: float | None = None

    def level(self, threads: int) -> float:
        """The reading for a run at `threads` learner threads: the one-thread work's, and for more than one thread
        its lanes' as well (as though the learner's whole period were learn, which it mostly is where threads
        matter: a layout bound by its learner)."""
        return self.host * (self.lanes if threads > 1 and self.lanes is not None else 1.0)


class HostGauge:
    """How fast this host runs the workload's own work now, against the moment its profile timed it: the
    learner's in-situ iteration (the profiler's `LearnerLoop`, the profile's `in_situ` figure) and an actor
    process's iteration at one env (`IterationProbe`, the profile's `actor_step` at one env), timed in
    alternating blocks in this process while nothing else of the benchmark runs; with them, learn at the host's
    lanes as threads and at one thread, against the profile's ratio of the two (its threaded `learn` entry).
    `reading()` gives the geometric mean of the first two medians' ratios to the profile's figures (> 1: the host
    runs that work slower now) and the lanes' ratio. The VM this was written on drifts 10-25 % over minutes, and
    the speed of two threads on it switches between two levels about 1.5 × apart for seconds to minutes while one
    thread's holds (docs/MEASUREMENTS.md); dividing each run's prediction by the reading beside it separates the
    model's error from the host's."""

    def __init__(self, w: Workload, profile: Path) -> None:
        from pearl.adapters import open_adapter
        from pearl.envs import env_spec
        from pearl.profiler.grids import GRIDS
        from pearl.profiler.learner import LearnerLoop
        from pearl.runtime.actor_process import IterationProbe

        data = json.loads(profile.read_text())
        self.profiled = [next(t["iteration_s"] for t in data["in_situ"] if t["device"] == "cpu"),
                         next(t["step_s"] for t in data["actor_step"] if t["device"] == "cpu" and t["envs"] == 1)]
        cfg, spec = config_of(w), env_spec(w.env)
        # the gauge times learn at fp32 (a gauge of the host's speed, whatever the plan's precision), so it is
        # set against the profile's fp32 entry, never its bf16-mixed one
        threaded = [t for t in data["kernels"] if t["kernel"] == "learn" and t["device"] == "cpu"
                    and t.get("threads", 1) > 1 and not t.get("beside") and t.get("one_thread_s")
                    and t["batch"] == cfg.batch_size and t.get("precision", "fp32") == "fp32"]
        self.lanes = threaded[0]["threads"] if threaded else 1
        self.profiled_factor = threaded[0]["median_s"] / threaded[0]["one_thread_s"] if threaded else None
        self.adapter = open_adapter("cpu", threads=1)
        self.learner = partial(LearnerLoop, self.adapter, cfg, spec, GRIDS["quick"])
        self.actor = IterationProbe(self.adapter, cfg, spec, 1)
        self.batch = cfg.batch_size
        self.last: list[float] = []

    def reading(self) -> GaugeReading:
        from pearl.adapters import open_adapter
        from pearl.profiler.learner import IN_SITU_CHAIN
        from pearl.profiler.timing import Point, measure_interleaved

        def threads(n: int) -> None:
            open_adapter("cpu", threads=n)

        one = partial(threads, 1)  # a run of two learner threads leaves torch's count at two
        one()
        learner = self.learner()  # afresh: learn slows or speeds as its weights and moments move
        points = [Point(learner.chain, self.adapter.synchronize, before=one),
                  Point(self.actor, self.adapter.synchronize, before=one)]
        if self.profiled_factor is not None:
            learn = partial(learner.learner.learn, learner.replay.sample(self.batch, 0.4))
            points += [Point(learn, self.adapter.synchronize, before=one),
                       Point(learn, self.adapter.synchronize, before=partial(threads, self.lanes))]
        try:
            stats = measure_interleaved(points, rounds=GAUGE_ROUNDS, min_time=GAUGE_SECONDS, warmup=3,
                                        min_samples=GAUGE_ROUNDS)
        finally:
            one()
        self.last = [stats[0].median_s / IN_SITU_CHAIN, stats[1].median_s]
        host = statistics.geometric_mean(t / t0 for t, t0 in zip(self.last, self.profiled))
        if self.profiled_factor is None:
            return GaugeReading(host)
        return GaugeReading(host, stats[3].median_s / stats[2].median_s / self.profiled_factor)

    def close(self) -> None:
        self.actor.close()


#: a gauge reading: its points in this many alternating blocks, this many seconds each point in all
GAUGE_ROUNDS, GAUGE_SECONDS = 4, 0.3


def train_layout(w: Workload, plan_file: Path, layout: Layout, seconds: float, runs: Path) -> float:
    """Learning-phase env steps/s of one run of `layout`."""
    result = _train(w, plan_file, layout, seconds, runs)
    return result.learning_env_steps_per_s or result.env_steps_per_s


def _train(w: Workload, plan_file: Path, layout: Layout, seconds: float, runs: Path):
    from pearl.training import train

    cfg = config_of(w)
    steps = cfg.learning_starts + int(min(100_000, max(2_000, layout.predicted * seconds)))
    return train(w.algo, w.env, plan=str(layout_plan(plan_file, layout)), config=cfg, steps=steps,
                 threads=layout.threads, eval_episodes=0, eval_every=0, checkpoint_every=0, runs_dir=str(runs))


def calibrated(w: Workload, profile: Path, plan, plan_file: Path, seconds: float, folder: Path):
    """(profile, plan, plan file) after one run of the plan's layout folded into the profile (`pearl profile
    --from-run`) and the plan made again from it, as a user calibrates."""
    from pearl.planner.make import make_plan
    from pearl.planner.plan import save_plan
    from pearl.profile.calibrate import calibrate, read_run
    from pearl.profile.format import load_profile, save_profile

    mine = predictor(w, profile, plan)(plan.actors, plan.envs_per_actor, plan.threads)
    result = _train(w, plan_file, mine, seconds, folder / "calibration")
    folded = save_profile(calibrate(load_profile(profile), read_run(result.run_dir)),
                          folder / "profile-calibrated.json")
    again = make_plan(folded, w.algo, w.env, envs=w.envs if w.envs == "auto" else int(w.envs), config=config_of(w))
    print(f"  calibrated from one run of the plan's layout: {mine.predicted:,.0f} predicted, "
          f"{result.learning_env_steps_per_s or result.env_steps_per_s:,.0f} measured; the plan made again: "
          f"{again.actors} actor(s) × {again.envs_per_actor} env(s), {again.threads} thread(s), "
          f"{again.predicted['env_steps_per_s']:,.0f} predicted", flush=True)
    return folded, again, save_plan(again, folder / "plan-calibrated.json")


def run_workload(w: Workload, passes: int, seconds: float, folder: Path, calibrate: bool = False) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    profile, plan, plan_file = profile_and_plan(w, folder)
    gauge = HostGauge(w, folder / "profile.json")
    try:
        if calibrate:
            profile, plan, plan_file = calibrated(w, profile, plan, plan_file, seconds, folder)
        todo = layouts(w, profile, plan)
        measured: dict[int, list[float]] = {i: [] for i in range(len(todo))}
        hosts: dict[int, list[float]] = {i: [] for i in range(len(todo))}
        lanes: dict[int, list[float]] = {i: [] for i in range(len(todo))}
        before = gauge.reading()
        for p in range(passes):
            order = list(range(len(todo))) if p % 2 == 0 else list(reversed(range(len(todo))))
            for i in order:
                lay = todo[i]
                speed = train_layout(w, plan_file, lay, seconds, folder / "runs")
                after = gauge.reading()
                measured[i].append(speed)
                hosts[i].append(math.sqrt(before.level(lay.threads) * after.level(lay.threads)))
                if lay.threads > 1 and before.lanes is not None and after.lanes is not None:
                    lanes[i].append(math.sqrt(before.lanes * after.lanes))
                before = after
                two = (f"; its one thread at {lanes[i][-1] / hosts[i][-1]:.2f}× and its speed-up at "
                       f"{lay.threads} threads at {1 / lanes[i][-1]:.2f}× the profile's" if lay.threads > 1 and lanes[i]
                       else "")
                print(f"  pass {p + 1}/{passes}: {lay.actors} actor(s) × {lay.envs} env(s), {lay.threads} thread(s): "
                      f"{speed:,.0f} env steps/s (predicted {lay.predicted:,.0f}; the host at {1 / hosts[i][-1]:.2f}× "
                      f"its speed at the profile{two})", flush=True)
    finally:
        gauge.close()
    rows = []
    for i, lay in enumerate(todo):
        mean = statistics.fmean(measured[i])
        rows.append({**asdict(lay), "measured": mean, "passes": measured[i], "hosts": hosts[i], "lanes": lanes[i],
                     "error": abs(lay.predicted - mean) / mean, **host_divided(lay.predicted, measured[i], hosts[i])})
    result = {"workload": w.name, "folder": str(folder), "profile": profile.name, "plan_file": plan_file.name,
              "plan": {"actors": plan.actors, "envs": plan.envs_per_actor, "threads": plan.threads,
                       "precision": plan.precision,
                       "predicted": plan.predicted["env_steps_per_s"], "bottleneck": plan.bottleneck},
              "rows": rows}
    return {**result, **plan_ratios(w, rows)}


def host_divided(predicted: float, passes: list[float], hosts: list[float]) -> dict[str, float]:
    """The prediction at each run's host speed (÷ the gauge's reading, the mean of those before and after it)
    against the measured mean, and the measured speeds at the profile's host speed (× the reading), for the
    plan's choice."""
    at_runs = statistics.fmean(predicted / h for h in hosts)
    mean = statistics.fmean(passes)
    return {"host_error": abs(at_runs - mean) / mean,
            "measured_at_profile": statistics.fmean(m * h for m, h in zip(passes, hosts))}


def plan_ratios(w: Workload, rows: list[dict]) -> dict[str, float]:
    """The plan's measured speed ÷ the best measured layout's among those the planner could choose (with envs
    per actor fixed by the workload, the layouts with that many), and ÷ the best of every layout measured; with
    the gauge's readings, the first ratio again on the speeds at the profile's host speed."""
    mine = next(r for r in rows if r["plan"])
    choices = [r for r in rows if w.envs == "auto" or r["envs"] == int(w.envs)]
    out = {"plan_vs_best": mine["measured"] / max(r["measured"] for r in choices),
           "plan_vs_any": mine["measured"] / max(r["measured"] for r in rows)}
    if all("measured_at_profile" in r for r in rows):
        out["plan_vs_best_at_profile"] = (mine["measured_at_profile"]
                                          / max(r["measured_at_profile"] for r in choices))
    return out


def print_table(result: dict) -> None:
    gauged = all("host_error" in r for r in result["rows"])
    print(f"\n{result['workload']}: plan {result['plan']['actors']} actor(s) × {result['plan']['envs']} env(s), "
          f"{result['plan'].get('threads', 1)} learner thread(s), learn in {result['plan'].get('precision', 'fp32')}, "
          f"bound by {result['plan']['bottleneck']}")
    print(f"  {'layout':28} {'predicted':>10} {'measured':>10} {'error':>7}" +
          (f" {'host':>5} {'÷ host':>7}" if gauged else "") + "  binding")
    for r in result["rows"]:
        tag = f"{r['actors']}×{r['envs']}, {r['threads']} thr" + ("  (plan)" if r["plan"] else "")
        host = (f" {1 / statistics.fmean(r['hosts']):5.2f} {r['host_error']:7.1%}" if gauged else "")
        print(f"  {tag:28} {r['predicted']:10,.0f} {r['measured']:10,.0f} {r['error']:7.1%}{host}  {r['binding']}")
    print(f"  plan's measured ÷ best measured layout it could choose: {result['plan_vs_best']:.2f} (÷ the best of "
          f"every layout measured: {result.get('plan_vs_any', result['plan_vs_best']):.2f}" +
          (f"; at the profile's host speed: {result['plan_vs_best_at_profile']:.2f}"
           if "plan_vs_best_at_profile" in result else "") + ")")
    if gauged:
        print("  host: its speed during the run ÷ at the profile (the gauge); ÷ host: the error with the prediction "
              "scaled by it")


def summary(results: list[dict]) -> dict:
    """The error over every layout and over the plans; and the same with each workload's level divided out (its
    layouts' median predicted ÷ measured, `levels`): how well the model tells one workload's layouts apart, which
    the plan's choice rests on, apart from how far its profile's figures sit from the runs' as a whole. With the
    gauge's readings (`HostGauge`), the errors and the plan's ratio again with the host's drift divided out."""
    every = [r["error"] for res in results for r in res["rows"]]
    plans = [r["error"] for res in results for r in res["rows"] if r["plan"]]
    ratios = [res["plan_vs_best"] for res in results]
    levels = [statistics.median(r["predicted"] / r["measured"] for r in res["rows"]) for res in results]
    relative = [abs(r["predicted"] / r["measured"] / level - 1) for res, level in zip(results, levels)
                for r in res["rows"]]
    out = {"layouts": len(every), "median_error": statistics.median(every), "worst_error": max(every),
           "plan_median_error": statistics.median(plans), "plan_worst_error": max(plans),
           "plan_vs_best_min": min(ratios), "levels": levels,
           "relative_median_error": statistics.median(relative), "relative_worst_error": max(relative)}
    if all("plan_vs_best_at_profile" in res for res in results):
        hosted = [r["host_error"] for res in results for r in res["rows"]]
        hosted_plans = [r["host_error"] for res in results for r in res["rows"] if r["plan"]]
        speeds = [1 / h for res in results for r in res["rows"] for h in r["hosts"]]
        out.update(host_median_error=statistics.median(hosted), host_worst_error=max(hosted),
                   host_plan_median_error=statistics.median(hosted_plans), host_plan_worst_error=max(hosted_plans),
                   host_plan_vs_best_min=min(res["plan_vs_best_at_profile"] for res in results),
                   host_speed_range=[min(speeds), max(speeds)])
    return out


def rescore(path: Path, root: str | None) -> None:
    """The run in `path` predicted again by today's model from the profiles and plans it saved."""
    from pearl.planner.plan import load_plan

    data = json.loads(path.read_text())
    for result in data["results"]:
        folder = Path(root) / str(_number(result["workload"])) if root else Path(result["folder"])
        w = WORKLOADS[_number(result["workload"]) - 1]
        plan = load_plan(folder / result.get("plan_file", "plan.json"))
        predict = predictor(w, folder / result.get("profile", "profile.json"), plan)
        for r in result["rows"]:
            x = predict(r["actors"], r["envs"], r["threads"])
            if x is None:
                r.update(predicted=0.0, binding="infeasible", error=1.0, plan=False,
                         **({"host_error": 1.0} if "hosts" in r else {}))
                continue
            r.update(predicted=x.predicted, binding=x.binding, error=abs(x.predicted - r["measured"]) / r["measured"],
                     plan=x.plan)
            if "hosts" in r:
                r.update(host_divided(x.predicted, r["passes"], r["hosts"]))
        result["plan"].update(threads=plan.threads, predicted=plan.predicted["env_steps_per_s"],
                              bottleneck=plan.bottleneck)
        if not any(r["plan"] for r in result["rows"]):
            raise SystemExit(f"error: {folder / 'plan.json'}'s own layout was not trained in this run")
        result.update(plan_ratios(w, result["rows"]))
        print_table(result)
    s = summary(data["results"])
    print_summary(s, len(data["results"]))


def loop_rows(folder: Path) -> list[dict]:
    """Per run record under `folder`/runs, what its roles spent beyond the figures the model prices them with:

    learner, per segment   (train wall − its waits for the actors − its replay and learn kernels − the profile's
                           publish × the segments) ÷ the segments: collecting the shares from the rings, waking
                           the actors, the loop's own bookkeeping
    actor, per iteration   (actors × train wall − their waits for weights − act − env step − the profile's load ×
                           the loads) ÷ the actors' iterations: the schedule's and the shared counters' bookkeeping
                           per step, the ring write and the learner's wake-up, a wait for room in the ring

    Both include whatever their role lost to the host beside the kernels it timed; the pre-learning segments (random
    actions, no updates) count as well."""
    profile = json.loads((folder / "profile.json").read_text())
    publish, load = profile["weight_sync"][0]["publish_s"], profile["weight_sync"][0]["load_s"]
    rows = []
    for summary in sorted((folder / "runs").glob("*/summary.json")):
        s = json.loads(summary.read_text())
        ks, waits, sched = s["kernel_seconds"], s["waits"], s["schedule"]
        segments, wall = sched["segments"], s["train_wall_s"]
        learner = (wall - waits["learner_wait_s"] - sum(ks.get(k, 0.0) for k in ("replay_insert", "replay_sample",
                                                                                  "learn", "priority_update"))
                   - publish * segments) / segments
        iterations = s["steps"] / s["envs_per_actor"]
        actor = (s["actors"] * wall - waits["actor_weights_wait_s"] - ks["act"] - ks["env_step"]
                 - load * s["traffic"]["weights"]["loads"]) / iterations
        rows.append({"actors": s["actors"], "envs": s["envs_per_actor"], "threads": s["threads"],
                     "updates_per_segment": sched["updates_per_segment"], "learner_per_segment_s": learner,
                     "actor_per_iteration_s": actor})
    return rows


def print_loops(path: Path, root: str | None) -> None:
    data = json.loads(path.read_text())
    print(f"  {'workload / layout':58} {'updates/seg':>11} {'learner/seg':>12} {'actor/iter':>11}")
    for result in data["results"]:
        folder = Path(root) / str(_number(result["workload"])) if root else Path(result["folder"])
        for r in loop_rows(folder):
            tag = f"{result['workload']}  {r['actors']}×{r['envs']}, {r['threads']} thr"
            print(f"  {tag:58} {r['updates_per_segment']:11d} {r['learner_per_segment_s'] * 1e6:9.0f} µs "
                  f"{r['actor_per_iteration_s'] * 1e6:8.0f} µs")


def _number(name: str) -> int:
    return next(i for i, w in enumerate(WORKLOADS, 1) if w.name == name)


def print_summary(s: dict, workloads: int) -> None:
    print(f"\nover {s['layouts']} layouts of {workloads} workloads: |predicted − measured| / measured median "
          f"{s['median_error']:.1%}, worst {s['worst_error']:.1%}; the plans alone: median "
          f"{s['plan_median_error']:.1%}, worst {s['plan_worst_error']:.1%}; the plan's measured speed is at least "
          f"{s['plan_vs_best_min']:.2f}× the best measured layout it could choose")
    print(f"each workload's level (its layouts' median predicted ÷ measured): "
          f"{', '.join(f'{x:.2f}' for x in s['levels'])}; with it divided out, the error over every layout: median "
          f"{s['relative_median_error']:.1%}, worst {s['relative_worst_error']:.1%}")
    if "host_median_error" in s:
        lo, hi = s["host_speed_range"]
        print(f"the host ran at {lo:.2f}-{hi:.2f}× its speed at the profiles (the gauge, beside every run); with "
              f"that divided out: median {s['host_median_error']:.1%}, worst {s['host_worst_error']:.1%}; the plans "
              f"alone: median {s['host_plan_median_error']:.1%}, worst {s['host_plan_worst_error']:.1%}; the plan "
              f"at least {s['host_plan_vs_best_min']:.2f}× the best layout it could choose")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=2, help="runs of every layout, alternating order")
    parser.add_argument("--seconds", type=float, default=8.0, help="learning phase per run, at predicted speed")
    parser.add_argument("--only", type=int, nargs="+", help="workload numbers (1-based) to run")
    parser.add_argument("--out", default=None, help="JSON of every figure [default: runs/plan_fidelity-<host>.json]")
    parser.add_argument("--calibrate", action="store_true",
                        help="fold one run of the plan's layout into the profile and plan again before the layouts")
    parser.add_argument("--rescore", default=None, metavar="FILE", help="predict a finished run's layouts anew")
    parser.add_argument("--loops", default=None, metavar="FILE",
                        help="print a finished run's loop times beyond the profile's figures")
    parser.add_argument("--root", default=None,
                        help="with --rescore or --loops: the run's folder of workload folders")
    args = parser.parse_args()
    if args.rescore or args.loops:
        try:
            (rescore if args.rescore else print_loops)(Path(args.rescore or args.loops), args.root)
        except (OSError, KeyError, ValueError) as exc:
            print(f"error: {args.rescore or args.loops}: not a finished scoreboard's figures with their run folders "
                  f"({exc!r}); pass the --out file of a run of this script", file=sys.stderr)
            sys.exit(2)
        return
    chosen = args.only or list(range(1, len(WORKLOADS) + 1))
    if args.passes < 1 or args.seconds <= 0 or any(not 1 <= n <= len(WORKLOADS) for n in chosen):
        print(f"error: --passes ≥ 1, --seconds > 0 and --only between 1 and {len(WORKLOADS)}", file=sys.stderr)
        sys.exit(2)
    out = Path(args.out or f"runs/plan_fidelity-{platform.node() or 'host'}.json")
    root = out.parent / f"plan_fidelity-{time.strftime('%Y%m%d-%H%M%S')}"
    print(f"plan fidelity on {platform.node()} ({os.cpu_count()} cores): {len(chosen)} workloads, "
          f"{args.passes} alternating passes, {args.seconds:g} s of learning per run", flush=True)
    results = []
    try:
        for n in chosen:
            w = WORKLOADS[n - 1]
            print(f"[{n}] {w.name}: profiling, planning", flush=True)
            try:
                results.append(run_workload(w, args.passes, args.seconds, root / str(n), args.calibrate))
            except ConfigError as exc:
                if w.precision == "fp32":
                    raise
                print(f"[{n}] skipped: {exc}", flush=True)  # this machine does not compute that precision fast
                continue
            print_table(results[-1])
    except PearlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    s = summary(results)
    print_summary(s, len(results))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"host": platform.node(), "cores": os.cpu_count(), "passes": args.passes,
                               "seconds": args.seconds, "calibrate": args.calibrate, "results": results,
                               "summary": s}, indent=1))
    print(f"figures: {out}")


if __name__ == "__main__":
    main()
