"""The integer program of pearl/planner/problem.py, solved with PuLP (HiGHS where installed, else CBC).

    solve(problem, objective="throughput" | "perf-per-watt", period_bound=None, solver=None, time_limit=30.0)
    pareto(problem, epsilons=(0, 0.05, 0.1, 0.2, 0.5, 1.0))       the energy/period front
    evaluate(problem, placement, actors, spread=None, shards=()) -> (period, energy, binding) | None
                                                                                       one fixed placement
    evaluator(problem) -> the same for many placements, the rows built once

Exact accounting, written once as rows of terms in pearl/planner/accounting.py, which the program and
`evaluate` both read (tests/test_planner_ilp.py and tests/test_planner_cluster.py re-state it for their oracles):
    busy[r]     Σ cost of the replay kernels and learn on r (learn with the learner's weight publishes
                publish[a, d(learn)], which build.py prices from the schedule; where the actor options price
                them apart, each option's is coupled with o[a] = [the option is a]: Σ_d v[a,d], or s[a]
                in a cluster; every row that counts learn counts them), + act_cost[a, d(act)] if d(act) is on r,
                + env_cost on the host, + each positive edge transfer once on the resource of each end (once
                only when both ends sit on one resource). In a cluster each node runs w[a,d] of the n
                actor processes (act on d, a device of the node; "env_step" at its host device), each an equal
                share of the env steps: w[a,d]/n of act_cost[a,d], and f[d] = Σ_a w[a,d]/n of the node's
                env_cost on its host and of every transfer with an actor end (accounting.py's count and share)
    load[r]     busy[r] ≤ lanes(r)·P
    role[name]  Σ its kernels' costs + transfers of the edges with exactly one end in the role ≤ P
    actors[n]   Σ_a,d∈n w[a,d] + R[n] − z[n] ≤ lanes(host of n): one lane per actor process and per replay
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
    actor_period[a]  actor_period[a, d(act)] ≤ P; actor_period[n] for each node of a cluster with actors
    latency     (no prefetch) sample + learn + priority update + the transfers sample→learn, learn→priority ≤ P
    process     per node, Σ cost of the replay kernels and learn placed on devices of its host resource
                + the transfers sample→learn, learn→priority ≤ P: the learner process runs the replay manager
                and the learner under one interpreter lock, and on the host's own cores (cpu, PoCL) their
                work does not overlap (measured: replay on PoCL beside learn on cpu ran at 0.3-0.4 × the
                overlapped prediction); an accelerator's device time still overlaps. "process[learner]" with
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
                K = 1, and latency is one row per shard device (the shards answer side by side). The
                messages every shard adds are in shard_transfer (build.py counts them as the launcher sends
                them)
    threads     T = problem.learner_threads, the learner's CPU threads (torch's intra-op threads), a decision
                taken outside this program: make.py solves one program per T ∈ {1, …, lanes of the host} for
                which the profile times learn (CostModel.thread_counts; the profiler times it at 1 and at the
                host's lanes) and keeps the least P (perf-per-watt: E), ties to fewer threads, as it chooses the
                envs per actor. Within a program T is a constant: learn's cost on a host device (`cpu`) is its
                T-thread figure, busy[host] counts T × it (T lanes busy while it runs), and the learner's
                process is T processes in contention's N below (and in `crowding`), so 2 threads beside 1 actor
                on 2 lanes are crowded. evaluate() reads the same rows, so it and the program agree for every T
    contention[learner], contention[actors]   (one host) processor sharing: the N = n + T processes of an
                option (its n actor processes, the learner's T threads) on the host's L lanes; when N > L each
                runs at L/N of a core while they all run. A one-thread process whose others do W lane-seconds
                an iteration is overlapped by them for W·N/((N − 1)·L) and runs at L/N meanwhile, so it loses
                κ₁·W, κ₁ = (N − L)/((N − 1)·L); a learner of T > 1 threads loses all of W (κ_T = 1): a parallel
                region ends only when each of its threads has run, and the thread another process displaced
                waits for it. With h[a, d] an actor's host work (actor_period[a, d] when act's device is on
                the host, else its env stepping, env_cost/n): contention[learner] = process[learner]'s terms +
                Σ_a,d κ_T[a]·n_a·h[a, d]·v[a, d]; contention[actors] per option that can crowd = actor_period[a,
                d] + κ₁[a]·(T·process[learner]'s terms + (n_a − 1)·h[a, d]), each coupled with v[a, d]. The
                option fixes N, so κ is a constant of it (accounting.sharing). Measured on the 2-core VM:
                2 actors ran at 0.96-1.03 × 1 actor on 11 of 16 layouts (docs/MEASUREMENTS.md), where the
                time-slicing charge of a whole process's work (N/L as long) had predicted 0.67-0.78 ×
    contention[turns]   (one host, a one-thread learner beside n = L actor processes) the actors take turns with
                the learner when their host work outruns the lanes it leaves them: r[a] binary, r[a] ≤ o[a],
                n·Σ_d h[a,d]·v[a,d] − (L − 1)·process[learner] ≤ M·r[a] with M = n·max_d h[a,d] (exact: r only
                raises the row, so the optimum sets it to 1 only where the actors outrun the learner, which is
                where evaluate's accounting.takes_turns says 1); the row: Σ_d h[a,d]·v[a,d]·r[a] +
                process[learner]'s terms × r[a]
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
    network[n,out], network[n,in]   (clusters) the seconds node n's network interface spends sending
                (receiving) the bytes of the edges that leave (enter) it, problem.nic, ≤ P: one interface
                per node, full duplex, shared by every edge that crosses it
    memory[d]   Σ memory of the kernels on d ≤ memory_bytes(d);  replay_same: the replay kernels share one device
    mps_memory[r]  on a GPU r offered as MPS shares (a device of r with slicing "mps"): the processes on its MPS
                shares and on the whole GPU share the GPU's one memory (a MIG instance has its own, memory[d]):
                Σ_{d of r, MPS share or whole} (Σ_{k of the learner process} mem[k,d]·x[k,d]
                + Σ_a n(a)·mem[act,d]·v[a,d]) ≤ memory_bytes of the GPU (each actor process holds its own
                copy of the policy); memory[d] and mps_memory[r] are accounting.py's memory rows
    slices[r]   on a GPU offered in slices (`partitioned`): Σ_d share(d)·used(d) ≤ 1, used(d) the instances of
                d in use: n + [learner process on d] where d gives each process an instance of its own
                (instances(d) > 1: an MPS share, a what-if MIG profile), else [anything on d] (the whole GPU,
                share 1, is thus used alone); count[d] used(d) ≤ instances(d); one_slice[d,d'] the learner
                process holds one device of the GPU; one_way[r] its slices in use are all MIG instances or all
                MPS shares (`_slices`); instance[d] (a row of accounting.py) a slice's learner-process kernels
                (+ act when the actors share its one instance) ≤ P. busy[r] counts each kernel's seconds ×
                share(d), the SM-seconds of a slice
    couple[a,b] y = a·b for a transfer whose two ends are both decided (y ≥ a + b − 1, y ≤ a, y ≤ b): exact
                for a binary b and a in [0, 1], a binary or f[d] = Σ_a w[a,d]/n, the share of the actor
                processes acting on d, by which each node's actors carry the edges with an actor end
    P = the largest of these lower bounds; E = Σ_r idle_w·P + (busy_w − idle_w)·busy[r]/lanes(r) (every
    node's idle power counts: a node of the cluster is on whether the plan uses it or not).

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
``-+[] ->/`` in names, so every PuLP name is built from indices (``x_k1_d2``, ``load_r0``) and `_Model.names`
maps constraint names back to the human labels (``load[cpu]``). `_build` calls one small function per
constraint family (`_assign`, `_memory`, `_actors`, and `_rows` for the bounds accounting.py lists, one
function there per family), each named after its row above; with `actors` relaxed (a diagnosis) the
contention rows, which lean on it, are left out. This module writes nothing to the process's standard output of
its own accord; the CLI silences HiGHS's banner (pearl.cli.base.quiet_solver).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import pulp

from pearl.errors import ConfigError, PlanError, PlanInfeasible
from pearl.planner import accounting as acc
from pearl.planner.accounting import ACT, ENV, LEARN, Literal, Row, Term
from pearl.planner.problem import PLACED, REPLAY, ActorOption, Problem, Solution

OBJECTIVES = ("throughput", "perf-per-watt")
SOLVERS = ("highs", "cbc")
#: how plans with equal objectives are told apart (plans report it)
TIES = "fewest actor processes, then fewest replay shards, then fewest devices (power is equal once P and E are)"
_MIP_GAP_REL = 1e-9  # ask the solvers for a proof of optimality, not their defaults (HiGHS stops at 1e-4)
_MIP_GAP_ABS = 1e-10
#: HiGHS's feasibility tolerances (1e-6 and 1e-7 by default) against P of order 1e-3 after `_time_scale`: at the
#: defaults a row could be violated by 1e-4 of P, and a plan 4e-5 slower than the optimum came back
_FEASIBILITY = 1e-9
_LEX_SLACK = 1e-9  # relative slack on the first objective while the second one is minimised


# ---------------------------------------------------------------------------------------------------------------
# accounting of one fixed placement


def _check(problem: Problem) -> None:
    """Structural checks: every id the numbers refer to exists. Raises PlanError."""
    resources = {r.id: r for r in problem.resources}
    devices = {d.id: d for d in problem.devices}
    if len(resources) != len(problem.resources):
        raise PlanError("problem: two resources share one id")
    if len(devices) != len(problem.devices):
        raise PlanError("problem: two devices share one id")
    for r in problem.resources:
        if r.lanes < 1:
            raise PlanError(f"problem: resource {r.id} has {r.lanes} lanes (needs at least 1)")
        if r.idle_w < 0 or r.busy_w < 0:
            raise PlanError(f"problem: resource {r.id} has negative power")
    for d in problem.devices:
        if d.resource not in resources:
            raise PlanError(f"problem: device {d.id} is on unknown resource {d.resource}")
    if problem.host not in resources:
        raise PlanError(f"problem: the host resource {problem.host} is not among the resources")
    if problem.host_device not in devices:
        raise PlanError(f"problem: the host device {problem.host_device} is not among the devices")
    for (k, d) in problem.cost:
        if d not in devices:
            raise PlanError(f"problem: cost of {k} on unknown device {d}")
    for (a, d) in problem.act_cost:
        if d not in devices:
            raise PlanError(f"problem: act cost on unknown device {d}")
        if (a, d) not in problem.actor_period:
            raise PlanError(f"problem: no actor_period for {a.n} actors × {a.envs} envs with act on {d}")
    for (_, d) in problem.memory:
        if d not in devices:
            raise PlanError(f"problem: memory need on unknown device {d}")
    lanes = min(problem.resource(n.host).lanes for n in problem.node_list()) if problem.host in resources else 1
    if isinstance(problem.learner_threads, bool) or not 1 <= problem.learner_threads <= lanes:
        raise PlanError(f"problem: the learner's {problem.learner_threads} threads must be 1 to the host's {lanes} "
                        "lanes")
    for (_, d) in problem.publish:
        if ("learn", d) not in problem.cost:
            raise PlanError(f"problem: weight publishes of learn on {d}, which does not implement learn")
    names = set()
    for e in problem.edges:
        if e.name in names:
            raise PlanError(f"problem: two edges are named {e.name}")
        names.add(e.name)
        for end in (e.src, e.dst):
            if end != ENV and end not in PLACED:
                raise PlanError(f"problem: edge {e.name} ends at {end}, which is neither env_step nor a placed kernel")
    for (name, d, d2) in [*problem.transfer, *problem.nic]:
        if d not in devices or d2 not in devices:
            raise PlanError(f"problem: transfer of {name} between unknown devices {d} → {d2}")
    _check_nodes(problem, resources, devices)
    _check_shards(problem, devices)


def _check_shards(problem: Problem, devices: dict) -> None:
    """A shard sits on a whole device that holds the unsharded replay server too, in a cluster, K ≥ 2."""
    for (k, d, K) in problem.shard_cost:
        if d not in devices or devices[d].is_slice or (k, d) not in problem.cost or K < 2 or k not in REPLAY:
            raise PlanError(f"problem: shard cost of {k} on {d} for {K} shards: a replay kernel on a whole "
                            "device that implements it, K ≥ 2")
        if K > len(problem.node_list()):
            raise PlanError(f"problem: {K} shards on {len(problem.node_list())} nodes (one shard per node)")
    for (name, d, d2, K) in [*problem.shard_transfer, *problem.shard_nic]:
        if d not in devices or d2 not in devices or K < 2:
            raise PlanError(f"problem: shard transfer of {name} between unknown devices {d} → {d2}")


def _check_nodes(problem: Problem, resources: dict, devices: dict) -> None:
    nodes = problem.node_list()
    if len({n.name for n in nodes}) != len(nodes):
        raise PlanError("problem: two nodes share one name")
    for n in nodes:
        if n.host not in resources or n.host_device not in devices:
            raise PlanError(f"problem: node {n.name!r} has an unknown host {n.host} or host device {n.host_device}")
    for d in problem.devices:
        if d.node not in {n.name for n in nodes}:
            raise PlanError(f"problem: device {d.id} is on unknown node {d.node!r}")


LEARNER_PROCESS = acc.LEARNER_PROCESS


def partitioned(problem: Problem) -> set[str]:
    """The resources offered in slices: those with a device of share below 1 or of several instances."""
    return {d.resource for d in problem.devices if d.is_slice}


def _slices_fit(problem: Problem, where: dict[str, str], spread: dict[str, int]) -> bool:
    """slices[r], count[d], one_slice[d,d'] and one_way[r] for one placement."""
    cut = partitioned(problem)
    if not cut:
        return True
    learner_devices = {where[k] for k in LEARNER_PROCESS}
    used: dict[str, int] = {}
    for dev in problem.devices:
        if dev.resource not in cut:
            continue
        if dev.instances > 1:  # each process holds its own instance
            used[dev.id] = spread.get(dev.id, 0) + (dev.id in learner_devices)
        else:
            used[dev.id] = int(dev.id in where.values() or dev.id in spread)
        if used[dev.id] > dev.instances:
            return False
    for r in cut:
        if sum(d.share * used[d.id] for d in problem.devices if d.resource == r) > 1 + 1e-9:
            return False
        if len({d.slicing for d in problem.devices if d.resource == r and used[d.id] and d.slicing}) > 1:
            return False
        if len({d for d in learner_devices if problem.device(d).resource == r}) > 1:
            return False
    return True


def _shards_fit(problem: Problem, shards: tuple[str, ...]) -> bool:
    """shard_node[n] and shard_device[d,K]: K ≥ 2 shards on devices of distinct nodes that offer K shards."""
    if not shards:
        return True
    nodes = [problem.device(d).node for d in shards]
    return len(set(nodes)) == len(nodes) and \
        all((k, d, len(shards)) in problem.shard_cost for k in REPLAY for d in shards)


def _feasible(problem: Problem, memory: list[acc.MemoryRow], where: dict[str, str], actors: ActorOption,
              spread: dict[str, int], shards: tuple[str, ...] = ()) -> bool:
    """assign (allowed devices), replay_same, shards, memory[d] and mps_memory[r] (`memory`: the problem's
    acc.memory_rows), spread, actors[n] and the slices families of one placement."""
    for k, d in where.items():
        if k != ACT and (k, d) not in problem.cost:
            return False
    if any((actors, d) not in problem.act_cost for d in spread):
        return False
    if len({where[k] for k in REPLAY}) != 1 or not _shards_fit(problem, shards):
        return False
    for row in memory:
        if acc.held(problem, row, where, actors, spread, shards) > row.capacity * (1 + 1e-9):
            return False
    per_node: dict[str, int] = {}
    for d, count in spread.items():
        per_node[problem.node_of(d).name] = per_node.get(problem.node_of(d).name, 0) + count
    for n in acc.server_nodes(problem, where, shards):
        per_node[n] = per_node.get(n, 0) + 1
    if any(count > problem.resource(problem.node(n).host).lanes for n, count in per_node.items()):
        return False
    return _slices_fit(problem, where, spread)


def _check_spread(problem: Problem, placement: dict[str, str], actors: ActorOption,
                  spread: dict[str, int] | None) -> dict[str, int]:
    """The spread of a fixed placement (default: every actor process on placement["act"]); PlanError when it
    does not add up to the option's processes, names no act device, or puts two act devices on one node."""
    if spread is None:
        return {placement[ACT]: actors.n}
    spread = {d: int(n) for d, n in spread.items() if n}
    if sum(spread.values()) != actors.n or any(n < 0 for n in spread.values()):
        raise PlanError(f"spread {spread} does not split {actors.n} actor processes")
    if placement[ACT] not in spread:
        raise PlanError(f"placement puts act on {placement[ACT]}, which spread {spread} gives no actor process")
    nodes = [problem.node_of(d).name for d in spread]
    if len(set(nodes)) != len(nodes):
        raise PlanError(f"spread {spread} gives one node two act devices")
    return spread


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
    _check(problem)
    busy = acc.busy(problem)
    before, after = acc.period_rows(problem, busy)
    return partial(_evaluate, problem, busy, before + after, acc.memory_rows(problem))


def _evaluate(problem: Problem, busy: dict[str, list[Term]], rows: list[Row], memory: list[acc.MemoryRow],
              placement: dict[str, str], actors: ActorOption, spread: dict[str, int] | None = None,
              shards: tuple[str, ...] | list[str] = ()) -> tuple[float, float, str] | None:
    missing = [k for k in PLACED if k not in placement]
    if missing:
        raise PlanError(f"placement lacks {', '.join(missing)}")
    where = {k: placement[k] for k in PLACED}
    spread = _check_spread(problem, where, actors, spread)
    shards = tuple(shards) if len(shards) > 1 else ()
    if shards and where[REPLAY[0]] not in shards:
        raise PlanError(f"placement puts the replay kernels on {where[REPLAY[0]]}, which holds none of the "
                        f"shards {', '.join(shards)}")
    if not _feasible(problem, memory, where, actors, spread, shards):
        return None
    bounds: dict[str, float] = {}
    for row in rows:  # rows sharing a label (one actor_period per option): the largest
        seconds = acc.value(problem, row.terms, where, actors, spread, shards)
        bounds[row.label] = max(bounds.get(row.label, 0.0), seconds / row.lanes)
    period = max(bounds.values())
    binding = next(name for name, value in bounds.items() if value == period)
    energy = sum(r.idle_w * period + (r.busy_w - r.idle_w)
                 * acc.value(problem, busy[r.id], where, actors, spread, shards) / r.lanes
                 for r in problem.resources)
    return period, energy, binding


# ---------------------------------------------------------------------------------------------------------------
# the program


@dataclass
class _Model:
    lp: pulp.LpProblem
    period: pulp.LpVariable
    energy: pulp.LpAffineExpression
    x: dict[tuple[str, str], pulp.LpVariable]  # (kernel, device) for the kernels other than act
    v: dict[tuple[ActorOption, str], pulp.LpVariable]  # (actor option, act's device)
    scale: float  # seconds per model time unit
    names: dict[str, str] = field(default_factory=dict)  # PuLP constraint name -> human label
    #: (clusters) the option chosen, and the actor processes of each option with act on each device
    s: dict[ActorOption, pulp.LpVariable] = field(default_factory=dict)
    w: dict[tuple[ActorOption, str], pulp.LpVariable] = field(default_factory=dict)
    processes: pulp.LpAffineExpression | None = None  # the actor processes the plan starts (TIES)
    sigma: dict[int, pulp.LpVariable] = field(default_factory=dict)  # (sharded replay) σ[K]


def _time_scale(problem: Problem) -> float:
    times = [problem.env_cost, *problem.cost.values(), *problem.act_cost.values()]
    times += [*problem.actor_period.values(), *problem.transfer.values()]
    times += [*problem.shard_cost.values(), *problem.shard_transfer.values(), *problem.publish.values()]
    top = max((t for t in times if math.isfinite(t)), default=0.0)
    return top if top > 0 else 1.0


def _var(lp: pulp.LpProblem, name: str, low: float | None, up: float | None, cat: str) -> pulp.LpVariable:
    """One variable, made the PuLP 4 way where this PuLP has it (a bare LpVariable is deprecated in PuLP 3.x)."""
    if hasattr(lp, "add_variable"):
        return lp.add_variable(name, lowBound=low, upBound=up, cat=cat)
    return pulp.LpVariable(name, lowBound=low, upBound=up, cat=cat)


def _expr(value: object) -> pulp.LpAffineExpression:
    if isinstance(value, (int, float)):
        return pulp.LpAffineExpression(constant=value)
    return pulp.LpAffineExpression(value)


@dataclass
class _Builder:
    """The program while it is being built: its variables, and the literal → expression map the rows use."""

    problem: Problem
    lp: pulp.LpProblem
    period: pulp.LpVariable
    scale: float
    x: dict[tuple[str, str], pulp.LpVariable] = field(default_factory=dict)
    v: dict[tuple[ActorOption, str], pulp.LpVariable] = field(default_factory=dict)
    s: dict[ActorOption, pulp.LpVariable] = field(default_factory=dict)
    w: dict[tuple[ActorOption, str], pulp.LpVariable] = field(default_factory=dict)
    acting: dict[str, pulp.LpVariable] = field(default_factory=dict)
    sigma: dict[int, pulp.LpVariable] = field(default_factory=dict)  # σ[K]: the replay server is K shards
    #: the linearised product of two literals, made once (couple[...])
    products: dict[frozenset, pulp.LpVariable] = field(default_factory=dict)
    #: (clusters) R[n] − z[n], the replay server processes of their own on node n, and c[n], made once
    servers: dict[int, pulp.LpAffineExpression] = field(default_factory=dict)
    crowds: dict[str, pulp.LpAffineExpression | pulp.LpVariable] = field(default_factory=dict)
    #: (one host) r[a]: option a's actors take turns with the learner, made once
    turn: dict[ActorOption, pulp.LpVariable] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    relax: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.didx = {d.id: j for j, d in enumerate(self.problem.devices)}
        self.options = self.problem.actor_options()
        self.multi = acc.multi_node(self.problem)

    def cap(self, a: ActorOption, d: str) -> int:
        """The most processes of option a that d's node may run: its host's lanes (unless `actors` is relaxed)."""
        if "actors" in self.relax:
            return a.n
        return min(a.n, self.problem.resource(self.problem.node_of(d).host).lanes)

    def count(self, a: ActorOption, d: str) -> pulp.LpAffineExpression | int:
        """w[a,d]: the processes of option a acting on d (n·v[a,d] with one host)."""
        if (a, d) not in self.v:
            return 0
        return self.w[(a, d)] if self.multi else a.n * self.v[(a, d)]

    def share(self, d: str) -> pulp.LpAffineExpression | int:
        """f[d]: the part of the actor processes acting on d, Σ_a w[a,d]/n ([act on d] with one host)."""
        if not self.multi:
            return self.on(ACT, d)
        return pulp.lpSum(var * (1.0 / a.n) for (a, dd), var in self.w.items() if dd == d)

    def processes(self) -> pulp.LpAffineExpression:
        """The actor processes the plan starts."""
        if self.multi:
            return pulp.lpSum(a.n * var for a, var in self.s.items())
        return pulp.lpSum(a.n * var for (a, _), var in self.v.items())

    def add(self, constraint: pulp.LpConstraint, name: str, label: str) -> None:
        self.lp.addConstraint(constraint, name)
        self.names[name] = label

    def on(self, k: str, d: str) -> pulp.LpAffineExpression | int:
        """x[k,d] as an expression, or the constant 0 (a device k is not allowed on)."""
        if k == ACT:
            terms = [self.v[(a, d)] for a in self.options if (a, d) in self.v]
            return pulp.lpSum(terms) if terms else 0
        var = self.x.get((k, d))
        return 0 if var is None else var

    def option(self, a: ActorOption) -> pulp.LpAffineExpression | pulp.LpVariable:
        """[the plan's actor option is a]: s[a] in a cluster, Σ_d v[a,d] with one host (binary-valued)."""
        if self.multi:
            return self.s[a]
        return pulp.lpSum(var for (aa, _), var in self.v.items() if aa == a)

    def actors_on(self, node: str) -> pulp.LpAffineExpression:
        """The actor processes on a node: Σ_{a, d on it} w[a,d]."""
        return pulp.lpSum(self.count(a, d) for (a, d) in self.v if self.problem.device(d).node == node)

    def server_processes(self, ni: int) -> pulp.LpAffineExpression:
        """(clusters) R[n] − z[n]: a replay server (or a shard) on node n, unless it runs in the learner's
        process there (z[n] ≤ R[n], L[n], σ[1]: exact, since z only loosens the rows it is in)."""
        if ni not in self.servers:
            node = self.problem.node_list()[ni]
            mine = [d.id for d in self.problem.devices if d.node == node.name]
            server = pulp.lpSum(self.on(REPLAY[0], d) for d in mine)
            joined = _var(self.lp, f"joined_n{ni}", 0, 1, pulp.LpContinuous)  # z[n]: the server is in the learner
            self.add(joined - server <= 0, f"joined_r_n{ni}", f"joined[{node.name}]")
            self.add(joined - pulp.lpSum(self.on(LEARN, d) for d in mine) <= 0, f"joined_l_n{ni}",
                     f"joined[{node.name}]")
            if 1 in self.sigma:
                self.add(joined - self.sigma[1] <= 0, f"joined_k_n{ni}", f"joined[{node.name}]")
            elif self.sigma:  # every K offered shards: no server joins the learner
                self.add(joined <= 0, f"joined_k_n{ni}", f"joined[{node.name}]")
            self.servers[ni] = server - joined
        return self.servers[ni]

    def crowd(self, name: str) -> pulp.LpVariable:
        """c[n] (clusters): a variable in [0, 1] with L·c[n] ≥ N[n] − L, N[n] = the node's actor processes + its
        replay server processes of their own + T·[learn on n] (T on every node for a cluster's
        learner group, `Problem.spread_group`) (exact: c only raises the rows it is in, and
        actors[n] keeps N[n] ≤ L + T ≤ 2L). One host's contention rows need no c (accounting.sharing)."""
        if name not in self.crowds:
            nodes = self.problem.node_list()
            ni = next(i for i, n in enumerate(nodes) if n.name == name)
            lanes = self.problem.resource(nodes[ni].host).lanes
            c = _var(self.lp, f"crowd_n{ni}", 0, 1, pulp.LpContinuous)
            learner = self.problem.learner_threads if self.problem.spread_group else \
                self.problem.learner_threads * pulp.lpSum(self.on(LEARN, d.id) for d in self.problem.devices
                                                          if d.node == name)
            processes = self.actors_on(name) + self.server_processes(ni) + learner
            self.add(lanes * c - processes >= -lanes, f"crowd_n{ni}", f"crowd[{name}]")
            self.crowds[name] = c
        return self.crowds[name]

    def turns(self, a: ActorOption) -> pulp.LpVariable:
        """r[a] (one host): a binary with r[a] ≤ o[a] and n·Σ_d h[a,d]·v[a,d] − (L − 1)·process[learner] ≤
        M·r[a], M = n·max_d h[a,d]: the actors outrunning the learner's spare lanes force it to 1, and nothing
        else does (it only raises the row it is in, so the optimum leaves it at 0 where it may)."""
        if a not in self.turn:
            ai = self.options.index(a)
            r = _var(self.lp, f"turns_a{ai}", 0, 1, pulp.LpBinary)
            works, own = acc.turn_work(self.problem, a)
            lanes = self.problem.resource(self.problem.host).lanes
            actors = pulp.lpSum(a.n * h / self.scale * self.v[(a, d)] for d, h in works.items() if (a, d) in self.v)
            big = a.n * max(works.values()) / self.scale
            label = f"turns[{a.n}x{a.envs}]"
            self.add(r - self.option(a) <= 0, f"turns_o_a{ai}", label)
            self.add(actors - (lanes - 1) * self.seconds(own) - big * r <= 0, f"turns_w_a{ai}", label)
            self.turn[a] = r
        return self.turn[a]

    def literal(self, lit: Literal) -> pulp.LpAffineExpression | int:
        if lit[0] == "c":
            return self.crowd(lit[1])
        if lit[0] == "r":
            return self.turns(lit[1])
        if lit[0] == "o":
            return self.option(lit[1])
        if lit[0] == "k":
            return self.sigma[lit[1]]
        if lit[0] == "x":
            return self.on(lit[1], lit[2])
        if lit[0] == "v":
            return self.v[(lit[1], lit[2])]
        if lit[0] == "f":
            return self.share(lit[1])
        return self.count(lit[1], lit[2])  # "w"

    def term(self, term: Term) -> pulp.LpAffineExpression | int:
        """The term's factor: 1, a literal, or couple[a,b], y = a·b, exact for a binary b and a in [0, 1] (a
        binary, or a share of the actor processes). Three literals (a sharded replay end): the binaries are
        coupled first, then their product with the share, if any, so every couple is exact."""
        lits = sorted(dict.fromkeys(term.when), key=lambda lit: lit[0] in acc.SHARES)  # a share last
        if not lits:
            return 1
        factor = self.literal(lits[0])
        for i in range(1, len(lits)):
            factor = self._couple(tuple(lits[:i]), lits[i], factor)
        return factor

    def _couple(self, left: tuple[Literal, ...], lit: Literal,
                a: pulp.LpAffineExpression | int) -> pulp.LpAffineExpression | int:
        key = frozenset((*left, lit))
        if key not in self.products:
            b = self.literal(lit)
            tag = f"p{len(self.products)}"
            y = _var(self.lp, f"y_{tag}", 0, 1, pulp.LpContinuous)
            label = "couple[" + ",".join(_show(x) for x in (*left, lit)) + "]"
            self.add(y >= a + b - 1, f"couple_{tag}", label)
            self.add(y <= a, f"couple_src_{tag}", label)
            self.add(y <= b, f"couple_dst_{tag}", label)
            self.products[key] = y
        return self.products[key]

    def seconds(self, terms: list[Term]) -> pulp.LpAffineExpression:
        return pulp.lpSum(t.seconds / self.scale * self.term(t) for t in terms)


def _show(lit: Literal) -> str:
    if lit[0] == "o":
        return f"option:{lit[1].n}x{lit[1].envs}"
    if lit[0] == "c":
        return f"contention@{lit[1]}"
    if lit[0] == "r":
        return f"turns:{lit[1].n}x{lit[1].envs}"
    if lit[0] == "k":
        return f"shards={lit[1]}"
    if lit[0] == "f":
        return f"actors@{lit[1]}"
    return f"{lit[1]}@{lit[2]}" if lit[0] == "x" else f"{lit[1].n}x{lit[1].envs}@{lit[2]}" if lit[0] == "v" else \
        f"count:{lit[1].n}x{lit[1].envs}@{lit[2]}"


def _variables(b: _Builder) -> None:
    """x[k,d] for the kernels other than act, v[a,d] for act: only where the problem allows them."""
    problem = b.problem
    for ki, k in enumerate(PLACED):
        if k == ACT:
            continue
        for d in problem.devices:
            if (k, d.id) in problem.cost:
                b.x[(k, d.id)] = _var(b.lp, f"x_k{ki}_d{b.didx[d.id]}", 0, 1, pulp.LpBinary)
    # in a cluster the binaries are s[a] and acting[d]; v[a,d] = s[a]·acting[d] is then continuous (`_spread`)
    kind = pulp.LpContinuous if b.multi else pulp.LpBinary
    for ai, a in enumerate(b.options):
        if b.multi:
            b.s[a] = _var(b.lp, f"s_a{ai}", 0, 1, pulp.LpBinary)
        for d in problem.devices:
            if (a, d.id) in problem.act_cost:
                tag = f"a{ai}_d{b.didx[d.id]}"
                b.v[(a, d.id)] = _var(b.lp, f"v_{tag}", 0, 1, kind)
                if b.multi:
                    b.w[(a, d.id)] = _var(b.lp, f"w_{tag}", 0, b.cap(a, d.id), pulp.LpInteger)
    if b.multi:
        for d in problem.allowed(ACT):
            b.acting[d] = _var(b.lp, f"acting_d{b.didx[d]}", 0, 1, pulp.LpBinary)
    if problem.sharded:
        b.sigma.update({K: _var(b.lp, f"sigma_{K}", 0, 1, pulp.LpBinary) for K in problem.shard_counts()})


def _assign(b: _Builder) -> None:
    """(a) assign[k]: every kernel on one device; replay_same[k,d]: the replay kernels on one device."""
    for ki, k in enumerate(PLACED):
        act = list(b.s.values()) if b.multi else list(b.v.values())
        terms = act if k == ACT else [var for (kk, _), var in b.x.items() if kk == k]
        if k in REPLAY and b.sigma:  # one device per shard
            b.add(pulp.lpSum(terms) - pulp.lpSum(K * var for K, var in b.sigma.items()) == 0, f"assign_k{ki}",
                  f"assign[{k}]")
        else:
            b.add(pulp.lpSum(terms) == 1, f"assign_k{ki}", f"assign[{k}]")
    _shards(b)
    for k in REPLAY[1:]:
        ki = PLACED.index(k)
        for d in b.problem.devices:
            diff = _expr(b.on(k, d.id)) - _expr(b.on(REPLAY[0], d.id))
            if diff.keys():
                b.add(diff == 0, f"replay_same_k{ki}_d{b.didx[d.id]}", f"replay_same[{k},{d.id}]")


def _shards(b: _Builder) -> None:
    """(sharded replay) shards: Σ_K σ[K] = 1; shard_node[n]: at most one shard on a node; shard_device[d,K]:
    a device without a shard's cost for K holds none of K shards."""
    if not b.sigma:
        return
    problem = b.problem
    b.add(pulp.lpSum(b.sigma.values()) == 1, "shards", "shards")
    for ni, node in enumerate(problem.node_list()):
        on_node = [var for (k, d), var in b.x.items() if k == REPLAY[0] and problem.device(d).node == node.name]
        if len(on_node) > 1:
            b.add(pulp.lpSum(on_node) <= 1, f"shard_node_n{ni}", f"shard_node[{node.name}]")
    for (k, d), var in b.x.items():
        if k != REPLAY[0]:
            continue
        for K, sigma in b.sigma.items():
            if K > 1 and (k, d, K) not in problem.shard_cost:
                b.add(var + sigma <= 1, f"shard_device_d{b.didx[d]}_{K}", f"shard_device[{d},{K}]")


def _spread(b: _Builder) -> None:
    """(clusters) spread: the chosen option's processes over the nodes, each node acting on one device; v[a,d]
    ≥ s[a] + acting[d] − 1 is their product (v only ever raises a bound, so its lower bound is enough)."""
    if not b.multi:
        return
    problem = b.problem
    for (a, d), var in b.v.items():
        tag, label = f"a{b.options.index(a)}_d{b.didx[d]}", f"spread[{a.n}x{a.envs},{d}]"
        b.add(var - b.s[a] - b.acting[d] >= -1, f"option_{tag}", label)
        b.add(b.w[(a, d)] - b.cap(a, d) * b.s[a] <= 0, f"count_option_{tag}", label)
        b.add(b.w[(a, d)] - b.cap(a, d) * b.acting[d] <= 0, f"count_device_{tag}", label)
    for d, var in b.acting.items():  # a device acted on runs at least one process
        counts = [b.w[(a, dd)] for (a, dd) in b.v if dd == d]
        b.add(pulp.lpSum(counts) - var >= 0, f"acting_d{b.didx[d]}", f"spread[{d}]")
    for ai, a in enumerate(b.options):
        counts = [b.w[(a, d)] for (aa, d) in b.v if aa == a]
        b.add(pulp.lpSum(counts) - a.n * b.s[a] == 0, f"total_a{ai}", f"spread[{a.n}x{a.envs}]")
    for ni, node in enumerate(problem.node_list()):
        on_node = [var for d, var in b.acting.items() if problem.device(d).node == node.name]
        if len(on_node) > 1:
            b.add(pulp.lpSum(on_node) <= 1, f"act_node_n{ni}", f"act_node[{node.name}]")


def _rows(b: _Builder, rows: list[Row]) -> None:
    """The bounds on P of pearl/planner/accounting.py (load, role, actor_period, process, latency, network):
    Σ terms ≤ lanes·P, each term's indicator made by `_Builder.term` (couple[...] where it is a product)."""
    for row in rows:
        b.add(b.seconds(row.terms) - row.lanes * b.period <= 0, row.name, row.label)


def _memory(b: _Builder) -> None:
    """(d) memory[d] and mps_memory[r], the memory rows of accounting.py: Σ needs ≤ capacity, scaled by the
    capacity."""
    for row in acc.memory_rows(b.problem):
        needs = [(n.bytes, ind) for n in row.needs if not isinstance(ind := b.term(Term(n.bytes, n.when)), int)]
        if not needs or math.isinf(row.capacity):
            continue
        cap = row.capacity if row.capacity > 0 else 1.0
        rhs = 1.0 if row.capacity > 0 else 0.0
        b.add(pulp.lpSum(m / cap * ind for m, ind in needs) <= rhs, row.name, row.label)


def _actors(b: _Builder) -> None:
    """(e) actors[n]: every actor process, and in a cluster every replay server process, has a lane of its
    node's host; the learner process shares lanes through load[r] and role[...]. A replay server is a process
    of its own when it sits on another node than the learner or is sharded (K ≥ 2): with z[n] ≤ R[n], L[n],
    σ[1] (R, L: the replay server, the learner on n) it adds R[n] − z[n], exact since z only loosens the row."""
    nodes = b.problem.node_list()
    for ni, node in enumerate(nodes):
        used = b.actors_on(node.name)
        name, label = ("actors", "actors") if len(nodes) == 1 else (f"actors_n{ni}", f"actors[{node.name}]")
        if len(nodes) > 1:
            used = used + b.server_processes(ni)
        b.add(used <= b.problem.resource(node.host).lanes, name, label)


def _slices(b: _Builder) -> None:
    """slices[r]: the slices of one GPU in use hold at most all of its SMs; count[d]: no more instances of a
    slice than it has; one_slice[d,d']: the learner process runs on one device of the GPU; one_way[r]: MIG
    instances or MPS shares, not both. See the docstring's slices[r] and `_slices_fit`, which evaluate uses
    (instance[d], a bound on P, is a row of accounting.py)."""
    problem = b.problem
    for ri, r in enumerate(sorted(partitioned(problem))):
        devices = [d for d in problem.devices if d.resource == r]
        used = {}
        for d in devices:
            j = b.didx[d.id]
            indicators = [ind for k in PLACED if not isinstance(ind := b.on(k, d.id), int)]
            if not indicators:
                continue
            held = _var(b.lp, f"held_d{j}", 0, 1, pulp.LpContinuous)  # the learner process, or anything, on d
            ties = [b.on(k, d.id) for k in LEARNER_PROCESS] if d.instances > 1 else indicators
            for i, ind in enumerate(ties):
                if not isinstance(ind, int):
                    b.add(held - ind >= 0, f"held_d{j}_{i}", f"slices[{r}]")
            used[d.id] = held
            if d.instances > 1:
                used[d.id] = held + pulp.lpSum(b.count(a, dd) for (a, dd) in b.v if dd == d.id)
                b.add(used[d.id] <= d.instances, f"count_d{j}", f"count[{d.id}]")
        b.add(pulp.lpSum(problem.device(d).share * u for d, u in used.items()) <= 1, f"slices_r{ri}",
              f"slices[{r}]")
        for d in devices:
            for d2 in devices:
                learn, insert = b.x.get((LEARN, d.id)), b.x.get((REPLAY[0], d2.id))
                if d != d2 and learn is not None and insert is not None:
                    b.add(learn + insert <= 1, f"one_slice_d{b.didx[d.id]}_d{b.didx[d2.id]}",
                          f"one_slice[{d.id},{d2.id}]")
        ways = sorted({d.slicing for d in devices if d.slicing})
        if len(ways) > 1:  # one_way[r]: MIG instances or MPS shares, not both
            way = {w: _var(b.lp, f"way_r{ri}_{i}", 0, 1, pulp.LpBinary) for i, w in enumerate(ways)}
            b.add(pulp.lpSum(way.values()) <= 1, f"one_way_r{ri}", f"one_way[{r}]")
            for d in devices:
                for i, k in enumerate(PLACED):
                    ind = b.on(k, d.id)
                    if d.slicing and not isinstance(ind, int):
                        b.add(ind - way[d.slicing] <= 0, f"one_way_d{b.didx[d.id]}_{i}", f"one_way[{r}]")


def _energy(b: _Builder, busy: dict[str, list[Term]]) -> pulp.LpAffineExpression:
    """E = Σ_r idle_w·P + (busy_w − idle_w)·busy[r]/lanes(r)."""
    return pulp.lpSum(r.idle_w * b.period + (r.busy_w - r.idle_w) / r.lanes * b.seconds(busy[r.id])
                      for r in b.problem.resources)


def _build(problem: Problem, relax: frozenset[str] = frozenset()) -> _Model:
    """The program with every family except those in `relax` ("memory", "actors"); no objective yet."""
    lp = pulp.LpProblem("pearl_plan", pulp.LpMinimize)
    b = _Builder(problem, lp, _var(lp, "period", 0, None, pulp.LpContinuous), _time_scale(problem), relax=relax)
    _variables(b)
    _assign(b)
    _spread(b)
    busy = acc.busy(problem)
    before, after = acc.period_rows(problem, busy)
    _rows(b, before)
    if "memory" not in relax:
        _memory(b)
    if "actors" not in relax:
        _actors(b)
    else:  # the contention rows lean on actors[n] (c[n] ≤ 1); they bound P only, never feasibility
        after = [row for row in after if not row.label.startswith(acc.CONTENTION)]
    _slices(b)
    _rows(b, after)
    return _Model(lp=lp, period=b.period, energy=_energy(b, busy), x=b.x, v=b.v, scale=b.scale, names=b.names,
                  s=b.s, w=b.w, processes=b.processes(), sigma=b.sigma)


def _pick_solver(solver: str | None) -> str:
    highs = pulp.HiGHS(msg=False).available()
    if solver is None:
        return "highs" if highs else "cbc"
    name = solver.lower()
    if name not in SOLVERS:
        raise ConfigError(f"unknown solver {solver!r}: use one of {', '.join(SOLVERS)}")
    if name == "highs" and not highs:
        raise ConfigError("the HiGHS solver is not available (install highspy) — use solver='cbc'")
    if name == "cbc":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            cbc = pulp.PULP_CBC_CMD(msg=False).available()
        if not cbc:
            raise PlanError("no MIP solver is available: install highspy, or a PuLP that bundles CBC")
    return name


@dataclass
class _Run:
    feasible: bool
    status: str = ""
    gap: float = 0.0


def _run(model: _Model, solver: str, time_limit: float) -> _Run:
    limit = max(float(time_limit), 0.01)
    if solver == "highs":
        cmd = pulp.HiGHS(msg=False, timeLimit=limit, gapRel=_MIP_GAP_REL, gapAbs=_MIP_GAP_ABS,
                         mip_feasibility_tolerance=_FEASIBILITY, primal_feasibility_tolerance=_FEASIBILITY)
    else:
        with warnings.catch_warnings():  # PuLP 3.x deprecates the bundled CBC; it is still the fallback we ship
            warnings.simplefilter("ignore", DeprecationWarning)
            cmd = pulp.PULP_CBC_CMD(msg=False, timeLimit=limit, gapRel=_MIP_GAP_REL, gapAbs=_MIP_GAP_ABS)
    status = model.lp.solve(cmd)
    sol_status = model.lp.sol_status
    if status == pulp.LpStatusInfeasible or sol_status == pulp.LpSolutionInfeasible:
        return _Run(feasible=False, status="Infeasible")
    if status == pulp.LpStatusOptimal and sol_status == pulp.LpSolutionOptimal:
        return _Run(feasible=True, status="Optimal", gap=0.0)
    if status == pulp.LpStatusOptimal and sol_status == pulp.LpSolutionIntegerFeasible:
        gap = math.inf  # CBC through PuLP does not report its bound
        if solver == "highs":
            try:
                reported = float(model.lp.solverModel.getInfo().mip_gap)
                gap = reported if math.isfinite(reported) and reported >= 0 else math.inf
            except Exception:  # an older highspy without getInfo
                gap = math.inf
        return _Run(feasible=True, status="Feasible (time limit)", gap=gap)
    raise PlanError(
        f"the {_solver_label(solver)} solver stopped without a plan: status {pulp.LpStatus.get(status, status)}, "
        f"{pulp.LpSolution.get(sol_status, sol_status)} (raise time_limit or try the other solver)"
    )


def _solver_label(solver: str) -> str:
    return "HiGHS" if solver == "highs" else "CBC"


def _extract(model: _Model) -> tuple[dict[str, str], ActorOption, dict[str, int], tuple[str, ...]]:
    """(placement, actor option, spread, shards): act's device in the placement is the one with the most
    processes (the first of them in the problem's order); a sharded replay server's kernels the first device
    holding a shard."""
    placement: dict[str, str] = {}
    shards = tuple(d for (k, d), var in model.x.items() if k == REPLAY[0] and (var.value() or 0.0) > 0.5)
    shards = shards if len(shards) > 1 else ()
    for k in PLACED:
        if k == ACT:
            continue
        choices = [(var.value() or 0.0, d) for (kk, d), var in model.x.items() if kk == k]
        placement[k] = shards[0] if k in REPLAY and shards else max(choices)[1]
    if model.s:
        a = max(model.s, key=lambda key: model.s[key].value() or 0.0)
        spread = {d: round(var.value() or 0.0) for (aa, d), var in model.w.items() if aa == a}
        spread = {d: n for d, n in spread.items() if n > 0}
        placement[ACT] = max(spread, key=lambda d: spread[d])
    else:
        (a, d) = max(model.v, key=lambda key: model.v[key].value() or 0.0)
        placement[ACT], spread = d, {d: a.n}
    return {k: placement[k] for k in PLACED}, a, spread, shards


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
        model = _build(problem)
        model.lp.setObjective(model.period)
        if _run(model, solver, time_limit).feasible:
            placement, actors, spread, shards = _extract(model)
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
        model = _build(problem, relax=frozenset(relax))
        model.lp.setObjective(model.period)
        if _run(model, solver, time_limit).feasible:
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
    name = _pick_solver(solver)
    _check(problem)
    start = time.perf_counter()
    _precheck(problem)
    model = _build(problem)
    s = model.scale
    if period_bound is not None:
        model.lp.addConstraint(model.period <= period_bound / s, "period_bound")
        model.names["period_bound"] = "period_bound"
    throughput = objective == "throughput"
    first, second = (model.period, model.energy) if throughput else (model.energy, model.period)
    model.lp.setObjective(first)
    run = _run(model, name, time_limit)
    if not run.feasible:
        raise _diagnose(problem, name, period_bound, time_limit)
    placement, actors, spread, shards = _extract(model)
    result = evaluate(problem, placement, actors, spread, shards)
    if result is None:
        raise PlanError(f"the {_solver_label(name)} solution violates a constraint by more than the tolerance")

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
        solver=_solver_label(name),
        gap=run.gap,
        solve_s=time.perf_counter() - start,
        binding=binding,
        spread=spread if acc.multi_node(problem) else {},
        shards=shards,
    )


def _lexicographic(problem: Problem, model: _Model, solver: str, objectives: tuple, throughput: bool, best: tuple,
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
            run = _run(model, solver, left)
        except PlanError:
            break
        if not (run.feasible and run.status == "Optimal"):
            break
        placement2, actors2, spread2, shards2 = _extract(model)
        result2 = evaluate(problem, placement2, actors2, spread2, shards2)
        if result2 is None or any(result2[j] > result[j] * (1 + 1e-7) + 1e-15 for _, j in stages[:k]):
            break
        placement, actors, spread, shards, result = placement2, actors2, spread2, shards2, result2
    return placement, actors, spread, shards, result


def _simplicity(problem: Problem, model: _Model) -> pulp.LpAffineExpression:
    """TIES as one objective: actor processes × (nodes + 1)·(devices + 1) + replay shards × (devices + 1) +
    devices used, so that fewer actor processes always wins, then fewer shards (an unsharded replay server
    wins a tie), and fewer devices decides among equal counts. u[d] ≥ every placement indicator on d."""
    used = []
    for j, d in enumerate(problem.devices):
        on_d = [var for (_, dd), var in model.x.items() if dd == d.id] + \
               [var for (_, dd), var in model.v.items() if dd == d.id]
        if not on_d:
            continue
        u = _var(model.lp, f"u_d{j}", 0, 1, pulp.LpContinuous)
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
