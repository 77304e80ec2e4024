"""Which nodes of a run are lost: after a role that holds the run's state dies, the Ray launcher waits until the
cluster has made up its mind on every node a role ran on (`await_node_deaths`), then names the ones it counts
dead (`lost_nodes`) in what it reports, before placing the roles again on the nodes left.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

PING_S = 20.0  # a node a role ran on runs a probe task within this, or it is taken for lost
NODE_DEATH_S = 90.0  # and a node taken for lost is counted dead by Ray within this (its health checks), or left


def await_node_deaths(ray: ModuleType, nodes: set[str]) -> None:
    """Wait until the cluster has made up its mind on each of `nodes` (Ray node ids): it runs a task there within
    `PING_S`, or Ray counts it dead (Ray needs its health checks' time, some seconds, to count a lost node dead;
    a role placed again meanwhile may be sent to it and fail). A node that does neither within `NODE_DEATH_S`
    is left to Ray."""
    alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    ping = ray.remote(num_cpus=0, max_retries=0)(_here)
    probes = {node: ping.options(scheduling_strategy=_pinned(node)).remote() for node in nodes & alive}
    done, _ = ray.wait(list(probes.values()), num_returns=len(probes), timeout=PING_S)
    suspects = {node for node, ref in probes.items() if ref not in done or not _answered(ray, ref)}
    deadline = time.monotonic() + NODE_DEATH_S
    while suspects and time.monotonic() < deadline:
        time.sleep(0.5)
        suspects &= {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    for ref in probes.values():
        if ref not in done:
            ray.cancel(ref, force=True)


def lost_nodes(ray: ModuleType, nodes: set[str]) -> str:
    """', node NODE (ADDRESS) lost' for each of `nodes` that the cluster no longer counts alive."""
    dead = [n for n in ray.nodes() if n["NodeID"] in nodes and not n.get("Alive")]
    return "".join(f", node {n['NodeID'][:8]} ({n.get('NodeManagerAddress', '?')}) lost" for n in dead)


def described(ray: ModuleType, named: list[tuple[str, str | None]], plan_nodes: dict[str, str]) -> dict[str, str]:
    """Each named role's node (a Ray node id, None for a role not placed): the id's first 8 hex digits, the node's
    address and, for a cluster plan, its plan node's name (`plan_nodes`: plan node → Ray node id)."""
    address = {n["NodeID"]: n.get("NodeManagerAddress", "?") for n in ray.nodes()}
    plan_name = {node: f", plan node {name}" for name, node in plan_nodes.items()}
    return {role: f"node {node[:8]} ({address.get(node, '?')}{plan_name.get(node, '')})"
            for role, node in named if node is not None}


def _here() -> bool:
    return True


def _pinned(node: str) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node, soft=False)


def _answered(ray: ModuleType, ref: Any) -> bool:
    try:
        return bool(ray.get(ref, timeout=0))
    except Exception:  # noqa: BLE001 - any failure of the probe: the node did not run it
        return False
