"""DQN (Mnih et al., 2015): a Q-network trained on replayed transitions against a periodically copied target.

Maths, as every adapter implements it for one `learn` call on a batch (s, a, r, s', d, w):
    y      = r + γ (1 − d) max_a' Q_target(s', a')
    δ      = y − Q(s, a)
    loss   = mean_i w_i · huber(δ_i)            (Huber with threshold 1)
    θ     ← Adam(θ, clip_by_global_norm(∇θ loss, max_grad_norm))
    every target_update_interval updates: θ_target ← θ
and returns δ (the priorities' input). `act` is ε-greedy: argmax_a Q(s, a), or a uniform random action
with probability ε, where ε falls linearly from exploration_initial_eps to exploration_final_eps over the
first exploration_fraction of the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from pearl.algos.base import Algorithm, LearnWork, OffPolicyConfig
from pearl.errors import ConfigError


@dataclass
class DQNConfig(OffPolicyConfig):
    """DQN hyperparameters. Defaults suit small classic-control tasks; presets hold the tuned values."""

    algo = "dqn"

    learning_rate: float = 2.5e-4
    batch_size: int = 128
    buffer_size: int = 50_000
    learning_starts: int = 10_000
    train_freq: int = 10
    hidden: tuple[int, ...] = (64, 64)
    target_update_interval: int = 500
    """Updates between hard copies of the online network into the target network."""
    exploration_fraction: float = 0.5
    """Fraction of total_steps over which ε falls to its final value."""
    exploration_initial_eps: float = 1.0
    """ε at the start of training."""
    exploration_final_eps: float = 0.05
    """ε after exploration_fraction of the run, kept to the end."""
    huber: bool = True
    """Huber (smooth L1) TD loss; False gives the squared error."""
    max_grad_norm: float = 10.0
    """Global gradient-norm clip; 0 disables clipping."""

    def epsilon(self, step: int) -> float:
        """ε-greedy exploration rate after `step` env steps."""
        span = self.exploration_fraction * self.total_steps
        progress = 1.0 if span <= 0 else min(1.0, step / span)
        return self.exploration_initial_eps + progress * (self.exploration_final_eps - self.exploration_initial_eps)

    def exploration(self, step: int) -> float:
        return self.epsilon(step)

    def validate(self) -> None:
        super().validate()
        if self.target_update_interval < 1:
            raise ConfigError(f"target_update_interval must be >= 1, got {self.target_update_interval}")
        if not 0.0 <= self.exploration_fraction <= 1.0:
            raise ConfigError(f"exploration_fraction must be in [0, 1], got {self.exploration_fraction}")
        for name in ("exploration_initial_eps", "exploration_final_eps"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.max_grad_norm < 0:
            raise ConfigError(f"max_grad_norm must be >= 0, got {self.max_grad_norm}")


def networks(obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> dict[str, list[int]]:
    """One Q-network: an observation in, one value per discrete action out."""
    return {"q": [obs_dim, *hidden, action_dim]}


DQN = Algorithm(
    name="dqn", title="DQN", config_class=DQNConfig, action_kind="discrete", networks=networks, policy_net="q",
    # target forward + online forward + backward (2) of q; one Adam step; the target is a hard copy
    learn_work=LearnWork(forward_passes=(("q", 4),), adam=("q",)),
    profile_env="CartPole-v1", policy_head="argmax",
    kernels={"torch": "pearl.adapters.torch.dqn:KERNELS", "opencl": "pearl.adapters.opencl.algos:DQN_KERNELS"})
