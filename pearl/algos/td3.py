"""TD3 (Fujimoto et al., 2018): DDPG with twin critics, clipped double-Q, target policy smoothing and delayed
actor and target updates.

Maths of one `learn` call, update number k (counted from 0), on a batch (s, a, r, s', d, w), actions in the
policy's [-1, 1] space:
    ε          = clip(σ̃ · z, −c, c)                    z ~ N(0, 1): the Philox draw (key, counter) = (learn key
                                                        of the seed, (element, k)), pearl/rng.py
    a'         = clip(μ_target(s') + ε, −1, 1)          (target policy smoothing)
    y          = r + γ (1 − d) min(Q1_target(s', a'), Q2_target(s', a'))      (clipped double-Q)
    δ_j        = y − Q_j(s, a)                          j = 1, 2
    critics    : minimise mean_i w_i (δ1_i² + δ2_i²)    (one Adam step of each critic)
    when (k + 1) mod policy_delay = 0:
        actor  : minimise −mean_i Q1(s_i, μ(s_i))      (one Adam step; the gradient reaches μ through Q1's
                                                        action input)
        targets ← τ · online + (1 − τ) · target         (actor and both critics)
and returns δ1 (the priorities' input). σ̃ is target_policy_noise, c target_noise_clip. `act` is DDPG's: μ(s)
plus exploration noise of σ `action_noise`, Gaussian or Ornstein–Uhlenbeck (`noise_type`; the processes of
pearl/algos/ddpg.py, driven by the act kernel's own Philox draws), clipped to [-1, 1].

The noise of the target is keyed by (seed, update index), not drawn from a stream: a run repeats bit for bit on
every launcher, and a resumed run draws what the uninterrupted one would have. This is Stable-Baselines3's TD3
(stable_baselines3/td3/td3.py: the same target, loss, delay counted in updates, and Polyak step of all three
targets with the actor's) with its defaults; SB3 does not weight by w (it has no prioritized replay).
"""

from __future__ import annotations

from dataclasses import dataclass

from pearl.algos.base import Algorithm, LearnState, LearnWork
from pearl.algos.ddpg import DeterministicPolicyConfig
from pearl.errors import ConfigError


@dataclass
class TD3Config(DeterministicPolicyConfig):
    """TD3 hyperparameters. Defaults are Stable-Baselines3's TD3 defaults; presets hold tuned values. The
    exploration noise (action_noise, noise_type) is DDPG's."""

    algo = "td3"
    LEARN_SETTINGS = ("policy_delay",)

    policy_delay: int = 2
    """Updates per actor update: the actor and the targets move on every policy_delay-th update."""
    target_policy_noise: float = 0.2
    """σ̃ of the smoothing noise added to the target policy's action."""
    target_noise_clip: float = 0.5
    """c: the smoothing noise is clipped to [-c, c]."""

    def steps_actor(self, update: int) -> bool:
        """Whether update number `update` (counted from 0) steps the actor and the targets: every
        policy_delay-th, (update + 1) mod policy_delay = 0."""
        return (update + 1) % self.policy_delay == 0

    def validate(self) -> None:
        super().validate()  # the exploration noise's fields, as DDPG's
        if self.target_policy_noise < 0 or self.target_noise_clip < 0:
            raise ConfigError("target_policy_noise and target_noise_clip must be >= 0")
        if self.policy_delay < 1:
            raise ConfigError(f"policy_delay must be a positive integer, got {self.policy_delay}")


def networks(obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> dict[str, list[int]]:
    """An actor (observation → action) and two critics (observation and action → one value)."""
    critic = [obs_dim + action_dim, *hidden, 1]
    return {"actor": [obs_dim, *hidden, action_dim], "qf1": critic, "qf2": list(critic)}


def learn_work(config: TD3Config) -> LearnWork:
    """Every update: the target actor F (1, under "actor"), both critic targets F and both critics F + B (4
    each); every policy_delay-th update, r = 1 / policy_delay of them: the actor F + weight-backward (2), Q1 F + B
    through to the action input (3), Adam on the actor, Polyak on all three targets."""
    r = 1.0 / config.policy_delay
    return LearnWork(forward_passes=(("actor", 1.0 + 2.0 * r), ("qf1", 4.0 + 3.0 * r), ("qf2", 4.0)),
                     adam=(("actor", r), "qf1", "qf2"), polyak=(("actor", r), ("qf1", r), ("qf2", r)))


TD3 = Algorithm(
    name="td3", title="TD3", config_class=TD3Config, action_kind="continuous", networks=networks,
    policy_net="actor",
    learn_work=learn_work,
    profile_env="Pendulum-v1", policy_head="tanh",
    kernels={"torch": "pearl.adapters.torch.td3:KERNELS", "opencl": "pearl.adapters.opencl.td3:TD3_KERNELS"},
    state=LearnState(targets=("actor", "qf1", "qf2")))
