"""TD3's `act` and `learn` in torch (maths in pearl/algos/td3.py). `learn` backpropagates by hand through the
flat-parameter MLPs of nets.py, as DDPG's does (ddpg.py): both critics' weight gradients, the actor's through
Q1's action input, one fused Adam step per network and one op per Polyak update. Its autograd reference,
`reference.TD3Reference`, is what tests/test_reference_learn.py trains it against; `benchmarks/learn_paths.py`
times the two, and this learn is the faster (measured: see docs/MEASUREMENTS.md, "The learn paths"). `act` is
DDPG's (μ(s) plus Gaussian or Ornstein–Uhlenbeck noise on Philox draws, the config's `noise_type`)."""

from __future__ import annotations

import torch

from pearl.adapters.base import AlgoKernels, LearnKernel, check_gradients
from pearl.adapters.torch.autograd import CRITICS, LearnDraws
from pearl.adapters.torch.ddpg import DDPGAct, actor_grad
from pearl.adapters.torch.graphs import captured
from pearl.adapters.torch.nets import (MLP, FlatAdam, build, compute_type, critic_grads, dump_net, grad_shapes,
                                      named_grads, take_grads, write_net)
from pearl.algos.td3 import TD3Config
from pearl.kernels import Precision
from pearl.types import Gradients, GroupShare, LearnResult, Params, SampleBatch


def twin_critic_backward(critics: dict[str, MLP], batch: SampleBatch, y: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Both critics' gradients (CRITICS) of loss = mean_i w_i (δ1_i² + δ2_i²), δj = y − Q_j(s, a), into their
    `grad`; returns (δ1, the loss, Q1(s, a)). ∂loss/∂Q_j(s_i, a_i) = −2 w_i δj_i / B. TD3's and SAC's critic step."""
    n = batch.reward.shape[0]
    x = torch.cat([batch.obs, batch.action], dim=1)
    outs = {q: critics[q].forward(x, slot="critic step") for q in CRITICS}
    deltas = {q: y - outs[q][-1].squeeze(1) for q in CRITICS}
    loss = (batch.weights * (deltas["qf1"].square() + deltas["qf2"].square())).mean()
    for q in CRITICS:
        critics[q].backward(outs[q], (batch.weights * deltas[q]).mul_(-2.0 / n).unsqueeze(1))
    return deltas["qf1"], loss, outs["qf1"][-1].squeeze(1)


class TD3Learn(LearnKernel):
    def __init__(self, config: TD3Config, nets: dict[str, list[int]], params: Params, device: torch.device,
                 seed: int, precision: Precision = Precision.FP32) -> None:
        """precision: the arithmetic of the networks' products (nets.MLP's `compute`); the losses, the targets
        (smoothing noise included), the TD errors, the gradients and Adam's state are in the parameters' type."""
        self.config = config
        self.action_dim = nets["actor"][-1]
        compute = compute_type(precision)
        self.actor = build(nets["actor"], params, "actor", device, tanh_out=True, compute=compute)
        self.actor_target = build(nets["actor"], params, "actor_target", device, tanh_out=True, compute=compute)
        self.critics = {q: build(nets[q], params, q, device, compute=compute) for q in CRITICS}
        self.targets = {q: build(nets[q], params, f"{q}_target", device, compute=compute) for q in CRITICS}
        self.optimizers = {"actor": FlatAdam(self.actor, config.learning_rate),
                           **{q: FlatAdam(self.critics[q], config.learning_rate) for q in CRITICS}}
        # `grads`' scratch: Q1 stepped
        self.qf1_ahead = MLP(nets["qf1"], device, dtype=self.actor.flat.dtype, compute=compute)
        self.action_cols = slice(nets["actor"][0], None)  # a critic's input is [obs, action]
        self.draws = LearnDraws(seed, device, self.actor.flat.dtype)
        self._critic_shapes = {k: v for q in CRITICS for k, v in grad_shapes(self.critics[q], q).items()}
        self.updates = 0

    @torch.no_grad()
    def learn(self, batch: SampleBatch) -> LearnResult:
        td, metrics = self._critic_grads(batch)
        for q in CRITICS:
            self.optimizers[q].step()
        if self.config.steps_actor(self.updates):  # through Q1 just stepped
            metrics["losses/actor_loss"] = actor_grad(self.actor, self.critics["qf1"], batch.obs, self.action_cols)
            self._step_actor_and_targets()
        self.updates += 1
        return LearnResult(td, metrics)

    def graph_key(self) -> tuple[bool, ...]:
        """The host's branches of the coming update, which a CUDA graph of it bakes in (`graphs.CapturedLearn`):
        the delayed actor's step, each Adam's denormal flush."""
        actor = self.config.steps_actor(self.updates)
        opt = self.optimizers
        return actor, opt["qf1"].flush_due(), opt["qf2"].flush_due(), actor and opt["actor"].flush_due()

    def stage(self, rows: int) -> None:
        """The coming update's smoothing draws into the device buffer its graph reads."""
        self.draws.stage(self.updates, rows * self.action_dim)

    def unstage(self) -> None:
        self.draws.unstage()

    @torch.no_grad()
    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        td, metrics = self._critic_grads(batch, share)
        arrays = critic_grads(self.critics, share)
        if self.config.steps_actor(self.updates):
            self.optimizers["qf1"].step_ahead(self.qf1_ahead)  # Q1 as `apply` will step it, a copy
            metrics["losses/actor_loss"] = actor_grad(self.actor, self.qf1_ahead, batch.obs, self.action_cols)
            actor = named_grads(self.actor, "actor")
            arrays.update(actor if share is None else share.average(actor))
        return Gradients(arrays, td, metrics)

    @torch.no_grad()
    def apply(self, gradients: Gradients) -> LearnResult:
        actor = self.config.steps_actor(self.updates)
        check_gradients(gradients, {**self._critic_shapes, **(grad_shapes(self.actor, "actor") if actor else {})})
        for q in CRITICS:
            take_grads(self.critics[q], gradients.arrays, q)
            self.optimizers[q].step()
        if actor:
            take_grads(self.actor, gradients.arrays, "actor")
            self._step_actor_and_targets()
        self.updates += 1
        return gradients.result()

    def _critic_grads(self, batch: SampleBatch, share: GroupShare | None = None
                      ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Both critics' gradients into their `grad`; the TD errors y − Q1 and the critics' metrics. The target
        y = r + γ (1 − d) min_j Q'_j(s', clip(μ'(s') + clip(σ̃ z, ±c), ±1)), z keyed by (seed, update): a learner
        of a group takes its rows' draws of the whole batch's."""
        cfg, n = self.config, batch.reward.shape[0]
        total = n if share is None else share.total
        z = self.draws.normals(self.updates, total * self.action_dim).view(total, self.action_dim)
        z = z if share is None else share.mine(z)
        smoothing = (z * cfg.target_policy_noise).clamp_(-cfg.target_noise_clip, cfg.target_noise_clip)
        next_action = (self.actor_target(batch.next_obs, slot="learn") + smoothing).clamp_(-1.0, 1.0)
        x_next = torch.cat([batch.next_obs, next_action], dim=1)
        next_q = torch.minimum(*(self.targets[q](x_next, slot="learn") for q in CRITICS)).squeeze(1)
        y = batch.reward + cfg.gamma * (1.0 - batch.terminated) * next_q

        td, loss, q1 = twin_critic_backward(self.critics, batch, y)
        return td, {"losses/td_loss": loss, "losses/q_values": q1.mean()}

    def _step_actor_and_targets(self) -> None:
        self.optimizers["actor"].step()
        self.actor_target.lerp_to(self.actor, self.config.tau)  # target += τ (online − target)
        for q in CRITICS:
            self.targets[q].lerp_to(self.critics[q], self.config.tau)

    def policy_params(self) -> Params:
        return dump_net(self.actor, "actor")

    def write_policy(self, out: Params) -> None:
        write_net(self.actor, out, "actor")

    def _nets(self) -> dict:
        return {"actor": self.actor, "actor_target": self.actor_target, **self.critics,
                **{f"{q}_target": t for q, t in self.targets.items()}}

    def _optimizers(self) -> dict:
        return dict(self.optimizers)


#: What the TD3 registry entry names for the torch backend (pearl.algos.td3.TD3.kernels).
KERNELS = AlgoKernels(
    act=lambda device, config, nets, params, seed: DDPGAct(nets["actor"], params, device, seed, config.noise_type),
    learn=lambda device, config, nets, params, seed, precision=Precision.FP32: captured(
        TD3Learn(config, nets, params, device, seed, precision), device),
    precisions=(Precision.FP32, Precision.BF16_MIXED))
