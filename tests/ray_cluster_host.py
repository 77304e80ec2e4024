"""A two-node `ray.cluster_utils.Cluster` in a process of its own, for tests that join it from other processes.

Run as a script: starts the cluster (on loopback, its head with a Ray Client server; token authentication as
this process's environment says, ``RAY_AUTH_MODE`` and ``RAY_AUTH_TOKEN``, which its nodes inherit), prints its
address and its Ray Client address, and shuts it down when its stdin closes. A process of its own because Ray
reads the authentication mode once per process, and the tests join clusters of both kinds.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

STORE = 80 * 2**20


@dataclass(frozen=True)
class HostedCluster:
    address: str  # the GCS address, host:port
    client: str  # the Ray Client address, ray://host:port


@contextmanager
def cluster_process(env: dict[str, str]) -> Iterator[HostedCluster]:
    """A two-node cluster started by this script in a child process with `env`; shut down after."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        line = proc.stdout.readline().split()
        assert len(line) == 2, f"the cluster did not start (exit status {proc.poll()})"
        yield HostedCluster(*line)
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)


def main() -> None:
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback only, as pearl's own instance
    # The head's Ray Client proxy waits 30 s for the server it starts per driver; on a 2-core machine running the
    # suite that start-up can take longer, and the proxy then refuses the driver. A server that failed to start
    # at all is only given up after this wait too, so it stays well short of the suite's budget.
    os.environ.setdefault("RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S", "90")
    from ray.cluster_utils import Cluster

    with socket.socket() as s:  # a free port for the Ray Client server
        s.bind(("127.0.0.1", 0))
        client_port = s.getsockname()[1]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": STORE,
                                                            "include_dashboard": False,
                                                            "ray_client_server_port": client_port})
    cluster.add_node(num_cpus=2, object_store_memory=STORE)
    cluster.wait_for_nodes()
    print(cluster.address, f"ray://127.0.0.1:{client_port}", flush=True)
    try:
        sys.stdin.read()
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
