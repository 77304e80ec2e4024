"""make_plan: profile file → cost model → planning problem → integer program → Plan."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pearl._version import __version__
from pearl.algos import OffPolicyConfig
from pearl.costmodel import CostModel
from pearl.device import HOST, NodeDevice
from pearl.envs import check_algo_fits, env_spec
from pearl.errors import ConfigError, PlanError
from pearl.kernels import GROUP_COMM, PRECISION_CHOICES, Precision
from pearl.planner.build import Facts, build_problem
from pearl.profile.format import config_workload
from pearl.planner.cluster_problem import build_cluster_problem
from pearl.planner.accounting import in_turn as in_turn_period
from pearl.planner.accounting import server_nodes
from pearl.planner.ilp import TIES, evaluate, evaluator, pareto, power_by_resource, solve
from pearl.planner.plan import Plan
from pearl.planner.problem import PLACED, REPLAY, ActorOption, Problem, Solution
from pearl.profile.cluster import Cluster, load_cluster
from pearl.profile.format import Profile
from pearl.types import MAX_ENVS, EnvSpec

OBJECTIVES = ("throughput", "perf-per-watt")


#: what `envs="auto"` chooses from: environments per actor, each batched into one act call
ENV_CHOICES = (1, 2, 4, 8, 16, 32, 64)
GROUP_SIZES = (2, 4)  # the learner groups a plan considers beside one learner (each learner a process)


def make_plan(profile_path: str | Path, algo: str, env_id: str, objective: str = "throughput",
              envs: int | str | None = None, config: OffPolicyConfig | None = None,
              learners: int | None = None, precision: str = "fp32") -> Plan:
    """The plan for `objective`, its learn at `precision` (PRECISION_CHOICES): fp32, bf16-mixed, or auto, which
    plans both where the profile timed learn at bf16-mixed and keeps the better (ties keep fp32), as threads and
    learners are chosen. The plan's `precision_why` says what the other precision would have given, or why it
    could not be planned. The rest as `plan_at`."""
    if precision not in PRECISION_CHOICES:
        raise ConfigError(f"unknown precision {precision!r}: use one of {', '.join(PRECISION_CHOICES)}")
    base = load_source(profile_path)
    args = (algo, env_id, objective, envs, config, learners)
    plans = {FP32: plan_at(base, *args)}
    bf16, asked = Precision.BF16_MIXED, precision
    missing = unmeasured_precision(base, algo, env_id, config, bf16)
    if asked == bf16.value and missing:
        raise ConfigError(f"--precision {bf16.value}: {missing}; plan with --precision fp32 or auto")
    if not missing:
        try:
            plans[bf16] = plan_at(Source(base.path, base.cluster, bf16), *args)
        except PlanError as exc:
            if asked == bf16.value:
                raise
            missing = f"no {bf16.value} plan fits ({exc})"
    chosen = FP32 if asked == FP32.value else bf16 if asked == bf16.value else \
        min(plans, key=lambda p: (_objective_rank(plans[p], objective)[0], p is not FP32))
    plan = plans[chosen]
    plan.precision, plan.precision_why = chosen.value, _precision_why(plans, chosen, asked, missing, objective)
    return plan


FP32 = Precision.FP32


def unmeasured_precision(source: "Source", algo: str, env_id: str, config: OffPolicyConfig | None,
                         precision: Precision) -> str:
    """Why the profile cannot plan learn at `precision` ('' when some device's learn was timed at it): each
    device's recorded problem (no bf16 units, a float32-only adapter), else that the profile has no such figures."""
    profiles = [n.profile for n in source.cluster.nodes]
    if any(k.kernel == "learn" and k.precision == precision.value for p in profiles for k in p.kernels):
        return ""
    problems = [f"{q.device}: {q.reason}" for p in profiles for q in p.precision_problems
                if q.precision == precision.value]
    return ("the profile times learn at " + precision.value + " on no device (" + "; ".join(problems) + ")"
            if problems else f"the profile has no {precision.value} learn figures (`pearl profile` times them on "
                             "devices that do bf16 in hardware)")


def _objective_rank(plan: Plan, objective: str) -> tuple[float, float]:
    rate, per_joule = plan.predicted["env_steps_per_s"], plan.predicted["env_steps_per_joule"] or 0.0
    return (-rate, -per_joule) if objective == "throughput" else (-per_joule, -rate)


def _precision_why(plans: dict[Precision, Plan], chosen: Precision, asked: str, missing: str, objective: str) -> str:
    """One line: the precision and how it was chosen, with what the other would have given (under auto always,
    under an asked precision when the other is better), or why the other was not planned (under auto)."""
    head = f"{chosen.value} ({'auto' if asked == 'auto' else 'as asked'})"
    others = [p for p in plans if p is not chosen]
    if not others:
        return f"{head}: bf16-mixed not planned: {missing}" if missing and asked == "auto" else head
    other = plans[others[0]]
    if asked != "auto" and _objective_rank(other, objective)[0] >= _objective_rank(plans[chosen], objective)[0]:
        return head
    key, unit = ("env_steps_per_s", "env steps/s") if objective == "throughput" else \
        ("env_steps_per_joule", "env steps/J")
    mine, theirs = plans[chosen].predicted[key] or 0.0, other.predicted[key] or 0.0
    ratio = f" ({theirs / mine:.2f}× this plan's)" if mine > 0 else ""
    return f"{head}: {others[0].value} would give {theirs:,.0f} {unit}{ratio}"


def plan_at(source: "Source", algo: str, env_id: str, objective: str = "throughput",
            envs: int | str | None = None, config: OffPolicyConfig | None = None,
            learners: int | None = None) -> Plan:
    """The plan for `objective` from `source`'s figures (learn at its precision). envs: environments per actor; None keeps the preset's (its published returns
    were measured with it), an integer fixes it, "auto" lets the planner choose from ENV_CHOICES (up to the
    largest act batch the profile measured, so no act time is extrapolated): one program per choice, the best
    kept, the Pareto fronts merged. config: the hyperparameters to plan for (default: the preset's); a
    workload shape the profile has not measured is planned from scaled figures (the plan names them).
    learners: plan exactly that learner group size (None: the planner chooses, `learner_layouts`)."""
    if objective not in OBJECTIVES:
        raise ConfigError(f"unknown objective {objective!r}: use one of {', '.join(OBJECTIVES)}")
    source, problem, facts = _setup(source, algo, env_id, config)
    if envs == "auto":
        _, model, host = source.local(problem.host_device)
        largest = max(model.batches("act", host, facts.target), default=1)
        choices = [e for e in ENV_CHOICES if e <= largest]
    elif envs is None:
        choices = [facts.envs_per_actor]
    elif isinstance(envs, int) and not isinstance(envs, bool) and 1 <= envs <= MAX_ENVS:
        choices = [envs]
    else:
        raise ConfigError(f"envs per actor must be 'auto' or an integer from 1 to {MAX_ENVS}, got {envs!r}")
    layouts = fixed_learners(learner_layouts(source, problem, facts), learners, len(source.cluster.nodes))
    candidates = []
    for e in choices:
        for threads, group in layouts:
            p_e, f_e = (problem, facts) if (e, threads, group) == (facts.envs_per_actor, 1, 1) else \
                build_cluster_problem(source.cluster, algo, env_spec(env_id), e, config, threads, group,
                                      source.precision)
            try:
                front = pareto(p_e)
            except PlanError:
                if group == 1:
                    raise
                continue  # no feasible layout with this group (its learners leave the actors no lane)
            best = front[0] if objective == "throughput" else solve(p_e, "perf-per-watt")
            candidates.append((p_e, f_e, best, front))
    if not candidates:
        raise PlanError(f"no layout with {learners} learners fits this profile: the group's learners leave the actors "
                        "no lane; plan with fewer learners")
    first = 0 if objective == "throughput" else 1  # lexicographic, as within one program

    def rank(solution: Solution) -> tuple[float, float]:
        figures = (solution.period_s, solution.energy_j)
        return figures[first], figures[1 - first]

    # ties keep the fewer learners, then the fewer threads, then the earlier envs choice (min keeps the first)
    p_e, f_e, best, _ = min(candidates, key=lambda c: (*rank(c[2]), c[0].learners, c[0].learner_threads))
    plan = _plan(source, p_e, f_e, algo, env_id, objective, best,
                 _merged_front([point for c in candidates for point in c[3]]))
    plan.learners_why = f"{learners} learner(s): as asked (--learners {learners})" if learners is not None else \
        _learners_why(p_e.learners, {c[0].learners: c[2] for c in sorted(candidates, key=lambda c: rank(c[2]),
                                                                         reverse=True)}, objective)
    return plan


def learner_layouts(source: "Source", problem: Problem, facts: Facts) -> list[tuple[int, int]]:
    """(T threads, N learners) to plan for: each T of `thread_choices` with one learner, and where every node's
    profile prices a learner group (its `group` figure) groups of one-thread learners: on one host N = 2 and 4,
    up to its lanes; in a cluster one learner on every node (`Problem.spread_group`)."""
    layouts = [(t, 1) for t in thread_choices(source, problem, facts)]
    models = [source.models[node.name] for node in source.cluster.nodes]
    if any(HOST not in model.devices() for model in models):
        return layouts
    try:
        for model in models:
            model.group_time(2, 1, 1, 1, 1)
    except KeyError:  # a profile from before learner groups: one learner
        return layouts
    if len(models) > 1:
        return layouts + [(1, len(models))]
    lanes = problem.resource(problem.host).lanes
    return layouts + [(1, n) for n in GROUP_SIZES if n <= lanes]


def fixed_learners(layouts: list[tuple[int, int]], learners: int | None, nodes: int) -> list[tuple[int, int]]:
    """The layouts with `learners` learners (all of them for None); ConfigError saying which sizes the profile
    offers when it offers none with that many."""
    if learners is None:
        return layouts
    kept = [(t, n) for t, n in layouts if n == learners]
    if not kept:
        sizes = ", ".join(str(n) for n in sorted({n for _, n in layouts}))
        why = (f"a cluster plan's group has one learner on each of its {nodes} nodes" if nodes > 1 else
               "a group of 2 or 4 learners, up to the host's lanes, where the profile has a `group` figure")
        raise ConfigError(f"--learners {learners}: this profile offers {sizes} learner(s) ({why})")
    return kept


def _learners_why(chosen: int, best_by_size: dict[int, Solution], objective: str) -> str:
    """Why the plan has `chosen` learners: its predicted figure against the best plan of each other group size."""
    index = 0 if objective == "throughput" else 1
    figure = {n: (s.period_s, s.energy_j)[index] for n, s in best_by_size.items()}
    what, unit = ("period", "s") if index == 0 else ("energy per iteration", "J")
    others = ", ".join(f"{n} learners' {figure[n] / figure[chosen]:.2f}x" for n in sorted(figure) if n != chosen)
    if not others:
        return f"{chosen} learner: no learner group was planned (a profile without a group figure)"
    return (f"{chosen} learner(s): the least predicted {what}, {figure[chosen]:.3g} {unit}, against the best plans "
            f"with {others} (ties keep the fewest learners)")


def layout_threads(profile: Profile, config: OffPolicyConfig, spec: EnvSpec, where: dict[str, str],
                   actors: int) -> int:
    """The learner's threads a plan would take for one layout of a host profile (the local launcher's roles,
    side by side): each count T the profile times learn at on `cpu`, up to the host's lanes, priced as the
    planner prices it (the problem for T, `evaluate` of the layout: contention included); the least period,
    ties to fewer threads; 1 where no count's layout is feasible. `where`: the device of each kernel of PLACED."""
    periods = launch_periods(profile, config, spec, where, actors, in_turn=False)
    return min(periods, key=lambda k: (periods[k], k[1]))[1]


@dataclass(frozen=True)
class Launch:
    """How `pearl train` runs a layout it has no plan for (`default_launch`)."""

    launcher: str  # "local" (roles side by side) or "sequential" (in turn, one process)
    threads: int  # the learner's T
    period_s: float  # the predicted seconds per iteration (math.inf: no layout was feasible)
    why: str  # one sentence: the two launchers' predictions


def default_launch(profile: Profile, config: OffPolicyConfig, spec: EnvSpec, where: dict[str, str], actors: int,
                   threads: int | None = None) -> Launch:
    """The launcher and learner threads a plan would take for one layout of a host profile: the local
    launcher's period at each T (`layout_threads`'s pricing, contention included) against the sequential
    launcher's (accounting.in_turn: the roles in turn, learn at its T-thread figure alone); the least period,
    ties to the local launcher and then to fewer threads. `threads`: only that T (the run names it)."""
    periods = launch_periods(profile, config, spec, where, actors, in_turn=True, only=threads)
    launcher, t = min(periods, key=lambda k: (periods[k], k[0] != "local", k[1]))
    best = {name: min((p, n) for (la, n), p in periods.items() if la == name) for name in ("local", "sequential")}
    rate = 1.0 / config.replay_ratio  # env steps per iteration (one update)
    why = "; ".join(f"{name} {rate / p:,.0f} env steps/s at {n} thread(s)" if math.isfinite(p) else
                    f"{name} infeasible" for name, (p, n) in best.items())
    return Launch(launcher, t, periods[(launcher, t)], f"predicted from this machine's profile: {why}")


def launch_periods(profile: Profile, config: OffPolicyConfig, spec: EnvSpec, where: dict[str, str], actors: int,
                   in_turn: bool, only: int | None = None) -> dict[tuple[str, int], float]:
    """The predicted period of the layout for ("local", T) (`evaluate`: the rows of accounting.py) and, with
    `in_turn`, ("sequential", T) (accounting.in_turn), for each T the profile times learn at on `cpu` up to the
    host's lanes (and 1), or only `only`; math.inf where infeasible."""
    model = CostModel(profile)
    problem, _ = build_problem(profile, model, config.algo, spec, config=config)
    lanes = problem.resource(problem.host).lanes
    counts = sorted({1, *(t for t in model.thread_counts("learn", HOST, config_workload(config, spec)) if t <= lanes)})
    option = ActorOption(actors, config.n_envs)
    periods: dict[tuple[str, int], float] = {}
    for t in counts if only is None else [only]:
        p_t = problem if t == 1 else build_problem(profile, model, config.algo, spec, config=config, threads=t)[0]
        got = evaluate(p_t, where, option)
        periods[("local", t)] = got[0] if got is not None else math.inf
        if in_turn:
            alone = p_t if t == 1 else build_problem(profile, model, config.algo, spec, config=config, threads=t,
                                                       beside_actors=False)[0]
            periods[("sequential", t)] = in_turn_period(alone, where, option) if (option, where["act"]) in \
                alone.act_cost else math.inf
    return periods


def thread_choices(source: "Source", problem: Problem, facts: Facts) -> list[int]:
    """The learner's thread counts T to plan for: 1, and each count up to the hosts' lanes at which every
    node's profile times learn on its `cpu` (the profiler times it at the host's lanes)."""
    lanes = min(problem.resource(n.host).lanes for n in problem.node_list())
    counts = set(range(1, lanes + 1))
    for node in source.cluster.nodes:
        model = source.models[node.name]
        counts &= set(model.thread_counts("learn", HOST, facts.target)) if HOST in model.devices() else {1}
    return sorted(counts | {1})


def _merged_front(points: list[Solution]) -> list[Solution]:
    """The non-dominated points of several fronts: in order of period, each using strictly less energy."""
    front: list[Solution] = []
    for point in sorted(points, key=lambda p: (p.period_s, p.energy_j)):
        if not front or point.energy_j < front[-1].energy_j * (1 - 1e-9):
            front.append(point)
    return front


def fixed_plans(profile_path: str | Path, algo: str, env_id: str) -> dict[str, Plan]:
    """Plans that put every kernel on one device (each device that can hold them all), plus the Pareto
    front's lowest-energy end, keyed by a label: what `pearl compare` runs beside the optimised plans."""
    source, problem, facts = _setup(profile_path, algo, env_id)
    front = pareto(problem)
    out = {"pareto end (lowest energy)": _plan(source, problem, facts, algo, env_id, "perf-per-watt", front[-1],
                                               front)}
    cost = evaluator(problem)
    for device in problem.devices:
        placement = {k: device.id for k in PLACED}
        results = [(r, a) for a in problem.actor_options() if (r := cost(placement, a)) is not None]
        if results:
            (period, energy, binding), actors = min(results, key=lambda ra: ra[0][0])
            fixed = Solution(placement, actors, period, energy, "fixed", "none", 0.0, 0.0, binding)
            out[f"all on {device.id}"] = _plan(source, problem, facts, algo, env_id, "throughput", fixed, front)
    return out


def every_plan(profile_path: str | Path, algo: str, env_id: str) -> list[Plan]:
    """A plan for every feasible mapping (each placement × actor count): what an exhaustive search measures."""
    import itertools

    source, problem, facts = _setup(profile_path, algo, env_id)
    front = pareto(problem)
    cost = evaluator(problem)
    plans = []
    choices = [problem.allowed("act"), sorted(set.intersection(*(set(problem.allowed(k)) for k in REPLAY))),
               problem.allowed("learn")]
    for act, replay, learn in itertools.product(*choices):
        placement = {"act": act, **{k: replay for k in REPLAY}, "learn": learn}
        for actors in problem.actor_options():
            result = cost(placement, actors)
            if result is not None:
                fixed = Solution(placement, actors, result[0], result[1], "fixed", "none", 0.0, 0.0, result[2])
                plans.append(_plan(source, problem, facts, algo, env_id, "throughput", fixed, front))
    return plans


@dataclass
class Source:
    """The profile a plan is made from: a cluster (a host profile is one node), and the profile and cost
    model behind each device id of the problem (NODE/DEVICE in a cluster of several nodes)."""

    path: str
    cluster: Cluster
    #: learn's arithmetic: the cost models read learn's timings at it
    precision: Precision = Precision.FP32
    models: dict[str, CostModel] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.models = {n.name: CostModel(n.profile, self.precision) for n in self.cluster.nodes}

    def local(self, device: str) -> tuple[Profile, CostModel, str]:
        """(profile, cost model, id within that profile) of a problem's device."""
        if len(self.cluster.nodes) == 1:
            node = self.cluster.nodes[0]
            return node.profile, self.models[node.name], device
        at = NodeDevice.parse(device)
        return self.cluster.node(at.node).profile, self.models[at.node], str(at.device)


def load_source(profile_path: str | Path) -> Source:
    return Source(str(profile_path), load_cluster(profile_path))


def _setup(profile_path: str | Path | Source, algo: str, env_id: str,
           config: OffPolicyConfig | None = None) -> tuple[Source, Problem, Facts]:
    source = profile_path if isinstance(profile_path, Source) else load_source(profile_path)
    spec = env_spec(env_id)
    check_algo_fits(algo, spec)
    if config is not None and config.algo != algo:
        raise ConfigError(f"a {config.algo} config cannot plan {algo}")
    problem, facts = build_cluster_problem(source.cluster, algo, spec, config=config, precision=source.precision)
    return source, problem, facts


def _plan(source: Source, problem: Problem, facts: Facts, algo: str, env_id: str, objective: str, best: Solution,
          front: list[Solution]) -> Plan:
    env_device = problem.node_of(best.placement["act"]).host_device
    mapping = {"env_step": env_device, **{k: best.placement[k] for k in PLACED}}
    return Plan(
        pearl_version=__version__, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        algo=algo, env=env_id, objective=objective, profile=_profile_summary(source),
        mapping=mapping, actors=best.actors.n, envs_per_actor=best.actors.envs, actor_devices=dict(best.spread),
        replay_shards=dict.fromkeys(best.shards, 1),
        threads=problem.learner_threads // (1 if problem.spread_group else problem.learners),
        learners=problem.learners,
        predicted={**_figures(best.period_s, best.energy_j, facts, _sources(source, mapping, facts)),
                   "workload": facts.workload,
                   "power_by_resource_w": power_by_resource(problem, best)},
        bottleneck=best.binding, lanes=_lanes(problem, best),
        baselines=_baselines(problem, facts, best, source),
        # a CBC run stopped by its time limit reports no bound: its gap is unknown (None), not infinite
        solver={"name": best.solver, "status": best.status, "gap": best.gap if math.isfinite(best.gap) else None,
                "solve_s": best.solve_s, "ties": TIES},
        pareto=[{**_figures(s.period_s, s.energy_j, facts, {}), "mapping": dict(s.placement), "actors": s.actors.n,
                 "envs_per_actor": s.actors.envs, **({"actor_devices": dict(s.spread)} if s.spread else {}),
                 **({"replay_shards": dict.fromkeys(s.shards, 1)} if s.shards else {})}
                for s in front],
        kernels=_kernel_seconds(problem, facts, best),
        implementations={k: facts.implementations[(k, d)] for k, d in mapping.items()
                         if (k, d) in facts.implementations},
        power=_power_figures(source, problem),
        why=_moves(problem, best),
        slices=split(problem, best),
    )


def split(problem: Problem, best: Solution) -> list[dict]:
    """How the plan splits each GPU it slices (plan.py "slices"): every slice in use with its roles."""
    out = []
    spread = best.actor_spread()
    for dev in problem.devices:
        roles = (["actors"] if dev.id in spread else []) + \
            (["learner"] if any(best.placement[k] == dev.id for k in ("replay_insert", "learn")) else [])
        if not dev.is_slice or not roles:
            continue
        processes = spread[dev.id] if roles == ["actors"] and dev.instances > 1 else 1
        if roles == ["actors", "learner"] and dev.instances > 1:
            processes = spread[dev.id] + 1
        out.append({"gpu": dev.resource, "device": dev.id, "roles": roles, "processes": processes,
                    "share": dev.share})
    return out


#: the roles a cluster plan places on nodes, and the kernels each moves
ROLES_ON_NODES = {"actors": ("act",), "replay server": REPLAY, "learner": ("learn",)}


def _moves(problem: Problem, best: Solution) -> list[dict]:
    """Why each role is on its node: the best plan (as evaluate costs it) with that role alone moved to each
    other node of a cluster, over that node's devices and, for the actors, every actor option there (all the
    actor processes on that one node: for actors spread over several nodes, each node is tried)."""
    nodes = problem.node_list()
    if len(nodes) == 1:
        return []
    out = []
    cost = evaluator(problem)
    actor_nodes = {problem.device(d).node for d in best.actor_spread()}
    for role, kernels in ROLES_ON_NODES.items():
        here = actor_nodes if role == "actors" else {problem.device(best.placement[kernels[0]]).node} \
            if role == "learner" else {problem.device(d).node for d in best.replay_devices()}
        for node in nodes:
            if here == {node.name}:
                continue
            tries = []
            for d in (d.id for d in problem.devices if d.node == node.name):
                placement = {**best.placement, **{k: d for k in kernels}}
                if role == "actors":  # every actor process on that node
                    tries += [r for a in problem.actor_options() if (r := cost(placement, a))]
                elif role == "replay server":  # one replay server there, the actors where the plan spreads them
                    tries += [r for r in [cost(placement, best.actors, best.actor_spread())] if r]
                else:  # the actors and the replay shards where the plan puts them
                    tries += [r for r in [cost(placement, best.actors, best.actor_spread(), best.shards)] if r]
            fastest = min(tries, default=None)
            out.append({"role": role, "node": node.name, "period_s": fastest[0] if fastest else None,
                        "bottleneck": fastest[2] if fastest else "infeasible"})
    return out


def _profile_summary(source: Source) -> dict:
    """Where the profile came from: its host (one node), or every node and link of a cluster."""
    def host(profile: Profile) -> dict:
        return {"node": profile.host.get("node"), "cpu": profile.host.get("cpu"), "cores": profile.host.get("cores"),
                "created": profile.created, "mode": profile.mode}

    nodes = source.cluster.nodes
    if len(nodes) == 1:
        return {"path": source.path, **host(nodes[0].profile)}
    return {"path": source.path, "nodes": {n.name: host(n.profile) for n in nodes},
            "links": [{"nodes": [k.a, k.b], "latency_s": k.latency_s, "bandwidth_bytes_per_s": k.bandwidth_bytes_per_s,
                       "source": k.source, "network": k.network} for k in source.cluster.links]}


def _power_figures(source: Source, problem: Problem) -> dict[str, dict]:
    """The power figures the energy terms used, per device of the problem, with where each came from: the
    method, and for a descriptor's figures the file and the share of them charged."""
    out = {}
    for d in problem.devices:
        profile, _, local = source.local(d.id)
        p = next((p for p in profile.power if p.device == local), None)
        if p is not None:
            out[d.id] = {"resource": d.resource, "idle_w": p.idle_w, "busy_w": p.busy_w, "source": p.source,
                         "method": p.method, "descriptor": p.descriptor, "scale": p.scale}
    return out


def _kernel_seconds(problem: Problem, facts: Facts, solution: Solution) -> dict[str, float]:
    """Predicted seconds per iteration of each kernel on its planned device (all actors together for act), with
    the weight sync (the learner's publishes, Problem.publish, + the actors' loads, which the problem counts in
    act) apart, as the runtime's clocks time it."""
    sync, a = facts.weight_sync_s, solution.actors
    publish = sync[("learn", a, solution.placement["learn"])]
    share = {d: n / a.n for d, n in solution.actor_spread().items()}  # each node's actors: their share
    load = sum(sync[("act", a, d)] * f for d, f in share.items())
    out = {"env_step": sum(problem.node_of(d).env_cost * f for d, f in share.items()),
           "act": sum(problem.act_cost[(a, d)] * f for d, f in share.items()) - load}
    for k in PLACED:
        if k != "act":
            out[k] = problem.cost[(k, solution.placement[k])]
    if solution.shards:  # every shard's part, together
        for k in REPLAY:
            out[k] = sum(problem.shard_cost[(k, d, len(solution.shards))] for d in solution.shards)
    out["weight_sync"] = publish + load
    if problem.learners > 1:  # a part of learn's, timed apart by the run
        out[GROUP_COMM] = problem.group_comm_s[solution.placement["learn"]]
    return out


def _figures(period: float, energy: float, facts: Facts, sources: dict) -> dict:
    steps, batch = facts.steps_per_iteration, facts.batch_size
    return {"env_steps_per_s": steps / period, "updates_per_s": 1.0 / period,
            "learner_samples_per_s": batch / period, "period_s": period, "energy_per_iteration_j": energy,
            "power_w": energy / period, "env_steps_per_joule": steps / energy if energy > 0 else None, **sources}


def _sources(source: Source, mapping: dict[str, str], facts: Facts) -> dict:
    """Where the figures came from: `source` modelled > scaled > measured (the worst of the mapping's), and
    `scaled`: each kernel of the mapping whose times were scaled, with the workload they were scaled from."""
    scaled = {k: facts.scaled[(k, d)] for k, d in mapping.items() if (k, d) in facts.scaled}
    timing, power = "scaled" if scaled else "measured", set()
    for d in set(mapping.values()):
        profile, model, local = source.local(d)
        if profile.device(local).source == "modelled":
            timing = "modelled"
        try:
            power.add(model.power(local).source)
        except KeyError:
            power.add("missing")
    return {"source": timing, "power_source": "+".join(sorted(power)), "scaled": scaled}


def _lanes(problem: Problem, solution: Solution) -> dict:
    """Lanes of the host CPU the plan keeps busy against accelerator resources used: the CPU/GPU ratio; in a
    cluster, the same per node (under "nodes") and over all nodes. A lane per process on the host's CPU: each
    actor process, the learner's process when learn or the replay it holds runs on the host, and a replay
    server that is a process of its own there (`accounting.server_nodes`, the processes actors[n] counts); the
    learner's T threads (Problem.learner_threads) count T lanes when learn runs on the host's `cpu`."""
    nodes = {}
    own = server_nodes(problem, solution.placement, tuple(solution.shards))
    for node in problem.node_list():
        used = {k: problem.device(d) for k, d in solution.placement.items() if problem.device(d).node == node.name}
        shard = next((problem.device(d) for d in solution.shards if problem.device(d).node == node.name), None)
        if shard is not None:  # a replay shard on this node
            used.update(dict.fromkeys(REPLAY, shard))
        on_host = {k for k in ("learn", REPLAY[0]) if k in used and used[k].resource == node.host}
        server = REPLAY[0] in on_host and node.name in own  # else the replay here is the learner's own
        learner = "learn" in on_host or ("learn" in used and REPLAY[0] in on_host and not server)
        # the learner's process holds its T threads' lanes when learn runs on the host's `cpu` device
        threaded = "learn" in used and used["learn"].id == node.host_device
        roles_on_host = int(learner) * (problem.learner_threads if threaded else 1) + int(server)
        actors = sum(n for d, n in solution.actor_spread().items() if problem.device(d).node == node.name)
        if actors:
            used["act"] = next(problem.device(d) for d in solution.actor_spread()
                               if problem.device(d).node == node.name)
        else:
            used.pop("act", None)
        accelerators = {dev.resource for dev in used.values() if dev.resource != node.host}
        cpu = actors + roles_on_host
        nodes[node.name] = {"cpu": cpu, "accelerator": len(accelerators),
                            "ratio": cpu / len(accelerators) if accelerators else None, "actors": actors,
                            "kernels": sorted(used)}
    if len(nodes) == 1:
        (only,) = nodes.values()
        return {k: only[k] for k in ("cpu", "accelerator", "ratio")}
    cpu, acc = sum(n["cpu"] for n in nodes.values()), sum(n["accelerator"] for n in nodes.values())
    return {"cpu": cpu, "accelerator": acc, "ratio": cpu / acc if acc else None, "nodes": nodes}


def _baselines(problem: Problem, facts: Facts, best: Solution, source: Source) -> list[dict]:
    """Every kernel on one device (the best actor count for it), as the cost model predicts it."""
    out = []
    cost = evaluator(problem)
    for device in problem.devices:
        placement = {k: device.id for k in PLACED}
        results = [(r, a) for a in problem.actor_options()
                   if (r := cost(placement, a)) is not None]
        if not results:
            out.append({"device": device.id, "feasible": False})
            continue
        (period, energy, binding), actors = min(results, key=lambda ra: ra[0][0])
        env_device = problem.node_of(device.id).host_device
        fig = _figures(period, energy, facts, _sources(source, {"env_step": env_device, **placement}, facts))
        out.append({"device": device.id, "feasible": True, "actors": actors.n, "bottleneck": binding,
                    "env_steps_per_s": fig["env_steps_per_s"], "env_steps_per_joule": fig["env_steps_per_joule"],
                    "speedup": period / best.period_s})
    return out


__all__ = ["OBJECTIVES", "ActorOption", "make_plan"]
