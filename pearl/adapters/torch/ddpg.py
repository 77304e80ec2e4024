"""DDPG's `act` and `learn` in torch: the reference maths (see pearl/algos/ddpg.py).

`learn` backpropagates by hand through the flat-parameter MLPs of nets.py (no autograd): the actor's step takes
only ∂Q/∂a from the critic, never the critic's weight gradients, and each Adam step and Polyak update is one
op on one flat tensor; see nets.py for why.
"""

from __future__ import annotations

import numpy as np
import torch

from pearl.adapters.base import AlgoKernels, CriticFirstLearn, check_gradients
from pearl.adapters.torch.graphs import captured
from pearl.adapters.torch.nets import (MLP, FlatAdam, PolicyAct, build, compute_type, critic_grads, dump_net,
                                      grad_shapes, named_grads, take_grads, write_net)
from pearl.algos.ddpg import DDPGConfig, ou_step
from pearl.kernels import Precision
from pearl.rng import normal
from pearl.types import Gradients, GroupShare, LearnResult, Params, SampleBatch


class DDPGAct(PolicyAct):
    """μ(s) plus noise from Philox draws (key = seed, counter = (flat index, call)), as on OpenCL: Gaussian, or
    an Ornstein–Uhlenbeck process per row and action dimension driven by the same draws.

    The noise is computed on the host in numpy, for CPU and CUDA alike, so both give the same noise bits: the
    process state x is a host array (n, action_dim) next to the draws, never a tensor. A call with another
    number of rows than the last starts new processes at 0 (the rows are other envs: the profiler measures
    one kernel at several batch sizes); an actor always acts on its n_envs rows.
    """

    def __init__(self, sizes: list[int], params: Params, device: torch.device, seed: int,
                 noise_type: str = "gaussian") -> None:
        super().__init__("actor", sizes, params, device, seed, tanh_out=True)
        self.ou = noise_type == "ornstein-uhlenbeck"
        self.x: np.ndarray | None = None  # the Ornstein–Uhlenbeck states, (n, action_dim) float32

    @torch.no_grad()
    def act(self, obs: np.ndarray, explore: float) -> np.ndarray:
        actions = self.forward(obs).cpu().numpy()
        r0, r1 = self.draws.next(actions.size)  # element (i, j) uses counter i·d + j, as on OpenCL
        if explore > 0:
            eps = normal(r0, r1).reshape(actions.shape)
            actions = actions + (self._ou_noise(eps, explore) if self.ou else np.float32(explore) * eps)
        return np.clip(actions, -1.0, 1.0, out=actions)

    def _ou_noise(self, eps: np.ndarray, sigma: float) -> np.ndarray:
        if self.x is None or self.x.shape != eps.shape:
            self.x = np.zeros(eps.shape, np.float32)
        self.x = ou_step(self.x, eps, sigma)
        return self.x

    def new_episodes(self, rows: np.ndarray) -> None:
        if self.x is not None:
            self.x[np.asarray(rows, dtype=bool)] = 0.0

    def noise_state(self) -> np.ndarray | None:
        """The Ornstein–Uhlenbeck states (n, action_dim), a copy; None before the first noisy act or for
        Gaussian noise."""
        return None if self.x is None else self.x.copy()


def actor_grad(actor: MLP, critic: MLP, obs: torch.Tensor, action_cols: slice) -> torch.Tensor:
    """The actor's gradient into `actor.grad`, of loss = −mean_i Q(s_i, μ(s_i)) through `critic`; the loss.
    Its gradient reaches μ through the critic's action input (`action_cols` of its input), so the critic returns
    only its input gradient (no weight gradients). DDPG's and TD3's actor step."""
    n = obs.shape[0]
    actor_outs = actor.forward(obs, slot="actor step")
    critic_outs = critic.forward(torch.cat([obs, actor_outs[-1]], dim=1), slot="actor step")
    actor_loss = -critic_outs[-1].mean()
    d_action = critic.backward(critic_outs, torch.full_like(critic_outs[-1], -1.0 / n), param_grads=False,
                               input_grad=action_cols)
    actor.backward(actor_outs, d_action)
    return actor_loss


class DDPGLearn(CriticFirstLearn):
    def __init__(self, config: DDPGConfig, actor_sizes: list[int], critic_sizes: list[int], params: Params,
                 device: torch.device, precision: Precision = Precision.FP32) -> None:
        """precision: the arithmetic of the networks' products (nets.MLP's `compute`); the losses, the targets,
        the TD errors, the gradients and Adam's state are in the parameters' type either way."""
        self.config = config
        compute = compute_type(precision)
        self.actor = build(actor_sizes, params, "actor", device, tanh_out=True, compute=compute)
        self.actor_target = build(actor_sizes, params, "actor_target", device, tanh_out=True, compute=compute)
        self.critic = build(critic_sizes, params, "critic", device, compute=compute)
        self.critic_target = build(critic_sizes, params, "critic_target", device, compute=compute)
        self.actor_opt = FlatAdam(self.actor, config.learning_rate)
        self.critic_opt = FlatAdam(self.critic, config.learning_rate)
        self.action_cols = slice(actor_sizes[0], None)  # the critic's input is [obs, action]
        # `grads`' scratch: the critic after its coming step
        self.critic_ahead = MLP(critic_sizes, device, dtype=self.critic.flat.dtype, compute=compute)
        self._grad_shapes = {**grad_shapes(self.critic, "critic"), **grad_shapes(self.actor, "actor")}
        self.updates = 0

    learn = torch.no_grad()(CriticFirstLearn.learn)

    def graph_key(self) -> tuple[bool, bool]:
        """The host's branches of the coming update, which a CUDA graph of it bakes in (`graphs.CapturedLearn`):
        each Adam's denormal flush."""
        return self.critic_opt.flush_due(), self.actor_opt.flush_due()

    @torch.no_grad()
    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        td, metrics = self._critic_grad(batch)
        critic = critic_grads({"critic": self.critic}, share)
        self.critic_opt.step_ahead(self.critic_ahead)  # the critic as `apply` will step it, in a scratch copy
        metrics["losses/actor_loss"] = self._actor_grad(batch, self.critic_ahead)
        actor = named_grads(self.actor, "actor")
        return Gradients({**critic, **(actor if share is None else share.average(actor))}, td, metrics)

    @torch.no_grad()
    def apply(self, gradients: Gradients) -> LearnResult:
        check_gradients(gradients, self._grad_shapes)
        take_grads(self.critic, gradients.arrays, "critic")
        self.critic_opt.step()
        take_grads(self.actor, gradients.arrays, "actor")
        self._step_actor_and_targets()
        return gradients.result()

    def _critic_grad(self, batch: SampleBatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The critic's gradient into `critic.grad`; the TD errors and the critic's metrics."""
        cfg = self.config
        n = batch.reward.shape[0]
        next_action = self.actor_target(batch.next_obs, slot="learn")
        next_q = self.critic_target(torch.cat([batch.next_obs, next_action], dim=1), slot="learn").squeeze(1)
        y = batch.reward + cfg.gamma * (1.0 - batch.terminated) * next_q

        # loss = mean_i w_i δ_i², so ∂loss/∂q_i = −2 w_i δ_i / B.
        outs = self.critic.forward(torch.cat([batch.obs, batch.action], dim=1), slot="critic step")
        q = outs[-1].squeeze(1)
        td = y - q
        critic_loss = (batch.weights * td.square()).mean()
        self.critic.backward(outs, (batch.weights * td).mul_(-2.0 / n).unsqueeze(1))
        return td, {"losses/td_loss": critic_loss, "losses/q_values": q.mean()}

    def _actor_grad(self, batch: SampleBatch, critic: MLP) -> torch.Tensor:
        return actor_grad(self.actor, critic, batch.obs, self.action_cols)

    def _step_actor_and_targets(self) -> None:
        self.actor_opt.step()
        self.actor_target.lerp_to(self.actor, self.config.tau)  # target += τ (online − target)
        self.critic_target.lerp_to(self.critic, self.config.tau)
        self.updates += 1

    def policy_params(self) -> Params:
        return dump_net(self.actor, "actor")

    def _nets(self) -> dict:
        return {"actor": self.actor, "actor_target": self.actor_target, "critic": self.critic,
                "critic_target": self.critic_target}

    def _optimizers(self) -> dict:
        return {"actor": self.actor_opt, "critic": self.critic_opt}

    def write_policy(self, out: Params) -> None:
        write_net(self.actor, out, "actor")


#: What the DDPG registry entry names for the torch backend (pearl.algos.ddpg.DDPG.kernels).
KERNELS = AlgoKernels(
    act=lambda device, config, nets, params, seed: DDPGAct(nets["actor"], params, device, seed,
                                                           config.noise_type),
    learn=lambda device, config, nets, params, seed, precision=Precision.FP32: captured(DDPGLearn(
        config, nets["actor"], nets["critic"], params, device, precision), device),
    precisions=(Precision.FP32, Precision.BF16_MIXED))
