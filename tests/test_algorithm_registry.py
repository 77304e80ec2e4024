"""The algorithm registry (pearl/algos/registry.py): an unknown algorithm is refused at every door, and every
stage asks the registry, so a third algorithm registered here (a toy: DQN's pieces under a new name, with a
Q-network one layer deeper) flows through config building, the env check, parameters, the roofline, the
torch adapter and a whole training run without any stage knowing its name."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import pearl
from pearl.algos import Algorithm, DQNConfig, algorithm, algorithm_names, preset, register, unregister
from pearl.algos.dqn import DQN
from pearl.algos.params import init_params, network_sizes, policy_net
from pearl.cli import cli
from pearl.roofline import Work, kernel_work
from pearl.envs import check_algo_fits, env_spec
from pearl.errors import ConfigError, DeviceError, EnvError
from pearl.profile.format import Workload, workload_key
from pearl.profiler.options import ProfileOptions
from pearl.profiler.profiler import workloads
from cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class ToyConfig(DQNConfig):
    algo = "toy"


def toy_networks(obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> dict[str, list[int]]:
    """DQN's Q-network with its last hidden layer twice: a shape no built-in algorithm has."""
    return {"q": [obs_dim, *hidden, hidden[-1], action_dim]}


TOY = Algorithm(name="toy", title="Toy", config_class=ToyConfig, action_kind="discrete", networks=toy_networks,
                policy_net="q", learn_work=DQN.learn_work, profile_env="CartPole-v1",
                kernels={"torch": "pearl.adapters.torch.dqn:KERNELS"})  # DQN's torch kernels take any depth


@pytest.fixture
def toy():
    register(TOY)
    try:
        yield TOY
    finally:
        unregister("toy")


class UnregisteredConfig(DQNConfig):
    algo = "ppo"  # a config of an algorithm the registry does not know


# ------------------------------------------------------------------------------- unknown algorithm, every door
@pytest.mark.parametrize("command", [
    ["train", "--algo", "dqnn", "--env", "CartPole-v1"],
    ["profile", "--quick", "--algo", "dqnn"],
    ["plan", "--profile", "p.json", "--algo", "dqnn", "--env", "CartPole-v1"],
    ["compare", "--profile", "p.json", "--algo", "dqnn", "--env", "CartPole-v1"],
])
def test_the_cli_refuses_an_unknown_algorithm_naming_the_nearest(capsys, tmp_path, monkeypatch, command) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, *command)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: "), err
    assert "'dqnn' is not one of 'dqn', 'ddpg'" in err and "did you mean 'dqn'?" in err, err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_cli_choices_are_the_registry_names() -> None:
    for name in ("train", "plan", "compare", "profile"):
        choices = next(p.type.choices for p in cli.commands[name].params if "--algo" in p.opts)
        assert list(choices) == [*algorithm_names(), *(["all"] if name == "profile" else [])]


@pytest.mark.parametrize("door", [
    lambda tmp: pearl.train("ppo", "CartPole-v1", runs_dir=str(tmp)),
    lambda tmp: preset("ppo", "CartPole-v1"),
    lambda tmp: algorithm("ppo"),
    lambda tmp: check_algo_fits("ppo", env_spec("CartPole-v1")),
    lambda tmp: workloads(ProfileOptions(quick=True, algos=("ppo",))),
    lambda tmp: network_sizes(UnregisteredConfig(), env_spec("CartPole-v1")),
    lambda tmp: policy_net("ppo"),
    lambda tmp: kernel_work("act", Workload("x", "ppo", "Tiny-v0", 2, 2, (3,), 4, 100), 1),
])
def test_the_python_api_refuses_an_unknown_algorithm(tmp_path, door) -> None:
    with pytest.raises(ConfigError, match=r"unknown algorithm 'ppo'; pearl knows: dqn, ddpg"):
        door(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_near_miss_gets_a_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"unknown algorithm 'DDPG' \(did you mean ddpg\?\)"):
        algorithm("DDPG")


@pytest.mark.parametrize("make", ["make_act", "make_learn"])
def test_an_adapter_builds_no_kernel_for_an_unknown_algorithm(make) -> None:
    from pearl.adapters.torch import TorchAdapter

    config, spec = UnregisteredConfig(hidden=(8,)), env_spec("CartPole-v1")
    params = init_params(DQNConfig(hidden=(8,)), spec, seed=0)
    args = (config, spec, params, 0) if make == "make_act" else (config, spec, params)
    with pytest.raises(ConfigError, match="unknown algorithm 'ppo'"):
        getattr(TorchAdapter("cpu"), make)(*args)


def test_an_entry_must_agree_with_its_config_and_networks() -> None:
    with pytest.raises(ValueError, match="config class says algo 'dqn'"):
        Algorithm(name="other", title="Other", config_class=DQNConfig, action_kind="discrete",
                  networks=toy_networks, policy_net="q", learn_work=DQN.learn_work, profile_env="CartPole-v1")
    with pytest.raises(ValueError, match="names networks it lacks: \\['actor'\\]"):
        Algorithm(name="toy", title="Toy", config_class=ToyConfig, action_kind="discrete", networks=toy_networks,
                  policy_net="actor", learn_work=DQN.learn_work, profile_env="CartPole-v1")
    with pytest.raises(ValueError, match="already registered"):
        register(DQN)


# ------------------------------------------------------------------------- a third algorithm, through each stage
def test_a_registered_algorithm_builds_its_config_and_checks_its_env(toy) -> None:
    assert "toy" in algorithm_names()
    assert type(preset("toy", "CartPole-v1")) is ToyConfig  # no preset: the entry's config class, at its defaults
    [(config, spec)] = workloads(ProfileOptions(quick=True, algos=("toy",)))  # pearl profile: the entry's env
    assert type(config) is ToyConfig and spec.env_id == "CartPole-v1"
    every_entry = ["dqn", "ddpg", "td3", "sac", "toy"]
    assert [c.algo for c, _ in workloads(ProfileOptions(quick=True))] == every_entry
    check_algo_fits("toy", env_spec("CartPole-v1"))
    with pytest.raises(EnvError, match="Toy needs a discrete action space but Pendulum-v1 has continuous"):
        check_algo_fits("toy", env_spec("Pendulum-v1"))
    with pytest.raises(EnvError, match="DDPG needs a continuous .* use --algo dqn or --algo toy$"):
        check_algo_fits("ddpg", env_spec("CartPole-v1"))


def test_a_registered_algorithm_gets_its_own_networks_and_roofline(toy) -> None:
    config, spec = ToyConfig(hidden=(8,)), env_spec("CartPole-v1")
    assert network_sizes(config, spec) == {"q": [4, 8, 8, 2]}
    assert [k for k in init_params(config, spec, 0) if k.endswith("weight")] == [
        "q.0.weight", "q.1.weight", "q.2.weight", "q_target.0.weight", "q_target.1.weight", "q_target.2.weight"]
    wl = Workload(workload_key("toy", "Tiny-v0", 2, 2, (3,)), "toy", "Tiny-v0", 2, 2, (3,), 4, 100)
    # q [2, 3, 3, 2]: W = 6 + 9 + 6 = 21, P = 9 + 12 + 8 = 29, A = 5 + 6 + 5 = 16, L = 3
    assert kernel_work("act", wl, 1) == Work(42, 4 * (29 + 16), 3)
    # learn: 4 forward passes (DQN's learn_work) + Adam: flops 4*42 + 10*29, bytes 4*180 + 28*29, launches 4*3 + 1
    assert kernel_work("learn", wl, 1) == Work(458, 1532, 13)
    assert kernel_work("replay_insert", wl, 1) == Work(0, 4 * 7, 1)  # discrete: the action is one index


def test_a_registered_algorithm_gets_its_kernels_from_its_entry(toy) -> None:
    from pearl.adapters.torch import TorchAdapter

    config, spec = ToyConfig(hidden=(8,), batch_size=4), env_spec("CartPole-v1")
    params = init_params(config, spec, seed=0)
    adapter = TorchAdapter("cpu")
    actions = adapter.make_act(config, spec, params, seed=0).act(np.zeros((3, 4), np.float32), 0.0)
    assert actions.shape == (3,) and set(actions.tolist()) <= {0, 1}
    learner = adapter.make_learn(config, spec, params)
    assert set(learner.get_params()) == set(params)  # the toy's three-layer networks, not DQN's two
    with pytest.raises(DeviceError, match="Toy has no opencl kernels .* names kernels for: torch"):
        toy.kernel_factories("opencl")


def test_a_registered_algorithm_trains_end_to_end(toy, tmp_path) -> None:
    config = ToyConfig(hidden=(16,), learning_starts=100, train_freq=50, gradient_steps=5, batch_size=16)
    result = pearl.train("toy", "CartPole-v1", steps=300, seed=0, eval_episodes=1, eval_every=0, config=config,
                         runs_dir=str(tmp_path), launcher="sequential", checkpoint_every=0)
    assert result.algo == "toy" and result.updates == (300 - 100) // 50 * 5
    recorded = json.loads((Path(result.run_dir) / "config.json").read_text())
    assert recorded["algo"] == "toy" and recorded["hyperparameters"]["hidden"] == [16]


# ------------------------------------------------------------------------------------ no stage compares names
def test_no_module_compares_an_algorithm_name() -> None:
    """Outside the algorithms' own modules, no code decides by an algorithm's name: it asks the registry."""
    names = "|".join(re.escape(n) for n in algorithm_names())
    compare = re.compile(rf'''(==|!=|\bin\b)\s*[(\[{{]?\s*["'](?:{names})["']|["'](?:{names})["']\s*(==|!=)''')
    found = []
    for path in sorted((ROOT / "pearl").rglob("*.py")):
        if path.parent.name == "algos":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if compare.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
    assert compare.search('if config.algo == "dqn":') and compare.search('algo in ("dqn", "ddpg")')
