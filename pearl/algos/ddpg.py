"""DDPG (Lillicrap et al., 2016): a deterministic actor and a Q critic, both with Polyak-averaged targets.

Maths of one `learn` call on a batch (s, a, r, s', d, w), actions in the policy's [-1, 1] space:
    y          = r + γ (1 − d) Q_target(s', μ_target(s'))
    δ          = y − Q(s, a)
    critic     : minimise mean_i w_i · δ_i²            (one Adam step)
    actor      : minimise −mean_i Q(s_i, μ(s_i))       (one Adam step; the gradient reaches μ through the
                                                        critic's action input)
    targets   ← τ · online + (1 − τ) · target          (both networks, every update)
and returns δ. `act` is μ(s) = tanh(MLP(s)) plus Gaussian noise N(0, σ²), clipped to [-1, 1]; the actor
role rescales it to the environment's bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from pearl.algos.base import Algorithm, LearnWork, OffPolicyConfig
from pearl.errors import ConfigError


@dataclass
class DDPGConfig(OffPolicyConfig):
    """DDPG hyperparameters. Defaults follow common continuous-control settings; presets hold tuned values."""

    algo = "ddpg"

    total_steps: int = 100_000
    """Environment steps to train for."""
    learning_rate: float = 1e-3
    """Adam step size of the actor and of the critic."""
    batch_size: int = 256
    """Transitions per gradient update."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions."""
    learning_starts: int = 1_000
    """Env steps of uniformly random actions before the first update."""
    hidden: tuple[int, ...] = (400, 300)
    """Hidden layer widths of the actor and of the critic."""
    tau: float = 0.005
    """Polyak coefficient of the target networks (1 would copy them outright)."""
    action_noise: float = 0.1
    """σ of the Gaussian exploration noise, in the policy's [-1, 1] action space."""

    def exploration(self, step: int) -> float:
        return self.action_noise  # constant Gaussian σ

    def validate(self) -> None:
        super().validate()
        if not 0.0 < self.tau <= 1.0:
            raise ConfigError(f"tau must be in (0, 1], got {self.tau}")
        if self.action_noise < 0:
            raise ConfigError(f"action_noise must be >= 0, got {self.action_noise}")


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
    profile_env="Pendulum-v1",
    kernels={"torch": "pearl.adapters.torch.ddpg:KERNELS", "opencl": "pearl.adapters.opencl.algos:DDPG_KERNELS"})
