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
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason='Ray is not installed (pip install "pearl[ray]")')


def base_env(**extra: str) -> dict[str, str]:
    """This process's environment without Ray's authentication variables and address, loopback only (as the
    clusters), the tests folder importable (by the clusters' workers too), with `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in AUTH_VARS and k != "RAY_ADDRESS"}
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS.parent), str(TESTS), env.get("PYTHONPATH")]))
    return {**env, **extra}


@pytest.fixture(scope="module")
def open_cluster() -> Iterator[str]:
    """A cluster without token authentication (RAY_AUTH_MODE unset: a Cluster's nodes do not turn it on)."""
    from ray_cluster_host import cluster_process

    with cluster_process(base_env()) as address:
        yield address


@pytest.fixture(scope="module")
def token_cluster() -> Iterator[tuple[str, str]]:
    """A cluster that requires a token, and the token."""
    from ray_cluster_host import cluster_process

    token = secrets.token_hex(16)
    with cluster_process(base_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)) as address:
        yield address, token


def home_with_token(tmp_path: Path, token: str | None = "left-over-by-an-earlier-local-run") -> Path:
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    if token is not None:
        (home / ".ray" / "auth_token").write_text(token)
    return home


def train(tmp_path: Path, address: str, home: Path, **env: str) -> subprocess.CompletedProcess:
    """`pearl train` of a short DQN CartPole run on the cluster at `address`, one actor, as a new process."""
    return subprocess.run([sys.executable, "-m", "pearl", "train", "--algo", "dqn", "--env", "CartPole-v1",
                           "--steps", "512", "--set", "learning_starts=256", "--eval-episodes", "0", "--actors", "1",
                           "--launcher", "ray", "--ray-address", address, "--runs-dir", str(tmp_path / "runs"),
                           "--json"], capture_output=True, text=True, timeout=600,
                          env=base_env(HOME=str(home), **env))


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), \
        (result.returncode, result.stderr[-3000:])
    return lines[0]


@needs_ray
def test_a_leftover_token_file_does_not_stop_joining_a_cluster_without_authentication(open_cluster, tmp_path) -> None:
    """The issue's case: an earlier local run left ~/.ray/auth_token; a cluster without authentication is joined
    all the same (pearl no longer turns token mode on because a file exists)."""
    result = train(tmp_path, open_cluster, home_with_token(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["steps"] == 512


@needs_ray
def test_a_driver_in_token_mode_on_a_cluster_without_authentication_is_one_error_line(open_cluster,
                                                                                       tmp_path) -> None:
    """The user asks for token mode where the cluster has none: Ray joins, then cancels every actor; pearl says so
    before placing any role, and how to fix it."""
    line = one_error_line(train(tmp_path, open_cluster, home_with_token(tmp_path), RAY_AUTH_MODE="token"))
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
