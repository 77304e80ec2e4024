"""Where each role of the Ray launcher goes, and whether the cluster can hold them all.

Actor workers, the learner and the replay shards are Ray actors, each placed with its declared
``num_cpus``/``num_gpus`` and custom resources or node affinity (`ShardPlacement`); a cluster plan's node
names become Ray node ids by the ``pearl_node_NAME`` resource each node carries (`plan_node_ids`). Every role's
placement is checked against the cluster (`check_roles`) before any role starts, so a run that cannot be
placed ends with one error naming the role and the resource before any actor is created. Ray's resources
are logical: they decide admission, not which cores a role's process uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pearl.device import DeviceId
from pearl.errors import ConfigError
from pearl.runtime.job import Job, RoleNodes
from pearl.runtime.ray.session import require_ray

__all__ = ["GivenPlacements", "Placements", "ShardPlacement", "check_placements", "check_roles", "plan_node_ids",
           "plan_placements", "role_placements"]


@dataclass(frozen=True)
class ShardPlacement:
    """Where one role's actor (a replay shard, an actor worker) goes and what it reserves (Ray's resources are
    logical: admission only)."""

    num_cpus: float = 1.0
    resources: dict[str, float] = field(default_factory=dict)
    num_gpus: float = 0.0  # fractional where roles share a GPU
    node_id: str | None = None  # a Ray node id (hex) to pin the shard to
    soft: bool = False  # with node_id: run elsewhere when that node cannot take it
    max_restarts: int = 0  # Ray restarts a dead shard empty; the run then needs a checkpoint to refill it
    #: environment the role's process starts with: a GPU slice's (pearl.adapters.slices.slice_env), which CUDA
    #: reads once, when it starts in the process
    env: dict[str, str] = field(default_factory=dict)

    def options(self) -> dict[str, Any]:
        """Keyword arguments for Ray's ``.options()``."""
        opts: dict[str, Any] = {"num_cpus": self.num_cpus, "max_restarts": self.max_restarts}
        if self.num_gpus:
            opts["num_gpus"] = self.num_gpus
        if self.resources:
            opts["resources"] = dict(self.resources)
        if self.env:
            opts["runtime_env"] = {"env_vars": dict(self.env)}
        if self.node_id is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.node_id, soft=self.soft)
        return opts

    def demand(self) -> dict[str, float]:
        gpus = {"GPU": float(self.num_gpus)} if self.num_gpus else {}
        return {"CPU": float(self.num_cpus), **gpus, **{k: float(v) for k, v in self.resources.items()}}


def plan_node_ids(names: Sequence[str]) -> dict[str, str]:
    """The Ray node id of each plan node: the live node that carries the resource ``pearl_node_NAME``
    (`RoleNodes.resource`). ConfigError naming the first plan node that no node, or more than one, carries."""
    ray = require_ray()
    live = [n for n in ray.nodes() if n.get("Alive")]
    out: dict[str, str] = {}
    for name in names:
        resource = RoleNodes.resource(name)
        carriers = [n["NodeID"] for n in live if n.get("Resources", {}).get(resource, 0) > 0]
        if not carriers:
            raise ConfigError(f"the Ray cluster has no node for plan node {name!r}: start that node with "
                              f"`ray start --address HEAD --resources '{{\"{resource}\": 1}}'` (the cluster's "
                              f"nodes carry {_node_resources(live) or 'no pearl_node_ resource'})")
        if len(carriers) > 1:
            raise ConfigError(f"{len(carriers)} Ray nodes carry {resource}, so plan node {name!r} is ambiguous: "
                              "give that resource to one node only")
        out[name] = carriers[0]
    return out


def _node_resources(nodes: list[dict[str, Any]]) -> str:
    prefix = RoleNodes.resource("")
    return ", ".join(sorted(r for n in nodes for r in n.get("Resources", {}) if r.startswith(prefix)))


def check_placements(placements: Sequence[ShardPlacement], role: str = "replay shard") -> None:
    """`check_roles` for roles of one kind, named "<role> <i>"."""
    check_roles([(f"{role} {i}", p) for i, p in enumerate(placements)])


def check_roles(roles: Sequence[tuple[str, ShardPlacement]]) -> None:
    """ConfigError naming the role and the resource when the cluster cannot hold every role's placement, before
    any actor is created: the total of each resource, and each pinned node's own resources."""
    ray = require_ray()
    totals = ray.cluster_resources()
    asked: dict[str, float] = {}
    for name, p in roles:
        for res, amount in p.demand().items():
            asked[res] = asked.get(res, 0.0) + amount
            if asked[res] > totals.get(res, 0.0) + 1e-9:
                raise ConfigError(f"{name} cannot be placed: the cluster has {totals.get(res, 0.0):g} {res}, "
                                  f"the roles up to it ask for {asked[res]:g}")
    nodes = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
    pinned: dict[tuple[str, str], float] = {}  # (node, resource) → asked by the roles pinned to it so far
    for name, p in roles:
        if p.node_id is None or p.soft:
            continue
        if p.node_id not in nodes:
            raise ConfigError(f"{name} is pinned to node {p.node_id}, which is not in the cluster")
        have = nodes[p.node_id].get("Resources", {})
        for res, amount in p.demand().items():
            pinned[p.node_id, res] = total = pinned.get((p.node_id, res), 0.0) + amount
            if total > have.get(res, 0.0) + 1e-9:
                raise ConfigError(f"{name} cannot be placed on node {p.node_id}: it has {have.get(res, 0.0):g} "
                                  f"{res}, the roles pinned to it up to this one ask for {total:g}")


#: the learner's, the other learners' of a group, each replay shard's and each actor worker's placement
Placements = tuple[ShardPlacement, list[ShardPlacement], list[ShardPlacement], list[ShardPlacement]]


@dataclass(frozen=True)
class GivenPlacements:
    """What the launcher was given: a placement for every actor worker, the learner, every replay shard and
    learners 1 … N − 1 of a group, each winning over the computed one where given; and how often Ray restarts
    a dead worker."""

    actor: ShardPlacement | None = None
    learner: ShardPlacement | None = None
    replay: ShardPlacement | None = None
    member: ShardPlacement | None = None
    restarts: int = 0


def role_placements(job: Job, given: GivenPlacements, replay_shards: int, have: dict[str, float],
                    here: str) -> Placements:
    """The roles' placements on a cluster with resources `have`: the ones given, else an equal part of the
    cluster's CPUs, at most one, for each learner and each worker (Ray's CPUs are admission only: the roles share
    the cores), none for a shard; on a CUDA device a GPU, or an equal part of one for the roles that share it;
    the learner near the driver (node `here`) where that node can take it, the other learners where Ray puts
    them."""
    learners, placement = job.learners, job.placement
    cpus = min(1.0, float(have.get("CPU", 1.0)) / (job.actors + learners))
    learn_gpu, act_gpu = placement.learn.is_cuda, placement.act.is_cuda
    shared = 1.0 / (job.actors + learners) if learn_gpu and act_gpu else None  # one GPU for all of them
    gpus = max(float(have.get("GPU", 0.0)), 1.0)
    worker = given.actor or ShardPlacement(
        num_cpus=cpus, num_gpus=0.0 if not act_gpu else shared or min(1.0, gpus / job.actors))
    learner = given.learner or ShardPlacement(  # a group's learners: a GPU each, or a part of one
        num_cpus=cpus, num_gpus=0.0 if not learn_gpu else shared or min(1.0, gpus / learners),
        node_id=here, soft=True)
    shard = given.replay or ShardPlacement(num_cpus=0)
    # as learner 0 but placed by Ray: a soft affinity to a busy node would wait for it
    member = given.member or replace(learner, node_id=None, soft=False)
    return learner, [member] * (learners - 1), [shard] * replay_shards, \
        [replace(worker, max_restarts=given.restarts)] * job.actors


def plan_placements(job: Job, given: GivenPlacements, replay_shards: int, nodes: RoleNodes, ids: dict[str, str],
                    cpus_of: dict[str, float]) -> Placements:
    """A cluster plan's placements: every role pinned (hard) to the Ray node of its plan node (`ids`), each actor
    worker and each learner of a group to its own (a plan may spread them over nodes); on each node the
    learners and the workers there share its CPUs (`cpus_of`, by Ray node id) equally, at most one each
    (admission only, as above); a CUDA role a GPU, or an equal part of one with the roles on the same node's
    same GPU. A sharded replay server: each shard pinned to its own plan node (`RoleNodes.shards`)."""
    learn = job.placement.learn
    acts = [nodes.worker(i, job.placement.act) for i in range(job.actors)]
    homes = [nodes.learner] + [nodes.member(r) for r in range(1, job.learners)]  # each learner's node
    on_node = {name: sum(node == name for node, _ in acts) + homes.count(name) for name in nodes.names()}

    def cpus(name: str) -> float:
        return min(1.0, cpus_of.get(ids[name], 0.0) / max(on_node[name], 1))

    def gpus(where: tuple[str, DeviceId]) -> float:  # an equal part of the GPU for every role on it
        sharing = acts.count(where) + sum(learn.is_cuda and where == (home, learn) for home in homes)
        return 1.0 / sharing if where[1].is_cuda else 0.0

    workers = [given.actor or ShardPlacement(num_cpus=cpus(node), node_id=ids[node], num_gpus=gpus((node, act)))
               for node, act in acts]
    learner = given.learner or ShardPlacement(num_cpus=cpus(nodes.learner), node_id=ids[nodes.learner],
                                              num_gpus=gpus((nodes.learner, learn)))
    members = [given.member or ShardPlacement(num_cpus=cpus(home), node_id=ids[home], num_gpus=gpus((home, learn)))
               for home in homes[1:]]
    if nodes.shards and len(nodes.shards) != replay_shards:
        raise ConfigError(f"the plan shards the replay server over {len(nodes.shards)} nodes, the launcher was "
                          f"given {replay_shards} replay shards")
    shard_homes = nodes.shards or (nodes.replay,) * replay_shards
    shards = [given.replay or ShardPlacement(num_cpus=0, node_id=ids[n]) for n in shard_homes]
    return learner, members, shards, [replace(w, max_restarts=given.restarts) for w in workers]
