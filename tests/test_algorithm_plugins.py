"""Algorithms from other packages (the `pearl.algorithms` entry-point group, pearl/algos/registry.py): an
installed plugin is registered in every process that imports pearl, so it trains on the local launcher, whose
actor processes are fresh interpreters, and on the Ray launcher, whose roles are processes Ray starts with the
Python environment of their node; a broken one is left out, and its name says why. A Ray node that lacks the
plugin is one error line naming it and what to install there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import importlib.util

import numpy as np
import pytest

#: a plugin's module: entry `{attr}`, algorithm `{name}` (DQN's maths under another name), with `{state}` added
MODULE = '''
from dataclasses import dataclass

from pearl.algos.base import Algorithm, LearnState
from pearl.algos.dqn import DQN, DQNConfig


@dataclass
class {title}Config(DQNConfig):
    algo = "{name}"


{attr} = Algorithm(name="{name}", title="{title}", config_class={title}Config, action_kind="discrete",
                   networks=DQN.networks, policy_net="q", learn_work=DQN.learn_work, profile_env="CartPole-v1",
                   kernels={{"torch": "pearl.adapters.torch.dqn:KERNELS"}}{state})
'''

PLUGIN = MODULE.format(attr="PLUG", name="plug", title="Plug", state="")

BAD_STATE = {  # module → an entry whose declared state does not hold together: its import fails
    "pearl_plug_badtarget": ("badtarget", "state=LearnState(targets=('q', 'critic'))"),
    "pearl_plug_badextra": ("badextra", "state=LearnState(extras=(('q_target', ()),))"),
}

#: a short run: 2 actors, 400 env steps, 35 updates of a 16-unit network
TRAIN = ("--algo", "plug", "--env", "CartPole-v1", "--steps", "400", "--set", "learning_starts=100", "--set",
         "train_freq=50", "--set", "gradient_steps=5", "--set", "batch_size=16", "--set", "hidden=16", "--actors", "2",
         "--eval-episodes", "1", "--eval-every", "0")

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the Ray launcher needs ray")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder on the path holding an installed distribution with entry points: a working algorithm, one whose
    module does not exist, and two whose declared state does not hold together."""
    folder = tmp_path_factory.mktemp("site")
    (folder / "pearl_plug.py").write_text(PLUGIN)
    for module, (name, state) in BAD_STATE.items():
        (folder / f"{module}.py").write_text(MODULE.format(attr="BAD", name=name, title="Bad", state=f", {state}"))
    info = folder / "pearl_plug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pearl-plug\nVersion: 0.1\n")
    bad = "".join(f"{name} = {module}:BAD\n" for module, (name, _) in BAD_STATE.items())
    (info / "entry_points.txt").write_text(f"[pearl.algorithms]\nplug = pearl_plug:PLUG\nbroken = no_such_module:X\n"
                                           f"{bad}")
    return folder


def _run(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python args` with pearl and `site` on PYTHONPATH, as an installed package would be."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(site)]), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def _final_learn_state(runs: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """The run's summary and its final checkpoint's learn state (every network, target and Adam moment)."""
    from pearl.runtime.checkpoint import candidates, read_checkpoint

    [run] = runs.iterdir()
    return json.loads((run / "summary.json").read_text()), read_checkpoint(candidates(run / "checkpoints")[0]).learn


@pytest.fixture(scope="module")
def local_run(site, tmp_path_factory) -> tuple[dict, dict[str, np.ndarray]]:
    """The short run on the local launcher: its actor processes import pearl afresh."""
    folder = tmp_path_factory.mktemp("local")
    done = _run(site, "-m", "pearl", "train", *TRAIN, "--launcher", "local", "--runs-dir", str(folder / "runs"),
                cwd=folder)
    assert done.returncode == 0, done.stderr[-2000:]
    return _final_learn_state(folder / "runs")


def test_an_installed_plugin_is_registered_and_a_broken_one_says_why(site) -> None:
    code = ("import pearl\nprint(list(pearl.algorithm_names()))\ntry:\n    pearl.algorithm('broken')\n"
            "except pearl.errors.ConfigError as e:\n    print(e)")
    done = _run(site, "-c", code)
    assert done.returncode == 0, done.stderr
    names, why = done.stdout.splitlines()
    assert json.loads(names.replace("'", '"')) == ["dqn", "ddpg", "td3", "sac", "plug"]
    assert why.startswith("algorithm 'broken' (entry point group pearl.algorithms) was not loaded: importing "
                          "no_such_module:X failed: ModuleNotFoundError"), why


@pytest.mark.parametrize("name, why", [
    ("badtarget", "ValueError: algorithm 'badtarget' names networks it lacks: ['critic']"),
    ("badextra", "ValueError: algorithm 'badextra' declares extra state ['q_target'] twice or under the name of a "
                 "network"),
])
def test_a_plugin_declaring_an_inconsistent_state_is_one_error_line_naming_it(site, tmp_path, name, why) -> None:
    done = _run(site, "-m", "pearl", "train", "--algo", name, "--env", "CartPole-v1", "--steps", "100",
                "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    [line] = done.stderr.splitlines()
    module = next(m for m, (n, _) in BAD_STATE.items() if n == name)
    assert line.startswith(f"error: algorithm '{name}' (entry point group pearl.algorithms) was not loaded: "
                           f"importing {module}:BAD failed: {why}"), line
    assert line.endswith("; fix or uninstall the package that provides it"), line
    assert not (tmp_path / "runs").exists()


def test_a_plugin_trains_on_the_local_launcher(local_run) -> None:
    """The actor processes import pearl afresh: the plugin's entry reaches them through the entry point."""
    summary, _ = local_run
    assert summary["algo"] == "plug" and summary["updates"] > 0


@needs_ray
def test_a_plugin_trains_on_the_ray_launcher_with_the_local_launchers_bits(site, local_run, tmp_path) -> None:
    """`pearl train --launcher ray` starts a local Ray, whose workers have the driver's environment (the
    plugin's folder on PYTHONPATH): the learner role and the actor workers register the plugin through its
    entry point, and the same seed gives the local launcher's final parameters bit for bit."""
    done = _run(site, "-m", "pearl", "train", *TRAIN, "--launcher", "ray", "--runs-dir", str(tmp_path / "runs"),
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ray launcher, 2 actor(s)" in done.stdout
    summary, learn = _final_learn_state(tmp_path / "runs")
    local_summary, local_learn = local_run
    assert summary["algo"] == "plug" and summary["updates"] == local_summary["updates"] > 0
    assert learn.keys() == local_learn.keys() and "q_target.0.weight" in learn
    for name, value in learn.items():
        assert np.array_equal(value, local_learn[name]), name


NODE_LACKS = '''
import sys

from pearl.runtime.ray.session import shutdown, start_local_ray

start_local_ray(num_cpus=2)  # Ray's workers get this process's environment: PYTHONPATH without the plugin
sys.path.append(sys.argv[1])  # the driver alone has it, as a cluster node without the plugin would be
import pearl_ghost  # on PYTHONPATH, so the workers import it too, but no entry point names it
from pearl.algos.registry import register
from pearl.errors import ConfigError
from pearl.training import train

register(pearl_ghost.GHOST)
for algo in ("plug", "ghost"):
    try:
        train(algo, "CartPole-v1", launcher="ray", actors=1, steps=200, eval_episodes=0, eval_every=0,
              runs_dir=sys.argv[2], settings={"learning_starts": "100", "hidden": "16"})
        print("trained")
    except ConfigError as exc:
        print(exc)
shutdown()
'''

GHOST = MODULE.format(attr="GHOST", name="ghost", title="Ghost", state="")


@needs_ray
def test_a_ray_node_without_the_plugin_is_one_error_line_naming_it_and_what_to_install(site, tmp_path) -> None:
    """The driver has the plugin, the Ray workers do not (its folder is on the driver's sys.path alone): the
    role that cannot unpickle the plugin's config is one line naming the algorithm and the package to install
    on every node. An algorithm registered at run time, whose module the workers import but whose name their
    registry lacks, is one line saying it exists in the driver alone. One Ray start for both."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "pearl_ghost.py").write_text(GHOST)
    runs = tmp_path / "runs"
    done = _run(shared, "-c", NODE_LACKS, str(site), str(runs), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    plug, ghost = done.stdout.splitlines()[-2:]
    assert plug == ("algorithm 'plug' is not available on Ray node 127.0.0.1 (No module named 'pearl_plug'): install "
                    "pearl-plug 0.1 there, in the Python environment Ray runs pearl's roles with; a plugin algorithm "
                    "(pearl.algorithms entry point plug = pearl_plug:PLUG) must be installed on every node, as on the "
                    "driver"), plug
    assert ghost.startswith("algorithm 'ghost' was registered at run time in this process only, so Ray node "
                            "127.0.0.1 does not have it (there: unknown algorithm 'ghost'"), ghost
    assert ghost.endswith("make it a plugin (pearl.algorithms entry point) installed on every node, or train it with "
                          "the sequential launcher"), ghost
