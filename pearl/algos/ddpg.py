"""DDPG (Lillicrap et al., 2016): a deterministic actor and a Q critic, both with Polyak-averaged targets.

Maths of one `learn` call on a batch (s, a, r, s', d, w), actions in the policy's [-1, 1] space:
    y          = r + γ (1 − d) Q_target(s', μ_target(s'))
    δ          = y − Q(s, a)
    critic     : minimise mean_i w_i · δ_i²            (one Adam step)
    actor      : minimise −mean_i Q(s_i, μ(s_i))       (one Adam step; the gradient reaches μ through the
                                                        critic's action input)
    targets   ← τ · online + (1 − τ) · target          (both networks, every update)
and returns δ. `act` is μ(s) = tanh(MLP(s)) plus exploration noise n_t, clipped to [-1, 1]; the actor role
rescales it to the environment's bounds. The noise (`noise_type`) is either

    gaussian            n_t = σ · ε_t
    ornstein-uhlenbeck  n_t = x_t,  x_t = x_{t−1} + θ (μ − x_{t−1}) dt + σ √dt · ε_t,  θ = 0.15, dt = 1e-2,
                        μ = 0, one process per env and action dimension, x = 0 before an episode's first act

with ε_t ~ N(0, 1) the Philox draw of pearl/rng.py for that element and act call (the same draw both kinds
use). The Ornstein–Uhlenbeck process is Stable-Baselines3's (stable_baselines3/common/noise.py,
OrnsteinUhlenbeckActionNoise, 2.9.2: the same recurrence, defaults θ and dt, initial noise 0; its
off_policy_algorithm.py adds it to the action in [-1, 1] and clips, `_sample_action`, and resets an env's
process when that env's episode ends, `collect_rollouts`). Two differences, both of pearl's schedule: SB3 adds
the noise to the uniform warm-up actions too (advancing the process), pearl's warm-up actions are uniform
without noise and the process starts at learning_starts; and SB3 keeps x in float64, pearl in float32 (the
OpenCL kernel's precision) with θ·dt and σ·√dt rounded once to float32 (`ou_coefficients`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from pearl.algos.base import ActorCriticConfig, Algorithm, LearnWork
from pearl.errors import ConfigError

NoiseType = Literal["gaussian", "ornstein-uhlenbeck"]
NOISE_TYPES: tuple[str, ...] = get_args(NoiseType)
OU_THETA = 0.15  # mean reversion rate, SB3's default (the zoo's MountainCarContinuous keeps it)
OU_DT = 1e-2  # time step of the process, SB3's default


def ou_coefficients(sigma: float) -> tuple[np.float32, np.float32]:
    """(θ·dt, σ·√dt) as the float32 scalars every adapter uses, so that their updates round alike."""
    return np.float32(OU_THETA * OU_DT), np.float32(sigma * math.sqrt(OU_DT))


def ou_step(x: np.ndarray, eps: np.ndarray, sigma: float) -> np.ndarray:
    """The next state of Ornstein–Uhlenbeck processes at x (float32) given their N(0, 1) draws eps:
    x + θ(0 − x)·dt + σ√dt·ε, evaluated as (x − θdt·x) + σ√dt·ε in float32, the OpenCL kernel's order."""
    theta_dt, scale = ou_coefficients(sigma)
    return (x - theta_dt * x) + scale * eps


@dataclass
class DeterministicPolicyConfig(ActorCriticConfig):
    """What DDPG and TD3 share: a deterministic policy explored with action noise of σ `action_noise`, Gaussian or
    Ornstein–Uhlenbeck (this module's docstring; both algorithms act with DDPG's act kernel). Not an algorithm
    itself (no registry entry names it)."""

    action_noise: float = 0.1
    """σ of the exploration noise, in the policy's [-1, 1] action space (of the Gaussian, or the
    Ornstein–Uhlenbeck process's σ)."""
    noise_type: NoiseType = "gaussian"
    """The exploration noise: "gaussian" (independent N(0, σ²) each step) or "ornstein-uhlenbeck"
    (temporally correlated, θ = 0.15, dt = 0.01, restarted at 0 with each episode; see the module docstring)."""

    def exploration(self, step: int) -> float:
        return self.action_noise  # constant σ, of either noise

    def validate(self) -> None:
        super().validate()
        if self.action_noise < 0:
            raise ConfigError(f"action_noise must be >= 0, got {self.action_noise}")
        if self.noise_type not in NOISE_TYPES:
            raise ConfigError(f"noise_type must be one of {', '.join(NOISE_TYPES)}, got {self.noise_type!r}")


@dataclass
class DDPGConfig(DeterministicPolicyConfig):
    """DDPG hyperparameters. Defaults follow common continuous-control settings; presets hold tuned values."""

    algo = "ddpg"

    learning_starts: int = 1_000


def networks(obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> dict[str, list[int]]:
    """An actor (observation → action) and a critic (observation and action → one value)."""
    return {"actor": [obs_dim, *hidden, action_dim], "critic": [obs_dim + action_dim, *hidden, 1]}


DDPG = Algorithm(
    name="ddpg", title="DDPG", config_class=DDPGConfig, action_kind="continuous", networks=networks,
    policy_net="actor",
    # critic update: actor target F, critic target F, critic F + B (2); actor update: actor F + B (2), critic F +
    # input-backward (1); then Adam and Polyak on both
    learn_work=LearnWork(forward_passes=(("actor", 4), ("critic", 6)), adam=("actor", "critic"),
                         polyak=("actor", "critic")),
    profile_env="Pendulum-v1", policy_head="tanh",
    kernels={"torch": "pearl.adapters.torch.ddpg:KERNELS", "opencl": "pearl.adapters.opencl.algos:DDPG_KERNELS"})
