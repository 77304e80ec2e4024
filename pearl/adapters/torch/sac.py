"""SAC's `act` and `learn` in torch (maths in pearl/algos/sac.py). `learn` is one autograd loss per optimiser,
CleanRL-style, in Stable-Baselines3's order; `act` samples the squashed Gaussian with Philox draws."""

from __future__ import annotations

import math

import numpy as np
import torch

from pearl.adapters.base import ActKernel, AlgoKernels, LearnKernel
from pearl.adapters.torch.autograd import CRITICS, Adam, LearnDraws, Net, min_q, net_adam, twin_critic_step
from pearl.adapters.torch.nets import build, load_net
from pearl.algos.sac import LOG_STD_MAX, LOG_STD_MIN, SACConfig
from pearl.rng import CounterDraws, normal
from pearl.types import LearnResult, Params, SampleBatch

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def squashed_sample(out: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, log π(a|s)) for the policy's output (m, ℓ) and standard normals z: a = tanh(m + σ z), σ = exp(clamp(ℓ)).
    log N(m + σz; m, σ) = −z²/2 − log σ − log √(2π), then the tanh's change of variables (SB3's, ε = 1e-6)."""
    d = out.shape[1] // 2
    mean, log_std = out[:, :d], out[:, d:].clamp(LOG_STD_MIN, LOG_STD_MAX)
    action = torch.tanh(mean + log_std.exp() * z)
    log_prob = (-0.5 * z.square() - log_std - HALF_LOG_2PI).sum(1) - torch.log(1.0 - action.square() + 1e-6).sum(1)
    return action, log_prob


class SACAct(ActKernel):
    """tanh(m + σ · ε) with ε from Philox (key = seed, counter = (flat index, call)), computed on the host so CPU
    and CUDA give the same bits; tanh(m) when explore is 0 (evaluation)."""

    def __init__(self, sizes: list[int], params: Params, device: torch.device, seed: int) -> None:
        self.device = device
        self.actor = build(sizes, params, "actor", device)
        self.draws = CounterDraws(seed)

    def set_params(self, params: Params) -> None:
        load_net(self.actor, params, "actor")

    @torch.no_grad()
    def act(self, obs: np.ndarray, explore: float) -> np.ndarray:
        out = self.actor(torch.as_tensor(obs, dtype=torch.float32, device=self.device)).cpu().numpy()
        d = out.shape[1] // 2
        mean = out[:, :d]
        r0, r1 = self.draws.next(mean.size)  # drawn every call, as DDPG's act does, so the counters stay in step
        if explore > 0:
            std = np.exp(np.clip(out[:, d:], LOG_STD_MIN, LOG_STD_MAX))
            mean = mean + std * normal(r0, r1).reshape(mean.shape)
        return np.tanh(mean).astype(np.float32)


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
        self.updates = 0

    def learn(self, batch: SampleBatch) -> LearnResult:
        cfg = self.config
        n, d = batch.reward.shape[0], self.action_dim
        z = self.draws.normals(self.updates, 2 * n * d).view(2, n, d)
        action_pi, log_pi = squashed_sample(self.actor(batch.obs), z[0])

        # temperature first, with α as it was (SB3's order)
        alpha = self.log_alpha.detach().exp()
        alpha_loss = -(self.log_alpha * (log_pi.detach() + self.target_entropy)).mean()
        (grad,) = torch.autograd.grad(alpha_loss, [self.log_alpha])
        self.alpha_optimizer.step(grad)

        with torch.no_grad():
            next_action, next_log_pi = squashed_sample(self.actor(batch.next_obs), z[1])
            next_q = min_q(self.targets, batch.next_obs, next_action)
            y = batch.reward + cfg.gamma * (1.0 - batch.terminated) * (next_q - alpha * next_log_pi)

        critic_loss, q1 = twin_critic_step(self.critics, self.optimizers, batch, y)

        q_pi = min_q(self.critics, batch.obs, action_pi)
        actor_loss = (alpha * log_pi - q_pi).mean()
        (grad,) = torch.autograd.grad(actor_loss, [self.actor.flat])
        self.optimizers["actor"].step(grad)

        for q in CRITICS:
            self.targets[q].lerp_to(self.critics[q], cfg.tau)
        self.updates += 1
        return LearnResult((y - q1).detach(), {"losses/td_loss": critic_loss.detach(),
                                                "losses/actor_loss": actor_loss.detach(),
                                                "losses/alpha": alpha, "losses/q_values": q1.detach().mean()})

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
