"""SAC's `act` and `learn` in torch (maths in pearl/algos/sac.py). `learn` is one autograd loss per optimiser,
CleanRL-style, in Stable-Baselines3's order; `act` samples the squashed Gaussian with Philox draws."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from pearl.adapters.base import AlgoKernels, LearnKernel, check_gradients
from pearl.adapters.torch.autograd import (CRITICS, Adam, LearnDraws, Net, average_flat, critic_grad_arrays,
                                          critics_ahead, min_q, net_adam, twin_critic_grads, twin_critic_step)
from pearl.adapters.torch.nets import PolicyAct
from pearl.algos.sac import LOG_STD_MAX, LOG_STD_MIN, SACConfig
from pearl.rng import normal
from pearl.types import Gradients, GroupShare, LearnResult, Params, SampleBatch

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def squashed_sample(out: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, log π(a|s)) for the policy's output (m, ℓ) and standard normals z: a = tanh(m + σ z), σ = exp(clamp(ℓ)).
    log N(m + σz; m, σ) = −z²/2 − log σ − log √(2π), then the tanh's change of variables (SB3's, ε = 1e-6)."""
    d = out.shape[1] // 2
    mean, log_std = out[:, :d], out[:, d:].clamp(LOG_STD_MIN, LOG_STD_MAX)
    action = torch.tanh(mean + log_std.exp() * z)
    log_prob = (-0.5 * z.square() - log_std - HALF_LOG_2PI).sum(1) - torch.log(1.0 - action.square() + 1e-6).sum(1)
    return action, log_prob


class SACAct(PolicyAct):
    """tanh(m + σ · ε) with ε from Philox (key = seed, counter = (flat index, call)), computed on the host so CPU
    and CUDA give the same bits; tanh(m) when explore is 0 (evaluation)."""

    def __init__(self, sizes: list[int], params: Params, device: torch.device, seed: int) -> None:
        super().__init__("actor", sizes, params, device, seed)

    @torch.no_grad()
    def act(self, obs: np.ndarray, explore: float) -> np.ndarray:
        out = self.forward(obs).cpu().numpy()
        d = out.shape[1] // 2
        mean = out[:, :d]
        r0, r1 = self.draws.next(mean.size)  # drawn every call, as DDPG's act does, so the counters stay in step
        if explore > 0:
            std = np.exp(np.clip(out[:, d:], LOG_STD_MIN, LOG_STD_MAX))
            mean = mean + std * normal(r0, r1).reshape(mean.shape)
        return np.tanh(mean).astype(np.float32)


@dataclass
class _Sample:
    """One update's policy sample at the batch's observations, and α before the update."""

    batch: SampleBatch
    z: torch.Tensor  # (2, B, d): the normals at obs and at next_obs
    action: torch.Tensor
    log_pi: torch.Tensor
    alpha: torch.Tensor


class SACLearn(LearnKernel):
    def __init__(self, config: SACConfig, nets: dict[str, list[int]], params: Params, device: torch.device,
                 seed: int) -> None:
        self.config = config
        self.action_dim = nets["actor"][-1] // 2
        self.target_entropy = config.target_entropy or -float(self.action_dim)
        self.actor = Net(nets["actor"], params, "actor", device)
        self.critics = {q: Net(nets[q], params, q, device) for q in CRITICS}
        self.targets = {q: Net(nets[q], params, f"{q}_target", device, trained=False) for q in CRITICS}
        self.optimizers = {"actor": net_adam(self.actor, "actor", config.learning_rate),
                           **{q: net_adam(self.critics[q], q, config.learning_rate) for q in CRITICS}}
        self.log_alpha = torch.tensor(math.log(config.initial_alpha), dtype=torch.float32, device=device,
                                      requires_grad=True)
        self.alpha_optimizer = Adam(self.log_alpha, config.learning_rate, lambda t: {"log_alpha": t})
        self.draws = LearnDraws(seed, device)
        # a fixed α (tune_alpha false) has no gradient: log α and its Adam stay as they started
        self._grad_shapes = {**({"log_alpha": ()} if config.tune_alpha else {}),
                             **{k: v for q in CRITICS for k, v in self.critics[q].shapes(q).items()},
                             **self.actor.shapes("actor")}
        self.updates = 0

    def learn(self, batch: SampleBatch) -> LearnResult:
        # SB3's order: temperature, critics, then the actor through the critics just updated
        sample, alpha_grad = self._sample_and_alpha_grad(batch)
        if alpha_grad is not None:
            self.alpha_optimizer.step(alpha_grad)
        y = self._target(batch, sample)
        critic_loss, q1, _ = twin_critic_step(self.critics, self.optimizers, batch, y)
        actor_loss, actor_grad = self._actor_grad(sample, self.critics)
        self._step_actor_and_targets(actor_grad)
        return LearnResult((y - q1).detach(), self._metrics(sample, critic_loss, actor_loss, q1))

    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        sample, alpha_grad = self._sample_and_alpha_grad(batch, share)
        y = self._target(batch, sample)
        critic_loss, q1, critic_grads = twin_critic_grads(self.critics, batch, y)
        if share is not None:  # the group's critic gradients are the ones the scratch steps below take
            critic_grads = average_flat(share, CRITICS, critic_grads)
        actor_loss, actor_grad = self._actor_grad(sample, critics_ahead(self.critics, self.optimizers, critic_grads))
        if share is not None and alpha_grad is not None:
            alpha_grad, actor_grad = average_flat(share, ("log_alpha", "actor"), (alpha_grad, actor_grad))
        elif share is not None:
            (actor_grad,) = average_flat(share, ("actor",), (actor_grad,))
        arrays = {**({} if alpha_grad is None else {"log_alpha": alpha_grad}),
                  **critic_grad_arrays(self.critics, critic_grads), **self.actor.named(actor_grad, "actor")}
        return Gradients(arrays, (y - q1).detach(), self._metrics(sample, critic_loss, actor_loss, q1))

    def apply(self, gradients: Gradients) -> LearnResult:
        check_gradients(gradients, self._grad_shapes)
        if self.config.tune_alpha:
            self.alpha_optimizer.step(gradients.arrays["log_alpha"])
        for q in CRITICS:
            self.optimizers[q].step(self.critics[q].flat_of(gradients.arrays, q))
        self._step_actor_and_targets(self.actor.flat_of(gradients.arrays, "actor"))
        return gradients.result()

    def _sample_and_alpha_grad(self, batch: SampleBatch, share: GroupShare | None = None
                               ) -> tuple[_Sample, torch.Tensor | None]:
        """The policy's sample at obs and next_obs (draws keyed by (seed, update): a learner of a group takes its
        rows' draws of the whole batch's), α as it is before this update, and the temperature's gradient (None for
        a fixed α)."""
        n = batch.reward.shape[0] if share is None else share.total
        d = self.action_dim
        z = self.draws.normals(self.updates, 2 * n * d).view(2, n, d)
        z = z if share is None else share.mine(z.transpose(0, 1)).transpose(0, 1)
        action_pi, log_pi = squashed_sample(self.actor(batch.obs), z[0])
        sample = _Sample(batch, z, action_pi, log_pi, self.log_alpha.detach().exp())
        if not self.config.tune_alpha:
            return sample, None
        alpha_loss = -(self.log_alpha * (log_pi.detach() + self.target_entropy)).mean()
        (grad,) = torch.autograd.grad(alpha_loss, [self.log_alpha])
        return sample, grad

    def _target(self, batch: SampleBatch, sample: _Sample) -> torch.Tensor:
        """y = r + γ (1 − d) (min_i Q'_i(s', a') − α log π(a'|s')), a' the policy's sample at s'."""
        with torch.no_grad():
            next_action, next_log_pi = squashed_sample(self.actor(batch.next_obs), sample.z[1])
            next_q = min_q(self.targets, batch.next_obs, next_action)
            return batch.reward + self.config.gamma * (1.0 - batch.terminated) * (next_q - sample.alpha * next_log_pi)

    def _actor_grad(self, sample: _Sample, critics: dict[str, Net]) -> tuple[torch.Tensor, torch.Tensor]:
        """mean(α log π(a|s) − min_i Q_i(s, a)) through `critics`, and its gradient in the actor's parameters."""
        q_pi = min_q(critics, sample.batch.obs, sample.action)
        actor_loss = (sample.alpha * sample.log_pi - q_pi).mean()
        (grad,) = torch.autograd.grad(actor_loss, [self.actor.flat])
        return actor_loss, grad

    def _step_actor_and_targets(self, actor_grad: torch.Tensor) -> None:
        self.optimizers["actor"].step(actor_grad)
        for q in CRITICS:
            self.targets[q].lerp_to(self.critics[q], self.config.tau)
        self.updates += 1

    @staticmethod
    def _metrics(sample: _Sample, critic_loss: torch.Tensor, actor_loss: torch.Tensor, q1: torch.Tensor) -> dict:
        return {"losses/td_loss": critic_loss.detach(), "losses/actor_loss": actor_loss.detach(),
                "losses/alpha": sample.alpha, "losses/q_values": q1.detach().mean()}

    def policy_params(self) -> Params:
        return self.actor.dump("actor")

    def write_policy(self, out: Params) -> None:
        self.actor.write(out, "actor")

    def _nets(self) -> dict:
        return {"actor": self.actor, **self.critics, **{f"{q}_target": t for q, t in self.targets.items()}}

    def _optimizers(self) -> dict:
        return dict(self.optimizers)

    def state_dict(self) -> Params:
        """The base state (networks, targets, their Adams, updates) and log α with its Adam."""
        out = super().state_dict()
        out["log_alpha"] = self.log_alpha.detach().cpu().numpy().copy()
        out.update(self.alpha_optimizer.state(None, "log_alpha"))
        return out

    def load_state_dict(self, state: Params) -> None:
        super().load_state_dict(state)  # checks every name and shape of state_dict, log α's included, first
        with torch.no_grad():
            self.log_alpha.copy_(torch.from_numpy(np.asarray(state["log_alpha"], dtype=np.float32)))
        self.alpha_optimizer.load_state(state, None, "log_alpha")


#: What the SAC registry entry names for the torch backend (pearl.algos.sac.SAC.kernels); no OpenCL entry.
KERNELS = AlgoKernels(
    act=lambda device, config, nets, params, seed: SACAct(nets["actor"], params, device, seed),
    learn=lambda device, config, nets, params, seed: SACLearn(config, nets, params, device, seed))
