"""DDPG's Ornstein–Uhlenbeck exploration noise: the process against a plain numpy oracle on the same Philox
draws, its statistics, its restart when an env's episode ends, and the config field that selects it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cli_support import run_cli

from pearl import rng
from pearl.adapters.torch import TorchAdapter
from pearl.algos import DDPGConfig, preset
from pearl.algos.params import init_params
from pearl.envs import env_spec
from pearl.errors import ConfigError
from pearl.runtime.protocol import VectorActor
from pearl.types import EnvSpec

OU = "ornstein-uhlenbeck"
THETA, DT = 0.15, 0.01  # SB3's OrnsteinUhlenbeckActionNoise defaults, written out again on purpose
SMALL = DDPGConfig(hidden=(16, 16), noise_type=OU)


def _kernels(config: DDPGConfig, seed: int, obs_dim: int = 3, action_dim: int = 2):
    """An act kernel with the config's noise and a second one for μ(s) alone (its own call counter)."""
    spec = EnvSpec("Box-v0", obs_dim, "continuous", action_dim, (-1.0,) * action_dim, (1.0,) * action_dim)
    params = init_params(config, spec, seed=1)
    cpu = TorchAdapter("cpu")
    return cpu.make_act(config, spec, params, seed), cpu.make_act(config, spec, params, seed)


def _eps(key: int, call: int, shape: tuple[int, int]) -> np.ndarray:
    """The N(0, 1) draw of every element at act call `call`: counters (flat index, call)."""
    r0, r1 = rng.philox2x32(key, np.arange(shape[0] * shape[1]), np.uint32(call))
    return rng.normal(r0, r1).astype(np.float64).reshape(shape)


def test_the_process_is_the_recurrence_on_the_same_philox_draws() -> None:
    """x_{t+1} = x_t + θ(0 − x_t)dt + σ√dt ε_t from x_0 = 0, in float64 one step at a time, against the
    kernel's float32 state and its actions clip(μ(s) + x)."""
    sigma, key, n, d = 0.7, 13, 5, 2
    act, mu_act = _kernels(SMALL, key, obs_dim=3, action_dim=d)
    obs = np.random.default_rng(0).normal(size=(n, 3)).astype(np.float32)
    mu = mu_act.act(obs, 0.0)
    x = np.zeros((n, d))
    for t in range(300):
        actions = act.act(obs, sigma)
        eps = _eps(key, t, (n, d))
        for i in range(n):
            for j in range(d):
                x[i, j] = x[i, j] + THETA * (0.0 - x[i, j]) * DT + sigma * math.sqrt(DT) * eps[i, j]
        np.testing.assert_allclose(act.noise_state(), x, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(actions, np.clip(mu + x, -1.0, 1.0), atol=2e-6)
    assert np.abs(x).max() > 0.3  # the process went somewhere: the test compared real noise


def test_the_process_has_the_ou_mean_variance_and_correlation() -> None:
    """Over 4,096 independent processes (rows) after t steps from 0: mean 0, variance σ²dt(1 − a^{2t})/(1 − a²)
    with a = 1 − θdt, and correlation a^k √(Var_t / Var_{t+k}) between x_t and x_{t+k}; Gaussian noise of the
    same σ has no correlation between steps."""
    sigma, n, t, k = 0.5, 4096, 150, 50
    act, _ = _kernels(SMALL, 3, obs_dim=3, action_dim=1)
    obs = np.zeros((n, 3), np.float32)
    states = []
    for _ in range(t + k):
        act.act(obs, sigma)
        states.append(act.noise_state()[:, 0].astype(np.float64))
    a = 1.0 - THETA * DT

    def variance(steps: int) -> float:
        return sigma ** 2 * DT * (1 - a ** (2 * steps)) / (1 - a ** 2)

    x_t, x_tk = states[t - 1], states[t + k - 1]
    assert abs(x_t.mean()) < 4 * math.sqrt(variance(t) / n)
    assert x_t.var() == pytest.approx(variance(t), rel=0.1)  # the sample variance's sd is √(2/n) ≈ 2.2 %
    want = a ** k * math.sqrt(variance(t) / variance(t + k))
    assert np.corrcoef(x_t, x_tk)[0, 1] == pytest.approx(want, abs=0.05)

    gauss, mu_act = _kernels(DDPGConfig(hidden=(16, 16)), 3, obs_dim=3, action_dim=1)
    mu = mu_act.act(obs, 0.0)[:, 0]
    steps = [gauss.act(obs, 0.05)[:, 0] - mu for _ in range(2)]  # σ small: nothing clipped
    assert abs(np.corrcoef(steps[0], steps[1])[0, 1]) < 0.1
    assert gauss.noise_state() is None


def test_new_episodes_restart_only_their_rows() -> None:
    sigma, key, n, d = 0.5, 21, 6, 2
    act, _ = _kernels(SMALL, key, obs_dim=3, action_dim=d)
    obs = np.random.default_rng(2).normal(size=(n, 3)).astype(np.float32)
    for _ in range(20):
        act.act(obs, sigma)
    before = act.noise_state()
    rows = np.array([True, False, False, True, False, True])
    act.new_episodes(rows)
    assert np.all(act.noise_state()[rows] == 0) and np.array_equal(act.noise_state()[~rows], before[~rows])
    act.act(obs, sigma)
    scale = np.float32(sigma * math.sqrt(DT))
    first = scale * _eps(key, 20, (n, d)).astype(np.float32)  # x_1 = σ√dt ε from x_0 = 0, exactly in float32
    assert np.array_equal(act.noise_state()[rows], first[rows])
    assert not np.any(act.noise_state()[~rows] == first[~rows])  # the others went on from where they were
    state = act.noise_state()
    act.act(obs, 0.0)  # σ = 0 (an evaluation): μ(s) alone, and the processes wait
    assert np.array_equal(act.noise_state(), state)


def test_the_actor_restarts_an_envs_process_when_its_episode_ends() -> None:
    """Pendulum's episodes end at 200 steps (truncated). After the next step (the vector env's reset step, whose
    action is ignored) the process is back at 0, and the new episode's first action gets x_1 = σ√dt ε, as a
    fresh process would: SB3 resets the noise of an env whose episode is done."""
    sigma, key, n = 0.5, 7, 2
    spec = env_spec("Pendulum-v1")
    config = DDPGConfig(hidden=(16, 16), n_envs=n, noise_type=OU)
    act = TorchAdapter("cpu").make_act(config, spec, init_params(config, spec, seed=0), key)
    actor = VectorActor(0, "Pendulum-v1", spec, n, act, seed=4)
    try:
        for _ in range(199):
            assert len(actor.step(sigma)) == n and not actor.drain_episodes()
        assert np.all(act.noise_state() != 0)
        actor.step(sigma)  # step 200 ends both episodes
        assert len(actor.drain_episodes()) == n and np.all(act.noise_state() == 0)
        assert len(actor.step(sigma)) == 0  # the reset step: no transition, and the process starts again
        assert np.all(act.noise_state() == 0)
        batch = actor.step(sigma)  # act call number 201: the new episodes' first action
        scale = np.float32(sigma * math.sqrt(DT))
        assert np.array_equal(act.noise_state(), scale * _eps(key, 201, (n, 1)).astype(np.float32))
        assert len(batch) == n
    finally:
        actor.close()


def test_noise_type_is_checked_and_set_from_text() -> None:
    assert DDPGConfig().noise_type == "gaussian"
    assert DDPGConfig().with_text({"noise_type": OU}).noise_type == OU
    with pytest.raises(ConfigError, match="noise_type must be one of gaussian, ornstein-uhlenbeck, got 'brownian'"):
        DDPGConfig(noise_type="brownian").validate()
    with pytest.raises(ConfigError, match="noise_type must be a str"):
        DDPGConfig(noise_type=1).validate()  # e.g. from a hand-edited config file


def test_a_bad_noise_type_at_the_cli_is_one_error_line(capsys, tmp_path) -> None:
    code, _, err = run_cli(capsys, "train", "--algo", "ddpg", "--env", "Pendulum-v1", "--steps", "300",
                           "--set", "noise_type=ou", "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and "noise_type must be one of" in err
    assert not (tmp_path / "runs").exists()


def test_the_mountaincar_continuous_preset_uses_the_zoos_ou_noise() -> None:
    config = preset("ddpg", "MountainCarContinuous-v0")
    assert (config.noise_type, config.action_noise) == (OU, 0.5)
    assert preset("ddpg", "Pendulum-v1").noise_type == "gaussian"
