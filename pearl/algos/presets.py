"""Tuned hyperparameters that reproduce well-known published results (rl-baselines3-zoo).

DQN CartPole-v1, DDPG Pendulum-v1, TD3 Pendulum-v1 and SAC Pendulum-v1 follow the rl-baselines3-zoo settings;
their published evaluation returns (one run each) are 500 ± 0, −152 ± 94, −152 ± 90 and −157 ± 89. So do the other
entries of PRESETS, each cited beside it with its published return: among them TD3 MountainCarContinuous-v0
93.5 ± 0.1 and LunarLanderContinuous-v3 207.5 ± 67.6, SAC MountainCarContinuous-v0 94.7 ± 1.1 (pearl lacks the
zoo's gSDE there) and LunarLanderContinuous-v3 260.4 ± 65.5 (a constant learning rate where the zoo's falls to 0).
Any other environment gets the algorithm's defaults.

The zoo's DQN `target_update_interval: 10` counts *env steps*: SB3 copies the target while collecting, so
with 128 updates after every 256 steps the target is copied once per burst, i.e. every 128 updates. pearl
counts the interval in updates and uses 128, the same schedule. Copying every 10 *updates* instead (a
literal reading) diverged: Q-values near 1e10, eval return 9.7 on seed 0.

What pearl changes in how the presets run (the hyperparameters above are the zoo's, unchanged):
- the schedule (pearl/schedule.py) is the zoo's train_freq/gradient_steps rounds, but by default the
  actors act with weights one round older (policy lag 1) so that they collect while the learner trains;
- the run keeps the best policy of ten in-training greedy evaluations (10 episodes each, every tenth of the
  run) and reports it beside the final policy, both scored on the same 20 episodes; the headline is the one of
  the two that did better on 20 other episodes (pearl/runtime/evaluate.py, `confirm`).
The zoo's own schedule and final-policy result stay runnable: `pearl train --algo dqn --env CartPole-v1
--policy-lag 0 --eval-every 0` (any launcher; the same result on each).

DQN CartPole-v1, 50,000 steps, default launcher, seeds 0-7, 20 evaluation episodes (2-core AMD EPYC VM;
docs/MEASUREMENTS.md has the commands and figures): the best policy reached >= 475 on every seed measured,
the final policy on about half of them, as Stable-Baselines3 with the same settings (5 of 8 final). DQN with
these settings solves CartPole and then often dips again before the budget ends; the in-training evaluations
show it (e.g. seed 1: 107, 94, 93, 96, 97, 110, 342, 134, 500, 37).
"""

from __future__ import annotations

from pearl.algos.base import OffPolicyConfig
from pearl.algos.ddpg import DDPGConfig
from pearl.algos.dqn import DQNConfig
from pearl.algos.sac import SACConfig
from pearl.algos.td3 import TD3Config
from pearl.algos.registry import algorithm

_DQN_COLUMNS = ("total_steps", "learning_rate", "batch_size", "buffer_size", "learning_starts", "gamma",
                "target_update_interval", "train_freq", "gradient_steps", "exploration_fraction",
                "exploration_final_eps")


def _dqn(*values: float) -> DQNConfig:
    """A zoo DQN entry from one row of _DQN_COLUMNS; every one has [256, 256] layers, and SB3's Huber loss and
    gradient clip at 10, which are DQNConfig's defaults."""
    return DQNConfig(hidden=(256, 256), **dict(zip(_DQN_COLUMNS, values, strict=True)))


# The zoo's DDPG "Pendulum-v1" settings; its TD3 Pendulum and DDPG LunarLanderContinuous entries use them too
# (their comments below).
_PENDULUM = dict(total_steps=20_000, learning_rate=1e-3, batch_size=256, buffer_size=200_000, learning_starts=10_000,
                 gamma=0.98, tau=0.005, action_noise=0.1, train_freq=1, gradient_steps=1, hidden=(400, 300))
# The zoo's DDPG and TD3 "MountainCarContinuous-v0" settings (the same in both files; the DDPG entry's comment).
_MOUNTAIN_CAR = dict(_PENDULUM, total_steps=300_000, buffer_size=1_000_000, learning_starts=100, gamma=0.99,
                     action_noise=0.5, noise_type="ornstein-uhlenbeck")

PRESETS: dict[tuple[str, str], OffPolicyConfig] = {
    # DQN, a row of _DQN_COLUMNS each, from rl-baselines3-zoo hyperparams/dqn.yml (commit ce95481):
    # - CartPole-v1: target_update_interval 128 counts updates, the zoo's 10 env steps (the module docstring).
    # - Acrobot-v1: its benchmark.md: -76.6 ± 11.8 over 100k steps. gradient_steps -1 there means train_freq of
    #   them; target_update_interval 250 counts env steps, which at one update per env step is 250 updates.
    # - MountainCar-v0: its benchmark.md: -100.8 ± 9.9 over 120k steps. target_update_interval 600 counts env
    #   steps; at 8 updates per 16 env steps that is 300 updates.
    # - LunarLander-v3: the zoo's "LunarLander-v2" (gymnasium 1.x names it LunarLander-v3); its benchmark.md:
    #   154.4 ± 79.2 over 100k steps. The same settings as Acrobot-v1. Needs Box2D: pip install "pearl[box2d]".
    #                               steps    lr      batch buffer   starts gamma target freq grad explore final ε
    ("dqn", "CartPole-v1"):    _dqn(50_000,  2.3e-3, 64,   100_000, 1_000, 0.99, 128,   256, 128, 0.16,   0.04),
    ("dqn", "Acrobot-v1"):     _dqn(100_000, 6.3e-4, 128,  50_000,  0,     0.99, 250,   4,   4,   0.12,   0.1),
    ("dqn", "MountainCar-v0"): _dqn(120_000, 4e-3,   128,  10_000,  1_000, 0.98, 300,   16,  8,   0.2,    0.07),
    ("dqn", "LunarLander-v3"): _dqn(100_000, 6.3e-4, 128,  50_000,  0,     0.99, 250,   4,   4,   0.12,   0.1),
    # The zoo's hyperparams/ddpg.yml (commit 22e3ff2), "Pendulum-v1".
    ("ddpg", "Pendulum-v1"): DDPGConfig(**_PENDULUM),
    # The zoo's hyperparams/ddpg.yml (commit 22e3ff2), "MountainCarContinuous-v0": 300k steps, Ornstein-Uhlenbeck
    # noise of σ 0.5 (noise_type 'ornstein-uhlenbeck', noise_std 0.5; SB3's θ 0.15 and dt 0.01), train_freq 1,
    # gradient_steps 1, lr 1e-3, batch 256, [400, 300], SB3's DDPG defaults otherwise (γ 0.99, buffer 1M,
    # learning_starts 100); its benchmark.md: 93.5 ± 0.05. The process is SB3's, driven by pearl's Philox draws
    # (pearl/algos/ddpg.py says where it differs).
    ("ddpg", "MountainCarContinuous-v0"): DDPGConfig(**_MOUNTAIN_CAR),
    # The zoo's hyperparams/ddpg.yml (commit 22e3ff2), "LunarLanderContinuous-v3": the Pendulum settings above
    # over 300k steps; its benchmark.md: 230.2 ± 92.4 (LunarLanderContinuous-v2, one run, published with v1.0
    # in 2021 under the file's settings then: train_freq [1, "episode"], gradient_steps -1, the same number of
    # updates in bursts at each episode's end; the zoo moved to train_freq 1, gradient_steps 1 in 2024, #430).
    # Needs Box2D: pip install "pearl[box2d]".
    ("ddpg", "LunarLanderContinuous-v3"): DDPGConfig(**_PENDULUM).replace(total_steps=300_000),
    # The zoo's hyperparams/td3.yml (commit a02f4fb), "Pendulum-v0" (gymnasium's Pendulum-v1 is the same task):
    # 20k steps, γ 0.98, buffer 200k, learning_starts 10k, normal noise σ 0.1, lr 1e-3, [400, 300]; SB3's TD3
    # defaults otherwise (batch 256, τ 0.005, policy_delay 2, target noise 0.2 clipped at 0.5). Its benchmark.md
    # (commit 02a1a90, one run): -151.9 ± 90.2. The file's train_freq [1, "episode"] with gradient_steps -1 is
    # the same number of updates in bursts at each episode's end; pearl runs them one per step, as the zoo's
    # DDPG Pendulum-v1 entry does since 2024 (the DDPG preset above).
    ("td3", "Pendulum-v1"): TD3Config(**_PENDULUM),
    # The zoo's hyperparams/td3.yml (commit 22e3ff2), "MountainCarContinuous-v0": the DDPG entry's settings above
    # (300k steps, Ornstein-Uhlenbeck noise of σ 0.5, train_freq 1, gradient_steps 1, lr 1e-3, batch 256,
    # [400, 300], SB3's TD3 defaults otherwise: γ 0.99, buffer 1M, learning_starts 100, τ 0.005, policy_delay 2,
    # target noise 0.2 clipped at 0.5); the OU process is DDPG's (pearl/algos/ddpg.py says where it differs from
    # SB3's). Its benchmark.md (commit 02a1a90, one run): 93.483 ± 0.075, published in 2021 when the entry held
    # only the steps and the noise, SB3 1.0's TD3 defaults otherwise: the same but batch 100, train_freq
    # [1, "episode"] and gradient_steps -1 (updates in bursts at each episode's end); the zoo wrote today's values
    # out in 2024 (#430).
    ("td3", "MountainCarContinuous-v0"): TD3Config(**_MOUNTAIN_CAR),
    # The zoo's hyperparams/td3.yml (commit 22e3ff2), "LunarLanderContinuous-v3": the Pendulum settings above over
    # 300k steps. Its benchmark.md (commit 02a1a90, one run, LunarLanderContinuous-v2): 207.451 ± 67.562, under the
    # file's settings then: train_freq [1, "episode"], gradient_steps -1 (moved to 1 and 1 in 2024, #430, as for
    # DDPG). Needs Box2D: pip install "pearl[box2d]".
    ("td3", "LunarLanderContinuous-v3"): TD3Config(**_PENDULUM).replace(total_steps=300_000),
    # The zoo's hyperparams/sac.yml (commit c94924e), "Pendulum-v1": 20k steps, lr 1e-3, SB3's SAC defaults
    # otherwise, which are SACConfig's (batch 256, buffer 1M, learning_starts 100, γ 0.99, τ 0.005, train_freq 1,
    # gradient_steps 1, ent_coef "auto" from α = 1 towards −action_dim, [256, 256]). Its benchmark.md (commit
    # 02a1a90, one run, Pendulum-v0): -157.0 ± 88.7.
    ("sac", "Pendulum-v1"): SACConfig(total_steps=20_000, learning_rate=1e-3),
    # The zoo's hyperparams/sac.yml (commit 22e3ff2; unchanged since its benchmark), "MountainCarContinuous-v0":
    # 50k steps, lr 3e-4, buffer 50k, batch 512, ent_coef 0.1 (a fixed α: initial_alpha 0.1, tune_alpha false),
    # train_freq 32, gradient_steps 32, γ 0.9999, τ 0.01, learning_starts 0, [64, 64]. Its benchmark.md (commit
    # 02a1a90, one run): 94.679 ± 1.134. One deviation: the zoo's use_sde True with log_std_init -3.67 (gSDE:
    # state-dependent noise from a noise matrix resampled at each 32-step rollout, its entries' σ starting at
    # e^-3.67 ≈ 0.025) has no counterpart in pearl, whose SAC samples its plain Gaussian policy afresh each step,
    # log σ an output of the network. Likely effect: independent per-step noise explores MountainCar's sparse goal
    # far worse than gSDE's smooth, correlated noise, so runs may settle on standing still (return near 0). Not
    # measured here.
    ("sac", "MountainCarContinuous-v0"): SACConfig(
        total_steps=50_000, learning_rate=3e-4, buffer_size=50_000, batch_size=512, initial_alpha=0.1,
        tune_alpha=False, train_freq=32, gradient_steps=32, gamma=0.9999, tau=0.01, learning_starts=0,
        hidden=(64, 64)),
    # The zoo's hyperparams/sac.yml (commit 22e3ff2; unchanged since its benchmark), "LunarLanderContinuous-v3":
    # 500k steps, batch 256, lr lin_7.3e-4, buffer 1M, ent_coef "auto", γ 0.99, τ 0.01, train_freq 1,
    # gradient_steps 1, learning_starts 10k, [400, 300]. Its benchmark.md (commit 02a1a90, one run,
    # LunarLanderContinuous-v2): 260.390 ± 65.467. One deviation: pearl has no learning-rate schedule, so the
    # rate is a constant 7.3e-4 where the zoo's falls linearly from 7.3e-4 to 0 over the run (every optimiser,
    # the temperature's too). Likely effect: the late updates keep their full step where the zoo's settle, so the
    # final policy is noisier (the kept best policy of the in-training evaluations partly makes up for it).
    # Needs Box2D: pip install "pearl[box2d]".
    ("sac", "LunarLanderContinuous-v3"): SACConfig(
        total_steps=500_000, learning_rate=7.3e-4, batch_size=256, buffer_size=1_000_000, gamma=0.99, tau=0.01,
        train_freq=1, gradient_steps=1, learning_starts=10_000, hidden=(400, 300)),
}


def algo_config_class(algo: str) -> type[OffPolicyConfig]:
    """The registered algorithm's config class (ConfigError naming the known ones for an unknown name)."""
    return algorithm(algo).config_class


def preset(algo: str, env_id: str) -> OffPolicyConfig:
    """The tuned config for (algo, env) if pearl has one, else the algorithm's defaults (a fresh copy);
    ConfigError for an algorithm the registry does not know."""
    cls = algo_config_class(algo)
    found = PRESETS.get((algo, env_id))
    return found.replace() if found is not None else cls()


def has_preset(algo: str, env_id: str) -> bool:
    """Whether pearl has tuned hyperparameters for (algo, env); an algorithm without any still trains, at its
    defaults, so a new algorithm need not add presets here."""
    return (algo, env_id) in PRESETS
