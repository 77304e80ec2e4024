"""Joining a Ray cluster as a new user would (`pearl train --launcher ray --ray-address`): with or without a token
file left in the home folder, a cluster with or without token authentication; what the driver is refused for
is one error line with its fix.

Each cluster is a two-node `ray.cluster_utils.Cluster` hosted by a process of its own (`ray_cluster_host`), one
per kind for the module, and each driver a `pearl` process: Ray reads the authentication mode once per process.
Every driver runs with a home folder of its own (with a leftover ~/.ray/auth_token where the test says so) and
the user's Ray authentication variables only as the test sets them.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_cluster_host import HostedCluster, assert_all_cpus_free, base_env, cluster_process, cpus

from pearl.runtime.ray.runs import PREFIX, STALE_S

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason='Ray is not installed (pip install "pearl[ray]")')


@pytest.fixture(scope="module")
def open_cluster() -> Iterator[HostedCluster]:
    """A cluster without token authentication (RAY_AUTH_MODE unset: a Cluster's nodes do not turn it on)."""
    with cluster_process(base_env()) as hosted:
        yield hosted


@pytest.fixture(scope="module")
def token_cluster() -> Iterator[tuple[str, str]]:
    """A cluster that requires a token (its address), and the token."""
    token = secrets.token_hex(16)
    with cluster_process(base_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)) as hosted:
        yield hosted.address, token


def home_with_token(tmp_path: Path, token: str | None = "left-over-by-an-earlier-local-run") -> Path:
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    if token is not None:
        (home / ".ray" / "auth_token").write_text(token)
    return home


def train_args(tmp_path: Path, address: str, steps: int = 512) -> list[str]:
    """`pearl train` of a DQN CartPole run on the cluster at `address`, one actor."""
    return [sys.executable, "-m", "pearl", "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", str(steps),
            "--set", "learning_starts=256", "--eval-episodes", "0", "--actors", "1", "--launcher", "ray",
            "--ray-address", address, "--runs-dir", str(tmp_path / "runs"), "--json"]


def train(tmp_path: Path, address: str, home: Path, **env: str) -> subprocess.CompletedProcess:
    """A short `train_args` run as a new process."""
    return subprocess.run(train_args(tmp_path, address), capture_output=True, text=True, timeout=600,
                          env=base_env(HOME=str(home), **env))


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), \
        (result.returncode, result.stderr[-3000:])
    return lines[0]


@needs_ray
@pytest.mark.parametrize("leftover", ["left-over-by-an-earlier-local-run", None], ids=["token-file", "no-token-file"])
def test_a_cluster_without_authentication_is_joined_with_or_without_a_leftover_token_file(
        open_cluster, tmp_path, leftover) -> None:
    """The issue's case: an earlier local run left ~/.ray/auth_token; a cluster without authentication is joined
    all the same (pearl no longer turns token mode on because a file exists), as without the file; after the
    run no actor of it holds any of the cluster's CPUs."""
    result = train(tmp_path, open_cluster.address, home_with_token(tmp_path, leftover))
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["steps"] == 512
    assert_all_cpus_free(open_cluster.address)


@needs_ray
def test_a_driver_in_token_mode_on_a_cluster_without_authentication_is_one_error_line(open_cluster,
                                                                                       tmp_path) -> None:
    """The user asks for token mode where the cluster has none: Ray joins, then cancels every actor; pearl says so
    before placing any role, and how to fix it."""
    line = one_error_line(train(tmp_path, open_cluster.address, home_with_token(tmp_path), RAY_AUTH_MODE="token"))
    assert "cancelled pearl's first actor" in line and "unset RAY_AUTH_MODE" in line


@needs_ray
def test_a_token_cluster_is_joined_with_the_token_in_the_users_environment(token_cluster, tmp_path) -> None:
    address, token = token_cluster
    result = train(tmp_path, address, home_with_token(tmp_path, None), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["steps"] == 512


@needs_ray
def test_a_token_cluster_joined_without_token_mode_is_refused_in_one_line(token_cluster, tmp_path) -> None:
    """RAY_AUTH_MODE unset (a leftover token file, another cluster's, changes nothing): Ray is refused by the
    cluster, and pearl's one line says that authentication was refused and what to set."""
    address, _ = token_cluster
    line = one_error_line(train(tmp_path, address, home_with_token(tmp_path)))
    assert "refused authentication" in line and "RAY_AUTH_MODE=token" in line and "RAY_AUTH_TOKEN" in line


def test_rays_version_mismatch_is_one_line_naming_both_versions_and_the_fix() -> None:
    """Ray's own check when it joins (the cluster's versions, then this process's), as `join_refused` gets it
    (the text of Ray 2.60's `check_version_info`): a cluster of another version cannot be started here."""
    from pearl.runtime.ray.session import join_refused

    text = ("Version mismatch: The cluster was started with:\n    Ray: 2.41.0\n    Python: 3.10.12\n"
            "This process on node 10.0.0.2 was started with:\n    Ray: 2.60.0\n    Python: 3.11.9\n")
    line = join_refused("10.0.0.5:6379", RuntimeError(text))
    assert "\n" not in line and line.startswith("version mismatch: the Ray cluster at 10.0.0.5:6379 runs Ray 2.41.0 "
                                                "on Python 3.10.12, this driver Ray 2.60.0 on Python 3.11.9")
    assert 'pip install "ray==2.41.0"' in line


def test_a_ray_client_server_that_cannot_start_the_drivers_server_is_one_line_with_its_reason() -> None:
    """Ray Client's proxy answered but its server for this driver did not come up (Ray's Init failure, with the
    proxy's traceback): the line says that, with the reason and where the log is, not that nothing answers."""
    from pearl.runtime.ray.session import join_refused

    text = ("Initialization failure from server:\nTraceback (most recent call last):\n  File \"proxier.py\", line 783,"
            " in Datapath\n    raise RuntimeError(\nRuntimeError: Proxy failed to Connect to backend! Check "
            "`ray_client_server.err` on the head node of the cluster for the relevant logs.\n")
    line = join_refused("ray://10.0.0.5:10001", ConnectionAbortedError(text))
    assert "\n" not in line and "answered but could not start" in line
    assert "(Proxy failed to Connect to backend!)" in line and "ray_client_server_<port>.err" in line
    assert "no Ray Client server answers" in join_refused("ray://10.0.0.5:6379",
                                                          ConnectionError("ray client connection timeout"))


@needs_ray
def test_ray_client_joins_through_the_heads_client_server(open_cluster, tmp_path) -> None:
    # Ray Client's driver waits 5 s, then 10 s, then 20 s for the head's proxy; more on a loaded 2-core machine.
    # The proxy now and then fails to start a driver's server at all (its log: "SpecificServer startup failed",
    # a gRPC fork race); pearl's error says to try again, and the test does, once.
    for attempt in range(2):
        result = train(tmp_path / str(attempt), open_cluster.client, home_with_token(tmp_path / str(attempt)),
                       RAY_CLIENT_INITIAL_CONNECTION_TIMEOUT_S="30")
        if "could not start this driver's server" not in result.stderr:
            break
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["steps"] == 512


@needs_ray
def test_ray_client_at_a_port_without_its_server_is_one_error_line(open_cluster, tmp_path) -> None:
    """ray:// with the GCS port (something answers there, not a Ray Client server): the reason and the fix."""
    line = one_error_line(train(tmp_path, "ray://" + open_cluster.address, home_with_token(tmp_path)))
    assert "no Ray Client server answers" in line and "without ray://" in line


@needs_ray
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["lost", "sigterm", "ctrl-c"])
def test_a_stopped_or_lost_driver_leaves_no_pearl_actor_on_the_cluster(open_cluster, tmp_path, sig) -> None:
    """The driver ended while its roles train: by SIGTERM or Ctrl-C (pearl stops its roles) or killed outright
    (SIGKILL, a lost driver: no cleanup of its own runs, Ray ends the actors it owned); the cluster's CPUs are
    all free again."""
    total, free = cpus(open_cluster.address)
    assert free == total
    proc = subprocess.Popen(train_args(tmp_path, open_cluster.address, steps=1_000_000), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=base_env(HOME=str(home_with_token(tmp_path))))
    try:
        deadline = time.monotonic() + 300
        while not list((tmp_path / "runs").glob("*/metrics.jsonl")) or \
                next((tmp_path / "runs").glob("*/metrics.jsonl")).read_text().count("\n") < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "training did not start within 300 s"
            time.sleep(0.5)
        assert cpus(open_cluster.address)[1] < total  # the learner and the worker hold CPUs
        proc.send_signal(sig)
        proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert_all_cpus_free(open_cluster.address)


NAMED = """
import json, sys
import ray
ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
print(json.dumps(ray.util.list_named_actors(all_namespaces=True)))
"""


def pearl_actors(address: str) -> dict[str, set[str]]:
    """The live named actors of every pearl namespace on the cluster (a run's roles and lease), asked by a driver
    of its own (Ray's public API)."""
    out = subprocess.run([sys.executable, "-c", NAMED, address], capture_output=True, text=True, timeout=300,
                         env=base_env(), check=True).stdout
    found: dict[str, set[str]] = {}
    for entry in json.loads(out.strip().splitlines()[-1]):
        if entry["namespace"].startswith(PREFIX):
            found.setdefault(entry["namespace"], set()).add(entry["name"])
    return found


@needs_ray
def test_a_finished_run_leaves_no_actor_of_its_namespace_on_a_shared_cluster(open_cluster, tmp_path) -> None:
    """Every role of a run is a named actor in the run's own namespace; once the run is over, none of them is
    alive (no pearl namespace appeared that was not there before)."""
    before = pearl_actors(open_cluster.address)
    result = train(tmp_path, open_cluster.address, home_with_token(tmp_path, None))
    assert result.returncode == 0, result.stderr[-3000:]
    after = pearl_actors(open_cluster.address)
    assert set(after) <= set(before), {ns: names for ns, names in after.items() if ns not in before}


@needs_ray
def test_a_lost_drivers_roles_are_removed_by_the_next_runs_start_in_one_line(open_cluster, tmp_path) -> None:
    """A Ray Client driver killed outright (SIGKILL): its session on the cluster outlives it for the reconnect grace
    period it asked for (300 s here), so its roles go on holding the cluster. The next run's start finds that run's
    lease not renewed for STALE_S, kills its actors and says so in one line, then runs."""
    before = pearl_actors(open_cluster.address)
    home = home_with_token(tmp_path, None)
    proc = subprocess.Popen(train_args(tmp_path / "lost", open_cluster.client, steps=1_000_000),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=base_env(HOME=str(home), RAY_CLIENT_RECONNECT_GRACE_PERIOD="300"))
    try:
        deadline = time.monotonic() + 300
        while True:
            new = {ns: names for ns, names in pearl_actors(open_cluster.address).items() if ns not in before}
            if any({"run", "learner", "worker-0"} <= names for names in new.values()):
                break
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run's roles did not start within 300 s"
            time.sleep(1)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    (lost,) = new
    time.sleep(STALE_S)
    assert {"run", "learner", "worker-0"} <= pearl_actors(open_cluster.address).get(lost, set())  # outlived it
    result = train(tmp_path / "next", open_cluster.address, home)
    assert result.returncode == 0, result.stderr[-3000:]
    notices = [line for line in result.stderr.splitlines() if lost in line]
    assert len(notices) == 1 and notices[0].startswith("pearl: removed the ") and "last renewed" in notices[0], \
        result.stderr[-3000:]
    assert lost not in pearl_actors(open_cluster.address)


def test_an_address_that_accepts_but_is_no_ray_head_is_one_error_line(capsys, tmp_path) -> None:
    """A port that accepts connections and says nothing (Ray would wait there for longer than 10 minutes): one
    error line, before the run folder is made."""
    from cli_support import run_cli

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        address = "127.0.0.1:%d" % server.getsockname()[1]
        code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "100",
                               "--launcher", "ray", "--ray-address", address, "--runs-dir", str(tmp_path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "not as a Ray head" in lines[0]
    assert not list(tmp_path.iterdir())


LOCAL_THEN_JOIN = """
import sys
from pearl.errors import ConfigError
from pearl.runtime.ray.session import connect, shutdown, start_local_ray
start_local_ray(num_cpus=1)
shutdown()
try:
    connect(sys.argv[1])
except ConfigError as exc:
    print(exc)
"""


@needs_ray
def test_joining_after_a_local_start_in_the_same_process_says_to_join_from_a_new_one(open_cluster, tmp_path) -> None:
    """Ray's local start turns token mode on for the whole process (Ray reads it once per process), so a later
    join of a cluster without authentication has its actors cancelled: pearl says that, not a bare death."""
    result = subprocess.run([sys.executable, "-c", LOCAL_THEN_JOIN, open_cluster.address], capture_output=True,
                            text=True, timeout=300, env=base_env(HOME=str(home_with_token(tmp_path, None))))
    assert "turned token authentication on for the whole process" in result.stdout, result.stderr[-3000:]
    assert "from a new process" in result.stdout
