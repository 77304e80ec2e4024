"""Algorithms from other packages (the `pearl.algorithms` entry-point group, pearl/algos/registry.py): an
installed plugin is registered in every process that imports pearl, so it trains on the local launcher, whose
actor processes are fresh interpreters; a broken one is left out, and its name says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = '''
from dataclasses import dataclass

from pearl.algos.base import Algorithm
from pearl.algos.dqn import DQN, DQNConfig


@dataclass
class PlugConfig(DQNConfig):
    algo = "plug"


PLUG = Algorithm(name="plug", title="Plug", config_class=PlugConfig, action_kind="discrete", networks=DQN.networks,
                 policy_net="q", learn_work=DQN.learn_work, profile_env="CartPole-v1",
                 kernels={"torch": "pearl.adapters.torch.dqn:KERNELS"})
'''


@pytest.fixture
def site(tmp_path) -> Path:
    """A folder on the path holding an installed distribution with two entry points: a working algorithm and
    one whose module does not exist."""
    (tmp_path / "pearl_plug.py").write_text(PLUGIN)
    info = tmp_path / "pearl_plug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pearl-plug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pearl.algorithms]\nplug = pearl_plug:PLUG\nbroken = no_such_module:X\n")
    return tmp_path


def _run(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(site)])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def test_an_installed_plugin_is_registered_and_a_broken_one_says_why(site) -> None:
    code = ("import pearl\nprint(list(pearl.algorithm_names()))\ntry:\n    pearl.algorithm('broken')\n"
            "except pearl.errors.ConfigError as e:\n    print(e)")
    done = _run(site, "-c", code)
    assert done.returncode == 0, done.stderr
    names, why = done.stdout.splitlines()
    assert json.loads(names.replace("'", '"')) == ["dqn", "ddpg", "td3", "sac", "plug"]
    assert why.startswith("algorithm 'broken' (entry point group pearl.algorithms) was not loaded: importing "
                          "no_such_module:X failed: ModuleNotFoundError"), why


def test_a_plugin_trains_on_the_local_launcher(site, tmp_path) -> None:
    """The actor processes import pearl afresh: the plugin's entry reaches them through the entry point."""
    done = _run(site, "-m", "pearl", "train", "--algo", "plug", "--env", "CartPole-v1", "--steps", "400",
                "--set", "learning_starts=100", "--set", "train_freq=50", "--set", "gradient_steps=5",
                "--set", "batch_size=16", "--set", "hidden=16", "--launcher", "local", "--actors", "2",
                "--eval-episodes", "1", "--eval-every", "0", "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    [run] = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["algo"] == "plug" and summary["updates"] > 0
