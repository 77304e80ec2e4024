"""DDPG's `act` and `learn` in torch: the reference maths (see pearl/algos/ddpg.py)."""

from __future__ import annotations

import numpy as np
import torch

from pearl.adapters.base import ActKernel, LearnKernel
from pearl.adapters.torch.nets import build, dump_net, load_net
from pearl.algos.ddpg import DDPGConfig
from pearl.rng import CounterDraws, normal
from pearl.types import LearnResult, Params, SampleBatch


class DDPGAct(ActKernel):
    """μ(s) plus Gaussian noise drawn from Philox (key = seed, counter = (flat index, call)), as on OpenCL."""

    def __init__(self, sizes: list[int], params: Params, device: torch.device, seed: int) -> None:
        self.device = device
        self.actor = build(sizes, params, "actor", device, tanh_out=True)
        self.draws = CounterDraws(seed)

    def set_params(self, params: Params) -> None:
        load_net(self.actor, params, "actor")

    @torch.no_grad()
    def act(self, obs: np.ndarray, explore: float) -> np.ndarray:
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        actions = self.actor(x).cpu().numpy()
        r0, r1 = self.draws.next(actions.size)  # element (i, j) uses counter i·d + j, as on OpenCL
        if explore > 0:
            actions = actions + np.float32(explore) * normal(r0, r1).reshape(actions.shape)
        return np.clip(actions, -1.0, 1.0, out=actions)


class DDPGLearn(LearnKernel):
    def __init__(self, config: DDPGConfig, actor_sizes: list[int], critic_sizes: list[int], params: Params,
                 device: torch.device) -> None:
        self.config = config
        self.actor = build(actor_sizes, params, "actor", device, tanh_out=True)
        self.actor_target = build(actor_sizes, params, "actor_target", device, tanh_out=True)
        self.critic = build(critic_sizes, params, "critic", device)
        self.critic_target = build(critic_sizes, params, "critic_target", device)
        for target in (self.actor_target, self.critic_target):
            target.requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=config.learning_rate)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=config.learning_rate)
        self._online = [*self.actor.parameters(), *self.critic.parameters()]
        self._targets = [*self.actor_target.parameters(), *self.critic_target.parameters()]
        self.updates = 0

    def learn(self, batch: SampleBatch) -> LearnResult:
        cfg = self.config
        with torch.no_grad():
            next_action = self.actor_target(batch.next_obs)
            next_q = self.critic_target(torch.cat([batch.next_obs, next_action], dim=1)).squeeze(1)
            y = batch.reward + cfg.gamma * (1.0 - batch.terminated) * next_q
        q = self.critic(torch.cat([batch.obs, batch.action], dim=1)).squeeze(1)
        td = y - q
        critic_loss = (batch.weights * td.square()).mean()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        # The actor's gradient flows through the critic's action input; the critic's own grads from this
        # backward pass are discarded by the next zero_grad.
        actor_loss = -self.critic(torch.cat([batch.obs, self.actor(batch.obs)], dim=1)).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()

        with torch.no_grad():
            torch._foreach_lerp_(self._targets, self._online, cfg.tau)  # target += τ (online − target)
        self.updates += 1
        return LearnResult(td.detach(), {"losses/td_loss": critic_loss.detach(),
                                         "losses/actor_loss": actor_loss.detach(),
                                         "losses/q_values": q.detach().mean()})

    def get_params(self) -> Params:
        return {**dump_net(self.actor, "actor"), **dump_net(self.actor_target, "actor_target"),
                **dump_net(self.critic, "critic"), **dump_net(self.critic_target, "critic_target")}

    def policy_params(self) -> Params:
        return dump_net(self.actor, "actor")
