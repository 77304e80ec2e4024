"""SAC (Haarnoja et al., 2018, with automatic entropy tuning): a tanh-squashed Gaussian policy, twin critics with
Polyak-averaged targets, and a learned entropy temperature α.

The policy network outputs (m, ℓ) per action dimension; log σ = clamp(ℓ, −20, 2), and an action is
a = tanh(m + σ · z), z ~ N(0, 1), with log π(a|s) = Σ_j [log N(m_j + σ_j z_j; m_j, σ_j) − log(1 − a_j² + 1e-6)].
Maths of one `learn` call, update number k, on a batch (s, a, r, s', d, w), α = exp(log α):
    ã, log π̃    = a sample of π(·|s)       (z: the Philox draws (learn key of the seed, (element, k)), first half)
    temperature : minimise −mean_i log α · (log π̃_i + H̄)          H̄ = target_entropy (−action_dim by default)
                  (one Adam step of log α; α below is the value before it; skipped, α fixed at initial_alpha,
                  when tune_alpha is false)
    a', log π'  = a sample of π(·|s')      (z: the same draws, second half)
    y           = r + γ (1 − d) (min(Q1_target(s', a'), Q2_target(s', a')) − α log π')
    δ_j         = y − Q_j(s, a)
    critics     : minimise mean_i w_i (δ1_i² + δ2_i²)                (one Adam step of each critic)
    actor       : minimise mean_i (α log π̃_i − min(Q1(s_i, ã_i), Q2(s_i, ã_i)))   (one Adam step; critics
                  just updated; ã is the sample above, its gradient flowing through m and σ)
    targets    ← τ · online + (1 − τ) · target                       (both critics, every update)
and returns δ1. This is Stable-Baselines3's SAC (stable_baselines3/sac/sac.py `train`, and the squashed Gaussian
of common/distributions.py), in its order, with ent_coef "auto" starting at α = 1 and SB3's log σ clamp. `act`
with explore > 0 samples a = tanh(m + σ · ε_t) (ε_t the act kernel's own Philox draws); with explore = 0 (the
evaluations) it is the deterministic tanh(m).

SAC runs on the torch adapter only (cpu, cuda:N): its registry entry names no OpenCL kernels, so `pearl train`
refuses an OpenCL device for it, the profiler measures nothing of it there, and the planner, which places a
kernel only where the profile timed it for that algorithm, never puts it there.
"""

from __future__ import annotations

from dataclasses import dataclass

from pearl.algos.base import ActorCriticConfig, Algorithm, LearnState, LearnWork
from pearl.errors import ConfigError

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # SB3's clamp of the policy's log σ


@dataclass
class SACConfig(ActorCriticConfig):
    """SAC hyperparameters. Defaults are Stable-Baselines3's SAC defaults; presets hold tuned values."""

    algo = "sac"

    learning_rate: float = 3e-4
    hidden: tuple[int, ...] = (256, 256)
    initial_alpha: float = 1.0
    """The entropy temperature α at the start (log α starts at its log)."""
    tune_alpha: bool = True
    """Learn α towards target_entropy (SB3's ent_coef "auto"); false keeps α at initial_alpha for the whole run, with
    no temperature loss and no step of log α (SB3's ent_coef given as a number, e.g. the zoo's 0.1)."""
    target_entropy: float = 0.0
    """H̄, the entropy α is tuned towards; 0 means −action_dim, SB3's "auto"."""

    def exploration(self, step: int) -> float:
        return 1.0  # act samples from the policy; 0 (evaluation) takes its mean

    def validate(self) -> None:
        super().validate()
        if not self.initial_alpha > 0:
            raise ConfigError(f"initial_alpha must be > 0, got {self.initial_alpha}")


def networks(obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> dict[str, list[int]]:
    """A policy (observation → mean and unclamped log σ of each action dimension) and two critics."""
    critic = [obs_dim + action_dim, *hidden, 1]
    return {"actor": [obs_dim, *hidden, 2 * action_dim], "qf1": critic, "qf2": list(critic)}


SAC = Algorithm(
    name="sac", title="SAC", config_class=SACConfig, action_kind="continuous", networks=networks,
    policy_net="actor",
    # actor F on s and on s' (2), both critic targets F, both critics F + B, then actor F + B (2) through both
    # critics' F + input-backward; Adam on the three networks (log α's is one scalar); Polyak on both critics
    learn_work=LearnWork(forward_passes=(("actor", 4), ("qf1", 5), ("qf2", 5)), adam=("actor", "qf1", "qf2"),
                         polyak=("qf1", "qf2")),
    profile_env="Pendulum-v1", policy_head="tanh-mean",
    kernels={"torch": "pearl.adapters.torch.sac:KERNELS"},
    state=LearnState(targets=("qf1", "qf2"), extras=(("log_alpha", ()),)))
