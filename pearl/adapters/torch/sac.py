"""SAC's `act` and `learn` in torch (maths in pearl/algos/sac.py). `learn` backpropagates by hand through the
flat-parameter MLPs of nets.py, as TD3's does (td3.py), in Stable-Baselines3's order: log α's Adam step, both
critics' weight gradients and steps, then the actor's gradient through min(Q1, Q2) of the critics just stepped
(both critics' action-input gradients, each row's going to its smaller Q) and through the tanh-squashed Gaussian.
Its autograd reference, `reference.SACReference`, is what tests/test_reference_learn.py trains it against;
`benchmarks/learn_paths.py` times the two, and this path is the faster (measured: see docs/MEASUREMENTS.md,
"The learn paths"). `act` samples the squashed
Gaussian with Philox draws."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from pearl.adapters.base import AlgoKernels, LearnKernel, check_gradients
from pearl.adapters.torch.autograd import CRITICS, LearnDraws
from pearl.adapters.torch.graphs import captured
from pearl.adapters.torch.nets import (MLP, FlatAdam, HostSteps, PolicyAct, build, compute_type, critic_grads,
                                      dump_net, fused_adam_step, grad_shapes, named_grads, take_grads, write_net)
from pearl.adapters.torch.td3 import twin_critic_backward
from pearl.algos.sac import LOG_STD_MAX, LOG_STD_MIN, SACConfig
from pearl.kernels import Precision
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


class Temperature(HostSteps):
    """log α and its Adam: torch.optim.Adam's update of one scalar, by the fused kernel `FlatAdam` runs too
    (`nets.fused_adam_step`), its state named as the autograd reference's (`log_alpha`, `adam.exp_avg.log_alpha`,
    `adam.step.log_alpha`)."""

    def __init__(self, initial_alpha: float, lr: float, device: torch.device, dtype: torch.dtype) -> None:
        self.log_alpha = torch.tensor(math.log(initial_alpha), dtype=dtype, device=device)
        self.grad = torch.zeros_like(self.log_alpha)
        self.lr = lr
        self.step_count = torch.zeros((), dtype=torch.float32, device=device)  # as FlatAdam's
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(self.log_alpha), torch.zeros_like(self.log_alpha)
        self._taken = 0  # step_count as a Python int (HostSteps)

    def step(self) -> None:
        """log α ← Adam(log α, grad)."""
        self.step_count.add_(1)
        fused_adam_step([self.log_alpha], [self.grad], [self.exp_avg], [self.exp_avg_sq], [self.step_count], self.lr)
        self._counted(self.exp_avg, self.exp_avg_sq)

    def state(self) -> Params:
        return {"log_alpha": self.log_alpha.cpu().numpy().copy(),
                "adam.step.log_alpha": np.asarray(int(self.step_count.item()), dtype=np.int64),
                "adam.exp_avg.log_alpha": self.exp_avg.cpu().numpy().copy(),
                "adam.exp_avg_sq.log_alpha": self.exp_avg_sq.cpu().numpy().copy()}

    def load_state(self, state: Params) -> None:
        for name, target in (("log_alpha", self.log_alpha), ("adam.exp_avg.log_alpha", self.exp_avg),
                             ("adam.exp_avg_sq.log_alpha", self.exp_avg_sq)):
            target.copy_(torch.from_numpy(np.asarray(state[name])))
        self._taken = int(state["adam.step.log_alpha"])
        self.step_count.fill_(float(self._taken))


@dataclass
class _Policy:
    """The policy's sample at the batch's observations, with what its backward pass needs, and α before the
    update."""

    obs: torch.Tensor
    outs: list[torch.Tensor]  # the actor's layer outputs at obs (`MLP.forward`)
    z: torch.Tensor  # (2, B, d): the normals at obs and at next_obs
    action: torch.Tensor  # a = tanh(m + σ z)
    std: torch.Tensor  # σ = exp(clamp(ℓ))
    inside: torch.Tensor  # where −20 ≤ ℓ ≤ 2: the clamp passes ℓ's gradient there only, as torch's does
    log_pi: torch.Tensor
    alpha: torch.Tensor


class SACLearn(LearnKernel):
    def __init__(self, config: SACConfig, nets: dict[str, list[int]], params: Params, device: torch.device,
                 seed: int, precision: Precision = Precision.FP32) -> None:
        """precision: the arithmetic of the networks' products (nets.MLP's `compute`); the squashed Gaussian, log
        π, α, the losses, the targets, the TD errors, the gradients and Adam's state are in the parameters' type."""
        self.config = config
        self.action_dim = nets["actor"][-1] // 2
        self.target_entropy = config.target_entropy or -float(self.action_dim)
        compute = compute_type(precision)
        self.actor = build(nets["actor"], params, "actor", device, compute=compute)
        self.critics = {q: build(nets[q], params, q, device, compute=compute) for q in CRITICS}
        self.targets = {q: build(nets[q], params, f"{q}_target", device, compute=compute) for q in CRITICS}
        self.optimizers = {"actor": FlatAdam(self.actor, config.learning_rate),
                           **{q: FlatAdam(self.critics[q], config.learning_rate) for q in CRITICS}}
        # `grads`' scratch: the critics after their step
        self.ahead = {q: MLP(nets[q], device, dtype=self.actor.flat.dtype, compute=compute) for q in CRITICS}
        self.temperature = Temperature(config.initial_alpha, config.learning_rate, device,
                                       self.actor.flat.dtype)
        self.action_cols = slice(nets["actor"][0], None)  # a critic's input is [obs, action]
        self.draws = LearnDraws(seed, device, self.actor.flat.dtype)
        # a fixed α (tune_alpha false) has no gradient: log α and its Adam stay as they started
        self._grad_shapes = {**({"log_alpha": ()} if config.tune_alpha else {}),
                             **{k: v for q in CRITICS for k, v in grad_shapes(self.critics[q], q).items()},
                             **grad_shapes(self.actor, "actor")}
        self.updates = 0

    @torch.no_grad()
    def learn(self, batch: SampleBatch) -> LearnResult:
        # SB3's order: temperature, critics, then the actor through the critics just updated
        policy = self._policy(batch)
        if self.config.tune_alpha:
            self._alpha_grad(policy)
            self.temperature.step()
        td, metrics = self._critic_grads(batch, policy)
        for q in CRITICS:
            self.optimizers[q].step()
        metrics["losses/actor_loss"] = self._actor_grad(policy, self.critics)
        self._step_actor_and_targets()
        return LearnResult(td, metrics)

    def graph_key(self) -> tuple[bool, ...]:
        """The host's branches of the coming update, which a CUDA graph of it bakes in (`graphs.CapturedLearn`):
        each Adam's denormal flush, the temperature's too."""
        opt = self.optimizers
        return (self.config.tune_alpha and self.temperature.flush_due(), opt["qf1"].flush_due(),
                opt["qf2"].flush_due(), opt["actor"].flush_due())

    def graph_counters(self) -> dict[str, HostSteps]:
        """What counts the host's steps of an update: each network's Adam and the temperature's."""
        return {**self.optimizers, "temperature": self.temperature}

    def stage(self, rows: int) -> None:
        """The coming update's policy draws (at obs and at next_obs) into the device buffer its graph reads."""
        self.draws.stage(self.updates, 2 * rows * self.action_dim)

    def unstage(self) -> None:
        self.draws.unstage()

    @torch.no_grad()
    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        policy = self._policy(batch, share)
        alpha = {"log_alpha": self._alpha_grad(policy).clone()} if self.config.tune_alpha else {}
        td, metrics = self._critic_grads(batch, policy)
        arrays = critic_grads(self.critics, share)
        for q in CRITICS:
            self.optimizers[q].step_ahead(self.ahead[q])  # each critic as `apply` will step it, a copy
        metrics["losses/actor_loss"] = self._actor_grad(policy, self.ahead)
        rest = {**alpha, **named_grads(self.actor, "actor")}
        arrays.update(rest if share is None else share.average(rest))
        return Gradients(arrays, td, metrics)

    @torch.no_grad()
    def apply(self, gradients: Gradients) -> LearnResult:
        check_gradients(gradients, self._grad_shapes)
        if self.config.tune_alpha:
            self.temperature.grad.copy_(gradients.arrays["log_alpha"])
            self.temperature.step()
        for q in CRITICS:
            take_grads(self.critics[q], gradients.arrays, q)
            self.optimizers[q].step()
        take_grads(self.actor, gradients.arrays, "actor")
        self._step_actor_and_targets()
        return gradients.result()

    def _policy(self, batch: SampleBatch, share: GroupShare | None = None) -> _Policy:
        """The policy's sample at obs (draws keyed by (seed, update): a learner of a group takes its rows' draws
        of the whole batch's), and α as it is before this update."""
        n = batch.reward.shape[0] if share is None else share.total
        d = self.action_dim
        z = self.draws.normals(self.updates, 2 * n * d).view(2, n, d)
        z = z if share is None else share.mine(z.transpose(0, 1)).transpose(0, 1)
        outs = self.actor.forward(batch.obs, slot="actor step")
        mean, raw_log_std = outs[-1][:, :d], outs[-1][:, d:]
        log_std = raw_log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
        std = log_std.exp()
        action = torch.tanh(mean + std * z[0])
        log_pi = (-0.5 * z[0].square() - log_std - HALF_LOG_2PI).sum(1) \
            - torch.log(1.0 - action.square() + 1e-6).sum(1)
        inside = (raw_log_std >= LOG_STD_MIN) & (raw_log_std <= LOG_STD_MAX)
        return _Policy(batch.obs, outs, z, action, std, inside, log_pi, self.temperature.log_alpha.exp())

    def _alpha_grad(self, policy: _Policy) -> torch.Tensor:
        """∂/∂log α of −mean_i log α (log π_i + H̄) = −mean_i (log π_i + H̄), into the temperature's gradient."""
        return torch.mean(policy.log_pi + self.target_entropy, 0, out=self.temperature.grad).neg_()

    def _critic_grads(self, batch: SampleBatch, policy: _Policy) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Both critics' gradients into their `grad`; the TD errors y − Q1 and the critics' metrics. The target
        y = r + γ (1 − d) (min_j Q'_j(s', a') − α log π(a'|s')), a' the policy's sample at s'."""
        cfg = self.config
        next_action, next_log_pi = squashed_sample(self.actor(batch.next_obs, slot="learn"), policy.z[1])
        x_next = torch.cat([batch.next_obs, next_action], dim=1)
        next_q = torch.minimum(*(self.targets[q](x_next, slot="learn") for q in CRITICS)).squeeze(1)
        y = batch.reward + cfg.gamma * (1.0 - batch.terminated) * (next_q - policy.alpha * next_log_pi)

        td, loss, q1 = twin_critic_backward(self.critics, batch, y)
        return td, {"losses/td_loss": loss, "losses/alpha": policy.alpha, "losses/q_values": q1.mean()}

    def _actor_grad(self, policy: _Policy, critics: dict[str, MLP]) -> torch.Tensor:
        """The actor's gradient into `actor.grad`, of loss = mean_i (α log π_i − min_j Q_j(s_i, ã_i)) through
        `critics`; the loss. With u = m + σz, ã = tanh(u), log σ = clamp(ℓ) and
        log π = Σ (−z²/2 − log σ − log √(2π) − log(1 − ã² + 1e-6)):
            ∂loss/∂ã = (2α ã / (1 − ã² + 1e-6) − ∂q/∂ã) / B       (q_i = min_j Q_j, its gradient to the smaller)
            ∂loss/∂m = ∂loss/∂u = ∂loss/∂ã · (1 − ã²)
            ∂loss/∂ℓ = (∂loss/∂u · σ z − α / B) where −20 ≤ ℓ ≤ 2, else 0."""
        n, d = policy.action.shape
        x = torch.cat([policy.obs, policy.action], dim=1)
        outs = {q: critics[q].forward(x, slot="actor step") for q in CRITICS}
        q1, q2 = outs["qf1"][-1], outs["qf2"][-1]
        actor_loss = (policy.alpha * policy.log_pi - torch.minimum(q1, q2).squeeze(1)).mean()
        # torch.minimum's gradient goes to the smaller value, half to each on a tie
        tie = (q1 == q2).to(q1.dtype).mul_(0.5)
        d_action = None
        for q, smaller in (("qf1", q1 < q2), ("qf2", q2 < q1)):
            grad_q = smaller.to(q1.dtype).add_(tie).mul_(-1.0 / n)
            part = critics[q].backward(outs[q], grad_q, param_grads=False, input_grad=self.action_cols)
            d_action = part if d_action is None else d_action.add_(part)
        one_minus_a2 = 1.0 - policy.action.square()
        grad_u = (policy.action * (2.0 / n) * policy.alpha / (one_minus_a2 + 1e-6)).add_(d_action).mul_(one_minus_a2)
        grad_ell = (grad_u * policy.std * policy.z[0]).sub_(policy.alpha / n).mul_(policy.inside)
        self.actor.backward(policy.outs, torch.cat([grad_u, grad_ell], dim=1))
        return actor_loss

    def _step_actor_and_targets(self) -> None:
        self.optimizers["actor"].step()
        for q in CRITICS:
            self.targets[q].lerp_to(self.critics[q], self.config.tau)
        self.updates += 1

    def policy_params(self) -> Params:
        return dump_net(self.actor, "actor")

    def write_policy(self, out: Params) -> None:
        write_net(self.actor, out, "actor")

    def _nets(self) -> dict:
        return {"actor": self.actor, **self.critics, **{f"{q}_target": t for q, t in self.targets.items()}}

    def _optimizers(self) -> dict:
        return dict(self.optimizers)

    def state_dict(self) -> Params:
        """The base state (networks, targets, their Adams, updates) and log α with its Adam."""
        return {**super().state_dict(), **self.temperature.state()}

    def load_state_dict(self, state: Params) -> None:
        super().load_state_dict(state)  # checks every name and shape of state_dict, log α's included, first
        self.temperature.load_state(state)


#: What the SAC registry entry names for the torch backend (pearl.algos.sac.SAC.kernels); no OpenCL entry.
KERNELS = AlgoKernels(
    act=lambda device, config, nets, params, seed: SACAct(nets["actor"], params, device, seed),
    learn=lambda device, config, nets, params, seed, precision=Precision.FP32: captured(
        SACLearn(config, nets, params, device, seed, precision), device),
    precisions=(Precision.FP32, Precision.BF16_MIXED))
