"""The families of the integer program (pearl/planner/ilp.py) that one fixed placement meets or not, checked
without a solver: assign (allowed devices), replay_same, shards, memory[d] and mps_memory[r], spread, actors[n]
and the slices families; and the structural checks of a problem (every id the numbers refer to exists), which
the program and `evaluate` both run first.
"""

from __future__ import annotations

from pearl.errors import PlanError
from pearl.planner import accounting as acc
from pearl.planner.problem import PLACED, REPLAY, ActorOption, Problem
from pearl.planner.terms import ACT, ENV, LEARNER_PROCESS


def check(problem: Problem) -> None:
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


def feasible(problem: Problem, memory: list[acc.MemoryRow], where: dict[str, str], actors: ActorOption,
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


def check_spread(problem: Problem, placement: dict[str, str], actors: ActorOption,
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

