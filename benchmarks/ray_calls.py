"""Time a Ray actor call as pearl's roles make them: the figure `pearl profile merge --call-s` asks for.

    python benchmarks/ray_calls.py [--address HOST:PORT] [--reps 300] [--rounds 3]

Without --address, a local Ray instance (`pearl.runtime.ray.session.start_local_ray`: loopback, no
dashboard) with both actors on its one node; with it, the caller on the first node and the callee on the
second when the cluster has two or more (by `pearl_node_NAME` name order), so the figure includes the link.

From inside a caller actor (as the learner role calls the replay server), against a callee actor:
- ``call``: a method call with a 1 kB array, waited for (a round trip, as each read of the replay server);
- ``call 64 kB``: the same with 64 kB (a segment's worth of CartPole transitions is about 10 kB a worker);
- ``sent``: calls sent back to back without waiting, then all collected (the priority updates and inserts).
Each figure is the median and 90th percentile over --reps calls, pooled over --rounds rounds, after a warm-up.
A message is half a round trip, so ``--call-s`` is half the ``call`` median (minus the network's latency when
the callee is on another node of a real network). Not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from pearl.hostinfo import cpu_name
from pearl.profiler.cluster_nodes import cluster_node_names
from pearl.runtime.ray import session


class Callee:
    def take(self, array: np.ndarray) -> int:
        return int(array.nbytes)


class Caller:
    def time_calls(self, callee, nbytes: int, reps: int, wait: bool) -> list[float]:
        """Seconds per call: each waited for (wait), or `reps` sent at once and collected (the mean)."""
        ray = session.require_ray()
        array = np.ones(nbytes, np.uint8)
        ray.get([callee.take.remote(array) for _ in range(20)])  # warm-up
        if not wait:
            t0 = time.perf_counter()
            ray.get([callee.take.remote(array) for _ in range(reps)])
            return [(time.perf_counter() - t0) / reps]
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            ray.get(callee.take.remote(array))
            out.append(time.perf_counter() - t0)
        return out


def _place(address: str | None):
    """(caller options, callee options, where): both on the one node, or on the first two nodes by name."""
    names = cluster_node_names() if address else {}
    if len(names) < 2:
        return {}, {}, "one node"
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    first, second = sorted(names, key=names.get)[:2]
    pin = [{"scheduling_strategy": NodeAffinitySchedulingStrategy(n, soft=False)} for n in (first, second)]
    return pin[0], pin[1], f"caller on {names[first]}, callee on {names[second]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--address", default=None, help="join this Ray cluster instead of starting a local instance")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if a.address:
        session.connect(a.address)
    else:
        session.start_local_ray()
    ray = session.require_ray()
    try:
        caller_opts, callee_opts, where = _place(a.address)
        caller = ray.remote(num_cpus=0)(Caller).options(**caller_opts).remote()
        callee = ray.remote(num_cpus=0)(Callee).options(**callee_opts).remote()
        cases = [("call", 1024, True), ("call 64 kB", 65536, True), ("sent", 1024, False)]
        times: dict[str, list[float]] = {name: [] for name, *_ in cases}
        for r in range(a.rounds):
            for name, nbytes, wait in cases[r % len(cases):] + cases[:r % len(cases)]:  # rotate the order
                times[name] += ray.get(caller.time_calls.remote(callee, nbytes, a.reps, wait))
                print(f"round {r + 1}/{a.rounds}: {name} done", flush=True)
    finally:
        session.shutdown()
    print(f"\nRay {ray.__version__}, {where}; {cpu_name()}, {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}")
    print(f"{'operation':<12} {'median µs':>10} {'p90 µs':>8}  calls")
    for name, ts in times.items():
        print(f"{name:<12} {np.median(ts) * 1e6:>10.0f} {np.percentile(ts, 90) * 1e6:>8.0f}  {len(ts)}")
    print(f"\none message (half a waited call): {np.median(times['call']) / 2 * 1e6:.0f} µs "
          f"-> pearl profile merge ... --call-s {np.median(times['call']) / 2:.2e}")


if __name__ == "__main__":
    main()
