"""pearl compare: run the plans the planner proposes beside the all-on-one-device mappings, and show how
close each prediction came.

Candidates: the throughput plan, the perf-per-watt plan, the low-energy end of the Pareto front, and every
mapping that puts all kernels on one device (duplicates merged, their labels joined). Each runs for a fixed
wall time with its placement and actor count; throughput is measured over the learning phase (after
learning_starts). Energy per env step is predicted by the plan. The measured figure is the run's energy
counters over its learning phase (RAPL, NVML: `pearl.runtime.energy`) where it read every resource it drew on;
where it read some, theirs plus the plan's power for the others; elsewhere the plan's power multiplied by the
measured time per step, which carries the plan's power source (modelled on machines without counters). Each
row says which (`energy_source`) and why a resource was not read. Output, in runs/compare-<time>/:
compare.json, report.md, compare.png.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Callable

from pearl.errors import ConfigError, RunDirError
from pearl.fileio import write_atomic, write_json_atomic
from pearl.planner.make import fixed_plans, make_plan
from pearl.planner.plan import Plan, save_plan
from pearl.run_options import check_positive_int
from pearl.training import train
from pearl.training.result import TrainResult


def candidates(profile_path: str, algo: str, env_id: str) -> list[tuple[str, Plan]]:
    plans = [("throughput plan", make_plan(profile_path, algo, env_id, "throughput", precision="auto")),
             ("perf-per-watt plan", make_plan(profile_path, algo, env_id, "perf-per-watt", precision="auto")),
             *fixed_plans(profile_path, algo, env_id).items()]
    merged: dict[tuple, tuple[list[str], Plan]] = {}
    for label, plan in plans:
        key = (tuple(sorted(plan.mapping.items())), plan.actors, plan.precision)
        merged.setdefault(key, ([], plan))[0].append(label)
    return [(" = ".join(labels), plan) for labels, plan in merged.values()]


def run_compare(profile_path: str, algo: str, env_id: str, seconds: float = 20.0, runs_dir: str = "runs",
                seed: int = 0, say: Callable[[str], None] = print,
                warn: Callable[[str], None] = lambda _line: None) -> dict:
    """warn(line): once per device the profile left out as unusable, after the arguments are checked."""
    if not (seconds > 0 and math.isfinite(seconds)):  # inf would train each mapping for its full preset
        raise ConfigError(f"--seconds must be a finite number > 0, got {seconds}")
    check_positive_int("--seed", seed, minimum=0)  # before any plan or folder is written
    chosen = candidates(profile_path, algo, env_id)
    from pearl.profile.cluster import left_out, load_cluster

    for line in left_out(load_cluster(profile_path)):
        warn(line)
    out = Path(runs_dir) / f"compare-{time.strftime('%Y%m%d-%H%M%S')}-{algo}-{env_id}"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"cannot make {out}: {exc.strerror or exc}; pass --runs-dir with a writable folder") from None
    rows = []
    for i, (label, plan) in enumerate(chosen, 1):
        say(f"{i}/{len(chosen)} {label}: {_mapping_text(plan)}, {seconds:g} s ...")
        path = save_plan(plan, out / f"{i}-{_slug(label)}.plan.json")
        result = train(algo, env_id, plan=str(path), seed=seed, eval_episodes=0, runs_dir=str(out / "runs"),
                       max_seconds=seconds)
        rows.append(row(label, plan, result, path, seconds))
        if rows[-1]["note"]:
            say(f"  {rows[-1]['note']}")
    front = chosen[0][1].pareto
    report = {"algo": algo, "env": env_id, "profile": str(profile_path), "seconds": seconds, "rows": rows,
              "pareto": front}
    write_json_atomic(out / "compare.json", report)
    write_atomic(out / "report.md", markdown(report))
    plot(report, out / "compare.png")
    report["dir"] = str(out)
    return report


def row(label: str, plan: Plan, result: TrainResult, path: Path, seconds: float) -> dict:
    """One mapping's line of the report: the plan's prediction against its run's learning-phase speed (None, with
    a note saying why, when the run made no update in its time)."""
    measured = result.learning_env_steps_per_s
    p = plan.predicted
    return {"label": label, "mapping": plan.mapping, "actors": plan.actors, "precision": plan.precision,
            "predicted_env_steps_per_s": p["env_steps_per_s"], "measured_env_steps_per_s": measured,
            "error": (p["env_steps_per_s"] - measured) / measured if measured else None,
            "predicted_j_per_step": 1.0 / p["env_steps_per_joule"] if p.get("env_steps_per_joule") else None,
            **_measured_energy(p, result, measured), "run_dir": result.run_dir, "plan": str(path),
            "note": None if measured else _not_learning(result, seconds)}


def _measured_energy(predicted: dict, result: TrainResult, measured: float | None) -> dict:
    """The run's energy per env step and where it came from: its counters' joules where it read every resource;
    where it read some, theirs plus the plan's power for the others (`power_by_resource_w`); else the plan's
    power × the measured time per step. Labelled so, with why a resource was not read."""
    energy = result.energy or {}
    unread = energy.get("unmeasured", {})
    why = "; ".join(f"{r}: {w}" for r, w in unread.items()) or None
    plan_w = predicted.get("power_by_resource_w") or {}
    if energy.get("source") == "measured" and energy.get("j_per_env_step"):
        return {"measured_j_per_step": energy["j_per_env_step"], "measured_power_w": energy["power_w"],
                "power_source": predicted.get("power_source"), "energy_source": f"counters ({energy['method']})",
                "energy_why": None}
    if energy.get("source") == "partly measured" and measured and energy.get("power_w") is not None \
            and unread and all(r in plan_w for r in unread):
        power = energy["power_w"] + sum(plan_w[r] for r in unread)
        return {"measured_j_per_step": power / measured, "measured_power_w": power,
                "power_source": predicted.get("power_source"),
                "energy_source": f"counters ({energy['method']}) + plan's power for {', '.join(unread)}",
                "energy_why": why}
    modelled = predicted["power_w"] / measured if predicted.get("power_w") and measured else None
    return {"measured_j_per_step": modelled, "measured_power_w": None, "power_source": predicted.get("power_source"),
            "energy_source": f"plan's power ({predicted.get('power_source')}) × time", "energy_why": why}


def _not_learning(result: TrainResult, seconds: float) -> str:
    """Why a mapping has no measured figure: its run made no update within the time (starting its processes and
    filling replay up to learning_starts took it all)."""
    return (f"no update within {seconds:g} s ({result.steps:,} env steps collected, {result.env_steps_per_s:,.0f}/s, "
            "before learning started): no learning-phase figure to set against the prediction; pass a larger --seconds")


def figure(value: float | None, spec: str) -> str:
    """A report's figure in `spec`, or "n/a" where there is none (no measurement, no power figure)."""
    return "n/a" if value is None else format(value, spec)


def markdown(report: dict) -> str:
    lines = [f"# pearl compare: {report['algo']} on {report['env']}", "",
             f"Profile `{report['profile']}`; each mapping ran {report['seconds']:g} s; throughput over the learning "
             "phase. Measured energy per step: the hardware's energy counters over the learning phase where the "
             "run read them, else the plan's power × measured time per step (the last column says which).", "",
             "| mapping | actors | predicted env steps/s | measured env steps/s | error | predicted J/step | "
             "measured J/step | energy from |", "|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        learn = f" (learn in {r['precision']})" if r.get("precision", "fp32") != "fp32" else ""
        lines.append(f"| {r['label']}: {_mapping_text_from(r['mapping'])}{learn} | {r['actors']} | "
                     f"{r['predicted_env_steps_per_s']:,.0f} | {figure(r['measured_env_steps_per_s'], ',.0f')} | "
                     f"{figure(r['error'], '+.0%')} | {figure(r['predicted_j_per_step'], '.3g')} | "
                     f"{figure(r['measured_j_per_step'], '.3g')} | {r['energy_source']} |")
    lines += [f"\n{r['label']}: {r['note']}." for r in report["rows"] if r.get("note")]
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["rows"]
    # points are numbered by row; a mapping that never learnt has no measured point, and the key says so
    measured = [(i, r) for i, r in enumerate(rows, 1) if r["measured_env_steps_per_s"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5.2 + 0.22 * len(rows)))
    front = report["pareto"]
    left.plot([p["env_steps_per_s"] for p in front], [p["env_steps_per_joule"] or 0 for p in front], "o-",
              color="tab:blue", label="Pareto front (predicted)")
    for r in rows:
        predicted_jps = 1 / r["predicted_j_per_step"] if r["predicted_j_per_step"] else 0
        left.scatter(r["predicted_env_steps_per_s"], predicted_jps, marker="s", color="tab:orange")
    for i, r in measured:
        measured_jps = 1 / r["measured_j_per_step"] if r["measured_j_per_step"] else 0
        left.scatter(r["measured_env_steps_per_s"], measured_jps, marker="x", color="tab:red")
        left.annotate(str(i), (r["measured_env_steps_per_s"], measured_jps), xytext=(4, 4),
                      textcoords="offset points", fontsize=9)
    left.scatter([], [], marker="s", color="tab:orange", label="candidate, predicted")
    left.scatter([], [], marker="x", color="tab:red", label="candidate, measured")
    left.set_xlabel("env steps / s")
    left.set_ylabel("env steps / J")
    left.set_title("throughput against energy efficiency")
    left.legend(fontsize=8)
    xs = [r["predicted_env_steps_per_s"] for r in rows]
    ys = [r["measured_env_steps_per_s"] for _, r in measured]
    top = max(xs + ys) * 1.1
    right.plot([0, top], [0, top], "--", color="grey", label="measured = predicted")
    right.scatter([r["predicted_env_steps_per_s"] for _, r in measured], ys, color="tab:red")
    for i, r in measured:
        right.annotate(str(i), (r["predicted_env_steps_per_s"], r["measured_env_steps_per_s"]), xytext=(4, 4),
                       textcoords="offset points", fontsize=9)
    right.set_xlim(0, top)
    right.set_ylim(0, top)
    right.set_xlabel("predicted env steps / s")
    right.set_ylabel("measured env steps / s")
    right.set_title("predicted against measured")
    right.legend(fontsize=8)
    fig.suptitle(f"pearl compare: {report['algo']} on {report['env']} ({report['seconds']:g} s per mapping; "
                 f"power {rows[0]['power_source']})")
    key = "\n".join(f"{i}: {r['label']} ({_mapping_text_from(r['mapping'])}, {r['actors']} actor(s))"
                     + ("" if r["measured_env_steps_per_s"] else ": no update in time, not measured")
                     for i, r in enumerate(rows, 1))
    fig.text(0.02, 0.02, key, fontsize=8, va="bottom", family="monospace")
    fig.subplots_adjust(left=0.07, right=0.98, top=0.88, bottom=0.16 + 0.04 * len(rows), wspace=0.25)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _mapping_text(plan: Plan) -> str:
    return _mapping_text_from(plan.mapping) + f", {plan.actors} actor(s)"


def _mapping_text_from(mapping: dict[str, str]) -> str:
    devices = sorted(set(v for k, v in mapping.items() if k != "env_step"))
    if len(devices) == 1:
        return f"all kernels on {devices[0]}"
    return ", ".join(f"{k}→{v}" for k, v in mapping.items() if k != "env_step")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


__all__ = ["candidates", "run_compare"]
