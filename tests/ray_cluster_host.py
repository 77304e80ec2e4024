"""A two-node `ray.cluster_utils.Cluster` in a process of its own, for tests that join it from other processes.

Run as a script: starts the cluster (on loopback, its head with a Ray Client server and one CPU, the other node
with the CPUs its argument says, 2 by default; token authentication as this process's environment says,
``RAY_AUTH_MODE`` and ``RAY_AUTH_TOKEN``, which its nodes inherit), prints its address and its Ray Client
address, and shuts it down when its stdin closes. A process of its own because Ray reads the authentication
mode once per process, and the tests join clusters of both kinds.

Imported, it holds what those tests share: the drivers' environment (`base_env`) and the cluster's CPUs as a
driver of its own sees them (`cpus`, `assert_all_cpus_free`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

STORE = 80 * 2**20
TESTS = Path(__file__).parent
AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def base_env(**extra: str) -> dict[str, str]:
    """This process's environment without Ray's authentication variables and address, loopback only (as the
    clusters), the tests folder importable (by the clusters' workers too), with `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in AUTH_VARS and k != "RAY_ADDRESS"}
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS.parent), str(TESTS), env.get("PYTHONPATH")]))
    return {**env, **extra}


@dataclass(frozen=True)
class HostedCluster:
    address: str  # the GCS address, host:port
    client: str  # the Ray Client address, ray://host:port


@contextmanager
def cluster_process(env: dict[str, str], node_cpus: int = 2) -> Iterator[HostedCluster]:
    """A two-node cluster started by this script in a child process with `env`, its second node with `node_cpus`;
    shut down after."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__)), str(node_cpus)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline().split()
        assert len(line) == 2, f"the cluster did not start (exit status {proc.poll()})"
        yield HostedCluster(*line)
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)


RESOURCES = """
import json, sys
import ray
ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
print(json.dumps([ray.cluster_resources().get("CPU"), ray.available_resources().get("CPU", 0.0)]))
"""


def cpus(address: str) -> tuple[float, float]:
    """The cluster's CPUs and those no actor holds, asked by a driver of its own (Ray's public API)."""
    out = subprocess.run([sys.executable, "-c", RESOURCES, address], capture_output=True, text=True, timeout=300,
                         env=base_env(), check=True).stdout
    total, free = json.loads(out.strip().splitlines()[-1])
    return total, free


def assert_all_cpus_free(address: str, within: float = 60.0) -> None:
    """No actor holds any of the cluster's CPUs (pearl's learner and workers hold some while they live), within
    `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        total, free = cpus(address)
        if free == total:
            return
        assert time.monotonic() < deadline, f"actors still hold {total - free:g} of the cluster's CPUs"
        time.sleep(1)


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
    cluster.add_node(num_cpus=int(sys.argv[1]) if len(sys.argv) > 1 else 2, object_store_memory=STORE)
    cluster.wait_for_nodes()
    print(cluster.address, f"ray://127.0.0.1:{client_port}", flush=True)
    try:
        sys.stdin.read()
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
