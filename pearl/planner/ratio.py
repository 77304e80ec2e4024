"""`pearl ratio`: how many CPU lanes an accelerator needs (the CPU/GPU ratio of arXiv 2012.04210), as a what-if.

The host profile gains the accelerator as a what-if device (its descriptor, costed by the roofline) unless it
already holds it; then, for each lane count L of the sweep, the host's CPU resource (every device that shares
it: `cpu`, PoCL's CPU device) has L lanes, and its power is the profile's charge for its lanes scaled by
L / those lanes (a CPU of L such cores). Per-call kernel times stay as measured: more lanes add parallel room
(the load rows, the actor options 1..L), not faster cores. Each L is planned twice, for throughput and for
perf-per-watt. The sweep's marks:
    knee          the fewest lanes whose throughput is within 5 % of the best throughput of the sweep
    perf-per-watt the lane count whose perf-per-watt plan has the most env steps per joule
This module imports no hardware library; the plot is matplotlib's (Agg).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path

from pearl.descriptors import load_descriptor, resolve_descriptor
from pearl.device import HOST_DEVICE, HOST_RESOURCE, DeviceId
from pearl.envs import check_algo_fits, env_spec
from pearl.errors import ConfigError
from pearl.planner.build import build_problem
from pearl.planner.ilp import solve
from pearl.planner.problem import Solution
from pearl.profile.cluster import load_cluster
from pearl.profile.format import Profile
from pearl.profiler.whatif import add_what_if, what_if_id
from pearl.costmodel import CostModel

DEFAULT_LANES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
KNEE = 0.05  # within 5 % of the best throughput


@dataclass(frozen=True)
class RatioPoint:
    lanes: int
    env_steps_per_s: float  # the throughput plan's
    actors: int
    bottleneck: str
    mapping: dict[str, str]
    steps_per_joule: float | None  # the throughput plan's
    best_steps_per_joule: float | None  # the perf-per-watt plan's
    power_w: float  # the throughput plan's


@dataclass(frozen=True)
class RatioSweep:
    accelerator: str
    points: list[RatioPoint]
    knee: int  # lanes
    perf_per_watt: int | None  # lanes; None when no figure has power

    def to_dict(self) -> dict:
        return {"accelerator": self.accelerator, "knee_lanes": self.knee, "perf_per_watt_lanes": self.perf_per_watt,
                "points": [p.__dict__ for p in self.points]}


def with_lanes(profile: Profile, lanes: int) -> Profile:
    """A copy of the profile whose host CPU resource has `lanes` lanes and power scaled to them."""
    out = copy.deepcopy(profile)
    on_host = {d.id for d in out.devices if DeviceId.parse(d.id) == HOST_DEVICE or d.shares == HOST_RESOURCE}
    before = max(d.lanes for d in out.devices if d.id in on_host)
    out.devices = [replace(d, lanes=lanes) if d.id in on_host else d for d in out.devices]
    k = lanes / before
    out.power = [replace(p, idle_w=p.idle_w * k, busy_w=p.busy_w * k) if p.device in on_host else p
                 for p in out.power]
    return out


def sweep(profile_path: str | Path, algo: str, env_id: str, accelerator: str,
          lanes: tuple[int, ...] = DEFAULT_LANES) -> RatioSweep:
    """Plan the host with `accelerator` at each CPU lane count of `lanes`."""
    if not lanes or any(n < 1 for n in lanes):
        raise ConfigError(f"--lanes takes positive lane counts, got {list(lanes)}")
    cluster = load_cluster(profile_path)
    if len(cluster.nodes) != 1:
        raise ConfigError(f"{profile_path}: pearl ratio sweeps one host; give a host profile, not a cluster of "
                          f"{len(cluster.nodes)} nodes")
    base = copy.deepcopy(cluster.nodes[0].profile)
    descriptor = load_descriptor(resolve_descriptor(accelerator))
    device = what_if_id(descriptor)
    if all(d.id != device for d in base.devices):
        add_what_if(base, descriptor)
    spec = env_spec(env_id)
    check_algo_fits(algo, spec)
    points = [_point(with_lanes(base, n), n, algo, spec) for n in sorted(set(lanes))]
    best = max(p.env_steps_per_s for p in points)
    knee = min(p.lanes for p in points if p.env_steps_per_s >= (1 - KNEE) * best)
    efficient = [p for p in points if p.best_steps_per_joule]
    ppw = max(efficient, key=lambda p: p.best_steps_per_joule).lanes if efficient else None
    return RatioSweep(device, points, knee, ppw)


def _point(profile: Profile, lanes: int, algo: str, spec) -> RatioPoint:
    problem, facts = build_problem(profile, CostModel(profile), algo, spec)
    fast: Solution = solve(problem, "throughput")
    green: Solution = solve(problem, "perf-per-watt")
    steps = facts.steps_per_iteration
    return RatioPoint(lanes, steps / fast.period_s, fast.actors.n, fast.binding, dict(fast.placement),
                      steps / fast.energy_j if fast.energy_j > 0 else None,
                      steps / green.energy_j if green.energy_j > 0 else None, fast.energy_j / fast.period_s)


def table(result: RatioSweep) -> list[str]:
    lines = [f"CPU lanes per {result.accelerator} (what-if): throughput plan, and the perf-per-watt plan's steps/J",
             f"{'lanes':>5} {'env steps/s':>11} {'actors':>6} {'act':>10} {'replay':>10} {'learn':>10} "
             f"{'W':>6} {'steps/J':>8} {'best steps/J':>12}  bottleneck"]
    for p in result.points:
        def short(d: str) -> str:
            return "accel" if d == result.accelerator else d[:10]

        mark = (" knee" if p.lanes == result.knee else "") + (" perf/W" if p.lanes == result.perf_per_watt else "")
        lines.append(f"{p.lanes:>5} {p.env_steps_per_s:>11,.0f} {p.actors:>6} {short(p.mapping['act']):>10} "
                     f"{short(p.mapping['replay_insert']):>10} {short(p.mapping['learn']):>10} {p.power_w:>6.0f} "
                     f"{p.steps_per_joule or 0:>8.2f} {p.best_steps_per_joule or 0:>12.2f}  {p.bottleneck}{mark}")
    lines.append(f"knee: {result.knee} lanes (fewest within {KNEE:.0%} of the best throughput); "
                 f"perf-per-watt optimum: {result.perf_per_watt} lanes")
    return lines


def plot(result: RatioSweep, path: str | Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p.lanes for p in result.points]
    fig, left = plt.subplots(figsize=(8, 4.8))
    left.plot(xs, [p.env_steps_per_s for p in result.points], "o-", color="tab:blue",
              label="env steps/s (throughput plan)")
    left.set_xlabel(f"CPU lanes per accelerator ({result.accelerator})")
    left.set_ylabel("env steps / s", color="tab:blue")
    right = left.twinx()
    right.plot(xs, [p.best_steps_per_joule or 0 for p in result.points], "s--", color="tab:green",
               label="env steps/J (perf-per-watt plan)")
    right.set_ylabel("env steps / J", color="tab:green")
    knee = next(p for p in result.points if p.lanes == result.knee)
    left.axvline(knee.lanes, color="tab:blue", alpha=0.5, linestyle=":",
                 label=f"knee: {knee.lanes} lanes (within {KNEE:.0%} of the best throughput)")
    if result.perf_per_watt is not None:
        best = next(p for p in result.points if p.lanes == result.perf_per_watt)
        right.plot([best.lanes], [best.best_steps_per_joule], "*", markersize=16, color="tab:red",
                   label=f"perf-per-watt optimum: {best.lanes} lanes")
    left.set_xscale("log", base=2)
    left.set_xticks(xs, [str(x) for x in xs])
    left.set_title(title)
    handles = left.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    fig.legend(handles, [h.get_label() for h in handles], loc="lower center", ncol=2, fontsize="small")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
