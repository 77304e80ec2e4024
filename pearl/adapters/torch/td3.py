"""TD3's `act` and `learn` in torch (maths in pearl/algos/td3.py). `learn` is one autograd loss per optimiser,
CleanRL-style; `act` is DDPG's (μ(s) plus Gaussian or Ornstein–Uhlenbeck noise on Philox draws, the config's
`noise_type`)."""

from __future__ import annotations

import torch

from pearl.adapters.base import AlgoKernels, LearnKernel, check_gradients
from pearl.adapters.torch.autograd import (CRITICS, LearnDraws, Net, average_flat, critic_grad_arrays, critics_ahead,
                                          min_q, net_adam, twin_critic_grads, twin_critic_step)
from pearl.adapters.torch.ddpg import DDPGAct
from pearl.algos.td3 import TD3Config
from pearl.types import Gradients, GroupShare, LearnResult, Params, SampleBatch


class TD3Learn(LearnKernel):
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
        self.draws = LearnDraws(seed, device)
        self._critic_shapes = {k: v for q in CRITICS for k, v in self.critics[q].shapes(q).items()}
        self.updates = 0

    def learn(self, batch: SampleBatch) -> LearnResult:
        y = self._target(batch)
        critic_loss, q1, _ = twin_critic_step(self.critics, self.optimizers, batch, y)
        metrics = {"losses/td_loss": critic_loss.detach(), "losses/q_values": q1.detach().mean()}
        if self._actor_update():
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
        if self._actor_update():
            ahead = critics_ahead(self.critics, self.optimizers, critic_grads, which=("qf1",))
            actor_loss, grad = self._actor_grad(batch, ahead["qf1"])
            if share is not None:
                (grad,) = average_flat(share, ("actor",), (grad,))
            arrays.update(self.actor.named(grad, "actor"))
            metrics["losses/actor_loss"] = actor_loss.detach()
        return Gradients(arrays, (y - q1).detach(), metrics)

    def apply(self, gradients: Gradients) -> LearnResult:
        actor = self._actor_update()
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

    def _actor_update(self) -> bool:
        """Whether this update steps the actor and the targets (every policy_delay-th)."""
        return (self.updates + 1) % self.config.policy_delay == 0

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


#: What the TD3 registry entry names for the torch backend (pearl.algos.td3.TD3.kernels).
KERNELS = AlgoKernels(
    act=lambda device, config, nets, params, seed: DDPGAct(nets["actor"], params, device, seed, config.noise_type),
    learn=lambda device, config, nets, params, seed: TD3Learn(config, nets, params, device, seed))
