"""TD3's `act` and `learn` on an OpenCL device: the maths of pearl/algos/td3.py, step for step as the torch
adapter's autograd loss computes it, with the backward passes of nets.py (DDPG's layers) and the kernels of
td3.cl.

The target's smoothing noise is drawn on the device from Philox at (learn_key(seed), (element, update)), the
counters the torch adapter's `LearnDraws` uses, so both adapters add the same noise but for the few ulp of
the normal's log/cos. `act` is DDPG's (`CLDDPGAct`: μ(s) plus Gaussian or Ornstein–Uhlenbeck noise). As for
DDPG, a `learn` call enqueues its kernels and returns without waiting (pearl/adapters/opencl/algos.py).
"""

from __future__ import annotations

import pyopencl.array as cla

from pearl.adapters.base import AlgoKernels, check_gradients
from pearl.adapters.opencl.algos import CLActorCritic, CLDDPGAct, _alone, _u32
from pearl.adapters.opencl.nets import DeviceAdam, DeviceMean, DeviceMLP, polyak
from pearl.adapters.opencl.runtime import CLRuntime
from pearl.algos.td3 import TD3Config
from pearl.rng import learn_key
from pearl.types import Gradients, GroupShare, LearnResult, Params, SampleBatch

CRITICS = ("qf1", "qf2")


class CLTD3Learn(CLActorCritic):
    def __init__(self, rt: CLRuntime, config: TD3Config, actor_sizes: list[int], critic_sizes: list[int],
                 params: Params, seed: int) -> None:
        super().__init__(rt, config.learning_rate, actor_sizes, params)
        self.config, self.key = config, learn_key(seed)
        self.critics = {q: DeviceMLP(rt, critic_sizes, params, q) for q in CRITICS}
        self.targets = {q: DeviceMLP(rt, critic_sizes, params, f"{q}_target") for q in CRITICS}
        self.critic_opts = {q: DeviceAdam(rt, net.buffers(), net.gradients(), config.learning_rate)
                            for q, net in self.critics.items()}
        self.qf1_ahead = DeviceMLP(rt, critic_sizes, params, "qf1")  # `grads`' scratch: Q1 as `apply` steps it

    def learn(self, batch: SampleBatch) -> LearnResult:
        td, metrics = self._critic_grads(batch)
        for q in CRITICS:
            self.critic_opts[q].step()
        if self.config.steps_actor(self.updates):
            metrics["losses/actor_loss"] = self._actor_grad(batch, self.critics["qf1"])  # through Q1 just stepped
            self._step_actor_and_targets()
        self.updates += 1
        return LearnResult(td, metrics)

    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        _alone(share)
        td, metrics = self._critic_grads(batch)
        arrays = {name: g for q in CRITICS for name, g in self.critics[q].named_grads().items()}
        if self.config.steps_actor(self.updates):
            self.critic_opts["qf1"].step_ahead(self.qf1_ahead.buffers())
            metrics["losses/actor_loss"] = self._actor_grad(batch, self.qf1_ahead)
            arrays.update(self.actor.named_grads())
        return Gradients(arrays, td, metrics)

    def apply(self, gradients: Gradients) -> LearnResult:
        actor = self.config.steps_actor(self.updates)
        shapes = {name: s for q in CRITICS for name, s in self.critics[q].grad_shapes().items()}
        check_gradients(gradients, {**shapes, **(self.actor.grad_shapes() if actor else {})})
        for q in CRITICS:
            self.critics[q].take_grads(gradients.arrays)
            self.critic_opts[q].step()
        if actor:
            self.actor.take_grads(gradients.arrays)
            self._step_actor_and_targets()
        self.updates += 1
        return gradients.result()

    def _critic_grads(self, batch: SampleBatch) -> tuple[cla.Array, dict[str, DeviceMean]]:
        """y = r + γ(1−d) min_j Q'_j(s', clip(μ'(s') + clip(σ̃z, ±c), ±1)) and the gradient of
        mean w·(δ1² + δ2²) into both critics' dw/db; the TD errors y − Q1 and the critics' metrics."""
        cfg, b, rt = self.config, len(batch), self.rt
        next_action = self.actor_target.forward(batch.next_obs, b)[-1]  # smoothed in place: no backward reads it
        rt.launch("td3_smooth", next_action.size, next_action, cfg.target_policy_noise, cfg.target_noise_clip,
                  _u32(self.key), _u32(self.updates))
        x_next = self._concat("x_next", batch.next_obs, next_action, b)
        next_q = [self.targets[q].forward(x_next, b)[-1] for q in CRITICS]
        x = self._concat("x", batch.obs, batch.action, b)
        acts = [self.critics[q].forward(x, b) for q in CRITICS]
        g = [self.bufs.get(f"g_{q}", (b, 1)) for q in CRITICS]
        td, loss, q_taken = self.bufs.get("td", (b,)), self.bufs.get("loss", (b,)), self.bufs.get("q_taken", (b,))
        rt.launch("td3_critic_td", b, acts[0][-1], acts[1][-1], *next_q, batch.reward, batch.terminated,
                  batch.weights, cfg.gamma, b, *g, td, loss, q_taken)
        for q, q_acts, g_q in zip(CRITICS, acts, g):
            self.critics[q].backward(q_acts, g_q, b)
        return td, {"losses/td_loss": DeviceMean(rt, loss), "losses/q_values": DeviceMean(rt, q_taken)}

    def _step_actor_and_targets(self) -> None:
        self.actor_opt.step()
        polyak(self.rt, self.actor_target, self.actor, self.config.tau)
        for q in CRITICS:
            polyak(self.rt, self.targets[q], self.critics[q], self.config.tau)

    def _nets(self) -> dict[str, DeviceMLP]:
        return {"actor": self.actor, "actor_target": self.actor_target, **self.critics,
                **{f"{q}_target": t for q, t in self.targets.items()}}

    def _optimizers(self) -> dict[str, DeviceAdam]:
        return {"actor": self.actor_opt, **self.critic_opts}


#: What the TD3 registry entry names for the OpenCL backend (pearl.algos.td3.TD3.kernels).
TD3_KERNELS = AlgoKernels(
    act=lambda rt, config, nets, params, seed: CLDDPGAct(rt, nets["actor"], params, seed, config.noise_type),
    learn=lambda rt, config, nets, params, seed: CLTD3Learn(rt, config, nets["actor"], nets["qf1"], params, seed))
