"""Where each role of the Ray launcher goes, and whether the cluster can hold them all.

Actor workers, the learner and the replay shards are Ray actors, each placed with its declared
``num_cpus``/``num_gpus`` and custom resources or node affinity (`ShardPlacement`); a cluster plan's node
names become Ray node ids by the ``pearl_node_NAME`` resource each node carries (`plan_node_ids`). The roles
not given a placement share the CPUs in the largest equal part that packs onto the nodes one node at a time
(`packing.largest_share`): Ray admits an actor on one node, so an equal part of the cluster's total may fit
no node and leave a role waiting for ever. Every role's placement is checked against the cluster's nodes
(`check_roles`, `packing.refusal`) before any role starts, so a run that cannot be placed ends with one error
naming the roles, what they ask for and what each node has, before any actor is created; a role that Ray has
not started yet, once they are created, is reported every 10 s (`progress`). Ray's resources are logical: they
decide admission, not which cores a role's process uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

from pearl.device import DeviceId
from pearl.errors import ConfigError
from pearl.runtime.job import Job, RoleNodes
from pearl.runtime.ray.packing import NodeRoom, RoleNeed, equal_share, largest_share, refusal, waiting_line
from pearl.runtime.ray.session import require_ray

__all__ = ["GivenPlacements", "Placements", "ShardPlacement", "check_placements", "check_roles", "cluster_nodes",
           "plan_node_ids", "plan_placements", "progress", "role_need", "role_placements"]


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
    """ConfigError in one line when the cluster cannot hold every role's placement, before any actor is created:
    a resource's total, a pinned node's own resources, or no packing of the roles onto the nodes one node at a
    time (`packing.refusal`: the roles, what each asks for and each node has, what to change). Ray would
    otherwise wait for the role that fits no node for ever."""
    why = refusal([role_need(name, p) for name, p in roles], cluster_nodes(require_ray()))
    if why is not None:
        raise ConfigError(why)


def role_need(name: str, p: ShardPlacement) -> RoleNeed:
    return RoleNeed(name, p.demand(), p.node_id, p.soft)


def cluster_nodes(ray: ModuleType) -> list[NodeRoom]:
    """The live nodes with their resources (Ray's totals), each named by its id and any plan node it carries."""
    prefix = RoleNodes.resource("")
    nodes = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        resources = dict(n.get("Resources", {}))
        plan = sorted(r[len(prefix):] for r in resources if r.startswith(prefix))
        label = f"node {n['NodeID'][:8]}" + (f" (plan node {', '.join(plan)})" if plan else "")
        nodes.append(NodeRoom(n["NodeID"], resources, label))
    return nodes


def progress(roles: Sequence[tuple[str, ShardPlacement]],
             refs: Sequence[Any] = ()) -> Callable[[list[Any], float], str]:
    """`session.answer`'s progress line while roles start: what the roles of `refs` still pending (``refs[i]``
    roles[i]'s first answer), or all of `roles`, ask for, and what the cluster has free."""
    of = dict(zip(refs, roles, strict=True)) if refs else {}

    def line(pending: list[Any], seconds: float) -> str:
        ray = require_ray()
        waiting = [of[r] for r in pending if r in of] or list(roles)
        try:
            nodes, free = cluster_nodes(ray), ray.available_resources()
        except Exception:  # noqa: BLE001 - a line of progress: a cluster that cannot be asked now ends no run
            nodes, free = [], {}
        return waiting_line([role_need(n, p) for n, p in waiting], nodes, free, seconds)
    return line


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


def role_placements(job: Job, given: GivenPlacements, replay_shards: int, nodes: Sequence[NodeRoom],
                    here: str) -> Placements:
    """The roles' placements on a cluster of `nodes`: the ones given, else for each learner and each worker the
    largest equal share of CPUs, at most one, with which every role packs onto the nodes one node at a time
    (`packing.largest_share`; an equal part of the total would not: 2/3 CPU each for three roles on two nodes of
    one CPU leaves the third waiting; Ray's CPUs are admission only: the roles share the cores), none for a
    shard; on a CUDA device a GPU, or an equal part of one for the roles that share it (each node's GPUs split
    the same way); the learner near the driver (node `here`) where that node can take it, the other learners
    where Ray puts them."""
    learners, placement = job.learners, job.placement
    learn_gpu, act_gpu = placement.learn.backend.gpu, placement.act.backend.gpu
    shared = 1.0 / (job.actors + learners) if learn_gpu and act_gpu else None  # one GPU for all of them
    gpus = [float(n.resources.get("GPU", 0.0)) for n in nodes]
    act_gpus = 0.0 if not act_gpu else shared or _gpu_share(gpus, job.actors)
    learn_gpus = 0.0 if not learn_gpu else shared or _gpu_share(gpus, learners)

    def placed(cpus: float) -> Placements:
        worker = given.actor or ShardPlacement(num_cpus=cpus, num_gpus=act_gpus)
        learner = given.learner or ShardPlacement(num_cpus=cpus, num_gpus=learn_gpus, node_id=here, soft=True)
        shard = given.replay or ShardPlacement(num_cpus=0)
        # as learner 0 but placed by Ray: a soft affinity to a busy node would wait for it
        member = given.member or replace(learner, node_id=None, soft=False)
        return learner, [member] * (learners - 1), [shard] * replay_shards, \
            [replace(worker, max_restarts=given.restarts)] * job.actors

    computed = (given.learner is None, given.member is None and given.learner is None, given.actor is None)
    cpus = largest_share(_needs(placed(1.0), computed), nodes)
    if cpus is None:  # nothing packs (a GPU, a given placement): a share the CPUs alone hold; `check_roles` says why
        cpus = equal_share([float(n.resources.get("CPU", 0.0)) for n in nodes], job.actors + learners) or 0.0
    return placed(cpus)


def _gpu_share(gpus: list[float], roles: int) -> float:
    """An equal part of a GPU for each of `roles` roles that packs onto the nodes' GPUs; without any GPU one
    that `check_roles` refuses (a share of the one GPU the cluster lacks)."""
    return equal_share(gpus, roles) or min(1.0, 1.0 / roles)


def _needs(placements: Placements, computed: tuple[bool, bool, bool]) -> list[RoleNeed]:
    """The roles as `largest_share` sees them: the learner's, the members' and the workers' CPUs its share where
    `computed` (not given)."""
    learner, members, shards, workers = placements
    own, member_own, worker_own = computed
    return [replace(role_need("learner", learner), shared=own),
            *(replace(role_need(f"learner {r}", m), shared=member_own) for r, m in enumerate(members, 1)),
            *(role_need(f"replay shard {i}", s) for i, s in enumerate(shards)),
            *(replace(role_need(f"actor worker {i}", w), shared=worker_own) for i, w in enumerate(workers))]


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
        sharing = acts.count(where) + sum(learn.backend.gpu and where == (home, learn) for home in homes)
        return 1.0 / sharing if where[1].backend.gpu else 0.0

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
