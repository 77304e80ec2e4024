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
from dataclasses import dataclass, field
from typing import Any

from pearl.errors import ConfigError
from pearl.runtime.launcher import RoleNodes
from pearl.runtime.ray.session import require_ray

__all__ = ["ShardPlacement", "check_placements", "check_roles", "plan_node_ids"]


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
