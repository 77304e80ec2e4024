"""The rl-baselines3-zoo presets of TD3 and SAC beyond Pendulum (pearl/algos/presets.py cites each): they validate
and build, train a few hundred steps on the sequential launcher, and use what they need of pearl: TD3 DDPG's
Ornstein-Uhlenbeck noise, SAC a fixed entropy coefficient."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from cli_support import run_cli
from learn_support import final_learn_state

from pearl.adapters.torch import TorchAdapter
from pearl.algos import DDPGConfig, TD3Config, preset
from pearl.algos.params import init_params
from pearl.algos.presets import has_preset
from pearl.errors import ConfigError
from pearl.types import EnvSpec

OU = "ornstein-uhlenbeck"
MCC, LLC = "MountainCarContinuous-v0", "LunarLanderContinuous-v3"
# the envs' spaces, written out so that the presets build without Box2D (LunarLander's extra)
SPECS = {MCC: EnvSpec(MCC, 2, "continuous", 1, (-1.0,), (1.0,)),
         LLC: EnvSpec(LLC, 8, "continuous", 2, (-1.0, -1.0), (1.0, 1.0))}
PRESETS = [(algo, env) for algo in ("td3", "sac") for env in (MCC, LLC)]
SHORT = ["--eval-episodes", "1", "--eval-every", "0", "--launcher", "sequential", "--set", "hidden=8,8",
         "--set", "batch_size=32", "--json"]


@pytest.mark.parametrize("algo,env_id", PRESETS)
def test_each_preset_validates_and_builds_its_kernels(algo: str, env_id: str) -> None:
    assert has_preset(algo, env_id)
    config = preset(algo, env_id)
    config.validate()
    spec, cpu = SPECS[env_id], TorchAdapter("cpu")
    params = init_params(config, spec, seed=0)
    act = cpu.make_act(config, spec, params, seed=0)
    actions = act.act(np.zeros((1, spec.obs_dim), np.float32), config.exploration(0))
    assert actions.shape == (1, spec.action_dim) and np.all(np.abs(actions) <= 1.0)
    learn = cpu.make_learn(config, spec, params, seed=0)
    assert set(learn.state_dict()) >= {"qf1.0.weight", "qf2.0.weight", "actor.0.weight"}


def test_the_presets_carry_the_zoo_settings_that_need_pearls_features() -> None:
    td3 = preset("td3", MCC)
    assert (td3.noise_type, td3.action_noise, td3.total_steps) == (OU, 0.5, 300_000)
    ddpg = preset("ddpg", MCC).to_dict()  # the zoo gives TD3 and DDPG the same MountainCar settings
    assert {k: v for k, v in td3.to_dict().items() if k in ddpg and k != "algo"} == {
        k: v for k, v in ddpg.items() if k != "algo"}
    sac = preset("sac", MCC)
    assert (sac.tune_alpha, sac.initial_alpha, sac.learning_starts, sac.hidden) == (False, 0.1, 0, (64, 64))
    assert (sac.train_freq, sac.gradient_steps, sac.batch_size, sac.gamma) == (32, 32, 512, 0.9999)
    llc = preset("sac", LLC)
    assert (llc.tune_alpha, llc.learning_rate, llc.tau, llc.total_steps) == (True, 7.3e-4, 0.01, 500_000)


@pytest.mark.parametrize("noise", ["gaussian", OU])
def test_td3s_act_is_ddpgs_with_either_noise(noise: str) -> None:
    """The torch TD3 act and DDPG's, of the same actor, seed and σ, give the same actions step for step, the
    Ornstein-Uhlenbeck state too, and restart it alike when an episode ends."""
    spec, cpu = SPECS[LLC], TorchAdapter("cpu")
    td3 = TD3Config(hidden=(16, 16), noise_type=noise)
    params = init_params(td3, spec, seed=1)  # DDPG's act reads the actor's parameters alone
    ddpg = DDPGConfig(hidden=(16, 16), noise_type=noise)
    acts = [cpu.make_act(config, spec, params, seed=7) for config in (td3, ddpg)]
    obs = np.random.default_rng(0).normal(size=(3, spec.obs_dim)).astype(np.float32)
    for t in range(40):
        if t == 20:
            for act in acts:
                act.new_episodes(np.array([True, False, True]))
        a, b = (act.act(obs, 0.5) for act in acts)
        np.testing.assert_array_equal(a, b)
    states = [act.noise_state() for act in acts]
    if noise == OU:
        np.testing.assert_array_equal(states[0], states[1])
        assert np.abs(states[0]).max() > 0.05
    else:
        assert states == [None, None]


def test_td3s_noise_type_is_checked_as_ddpgs() -> None:
    with pytest.raises(ConfigError, match="noise_type must be one of gaussian, ornstein-uhlenbeck, got 'brownian'"):
        TD3Config(noise_type="brownian").validate()
    assert TD3Config().with_text({"noise_type": OU}).noise_type == OU


def _train(capsys, tmp_path: Path, algo: str, env_id: str, steps: int, *extra: str) -> dict:
    code, out, err = run_cli(capsys, "train", "--algo", algo, "--env", env_id, "--steps", str(steps), *SHORT,
                             *extra, "--runs-dir", str(tmp_path / "runs"))
    assert code == 0, err
    return json.loads(out)


def test_td3_with_ou_noise_trains_and_its_noise_reaches_the_run(capsys, tmp_path) -> None:
    """The MountainCar preset (OU noise) trains on the sequential launcher; the same run with Gaussian noise of
    the same σ collects other transitions, so ends with other weights."""
    ou = _train(capsys, tmp_path, "td3", MCC, 300)
    hyper = json.loads((Path(ou["run_dir"]) / "config.json").read_text())["hyperparameters"]
    assert (hyper["noise_type"], hyper["action_noise"]) == (OU, 0.5) and ou["updates"] == 200
    gauss = _train(capsys, tmp_path, "td3", MCC, 300, "--set", "noise_type=gaussian")
    a, b = final_learn_state(ou["run_dir"]), final_learn_state(gauss["run_dir"])
    assert not np.array_equal(a["actor.0.weight"], b["actor.0.weight"])


def test_sac_with_a_fixed_coefficient_trains_with_alpha_held(capsys, tmp_path) -> None:
    """The MountainCar preset (ent_coef 0.1, 32 updates every 32 steps from the first) trains on the sequential
    launcher, and its final state holds log α at log 0.1, never stepped."""
    result = _train(capsys, tmp_path, "sac", MCC, 256)
    assert result["updates"] == 256
    state = final_learn_state(result["run_dir"])
    assert float(state["log_alpha"]) == pytest.approx(math.log(0.1), rel=1e-6)
    assert int(state["adam.step.log_alpha"]) == 0 and int(state["adam.step.actor"]) == 256


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_the_lunarlander_presets_train(capsys, tmp_path, algo: str) -> None:
    """Skipped without Box2D; with it the spaces are the ones the tests above build on."""
    pytest.importorskip("Box2D", reason='LunarLander needs Box2D: pip install "pearl[box2d]"')
    from pearl.envs import env_spec

    spec = env_spec(LLC)
    assert (spec.obs_dim, spec.action_dim) == (SPECS[LLC].obs_dim, SPECS[LLC].action_dim)
    result = _train(capsys, tmp_path, algo, LLC, 200, "--set", "learning_starts=100")
    assert result["updates"] == 100
