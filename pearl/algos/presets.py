"""Tuned hyperparameters that reproduce well-known published results (DESIGN.md §8).

DQN CartPole-v1 and DDPG Pendulum-v1 follow the rl-baselines3-zoo settings; their published evaluation
returns (one run each) are 500 ± 0 and −152 ± 94. Any other environment gets the algorithm's defaults.

One deliberate difference: the zoo's DQN `target_update_interval: 10` counts *env steps* (SB3 copies the
target while collecting), and with 128 updates after every 256 steps that copies the target once per burst,
i.e. every 128 updates. Copying every 10 *updates* diverges (Q-values ~1e10, eval return 9.7, seed 0).
pearl counts the interval in updates and uses 256. Measured on a 2-core EPYC, final greedy return over 20
episodes, seeds 0-7: every 128 updates reached ≥ 475 on 4 of 8 seeds, every 256 on 5 of 8 (seeds 0, 1, 3,
4, 6), every 512 on 0 of 4; SB3 2.9.2 with the zoo settings reached it on seeds 1 and 2 but not 0 (18.4).
The difference between 128 and 256 is within seed noise: this preset is not reliable on every seed.
"""

from __future__ import annotations

from pearl.algos.base import OffPolicyConfig
from pearl.algos.ddpg import DDPGConfig
from pearl.algos.dqn import DQNConfig
from pearl.errors import ConfigError

ALGOS: dict[str, type[OffPolicyConfig]] = {"dqn": DQNConfig, "ddpg": DDPGConfig}

PRESETS: dict[tuple[str, str], OffPolicyConfig] = {
    ("dqn", "CartPole-v1"): DQNConfig(
        total_steps=50_000,
        learning_rate=2.3e-3,
        batch_size=64,
        buffer_size=100_000,
        learning_starts=1_000,
        gamma=0.99,
        target_update_interval=256,  # updates; see the module docstring
        train_freq=256,
        gradient_steps=128,
        exploration_fraction=0.16,
        exploration_final_eps=0.04,
        hidden=(256, 256),
        huber=True,
        max_grad_norm=10.0,
    ),
    ("ddpg", "Pendulum-v1"): DDPGConfig(
        total_steps=20_000,
        learning_rate=1e-3,
        batch_size=256,
        buffer_size=200_000,
        learning_starts=10_000,
        gamma=0.98,
        tau=0.005,
        action_noise=0.1,
        train_freq=1,
        gradient_steps=1,
        hidden=(400, 300),
    ),
}


def algo_config_class(algo: str) -> type[OffPolicyConfig]:
    try:
        return ALGOS[algo]
    except KeyError:
        raise ConfigError(f"unknown algorithm {algo!r}; choose one of: {', '.join(ALGOS)}") from None


def preset(algo: str, env_id: str) -> OffPolicyConfig:
    """The tuned config for (algo, env) if pearl has one, else the algorithm's defaults (a fresh copy)."""
    cls = algo_config_class(algo)
    found = PRESETS.get((algo, env_id))
    return found.replace() if found is not None else cls()


def has_preset(algo: str, env_id: str) -> bool:
    return (algo, env_id) in PRESETS
