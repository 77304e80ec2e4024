"""DQN's `act` and `learn` in torch: the reference maths (see pearl/algos/dqn.py)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from pearl.adapters.base import ActKernel, LearnKernel
from pearl.adapters.torch.nets import build, dump_net, load_net
from pearl.algos.dqn import DQNConfig
from pearl.rng import CounterDraws, below, uniform
from pearl.types import LearnResult, Params, SampleBatch


class DQNAct(ActKernel):
    """Greedy actions from the Q-network; ε-greedy draws from Philox (key = seed, counter = (row, call)),
    the same draws the OpenCL adapter makes."""

    def __init__(self, sizes: list[int], params: Params, device: torch.device, seed: int) -> None:
        self.device = device
        self.n_actions = sizes[-1]
        self.q = build(sizes, params, "q", device)
        self.draws = CounterDraws(seed)

    def set_params(self, params: Params) -> None:
        load_net(self.q, params, "q")

    @torch.no_grad()
    def act(self, obs: np.ndarray, explore: float) -> np.ndarray:
        n = obs.shape[0]
        r0, r1 = self.draws.next(n)
        random = uniform(r0) < np.float32(explore)
        actions = below(r1, self.n_actions)
        if not random.all():  # the forward pass only for the greedy ones
            greedy = ~random
            x = torch.as_tensor(obs[greedy], dtype=torch.float32, device=self.device)
            actions[greedy] = self.q(x).argmax(dim=1).cpu().numpy()
        return actions


class DQNLearn(LearnKernel):
    def __init__(self, config: DQNConfig, sizes: list[int], params: Params, device: torch.device) -> None:
        self.config = config
        self.q = build(sizes, params, "q", device)
        self.q_target = build(sizes, params, "q_target", device)
        self.q_target.requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=config.learning_rate)
        self.updates = 0

    def learn(self, batch: SampleBatch) -> LearnResult:
        cfg = self.config
        with torch.no_grad():
            next_q = self.q_target(batch.next_obs).max(dim=1).values
            y = batch.reward + cfg.gamma * (1.0 - batch.terminated) * next_q
        q = self.q(batch.obs).gather(1, batch.action.view(-1, 1)).squeeze(1)
        td = y - q
        per_item = F.smooth_l1_loss(q, y, reduction="none") if cfg.huber else td.square()
        loss = (batch.weights * per_item).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.q.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        if self.updates % cfg.target_update_interval == 0:
            self.q_target.load_state_dict(self.q.state_dict())
        # Metrics stay tensors: reading them would synchronise the device; the caller reads them rarely.
        return LearnResult(td.detach(), {"losses/td_loss": loss.detach(), "losses/q_values": q.detach().mean()})

    def get_params(self) -> Params:
        return {**dump_net(self.q, "q"), **dump_net(self.q_target, "q_target")}

    def policy_params(self) -> Params:
        return dump_net(self.q, "q")
