"""The planning problem over every node of a cluster (`build_cluster_problem`): each node's own problem
(pearl/planner/build.py prices it; the program over it is pearl/planner/ilp.py's) with its ids qualified
NODE/DEVICE, joined by the edges that cross nodes: what the Ray launcher's traffic statement sends on them
(`crossings`), priced at each link's per-message cost and bandwidth, plus the devices' legs to and from their
hosts; the replay server sharded over nodes, and a learner group with one learner on every node. This module
imports no torch and no pyopencl.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from itertools import combinations, product
from typing import Callable

from pearl.algos import OffPolicyConfig
from pearl.costmodel import CostModel
from pearl.costmodel.model import HOST
from pearl.errors import PlanError
from pearl.kernels import Precision
from pearl.planner.build import CLUSTER_LAUNCHER, Facts, build_problem, estimate_seconds, group_comm, per_iteration
from pearl.planner.problem import REPLAY, Edge, Node, Problem, Resource
from pearl.profile.cluster import Cluster
from pearl.profile.format import Profile
from pearl.traffic import BATCH_ARRAYS, INSERTS, PRIORITIES, SAMPLES, TRANSITIONS, WEIGHTS
from pearl.types import EnvSpec

#: Within a node they go through host memory, which the profile's act, replay_insert and weight-sync timings
#: already hold
CLUSTER_EDGES = (Edge("transitions", "act", "learn"), Edge("inserts", "learn", "replay_insert"),
                 Edge("weights", "learn", "act"))


@dataclass(frozen=True)
class Crossing:
    """What one edge sends over a link per iteration, as the Ray launcher sends it."""

    messages: float  # each pays the link's per-message cost (transport call + latency)
    nbytes: float  # bytes per iteration, at the link's bandwidth
    arrays: int = 1
    legs: bool = False  # device → host before sending, host → device after (replay's and learn's own devices)


def crossings(config: OffPolicyConfig, spec: EnvSpec, actors: int) -> dict[str, Crossing]:
    """Messages and bytes per iteration of every edge that may cross nodes: the Ray launcher's traffic
    statement (`pearl.traffic.ray`, with the replay server, where replay sits on a node of its own) for a
    segment of the schedule `actors` run, spread over its U updates."""
    stated = per_iteration(CLUSTER_LAUNCHER, config, spec, actors, replay_server=True)

    def crossing(edge: str, arrays: int = 1, legs: bool = False) -> Crossing:
        return Crossing(stated[edge].messages, stated[edge].nbytes, arrays, legs)

    return {"transitions": crossing(TRANSITIONS), "inserts": crossing(INSERTS), "weights": crossing(WEIGHTS),
            "batch": crossing(SAMPLES, BATCH_ARRAYS, True), "td_errors": crossing(PRIORITIES, 1, True)}


def qualified(node: str, name: str) -> str:
    """A device's or resource's id in a cluster problem: NODE/NAME (a device's reads as `pearl.device.NodeDevice`
    in the plan file)."""
    return f"{node}/{name}"


def build_cluster_problem(cluster: Cluster, algo: str, spec: EnvSpec, envs: int | None = None,
                          config: OffPolicyConfig | None = None, threads: int = 1,
                          learners: int = 1, precision: Precision = Precision.FP32) -> tuple[Problem, Facts]:
    """The problem over every node of the cluster: each node's own problem (build_problem on its profile) with
    its ids qualified NODE/DEVICE, joined by the data edges that cross nodes, each paying the link's latency and
    bandwidth (plus the devices' legs to and from their hosts). A cluster of one node is build_problem's
    problem, unqualified: it plans exactly as the host profile."""
    if len(cluster.nodes) == 1:
        profile = cluster.nodes[0].profile
        return build_problem(profile, CostModel(profile, precision), algo, spec, envs, config, threads=threads,
                             learners=learners)
    if learners > 1 and learners != len(cluster.nodes):
        raise PlanError(f"a cluster plan's learner group has one learner on every node: {len(cluster.nodes)} "
                        f"learners, not {learners}")
    parts = []
    models = {node.name: CostModel(node.profile, precision) for node in cluster.nodes}
    # the actor processes may spread over every node: options up to all the hosts' lanes together
    lanes = [_host_lanes(node.profile, models[node.name]) for node in cluster.nodes]
    total = sum(lanes)
    for node in cluster.nodes:
        model = models[node.name]
        problem, facts = _on_node(node.name, partial(build_problem, node.profile, model, algo, spec, envs, config,
                                                     total, threads))
        parts.append((node.name, model, problem, facts))
    for (a, *_), (b, *_) in combinations(parts, 2):
        if cluster.link(a, b) is None:
            raise PlanError(f"the cluster profile has no link between nodes {a} and {b}; merge it again with "
                            "--network DESCRIPTOR")
    merged = _merge_nodes(parts)
    facts = parts[0][3]
    sync = {key[:-1] + (qualified(name, key[-1]),): s for name, _, _, f in parts for key, s in f.weight_sync_s.items()}
    scaled = {(k, qualified(name, d)): w for name, _, _, f in parts for (k, d), w in f.scaled.items()}
    ways = {(k, qualified(name, d)): w for name, _, _, f in parts for (k, d), w in f.implementations.items()}
    merged.edges += list(CLUSTER_EDGES)
    _cross_node_transfers(cluster, parts, merged, facts, spec, max(lanes))
    _replay_shards(cluster, parts, merged, facts, spec, max(lanes))
    if learners > 1:
        _spread_group(cluster, parts, merged, partial(build_problem, algo=algo, spec=spec, envs=envs,
                                                      max_actors=total, threads=threads), facts.config, spec,
                      threads)
    return merged, replace(facts, weight_sync_s=sync, scaled=scaled, implementations=ways)


def _spread_group(cluster: Cluster, parts: list, problem: Problem, build: Callable[..., tuple[Problem, Facts]],
                  config: OffPolicyConfig, spec: EnvSpec, threads: int) -> None:
    """A learner group with one learner on every node (`Problem.spread_group`): learn on a device of one node
    costs the slowest node's group update on the device of that id, plus what the links add to the group's
    communication (`group_comm`: each node's `group` figure against the slowest link; gloo's messages pay the
    network's latency, not a Ray call). A node's group update is its profile's timing of a group of N on that
    device (N one-thread learner processes on its host, the nearest a profile comes to N nodes), else its learn
    on the B/N rows a learner takes (as `build` prices it there) plus the host's communication. A timing on a
    host of fewer lanes than N stands for N nodes too: its learners' parts ran in turn where on N nodes they run
    side by side, but what dominates a small network's group update is the collectives' waits, which the
    latency and bandwidth figures leave out (`build._group_update`); a one-core host's timing of a group of two
    and a run of that group across two one-core Ray nodes come out alike (measured: see docs/MEASUREMENTS.md,
    "A learner group across two nodes"). Learner 0's wait in the collectives (`group_comm_s`, per learn device)
    is what the profile timed of it in that group, else the update less learner 0's own part, plus what the
    links add. A device whose id some
    node lacks cannot hold learn."""
    n = len(parts)
    part_config = config.replace(batch_size=-(-config.batch_size // n))
    links = [cluster.link(a, b) for (a, *_), (b, *_) in combinations(parts, 2)]
    network = (max(k.latency_s for k in links if k), min(k.bandwidth_bytes_per_s for k in links if k))
    update: dict[tuple[str, str], tuple[float, float]] = {}  # (node, device) → (the update, learner 0's wait)
    for name, model, _, facts in parts:
        p, _ = _on_node(name, partial(build, cluster.node(name).profile, model, config=part_config))
        host = group_comm(model, config, spec, n)
        extra = group_comm(model, config, spec, n, network) - host
        for d in (d for k, d in p.cost if k == "learn"):
            timed = model.group_learn_time(facts.workload, d, n) if threads == 1 else None
            part = p.cost[("learn", d)]
            # a timed group interleaves with the replay kernels, as `_learner_costs` counts it
            own = model.in_situ_factor(d, facts.workload) * timed.seconds if timed is not None else part + host
            waits = model.group_wait_time(facts.workload, d, n) if timed is not None else None
            wait = waits.seconds if waits is not None else max(own - part, 0.0)
            update[(name, d)] = (own + extra, wait + extra)
    problem.group_comm_s = {}
    for key in [key for key in problem.cost if key[0] == "learn"]:
        device = problem.device(key[1]).local
        if all((name, device) in update for name, *_ in parts):
            problem.cost[key] = max(update[(name, device)][0] for name, *_ in parts)
            problem.group_comm_s[key[1]] = max(update[(name, device)][1] for name, *_ in parts)
        else:
            del problem.cost[key]
            problem.publish = {k: v for k, v in problem.publish.items() if k[1] != key[1]}
    problem.learners = n


def _host_lanes(profile: Profile, model: CostModel) -> int:
    """The lanes of a profile's host resource (its `cpu` device's, or more of a device sharing it)."""
    if HOST not in model.devices():
        return 1  # build_problem says what is missing
    host = model.resource(HOST)
    return max((profile.device(d).lanes for d in model.devices() if model.resource(d) == host), default=1)


def _on_node(name: str, build: Callable[[], tuple[Problem, Facts]]) -> tuple[Problem, Facts]:
    try:
        return build()
    except PlanError as exc:
        raise PlanError(f"node {name}: {exc}") from None


def _merge_nodes(parts: list) -> Problem:
    """The nodes' problems side by side, ids qualified."""
    q = qualified
    resources, devices, nodes = [], [], []
    cost, act_cost, actor_period, transfer, memory, publish, shares = {}, {}, {}, {}, {}, {}, {}
    for name, _, p, _ in parts:
        resources += [Resource(q(name, r.id), r.lanes, r.idle_w, r.busy_w) for r in p.resources]
        devices += [replace(d, id=q(name, d.id), resource=q(name, d.resource), node=name, local_id=d.id)
                    for d in p.devices]
        nodes.append(Node(name, q(name, p.host), q(name, p.host_device), p.env_cost))
        cost.update({(k, q(name, d)): t for (k, d), t in p.cost.items()})
        act_cost.update({(a, q(name, d)): t for (a, d), t in p.act_cost.items()})
        actor_period.update({(a, q(name, d)): t for (a, d), t in p.actor_period.items()})
        transfer.update({(e, q(name, d), q(name, d2)): t for (e, d, d2), t in p.transfer.items()})
        memory.update({(k, q(name, d)): m for (k, d), m in p.memory.items()})
        publish.update({(a, q(name, d)): t for (a, d), t in p.publish.items()})
        shares.update({(k, q(name, d)): s for (k, d), s in p.device_share.items()})
    first = nodes[0]
    return Problem(resources, devices, first.host, first.host_device, cost, act_cost, first.env_cost, actor_period,
                   list(parts[0][2].edges), transfer, memory, prefetch=parts[0][2].prefetch, nodes=nodes,
                   publish=publish, learner_threads=parts[0][2].learner_threads, device_share=shares)


def _cross_node_transfers(cluster: Cluster, parts: list, problem: Problem, facts: Facts, spec: EnvSpec,
                          actors: int) -> None:
    """transfer and nic seconds per iteration of every edge between devices of two nodes (`crossings`): each
    message pays the link's per-message cost (the transport's call and the network's latency), the bytes its
    bandwidth, and the batch and TD errors also the legs device → host on the sending node and host → device
    on the receiving one (the cost model's transfer_time to and from `cpu`). The actors are counted at the
    largest number one node offers (the count of a segment's messages grows with them; the options that
    spread the actors over nodes go beyond it, and are counted so too: one table serves every option).
    The actors' edges (transitions, weights) carry all the actors' traffic: each node's processes carry
    their share of it (accounting.py)."""
    models = {name: model for name, model, _, _ in parts}
    per_edge = crossings(facts.config, spec, actors)
    for e in problem.edges:
        c = per_edge[e.name]
        if c.messages <= 0:
            continue
        for d, d2 in product(problem.devices, problem.devices):
            if d.node == d2.node:
                continue
            link = cluster.link(d.node, d2.node)
            seconds = c.messages * link.message_s + c.nbytes / link.bandwidth_bytes_per_s
            if c.legs:
                here, there = d.local, d2.local
                out = partial(models[d.node].transfer_time, here, HOST, int(c.nbytes), c.arrays)
                into = partial(models[d2.node].transfer_time, HOST, there, int(c.nbytes), c.arrays)
                seconds += estimate_seconds(out) + estimate_seconds(into)
            problem.transfer[(e.name, d.id, d2.id)] = seconds
            problem.nic[(e.name, d.id, d2.id)] = c.nbytes / link.bandwidth_bytes_per_s


def _replay_shards(cluster: Cluster, parts: list, problem: Problem, facts: Facts, spec: EnvSpec,
                   actors: int) -> None:
    """The replay server sharded over K ≥ 2 nodes, as the Ray launcher runs it: each shard a ReplayShard actor
    (host numpy storage) on a node's `cpu`, holding 1/K of the buffer and doing 1/K of the inserts, samples
    and priority updates (shard_cost = cost / K). Its edges, one shard's part (`crossings` for one server):
        inserts     each worker's batch goes whole to one shard, round-robin: 1/K of the messages and bytes
        batch       every read touches every shard (a stats and a lookup round trip each): the messages of
                    one server per shard, 1/K of the bytes (sharding multiplies the batch's messages by K)
        td_errors   one message an update to every shard, 1/K of the bytes
    between nodes at the link's per-message cost and bandwidth (and the legs to and from a device), within a
    node at the transport's call per message (a shard is a process of its own, not the learner's) and the
    cost model's copy between two devices."""
    per_edge = crossings(facts.config, spec, actors)
    models = {name: model for name, model, _, _ in parts}
    hosts = [n.host_device for n in problem.nodes if all((k, n.host_device) in problem.cost for k in REPLAY)]
    for K in range(2, len(hosts) + 1):
        for d in hosts:
            problem.shard_cost.update({(k, d, K): problem.cost[(k, d)] / K for k in REPLAY})
        for e in problem.edges:
            c = per_edge.get(e.name)
            if c is None or c.messages <= 0 or not (e.src in REPLAY or e.dst in REPLAY):
                continue
            part = Crossing(c.messages / K if e.name == "inserts" else c.messages, c.nbytes / K, c.arrays, c.legs)
            for shard, other in product(hosts, problem.devices):
                src, dst = (shard, other.id) if e.src in REPLAY else (other.id, shard)
                seconds, nic = _shard_message(cluster, models, problem, part, src, dst)
                problem.shard_transfer[(e.name, src, dst, K)] = seconds
                if nic > 0:
                    problem.shard_nic[(e.name, src, dst, K)] = nic


def _shard_message(cluster: Cluster, models: dict[str, CostModel], problem: Problem, c: Crossing, src: str,
                   dst: str) -> tuple[float, float]:
    """(transfer seconds, nic seconds) of one shard's part `c` of an edge from device src to dst."""
    a, b = problem.device(src).node, problem.device(dst).node
    local = {d: problem.device(d).local for d in (src, dst)}
    if a == b:
        calls = [link.call_s for link in cluster.links if a in (link.a, link.b)]
        seconds = c.messages * min(calls, default=0.0)
        if src != dst:
            seconds += estimate_seconds(partial(models[a].transfer_time, local[src], local[dst], int(c.nbytes),
                                                c.arrays))
        return seconds, 0.0
    link = cluster.link(a, b)
    seconds = c.messages * link.message_s + c.nbytes / link.bandwidth_bytes_per_s
    if c.legs:
        seconds += estimate_seconds(partial(models[a].transfer_time, local[src], HOST, int(c.nbytes), c.arrays))
        seconds += estimate_seconds(partial(models[b].transfer_time, HOST, local[dst], int(c.nbytes), c.arrays))
    return seconds, c.nbytes / link.bandwidth_bytes_per_s
