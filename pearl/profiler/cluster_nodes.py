"""Measuring a running Ray cluster (`pearl profile --ray-address`): a function run on each node, the links.

`run_on_each_node` runs a function (the profiler) in a Ray task pinned to each live node in turn, one node at
a time so that no measurement shares a machine with another; `measure_links` times Ray object transfers
between every pair of nodes and fits each link's latency and bandwidth. Nodes are named by their
``pearl_node_NAME`` resource (`cluster_node_names`). Ray is imported only inside these functions (through
`pearl.runtime.ray.session.require_ray`), so the profiler package imports without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pearl.runtime.job import RoleNodes
from pearl.runtime.ray.session import require_ray

__all__ = ["LINK_SIZES", "cluster_node_names", "measure_links", "run_on_each_node"]

#: payload sizes of the link measurement (bytes): small messages fix the per-call cost, large ones the bandwidth
LINK_SIZES = (1_000, 100_000, 1_000_000, 10_000_000)


def cluster_node_names() -> dict[str, str]:
    """Each live Ray node's name: NAME of its ``pearl_node_NAME`` resource, else ``node-`` and its id's first 8
    hex digits; Ray node id → name."""
    prefix = RoleNodes.resource("")
    out: dict[str, str] = {}
    for n in require_ray().nodes():
        if n.get("Alive"):
            names = sorted(r[len(prefix):] for r in n.get("Resources", {}) if r.startswith(prefix))
            out[n["NodeID"]] = names[0] if names else f"node-{n['NodeID'][:8]}"
    return out


def run_on_each_node(fn: Callable[[], Any]) -> dict[str, Any]:
    """``fn()`` run by a Ray task pinned (hard) to each live node in turn, one node at a time so that no
    measurement shares the machine with another; its result per node name (`cluster_node_names`)."""
    ray = require_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0)(_call)
    out: dict[str, Any] = {}
    for node_id, name in sorted(cluster_node_names().items(), key=lambda kv: kv[1]):
        strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
        out[name] = ray.get(task.options(scheduling_strategy=strategy).remote(fn))
    return out


def _call(fn: Callable[[], Any]) -> Any:
    return fn()


class _Receiver:
    """Takes an array by object ref (Ray fetches it to this actor's node first): the far end of a link."""

    def take(self, array: np.ndarray) -> int:
        return int(array.nbytes)


class _Sender:
    """Puts a fresh array in its node's object store and has the receiver take it: one transfer, timed."""

    def send(self, receiver: Any, sizes: Sequence[int], reps: int) -> dict[int, float]:
        ray = require_ray()
        ray.get(receiver.take.remote(np.zeros(8, np.uint8)))  # the receiver is up
        out: dict[int, float] = {}
        for size in sizes:
            times = []
            for _ in range(reps):
                ref = ray.put(np.ones(size, np.uint8))  # new each time: the far node has no copy yet
                t0 = time.perf_counter()
                ray.get(receiver.take.remote(ref))
                times.append(time.perf_counter() - t0)
            out[size] = float(np.median(times))
        return out


def measure_links(sizes: Sequence[int] = LINK_SIZES, reps: int = 5) -> list[tuple[str, str, float, float]]:
    """Every pair of live nodes: an actor on one puts arrays of each size and an actor on the other takes them
    by ref (both directions, the median of `reps` each); a least-squares line t = c + bytes / bw over the sizes
    gives (a, b, latency_s = c / 2, one way; bandwidth_bytes_per_s = bw), both directions averaged. These are
    Ray's costs (a call, the object transfer), what a crossing edge costs the Ray launcher."""
    ray = require_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    names = cluster_node_names()
    ids = sorted(names, key=names.get)
    sender, receiver = ray.remote(num_cpus=0)(_Sender), ray.remote(num_cpus=0)(_Receiver)
    out = []
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            fits = []
            for src, dst in ((a, b), (b, a)):
                s = sender.options(scheduling_strategy=NodeAffinitySchedulingStrategy(src, soft=False)).remote()
                r = receiver.options(scheduling_strategy=NodeAffinitySchedulingStrategy(dst, soft=False)).remote()
                seconds = ray.get(s.send.remote(r, list(sizes), reps))
                ray.kill(s)
                ray.kill(r)
                slope, intercept = np.polyfit(np.array(sizes, float), np.array([seconds[k] for k in sizes]), 1)
                fits.append((max(float(intercept), 1e-9) / 2, 1.0 / max(float(slope), 1e-15)))
            out.append((names[a], names[b], sum(f[0] for f in fits) / 2, sum(f[1] for f in fits) / 2))
    return out
