"""The planner's integer program: its one full statement (the other planner modules point here) and its entry
points, solved with PuLP (HiGHS where installed, else CBC).

    solve(problem, objective="throughput" | "perf-per-watt", period_bound=None, solver=None, time_limit=30.0)
    pareto(problem, epsilons=(0, 0.05, 0.1, 0.2, 0.5, 1.0))       the energy/period front
    evaluate(problem, placement, actors, spread=None, shards=()) -> (period, energy, binding) | None
                                                                                       one fixed placement
    evaluator(problem) -> the same for many placements, the rows built once
    power_by_resource(problem, solution) -> {resource: W}, a solution's E ÷ P by resource

One *iteration* is one learner update and S = 1/ρ env steps (ρ the replay ratio). Every cost is in seconds per
iteration: build.py prices them from the cost model and the launcher's traffic statement, problem.py holds them
as plain numbers. The program chooses a placement and an actor option and minimises the iteration period P
(throughput) or the energy per iteration E (perf-per-watt).

Decisions
    x[k,d] ∈ {0,1}    kernel k ∈ PLACED on device d (only where an adapter implements it there)
    v[a,d] ∈ {0,1}    actor option a (n actor processes × e envs each) with act on d; x[act,d] = Σ_a v[a,d];
                      only the options build.py offers on d (one actor process on a whole GPU or a MIG instance)
    w[a,d] ∈ ℕ        (clusters) how many of those processes run on d's node (n·v[a,d] with one host)
    y[e,d,d'] ∈ {0,1} data edge e runs from d to d' (its ends are kernels): couple[...] below
    σ[K] ∈ {0,1}      (a sharded replay server) the replay server is K shards
    P ≥ 0             the iteration period
and, taken outside the program by solving one program per value (make.py: the least P wins, perf-per-watt the
least E, ties keep the smaller value, as for the envs per actor):
    T                 the learner's CPU threads (`learner_threads`), each T for which the profile times learn
    N ∈ {1, 2, 4}     the learners of a learner group (`learners`, N·T ≤ lanes); in a cluster one learner on
                      every node, learner 0 where learn is placed (`spread_group`)

Constraints, by the names the code gives them. accounting.py writes the bounds on P as rows of terms, which the
program and `evaluate` both read (tests/test_planner_ilp.py and tests/test_planner_cluster.py re-state them for
their oracles):
    (a) assign[k]  Σ_d x[k,d] = 1; replay_same[k,d]: the replay kernels share one device (their storage)
    busy[r]     Σ cost of the replay kernels and learn on r (learn with the learner's weight publishes
                publish[a, d(learn)], which build.py prices from the schedule; where the actor options price
                them apart, each option's is coupled with o[a] = [the option is a]: Σ_d v[a,d], or s[a]
                in a cluster; every row that counts learn counts them), + act_cost[a, d(act)] if d(act) is on r,
                + env_cost on the host, + each positive edge transfer once on the resource of each end (once
                only when both ends sit on one resource). (g) Devices on one physical resource (`cpu` and PoCL;
                the slices of a GPU) sum into one busy[r]. In a cluster each node runs w[a,d] of the n
                actor processes (act on d, a device of the node; "env_step" at its host device), each an equal
                share of the env steps: w[a,d]/n of act_cost[a,d], and f[d] = Σ_a w[a,d]/n of the node's
                env_cost on its host and of every transfer with an actor end (accounting.py's count and share).
                A kernel's cost counts × β[k,d] here (device_share: its device-clock time ÷ its wall time, at
                most 1, where the profile timed it by the device's clock, a GPU's CUDA events; 1 elsewhere):
                the device idles while its host launches an eager call's kernels, so the processes that share
                it overlap there; the role and process rows count the whole cost
    (c) load[r]     busy[r] ≤ lanes(r)·P
    (c') role[name]  a role is one thread: Σ its kernels' costs + transfers of the edges with exactly one end
                in the role ≤ P (replay manager: insert, sample, priority update; learner: learn and publishes)
    (e) actors[n]   Σ_a,d∈n w[a,d] + R[n] − z[n] ≤ lanes(host of n): one lane per actor process and per replay
                server process (R[n]: the server, or a shard, on a device of n; z[n] ≤ R[n], L[n], σ[1], with
                L[n] the learner on n: a whole server on the learner's node runs in the learner's process);
                the learner shares lanes through load, role and contention; "actors" (n ≤ lanes of the host,
                no R or z)
                when there is one host
    spread      (clusters) the binaries s[a] (option a; Σ_a s[a] = 1 is assign[act]) and acting[d] (a node's
                actors act on d); act_node[n]: Σ_d∈n acting[d] ≤ 1; v[a,d] ∈ [0,1] continuous with v[a,d] ≥
                s[a] + acting[d] − 1, their product (v only raises bounds, so its lower bound is exact);
                w[a,d] integer ≤ min(n, lanes)·s[a] and ≤ min(n, lanes)·acting[d]; total[a]: Σ_d w[a,d] =
                n·s[a]; Σ_a w[a,d] ≥ acting[d]. With one host v is binary, Σ v = 1, and w[a,d] = n·v[a,d]
    (e') actor_period[a]  one actor's share, actor_period[a, d(act)] ((S/n)·(env side + act per env) + its
                weight loads, build.py) ≤ P; actor_period[n] for each node of a cluster with actors
    (f) latency     (no prefetch) sample + learn + priority update + the transfers sample→learn, learn→priority ≤ P
    (h) process     per node, Σ cost of the replay kernels and learn placed on devices of its host resource
                + the transfers sample→learn, learn→priority ≤ P: the learner process runs the replay manager
                and the learner under one interpreter lock, and on the host's own cores (cpu, PoCL) their
                work does not overlap, so a layout priced as overlapped there runs well below its prediction;
                an accelerator's device time still overlaps. "process[learner]" with
                one host, "process[learner@n]" per node of a cluster (a replay server on another node is a
                process of its own there)
    shards      (a sharded replay server, problem.shard_cost not empty) σ[K] ∈ {0,1} for K ∈ shard_counts():
                Σ_K σ[K] = 1; assign[replay kernel]: Σ_d x[k,d] = Σ_K K·σ[K] (x[k,d]: a shard on d, one device
                per shard, replay_same as before); shard_node[n]: Σ_{d∈n} x[replay_insert,d] ≤ 1 (a shard per
                node at most); shard_device[d,K]: x[replay_insert,d] + σ[K] ≤ 1 where d offers no shard of K.
                Each shard holds 1/K of the buffer and does 1/K of the inserts, samples and priority updates:
                every replay term (kernel, memory, and each transfer with a replay end) comes once per K,
                one shard's figure (shard_cost, shard_transfer, shard_nic; K = 1: cost, transfer, nic),
                coupled with σ[K] (accounting.py's ("k", K) literal; three literals are coupled in turn,
                binaries first, so every couple stays exact). A shard is a process of its own: role[replay]
                is one row per device (each shard ≤ P), process[learner@n] counts replay kernels only at
                K = 1, and latency is one row per shard device (the shards answer side by side). Every read
                touches every shard, so sharding adds messages: shard_transfer holds them as the launcher's
                client sends them
    threads     within a program T is a constant: learn's cost on a host device (`cpu`) is its T-thread
                figure, busy[host] counts T × it (T lanes busy while it runs), and the learner's process is T
                processes in contention's N below (and in `crowding`), so 2 threads beside 1 actor on 2 lanes
                are crowded. evaluate() reads the same rows, so it and the program agree for every T
    (e'') contention[learner], contention[actors]   (one host) processor sharing: the N = n + T processes of an
                option (its n actor processes, the learner's T threads) on the host's L lanes; when N > L each
                runs at L/N of a core while they all run. A one-thread process whose others do W lane-seconds
                an iteration is overlapped by them for W·N/((N − 1)·L) and runs at L/N meanwhile, so it loses
                κ₁·W, κ₁ = (N − L)/((N − 1)·L); a learner of T > 1 threads loses all of W (κ_T = 1): a parallel
                region ends only when each of its threads has run, and the thread another process displaced
                waits for it. With h[a, d] an actor's host work (actor_period[a, d] when act's device is on
                the host, else its env stepping, env_cost/n): contention[learner] = process[learner]'s terms +
                Σ_a,d κ_T[a]·n_a·h[a, d]·v[a, d]; contention[actors] per option that can crowd = actor_period[a,
                d] + κ₁[a]·(T·process[learner]'s terms + (n_a − 1)·h[a, d]), each coupled with v[a, d]. The
                option fixes N, so κ is a constant of it (accounting.sharing). Processor sharing rather than
                each process's whole work N/L as long, because a process only loses what the others run
                beside it: an extra actor whose work fits the lanes left costs little (measured: see
                docs/MEASUREMENTS.md, "What the model's rows rest on")
    contention[turns]   (one host, a one-thread learner beside n = L actor processes) the actors take turns with
                the learner when their host work outruns the lanes it leaves them: a learner woken while the
                actors hold every lane waits until they stop, and the actors, a segment ahead, then wait for its
                weights. r[a] binary, r[a] ≤ o[a],
                n·Σ_d h[a,d]·v[a,d] − (L − 1)·process[learner] ≤ M·r[a] with M = n·max_d h[a,d] (exact: r only
                raises the row, so the optimum sets it to 1 only where the actors outrun the learner, which is
                where evaluate's accounting.takes_turns says 1); the row: n·Σ_d h[a,d]·v[a,d]·r[a] +
                process[learner]'s terms × r[a]. The actors' part is all of their shares one after another, as
                real runs on the planner's scoreboard follow; stand-ins that spin a fixed time
                (benchmarks/turns.py) follow one share, since a real share also pays its wake-ups across the
                lanes and stretches where it overlaps the others (measured: see docs/MEASUREMENTS.md, "What the
                model's rows rest on")
    contention[learner@n], contention[actors@n], contention[replay@n]   (a cluster, where N is a decision)
                time slicing, bounded: each process's work on the host takes N/L as long. The processes: the
                actor processes on the node, the learner's process (on the node of learn's device, whatever
                that device: it runs on the host), each replay server process of its own there. The row of
                each process again, each term also × c[n] = (N − L)⁺/L: process[learner@n]'s terms;
                actor_period[a, d] for an option a that can crowd the node (n + T + 1 > L), all of it when
                act's device is on the host, else its env stepping; a shard's replay kernels on the host. c[n]
                is a variable with L·c[n] ≥ Σ_a,d∈n w[a,d] + R[n] − z[n] + T·Σ_d∈n x[learn,d] − L (T alone for a
                cluster's learner group, one learner on every node: `Problem.spread_group`), exact since
                c only raises bounds and actors[n] keeps N ≤ L + T (c ≤ 1, so its products with the
                placement's binaries are couples)
    (i) network[n,out], network[n,in]   (clusters) the seconds node n's network interface spends sending
                (receiving) the bytes of the edges that leave (enter) it, problem.nic, ≤ P: one interface
                per node, full duplex, shared by every edge that crosses it. Every edge between nodes pays the
                link's cost per message and bytes ÷ bandwidth (problem.transfer)
    (d) memory[d]   Σ memory of the kernels on d ≤ memory_bytes(d) (a shard: 1/K of the replay storage)
    mps_memory[r]  on a GPU r offered as MPS shares (a device of r with slicing "mps"): the processes on its MPS
                shares and on the whole GPU share the GPU's one memory (a MIG instance has its own, memory[d]):
                Σ_{d of r, MPS share or whole} (Σ_{k of the learner process} mem[k,d]·x[k,d]
                + Σ_a n(a)·mem[act,d]·v[a,d]) ≤ memory_bytes of the GPU (each actor process holds its own
                copy of the policy); memory[d] and mps_memory[r] are accounting.py's memory rows
    (j) slices[r]   on a GPU offered in slices (`partitioned`): Σ_d share(d)·used(d) ≤ 1, used(d) the instances of
                d in use: n + [learner process on d] where d gives each process an instance of its own
                (instances(d) > 1: an MPS share, a what-if MIG profile), else [anything on d] (the whole GPU,
                share 1, is thus used alone); count[d] used(d) ≤ instances(d); one_slice[d,d'] the learner
                process holds one device of the GPU; one_way[r] its slices in use are all MIG instances or all
                MPS shares (families.py `_slices`); instance[d] (a row of accounting.py) a slice's learner-process
                kernels (+ act when the actors share its one instance) ≤ P. busy[r] counts each kernel's seconds ×
                share(d), the SM-seconds of a slice
    (b) couple[a,b] y = a·b for a transfer whose two ends are both decided (y ≥ a + b − 1, y ≤ a, y ≤ b): exact
                for a binary b and a in [0, 1], a binary or f[d] = Σ_a w[a,d]/n, the share of the actor
                processes acting on d, by which each node's actors carry the edges with an actor end
    P = the largest of these lower bounds; E = Σ_r idle_w·P + (busy_w − idle_w)·busy[r]/lanes(r) (every
    node's idle power counts: a node of the cluster is on whether the plan uses it or not).

The rows are the local and Ray launchers', whose roles are processes side by side. The sequential launcher runs
every role in turn in one process, so its period is the sum of an iteration's work (accounting.in_turn), which
`pearl train` without a plan weighs against these rows (pearl.planner.make.default_launch).

Both objectives are solved lexicographically: throughput minimises P, then E among the plans with that P;
perf-per-watt minimises E, then P among the plans with that E (so every point of the front is non-dominated).
Ties are then resolved on purpose (TIES): among the plans with both figures optimal, the fewest actor
processes, then the fewest replay shards (an unsharded replay server wins a tie), then the fewest devices
used (u[d] ≥ every placement indicator on d, so actors spread over two nodes' devices lose a tie to the same
actors on one); power, E/P, is the same for every plan left by
then. On a profile where the actors' count does not move P (the learner binds), the plan starts one actor
process, not as many as the host has lanes.
Times are divided by the largest time in the problem and memory rows by the device's memory before PuLP sees
them, so the solver's absolute tolerances (1e-7) stay small against the numbers. PuLP rewrites the characters
``-+[] ->/`` in names, so every PuLP name is built from indices (``x_k1_d2``, ``load_r0``) and `Model.names`
maps constraint names back to the human labels (``load[cpu]``).

The modules: this one states the program and holds its entry points (solve, pareto, evaluate, the lexicographic
stages and the diagnosis of an infeasible problem); problem.py the numbers; build.py and cluster_problem.py
those numbers from the cost model; terms.py and accounting.py the rows; program.py the variables and the
literal → expression map (`Builder`, `Model`); families.py `build`, which calls one small function per
constraint family (`_assign`, `_memory`, `_actors`, and `_rows` for the bounds accounting.py lists, one function
there per family), each named after its row above, and with `actors` relaxed (a diagnosis) leaves out the
contention rows, which lean on it; solver.py runs HiGHS or CBC and reads the plan back; feasibility.py checks a
problem's ids and the families one fixed placement meets or not, for `evaluate`. These modules write nothing to
the process's standard output of their own accord; the CLI silences HiGHS's banner (pearl.cli.base.quiet_solver).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial

import pulp

from pearl.errors import ConfigError, PlanError, PlanInfeasible
from pearl.planner import accounting as acc
from pearl.planner.accounting import Row
from pearl.planner.families import build
from pearl.planner.feasibility import check, check_spread, feasible
from pearl.planner.problem import PLACED, REPLAY, ActorOption, Problem, Solution
from pearl.planner.program import Model, variable
from pearl.planner.solver import extract, pick_solver, run_solver, solver_label
from pearl.planner.terms import ACT, LEARN, Term, busy, multi_node

OBJECTIVES = ("throughput", "perf-per-watt")
#: how plans with equal objectives are told apart (plans report it)
TIES = "fewest actor processes, then fewest replay shards, then fewest devices (power is equal once P and E are)"
_LEX_SLACK = 1e-9  # relative slack on the first objective while the second one is minimised


def evaluate(
    problem: Problem, placement: dict[str, str], actors: ActorOption, spread: dict[str, int] | None = None,
    shards: tuple[str, ...] | list[str] = (),
) -> tuple[float, float, str] | None:
    """(period P, energy per iteration E, binding constraint) of one placement, or None if it is infeasible.

    `placement` maps every kernel of PLACED to a device id (an "env_step" entry, if any, is ignored). `spread`
    (clusters): act's device on each node that runs actor processes → how many (they add up to actors.n, and
    placement["act"] is one of them); default: all of them on placement["act"]. Infeasible: a kernel on a
    device that does not implement it (or `actors` not offered with act there), the replay kernels on
    different devices, memory over a device's capacity, or more actor processes on a node than its host's
    lanes. `shards` (a sharded replay server): the devices holding its K ≥ 2 shards, one per node; the
    placement's replay kernels name one of them; default (or one device): one replay server at the
    placement's. Infeasible too: shards on one node, or on a device that does not offer K shards. The bounds
    on P are the rows of pearl/planner/accounting.py, which the program also adds.
    """
    return evaluator(problem)(placement, actors, spread, shards)


def evaluator(problem: Problem) -> Callable[..., tuple[float, float, str] | None]:
    """`evaluate` for many placements of one problem: its rows (the bounds on P and the memory rows) are built
    once (the problem must not change while the evaluator is in use)."""
    check(problem)
    busy_terms = busy(problem)
    before, after = acc.period_rows(problem, busy_terms)
    return partial(_evaluate, problem, busy_terms, before + after, acc.memory_rows(problem))


def _evaluate(problem: Problem, busy_terms: dict[str, list[Term]], rows: list[Row], memory: list[acc.MemoryRow],
              placement: dict[str, str], actors: ActorOption, spread: dict[str, int] | None = None,
              shards: tuple[str, ...] | list[str] = ()) -> tuple[float, float, str] | None:
    where, spread, shards = _placed(problem, placement, actors, spread, shards)
    if not feasible(problem, memory, where, actors, spread, shards):
        return None
    bounds: dict[str, float] = {}
    for row in rows:  # rows sharing a label (one actor_period per option): the largest
        seconds = acc.value(problem, row.terms, where, actors, spread, shards)
        bounds[row.label] = max(bounds.get(row.label, 0.0), seconds / row.lanes)
    period = max(bounds.values())
    binding = next(name for name, value in bounds.items() if value == period)
    energy = sum(_resource_energy(problem, busy_terms, where, actors, spread, shards, period).values())
    return period, energy, binding


def _placed(problem: Problem, placement: dict[str, str], actors: ActorOption, spread: dict[str, int] | None,
            shards: tuple[str, ...] | list[str]) -> tuple[dict[str, str], dict[str, int], tuple[str, ...]]:
    """A placement as the rows read it: each kernel of PLACED's device, act's spread over the nodes, and the
    replay server's shards (none for one server); PlanError for a placement that lacks a kernel or puts replay
    on none of its shards."""
    missing = [k for k in PLACED if k not in placement]
    if missing:
        raise PlanError(f"placement lacks {', '.join(missing)}")
    where = {k: placement[k] for k in PLACED}
    spread = check_spread(problem, where, actors, spread)
    shards = tuple(shards) if len(shards) > 1 else ()
    if shards and where[REPLAY[0]] not in shards:
        raise PlanError(f"placement puts the replay kernels on {where[REPLAY[0]]}, which holds none of the "
                        f"shards {', '.join(shards)}")
    return where, spread, shards


def _resource_energy(problem: Problem, busy_terms: dict[str, list[Term]], where: dict[str, str],
                     actors: ActorOption, spread: dict[str, int], shards: tuple[str, ...],
                     period: float) -> dict[str, float]:
    """Each resource's joules in an iteration of `period`: idle the whole period, busy − idle for its lanes'
    share of busy seconds (the E of the formulation, by resource)."""
    return {r.id: r.idle_w * period + (r.busy_w - r.idle_w)
            * acc.value(problem, busy_terms[r.id], where, actors, spread, shards) / r.lanes
            for r in problem.resources}


def power_by_resource(problem: Problem, solution: Solution) -> dict[str, float]:
    """Each resource's mean watts over an iteration of a solution (they sum to its E ÷ P): what a run that reads
    some resources' energy counters and not others adds for the others."""
    where, spread, shards = _placed(problem, solution.placement, solution.actors, solution.spread or None,
                                    solution.shards)
    period = solution.period_s
    joules = _resource_energy(problem, busy(problem), where, solution.actors, spread, shards, period)
    return {r: j / period for r, j in joules.items()}


def _precheck(problem: Problem) -> None:
    """Families that fail on their own, found without a solver. Raises PlanInfeasible."""
    for k in PLACED:
        if not problem.allowed(k):
            raise PlanInfeasible(f"assign[{k}]: no device implements {k} (the profile has no cost for it anywhere)")
    replay_devs = sorted(set.intersection(*(set(problem.allowed(k)) for k in REPLAY)))
    if not replay_devs:
        raise PlanInfeasible(
            "replay_same: no device implements all of " + ", ".join(REPLAY) + ", and they must share one device"
        )

    def fits(kernels: tuple[str, ...], d: str) -> bool:
        need = sum(problem.memory.get((k, d), 0.0) for k in kernels)
        return need <= problem.device(d).memory_bytes * (1 + 1e-9)

    for kernels, devs in ((REPLAY, replay_devs), ((LEARN,), problem.allowed(LEARN)), ((ACT,), problem.allowed(ACT))):
        if not any(fits(kernels, d) for d in devs):
            what = "replay storage" if kernels == REPLAY else f"{kernels[0]}'s memory"
            raise PlanInfeasible(
                f"memory: the {what} fits on no device that implements it ({', '.join(devs)})"
            )
    hosts = sorted({n.host for n in problem.node_list()})
    lanes = sum(problem.resource(r).lanes for r in hosts)
    fewest = min(a.n for a in problem.actor_options())
    if fewest > lanes:
        where = f"the host resource {hosts[0]} has" if len(hosts) == 1 else f"the hosts {', '.join(hosts)} have"
        raise PlanInfeasible(f"actors: {where} {lanes} lanes, fewer than the smallest actor option "
                             f"({fewest} processes)")


def _diagnose(problem: Problem, solver: str, period_bound: float | None, time_limit: float) -> PlanInfeasible:
    """The first family whose relaxation makes the problem feasible, as a PlanInfeasible to raise."""
    if period_bound is not None:
        model = build(problem)
        model.lp.setObjective(model.period)
        if run_solver(model, solver, time_limit).feasible:
            placement, actors, spread, shards = extract(model)
            fastest = evaluate(problem, placement, actors, spread, shards)
            detail = f"; the fastest plan takes {fastest[0]:.4g} s, bound by {fastest[2]}" if fastest else ""
            return PlanInfeasible(f"period_bound: no plan reaches a period of {period_bound:.4g} s{detail}")
    host = max((n.host for n in problem.node_list()), key=lambda r: problem.resource(r).lanes)
    lanes = problem.resource(host).lanes
    why = {
        "memory": "the kernels' memory needs cannot all fit on the devices that implement them at once",
        "actors": f"the host resource {host} has {lanes} lanes, too few for the actor processes plus the "
        "replay/learner roles that must then run on it",
    }
    for relax in (("memory",), ("actors",), ("memory", "actors")):
        model = build(problem, relax=frozenset(relax))
        model.lp.setObjective(model.period)
        if run_solver(model, solver, time_limit).feasible:
            return PlanInfeasible(" and ".join(f"{family}: {why[family]}" for family in relax))
    return PlanInfeasible("assign/replay_same: no placement of the kernels satisfies the constraints")


def solve(
    problem: Problem,
    objective: str = "throughput",
    period_bound: float | None = None,
    solver: str | None = None,
    time_limit: float = 30.0,
) -> Solution:
    """The optimal plan: "throughput" minimises the period P, "perf-per-watt" the energy per iteration E.

    Ties are broken by the other objective (a second solve). `period_bound` (seconds) caps P for either objective.
    `solver` forces "highs" or "cbc"; the default is HiGHS when highspy is installed. Raises PlanInfeasible
    (the message names the family that cannot be met), PlanError (the solver stopped without a plan) or
    ConfigError (an unknown objective or solver).
    """
    if objective not in OBJECTIVES:
        raise ConfigError(f"unknown objective {objective!r}: use one of {', '.join(OBJECTIVES)}")
    if period_bound is not None and not period_bound > 0:
        raise ConfigError(f"period_bound must be positive, got {period_bound}")
    name = pick_solver(solver)
    check(problem)
    start = time.perf_counter()
    _precheck(problem)
    model = build(problem)
    s = model.scale
    if period_bound is not None:
        model.lp.addConstraint(model.period <= period_bound / s, "period_bound")
        model.names["period_bound"] = "period_bound"
    throughput = objective == "throughput"
    first, second = (model.period, model.energy) if throughput else (model.energy, model.period)
    model.lp.setObjective(first)
    run = run_solver(model, name, time_limit)
    if not run.feasible:
        raise _diagnose(problem, name, period_bound, time_limit)
    placement, actors, spread, shards = extract(model)
    result = evaluate(problem, placement, actors, spread, shards)
    if result is None:
        raise PlanError(f"the {solver_label(name)} solution violates a constraint by more than the tolerance")

    if run.status == "Optimal":
        left = time_limit - (time.perf_counter() - start)
        placement, actors, spread, shards, result = _lexicographic(
            problem, model, name, (first, second), throughput, (placement, actors, spread, shards, result), left)

    period, energy, binding = result
    return Solution(
        placement=placement,
        actors=actors,
        period_s=period,
        energy_j=energy,
        status=run.status,
        solver=solver_label(name),
        gap=run.gap,
        solve_s=time.perf_counter() - start,
        binding=binding,
        spread=spread if multi_node(problem) else {},
        shards=shards,
    )


def _lexicographic(problem: Problem, model: Model, solver: str, objectives: tuple, throughput: bool, best: tuple,
                   remaining: float) -> tuple[dict[str, str], ActorOption, dict[str, int], tuple[str, ...],
                                              tuple[float, float, str]]:
    """The optimum of the first objective, then among its plans the least of the second (E for throughput,
    P for perf-per-watt), then among those the simplest: TIES. Each stage holds the stages before it to
    their optimum within _LEX_SLACK; a stage the solver cannot finish in the time left keeps the plan so far."""
    placement, actors, spread, shards, result = best
    first, second = objectives
    s = model.scale
    stages = [(first, 0 if throughput else 1), (second, 1 if throughput else 0), (_simplicity(problem, model), None)]
    deadline = time.perf_counter() + remaining
    for k in range(1, len(stages)):
        left = deadline - time.perf_counter()
        if left <= 0.05:
            break
        held, i = stages[k - 1]
        model.lp.addConstraint(held <= result[i] / s * (1 + _LEX_SLACK) + 1e-12, f"lexicographic_{k}")
        model.lp.setObjective(stages[k][0])
        try:
            run = run_solver(model, solver, left)
        except PlanError:
            break
        if not (run.feasible and run.status == "Optimal"):
            break
        placement2, actors2, spread2, shards2 = extract(model)
        result2 = evaluate(problem, placement2, actors2, spread2, shards2)
        if result2 is None or any(result2[j] > result[j] * (1 + 1e-7) + 1e-15 for _, j in stages[:k]):
            break
        placement, actors, spread, shards, result = placement2, actors2, spread2, shards2, result2
    return placement, actors, spread, shards, result


def _simplicity(problem: Problem, model: Model) -> pulp.LpAffineExpression:
    """TIES as one objective: actor processes × (nodes + 1)·(devices + 1) + replay shards × (devices + 1) +
    devices used, so that fewer actor processes always wins, then fewer shards (an unsharded replay server
    wins a tie), and fewer devices decides among equal counts. u[d] ≥ every placement indicator on d."""
    used = []
    for j, d in enumerate(problem.devices):
        on_d = [var for (_, dd), var in model.x.items() if dd == d.id] + \
               [var for (_, dd), var in model.v.items() if dd == d.id]
        if not on_d:
            continue
        u = variable(model.lp, f"u_d{j}", 0, 1, pulp.LpContinuous)
        for n, var in enumerate(on_d):
            model.lp.addConstraint(u - var >= 0, f"uses_d{j}_{n}")
        used.append(u)
    dev = len(problem.devices) + 1
    shards = pulp.lpSum(K * var for K, var in model.sigma.items())
    return (len(problem.node_list()) + 1) * dev * model.processes + dev * shards + pulp.lpSum(used)


def pareto(
    problem: Problem,
    epsilons=(0, 0.05, 0.1, 0.2, 0.5, 1.0),
    *,
    solver: str | None = None,
    time_limit: float = 30.0,
) -> list[Solution]:
    """The period/energy front: P* from the throughput plan, then min E subject to P ≤ (1+ε)·P* for each ε.

    The first point is the throughput plan (the least energy among the fastest plans, which is the ε = 0 point).
    Points are in order of period; a point that repeats a placement, or that does not use strictly less energy
    than the point before it (a tie, or a plan dominated by a faster one), is left out, so along the front
    periods increase and energies decrease.
    """
    eps = sorted({float(e) for e in epsilons})
    if any(e < 0 or not math.isfinite(e) for e in eps):
        raise ConfigError(f"pareto epsilons must be finite and non-negative, got {list(epsilons)}")
    fastest = solve(problem, "throughput", solver=solver, time_limit=time_limit)
    points = [fastest]
    for e in eps:
        if e == 0:
            continue
        bound = (1 + e) * fastest.period_s * (1 + _LEX_SLACK)
        points.append(solve(problem, "perf-per-watt", period_bound=bound, solver=solver, time_limit=time_limit))
    front = [fastest]
    seen = {(tuple(fastest.placement.items()), fastest.actors, tuple(sorted(fastest.spread.items())), fastest.shards)}
    for point in sorted(points[1:], key=lambda p: (p.period_s, p.energy_j)):
        key = (tuple(point.placement.items()), point.actors, tuple(sorted(point.spread.items())), point.shards)
        if key in seen or point.energy_j >= front[-1].energy_j * (1 - 1e-9):
            continue
        seen.add(key)
        front.append(point)
    return front
