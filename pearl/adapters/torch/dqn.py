"""DQN's `act` and `learn` in torch: the reference maths (see pearl/algos/dqn.py).

`learn` backpropagates by hand through the flat-parameter MLP of nets.py (no autograd), so clipping is one
norm over one gradient tensor and Adam steps one tensor; see nets.py for why.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from pearl.adapters.base import AlgoKernels, LearnKernel, check_gradients
from pearl.adapters.torch.graphs import captured
from pearl.adapters.torch.nets import (FlatAdam, PolicyAct, build, clip_grad_norm_, compute_type, dump_net, grad_shapes,
                                      named_grads, take_grads, write_net)
from pearl.algos.dqn import DQNConfig
from pearl.kernels import Precision
from pearl.rng import below, uniform
from pearl.types import Gradients, GroupShare, LearnResult, Params, SampleBatch


class DQNAct(PolicyAct):
    """Greedy actions from the Q-network; ε-greedy draws from Philox (key = seed, counter = (row, call)),
    the same draws the OpenCL adapter makes."""

    def __init__(self, sizes: list[int], params: Params, device: torch.device, seed: int) -> None:
        super().__init__("q", sizes, params, device, seed)
        self.n_actions = sizes[-1]

    @torch.no_grad()
    def act(self, obs: np.ndarray, explore: float) -> np.ndarray:
        n = obs.shape[0]
        r0, r1 = self.draws.next(n)
        random = uniform(r0) < np.float32(explore)
        actions = below(r1, self.n_actions)
        if not random.all():  # the forward pass only for the greedy ones
            greedy = ~random
            actions[greedy] = self.forward(obs[greedy]).argmax(dim=1).cpu().numpy()
        return actions


class DQNLearn(LearnKernel):
    def __init__(self, config: DQNConfig, sizes: list[int], params: Params, device: torch.device,
                 precision: Precision = Precision.FP32) -> None:
        """precision: the arithmetic of the networks' products (nets.MLP's `compute`); the loss, the targets, the
        TD errors, the gradient and Adam's state are in the parameters' type either way."""
        self.config = config
        compute = compute_type(precision)
        self.q = build(sizes, params, "q", device, compute=compute)
        self.q_target = build(sizes, params, "q_target", device, compute=compute)
        self.optimizer = FlatAdam(self.q, config.learning_rate)
        self._grad_shapes = grad_shapes(self.q, "q")
        self.updates = 0

    @torch.no_grad()
    def learn(self, batch: SampleBatch) -> LearnResult:
        td, metrics = self._backward(batch)
        self._step()
        # Metrics stay tensors: reading them would synchronise the device; the caller reads them rarely.
        return LearnResult(td, metrics)

    @torch.no_grad()
    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        td, metrics = self._backward(batch)
        arrays = named_grads(self.q, "q")
        return Gradients(arrays if share is None else share.average(arrays), td, metrics)

    @torch.no_grad()
    def apply(self, gradients: Gradients) -> LearnResult:
        check_gradients(gradients, self._grad_shapes)
        take_grads(self.q, gradients.arrays, "q")
        self._step()
        return gradients.result()

    def _backward(self, batch: SampleBatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The Q-network's gradient into `q.grad`; the TD errors and the loss metrics."""
        cfg = self.config
        next_q = self.q_target(batch.next_obs, slot="learn").amax(dim=1)
        y = batch.reward + cfg.gamma * (1.0 - batch.terminated) * next_q
        outs = self.q.forward(batch.obs, slot="learn")
        taken = batch.action.view(-1, 1)
        q = outs[-1].gather(1, taken).squeeze(1)
        td = y - q
        per_item = F.smooth_l1_loss(q, y, reduction="none") if cfg.huber else td.square()
        loss = (batch.weights * per_item).mean()
        self.q.backward(outs, self._grad_out(outs[-1], taken, td, batch.weights))
        return td, {"losses/td_loss": loss, "losses/q_values": q.mean()}

    def graph_key(self) -> tuple[bool, bool]:
        """The host's branches of the coming update, which a CUDA graph of it bakes in (`graphs.CapturedLearn`):
        the hard target copy, Adam's denormal flush."""
        return self._target_due(), self.optimizer.flush_due()

    def _target_due(self) -> bool:
        """The coming update ends with the hard target copy (every target_update_interval updates)."""
        return (self.updates + 1) % self.config.target_update_interval == 0

    def _step(self) -> None:
        """Clip `q.grad` (the optimiser's part: after any averaging of gradients), one Adam step, and the hard
        target copy every target_update_interval updates."""
        cfg = self.config
        if cfg.max_grad_norm > 0:
            clip_grad_norm_(self.q.grad, cfg.max_grad_norm)
        copy_target = self._target_due()
        self.optimizer.step()
        self.updates += 1
        if copy_target:
            self.q_target.copy_from(self.q)

    def _grad_out(self, out: torch.Tensor, taken: torch.Tensor, td: torch.Tensor,
                  weights: torch.Tensor) -> torch.Tensor:
        """∂loss/∂Q(s, ·): nonzero only at the taken action, where loss = mean_i w_i · ℓ(q_i − y_i) gives
        w_i · ℓ'(q_i − y_i) / B, with ℓ' = clamp(·, −1, 1) for Huber (β = 1) and 2· for the square."""
        dq = td.clamp(-1.0, 1.0) if self.config.huber else td * 2.0
        dq = dq.mul_(weights).mul_(-1.0 / td.shape[0])  # q − y = −δ
        return torch.zeros_like(out).scatter_(1, taken, dq.unsqueeze(1))

    def policy_params(self) -> Params:
        return dump_net(self.q, "q")

    def _nets(self) -> dict:
        return {"q": self.q, "q_target": self.q_target}

    def _optimizers(self) -> dict:
        return {"q": self.optimizer}

    def write_policy(self, out: Params) -> None:
        write_net(self.q, out, "q")


#: What the DQN registry entry names for the torch backend (pearl.algos.dqn.DQN.kernels).
KERNELS = AlgoKernels(
    act=lambda device, config, nets, params, seed: DQNAct(nets["q"], params, device, seed),
    learn=lambda device, config, nets, params, seed, precision=Precision.FP32: captured(
        DQNLearn(config, nets["q"], params, device, precision), device),
    precisions=(Precision.FP32, Precision.BF16_MIXED))
