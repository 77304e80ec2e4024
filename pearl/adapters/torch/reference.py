"""DQN's, DDPG's, TD3's and SAC's learn written as autograd losses, CleanRL-style: the paper's loss, and torch
derives every gradient. They are the references the fast paths are tested against (tests/test_reference_learn.py):
the torch adapter's hand-derived backward passes (dqn.py, ddpg.py, td3.py, sac.py) and the OpenCL kernels.

Training uses the hand-derived paths, because they are faster: they skip autograd's graph and fuse what the
losses compute apart. `benchmarks/learn_paths.py` times both on the presets' networks and batches, alternating,
in one invocation (measured: see docs/MEASUREMENTS.md, "The learn paths").

State names and layout are those of every learn kernel (`LearnKernel.state_dict`), so a reference and a fast
kernel load each other's checkpoints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from pearl.adapters.base import LearnKernel, check_gradients
from pearl.adapters.torch.autograd import (CRITICS, Adam, LearnDraws, Net, average_flat, critic_grad_arrays,
                                          critics_ahead, min_q, net_adam, twin_critic_grads, twin_critic_step)
from pearl.adapters.torch.sac import squashed_sample
from pearl.algos.ddpg import DDPGConfig
from pearl.algos.dqn import DQNConfig
from pearl.algos.sac import SACConfig
from pearl.algos.td3 import TD3Config
from pearl.types import Gradients, GroupShare, LearnResult, Params, SampleBatch


class DQNReference(LearnKernel):
    """y = r + γ(1 − d) max_a Q'(s', a); minimise mean_i w_i ℓ(Q(s_i, a_i) − y_i), ℓ Huber (β = 1) or the
    square; clip by global norm, one Adam step, and copy the target every target_update_interval updates."""

    def __init__(self, config: DQNConfig, sizes: list[int], params: Params, device: torch.device) -> None:
        self.config = config
        self.q = Net(sizes, params, "q", device)
        self.q_target = Net(sizes, params, "q_target", device, trained=False)
        self.optimizer = net_adam(self.q, "q", config.learning_rate)
        self.updates = 0

    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        cfg = self.config
        with torch.no_grad():
            y = batch.reward + cfg.gamma * (1.0 - batch.terminated) * self.q_target(batch.next_obs).amax(dim=1)
        q = self.q(batch.obs).gather(1, batch.action.view(-1, 1)).squeeze(1)
        per_item = F.smooth_l1_loss(q, y, reduction="none") if cfg.huber else (y - q).square()
        loss = (batch.weights * per_item).mean()
        (grad,) = torch.autograd.grad(loss, [self.q.flat])
        if share is not None:
            (grad,) = average_flat(share, ("q",), (grad,))
        metrics = {"losses/td_loss": loss.detach(), "losses/q_values": q.detach().mean()}
        return Gradients(self.q.named(grad, "q"), (y - q).detach(), metrics)

    def apply(self, gradients: Gradients) -> LearnResult:
        check_gradients(gradients, self.q.shapes("q"))
        grad = self.q.flat_of(gradients.arrays, "q")
        if self.config.max_grad_norm > 0:  # torch's own clipping, on the gradient as the parameter's
            self.q.flat.grad = grad
            torch.nn.utils.clip_grad_norm_([self.q.flat], self.config.max_grad_norm)
            grad, self.q.flat.grad = self.q.flat.grad, None
        self.optimizer.step(grad)
        self.updates += 1
        if self.updates % self.config.target_update_interval == 0:
            with torch.no_grad():
                self.q_target.flat.copy_(self.q.flat)
        return gradients.result()

    def policy_params(self) -> Params:
        return self.q.dump("q")

    def _nets(self) -> dict:
        return {"q": self.q, "q_target": self.q_target}

    def _optimizers(self) -> dict:
        return {"q": self.optimizer}


class DDPGReference(LearnKernel):
    """y = r + γ(1 − d) Q'(s', μ'(s')); minimise mean_i w_i (y_i − Q(s_i, a_i))² (one Adam step of the critic),
    then −mean_i Q(s_i, μ(s_i)) through the critic so stepped (one Adam step of the actor); Polyak both targets."""

    def __init__(self, config: DDPGConfig, actor_sizes: list[int], critic_sizes: list[int], params: Params,
                 device: torch.device) -> None:
        self.config = config
        self.actor = Net(actor_sizes, params, "actor", device, tanh_out=True)
        self.actor_target = Net(actor_sizes, params, "actor_target", device, tanh_out=True, trained=False)
        self.critic = Net(critic_sizes, params, "critic", device)
        self.critic_target = Net(critic_sizes, params, "critic_target", device, trained=False)
        self.optimizers = {"actor": net_adam(self.actor, "actor", config.learning_rate),
                           "critic": net_adam(self.critic, "critic", config.learning_rate)}
        self.updates = 0

    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        cfg = self.config
        with torch.no_grad():
            next_q = self.critic_target(torch.cat([batch.next_obs, self.actor_target(batch.next_obs)], dim=1))
            y = batch.reward + cfg.gamma * (1.0 - batch.terminated) * next_q.squeeze(1)
        q = self.critic(torch.cat([batch.obs, batch.action], dim=1)).squeeze(1)
        critic_loss = (batch.weights * (y - q).square()).mean()
        (critic_grad,) = torch.autograd.grad(critic_loss, [self.critic.flat])
        if share is not None:
            (critic_grad,) = average_flat(share, ("critic",), (critic_grad,))
        stepped = self.critic.at(self.optimizers["critic"].ahead(critic_grad))  # the critic `apply` will step
        actor_loss = -stepped(torch.cat([batch.obs, self.actor(batch.obs)], dim=1)).mean()
        (actor_grad,) = torch.autograd.grad(actor_loss, [self.actor.flat])
        if share is not None:
            (actor_grad,) = average_flat(share, ("actor",), (actor_grad,))
        metrics = {"losses/td_loss": critic_loss.detach(), "losses/q_values": q.detach().mean(),
                   "losses/actor_loss": actor_loss.detach()}
        arrays = {**self.critic.named(critic_grad, "critic"), **self.actor.named(actor_grad, "actor")}
        return Gradients(arrays, (y - q).detach(), metrics)

    def apply(self, gradients: Gradients) -> LearnResult:
        check_gradients(gradients, {**self.critic.shapes("critic"), **self.actor.shapes("actor")})
        self.optimizers["critic"].step(self.critic.flat_of(gradients.arrays, "critic"))
        self.optimizers["actor"].step(self.actor.flat_of(gradients.arrays, "actor"))
        self.actor_target.lerp_to(self.actor, self.config.tau)
        self.critic_target.lerp_to(self.critic, self.config.tau)
        self.updates += 1
        return gradients.result()

    def policy_params(self) -> Params:
        return self.actor.dump("actor")

    def _nets(self) -> dict:
        return {"actor": self.actor, "actor_target": self.actor_target, "critic": self.critic,
                "critic_target": self.critic_target}

    def _optimizers(self) -> dict:
        return dict(self.optimizers)


class TD3Reference(LearnKernel):
    """TD3's learn as one autograd loss per optimiser (the maths in pearl/algos/td3.py)."""

    def __init__(self, config: TD3Config, nets: dict[str, list[int]], params: Params, device: torch.device,
                 seed: int) -> None:
        self.config = config
        self.action_dim = nets["actor"][-1]
        self.actor = Net(nets["actor"], params, "actor", device, tanh_out=True)
        self.actor_target = Net(nets["actor"], params, "actor_target", device, tanh_out=True, trained=False)
        self.critics = {q: Net(nets[q], params, q, device) for q in CRITICS}
        self.targets = {q: Net(nets[q], params, f"{q}_target", device, trained=False) for q in CRITICS}
        self.optimizers = {"actor": net_adam(self.actor, "actor", config.learning_rate),
                           **{q: net_adam(self.critics[q], q, config.learning_rate) for q in CRITICS}}
        self.draws = LearnDraws(seed, device, self.actor.flat.dtype)
        self._critic_shapes = {k: v for q in CRITICS for k, v in self.critics[q].shapes(q).items()}
        self.updates = 0

    def learn(self, batch: SampleBatch) -> LearnResult:
        y = self._target(batch)
        critic_loss, q1, _ = twin_critic_step(self.critics, self.optimizers, batch, y)
        metrics = {"losses/td_loss": critic_loss.detach(), "losses/q_values": q1.detach().mean()}
        if self.config.steps_actor(self.updates):
            actor_loss, grad = self._actor_grad(batch, self.critics["qf1"])  # through the critic just updated
            self._step_actor_and_targets(grad)
            metrics["losses/actor_loss"] = actor_loss.detach()
        self.updates += 1
        return LearnResult((y - q1).detach(), metrics)

    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        y = self._target(batch, share)
        critic_loss, q1, critic_grads = twin_critic_grads(self.critics, batch, y)
        if share is not None:  # the group's critic gradients are the ones the scratch steps below take
            critic_grads = average_flat(share, CRITICS, critic_grads)
        arrays = critic_grad_arrays(self.critics, critic_grads)
        metrics = {"losses/td_loss": critic_loss.detach(), "losses/q_values": q1.detach().mean()}
        if self.config.steps_actor(self.updates):
            ahead = critics_ahead(self.critics, self.optimizers, critic_grads, which=("qf1",))
            actor_loss, grad = self._actor_grad(batch, ahead["qf1"])
            if share is not None:
                (grad,) = average_flat(share, ("actor",), (grad,))
            arrays.update(self.actor.named(grad, "actor"))
            metrics["losses/actor_loss"] = actor_loss.detach()
        return Gradients(arrays, (y - q1).detach(), metrics)

    def apply(self, gradients: Gradients) -> LearnResult:
        actor = self.config.steps_actor(self.updates)
        check_gradients(gradients, {**self._critic_shapes, **(self.actor.shapes("actor") if actor else {})})
        for q in CRITICS:
            self.optimizers[q].step(self.critics[q].flat_of(gradients.arrays, q))
        if actor:
            self._step_actor_and_targets(self.actor.flat_of(gradients.arrays, "actor"))
        self.updates += 1
        return gradients.result()

    def _target(self, batch: SampleBatch, share: GroupShare | None = None) -> torch.Tensor:
        """y = r + γ (1 − d) min_i Q'_i(s', clip(μ'(s') + clip(σ z, ±c), ±1)), z keyed by (seed, update): a
        learner of a group takes its rows' draws of the whole batch's."""
        cfg = self.config
        n = batch.reward.shape[0] if share is None else share.total
        z = self.draws.normals(self.updates, n * self.action_dim).view(n, self.action_dim)
        z = z if share is None else share.mine(z)
        with torch.no_grad():
            smoothing = (z * cfg.target_policy_noise).clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
            next_action = (self.actor_target(batch.next_obs) + smoothing).clamp(-1.0, 1.0)
            next_q = min_q(self.targets, batch.next_obs, next_action)
            return batch.reward + cfg.gamma * (1.0 - batch.terminated) * next_q

    def _actor_grad(self, batch: SampleBatch, qf1: Net) -> tuple[torch.Tensor, torch.Tensor]:
        """−mean Q1(s, μ(s)) through qf1, and its gradient in the actor's parameters."""
        actor_loss = -qf1(torch.cat([batch.obs, self.actor(batch.obs)], dim=1)).mean()
        (grad,) = torch.autograd.grad(actor_loss, [self.actor.flat])
        return actor_loss, grad

    def _step_actor_and_targets(self, grad: torch.Tensor) -> None:
        self.optimizers["actor"].step(grad)
        self.actor_target.lerp_to(self.actor, self.config.tau)
        for q in CRITICS:
            self.targets[q].lerp_to(self.critics[q], self.config.tau)

    def policy_params(self) -> Params:
        return self.actor.dump("actor")

    def write_policy(self, out: Params) -> None:
        self.actor.write(out, "actor")

    def _nets(self) -> dict:
        return {"actor": self.actor, "actor_target": self.actor_target, **self.critics,
                **{f"{q}_target": t for q, t in self.targets.items()}}

    def _optimizers(self) -> dict:
        return dict(self.optimizers)


@dataclass
class _Sample:
    """One update's policy sample at the batch's observations, and α before the update."""

    batch: SampleBatch
    z: torch.Tensor  # (2, B, d): the normals at obs and at next_obs
    action: torch.Tensor
    log_pi: torch.Tensor
    alpha: torch.Tensor


class SACReference(LearnKernel):
    """SAC's learn as one autograd loss per optimiser (the maths in pearl/algos/sac.py), in SB3's order."""

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
        self.log_alpha = torch.tensor(math.log(config.initial_alpha), dtype=self.actor.flat.dtype, device=device,
                                      requires_grad=True)
        self.alpha_optimizer = Adam(self.log_alpha, config.learning_rate, lambda t: {"log_alpha": t})
        self.draws = LearnDraws(seed, device, self.actor.flat.dtype)
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
            self.log_alpha.copy_(torch.from_numpy(np.asarray(state["log_alpha"])))
        self.alpha_optimizer.load_state(state, None, "log_alpha")


#: The references by algorithm, as `AlgoKernels.learn` factories (handle, config, nets, params, seed).
REFERENCES = {
    "dqn": lambda device, config, nets, params, seed: DQNReference(config, nets["q"], params, device),
    "ddpg": lambda device, config, nets, params, seed: DDPGReference(config, nets["actor"], nets["critic"], params,
                                                                     device),
    "td3": lambda device, config, nets, params, seed: TD3Reference(config, nets, params, device, seed),
    "sac": lambda device, config, nets, params, seed: SACReference(config, nets, params, device, seed),
}
