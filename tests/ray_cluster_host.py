"""A two-node `ray.cluster_utils.Cluster` in a process of its own, for tests that join it from other processes.

Run as a script: starts the cluster (on loopback; token authentication as this process's environment says,
``RAY_AUTH_MODE`` and ``RAY_AUTH_TOKEN``, which its nodes inherit), prints its address, and shuts it down when
its stdin closes. A process of its own because Ray reads the authentication mode once per process, and the
tests join clusters of both kinds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STORE = 80 * 2**20


@contextmanager
def cluster_process(env: dict[str, str]) -> Iterator[str]:
    """The address of a two-node cluster started by this script in a child process with `env`; shut down after."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        address = proc.stdout.readline().strip()
        assert address, f"the cluster did not start (exit status {proc.poll()})"
        yield address
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)


def main() -> None:
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback only, as pearl's own instance
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": STORE,
                                                            "include_dashboard": False})
    cluster.add_node(num_cpus=2, object_store_memory=STORE)
    cluster.wait_for_nodes()
    print(cluster.address, flush=True)
    try:
        sys.stdin.read()
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
