"""A node lost mid-run: does the run go on, and what did it lose? (Not a test: it prints.)

    python benchmarks/node_loss.py [--steps 50000] [--at 0.5] [--seed 0]

Starts a local three-node Ray cluster (`ray.cluster_utils.Cluster`: a head of one CPU, where the driver and
the learner go, and two worker nodes of two CPUs), runs `pearl train --algo dqn --env CartPole-v1 --launcher ray
--actors 2 --replay-shards 2` on it as a user would (a subprocess joining at the cluster's address), and when
the run's metrics pass `--at` of its budget, removes the worker node that holds the most of the run's roles
(its raylet and every process on it killed, no grace). It then waits for the run and prints its headline, the
restarts, what each recovery lost and the env steps collected again, from the run's summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback only, as pearl's own instance

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from pearl.runtime.ray.runs import pearl_namespaces  # noqa: E402

STORE = 200 * 2**20


def role_nodes() -> Counter:
    """How many of the running pearl run's roles each node holds, asked from inside each role."""
    count: Counter = Counter()
    for namespace, names in pearl_namespaces(ray).items():
        for name in names:
            if name.startswith(("worker-", "replay-")):
                actor = ray.get_actor(name, namespace=namespace)
                count[ray.get(actor.node_id.remote(), timeout=30)] += 1
    return count


def newest_step(run_root: Path) -> int:
    runs = sorted(run_root.glob("*/metrics.jsonl"))
    if not runs:
        return 0
    lines = runs[-1].read_text().splitlines()
    return json.loads(lines[-1]).get("global_step", 0) if lines else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--at", type=float, default=0.5, help="the fraction of the budget at which a node is lost")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": STORE,
                                                            "include_dashboard": False})
    workers = [cluster.add_node(num_cpus=2, object_store_memory=STORE) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    runs = Path(tempfile.mkdtemp(prefix="pearl-node-loss-"))
    cmd = [sys.executable, "-m", "pearl", "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", str(args.steps),
           "--seed", str(args.seed), "--launcher", "ray", "--ray-address", cluster.address, "--actors", "2",
           "--replay-shards", "2", "--runs-dir", str(runs)]
    print("$", " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    out = runs / "stdout.txt"  # what pearl train prints; its summary.json is read after
    run = subprocess.Popen(cmd, stdout=out.open("w"))
    try:
        while run.poll() is None and newest_step(runs) < args.at * args.steps:
            time.sleep(0.5)
        if run.poll() is None:
            held = role_nodes()
            doomed = max(workers, key=lambda node: held.get(node.node_id, 0))
            print(f"{time.perf_counter() - t0:.0f} s, {newest_step(runs):,} env steps: removing node "
                  f"{doomed.node_id[:8]}, which holds {held.get(doomed.node_id, 0)} of the run's workers and shards",
                  flush=True)
            cluster.remove_node(doomed, allow_graceful=False)
        run.wait()
    finally:
        if run.poll() is None:
            run.kill()
        ray.shutdown()
        cluster.shutdown()
    print(f"pearl train exited with {run.returncode} after {time.perf_counter() - t0:.0f} s")
    if run.returncode == 0:
        result = json.loads(sorted(runs.glob("*/summary.json"))[-1].read_text())
        print(f"headline ({result['headline']}): {result['eval_return_mean']:.1f}; {result['steps']:,} env steps, "
              f"{result['env_steps_per_s']:,.0f} env steps/s; restarts {result['actor_restarts']}, at most "
              f"{result['lost_steps_max']:,} env steps lost with the workers, {result['redone_steps']:,} collected "
              "again")
        print("pearl train said:")
        print("\n".join(line for line in out.read_text().splitlines() if line.startswith("  restarts")))
        print("\n".join(f"    {restart}" for restart in result["restart_log"]))  # the lines it prints under it
        print("  roles at the end: " + ", ".join(f"{k} on {v}" for k, v in result["roles"].items()))


if __name__ == "__main__":
    main()
