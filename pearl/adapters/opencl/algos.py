"""DQN and DDPG `act` and `learn` on an OpenCL device: the maths of pearl/algos/{dqn,ddpg}.py, step for step
as the torch adapter does it, on buffers that stay on the device.

A `learn` call (or `grads`, `apply`) enqueues its kernels and returns without waiting: the TD errors it returns
are a device buffer valid until the next `learn` or `grads` call (the in-order queue runs the priority update
that reads them first); a `grads`' gradients are device copies of its own.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from pearl.adapters.base import ActKernel, AlgoKernels, CriticFirstLearn, LearnKernel, check_gradients
from pearl.adapters.opencl.nets import DeviceAdam, DeviceMean, DeviceMLP, polyak
from pearl.adapters.opencl.runtime import CLRuntime
from pearl.algos.ddpg import DDPGConfig, ou_coefficients
from pearl.algos.dqn import DQNConfig
from pearl.types import Gradients, GroupShare, LearnResult, Params, SampleBatch


class _Buffers:
    """Scratch buffers by (name, batch size), allocated on first use."""

    def __init__(self, rt: CLRuntime) -> None:
        self.rt, self._bufs = rt, {}

    def get(self, name: str, shape: tuple[int, ...], dtype=None) -> cla.Array:
        """The buffer; of the program's `real` type unless `dtype` says another."""
        key = (name, shape)
        if key not in self._bufs:
            self._bufs[key] = self.rt.zeros(shape, dtype or self.rt.real)
        return self._bufs[key]


def _u32(x: int) -> np.uint32:
    return np.uint32(x & 0xFFFFFFFF)


class _CLAct(ActKernel):
    """An act kernel on the device: its policy network, the Philox key and call count its draws take, and
    scratch buffers."""

    def __init__(self, rt: CLRuntime, net: DeviceMLP, seed: int) -> None:
        self.rt, self.net, self.key, self.call = rt, net, seed, 0
        self.bufs = _Buffers(rt)

    def set_params(self, params: Params) -> None:
        self.net.load(params)

    def _forward(self, obs: np.ndarray) -> cla.Array:
        """The network's output for obs, on the device; the upload is asynchronous (`act` reads back later)."""
        x = self.bufs.get("obs", obs.shape)
        x.set(np.ascontiguousarray(obs, dtype=self.rt.real), queue=self.rt.queue, async_=True)
        return self.net.forward(x, obs.shape[0])[-1]


class CLDQNAct(_CLAct):
    def __init__(self, rt: CLRuntime, sizes: list[int], params: Params, seed: int) -> None:
        super().__init__(rt, DeviceMLP(rt, sizes, params, "q"), seed)
        self.n_actions = sizes[-1]

    def act(self, obs: np.ndarray, explore: float) -> np.ndarray:
        n = obs.shape[0]
        q = self._forward(obs)
        actions = self.bufs.get("actions", (n,), np.int32)
        self.rt.launch("dqn_act", n, q, self.n_actions, float(explore), _u32(self.key), _u32(self.call), actions)
        self.call += 1
        return actions.get(queue=self.rt.queue).astype(np.int64)


def _alone(share: GroupShare | None) -> None:
    """The OpenCL learn kernels train on their own: a learner group averages torch tensors (its all-reduce is
    torch.distributed's)."""
    if share is not None:
        raise ValueError("an OpenCL learn kernel cannot be one of a learner group; learn on cpu or cuda:N")


class CLDQNLearn(LearnKernel):
    def __init__(self, rt: CLRuntime, config: DQNConfig, sizes: list[int], params: Params) -> None:
        self.rt, self.config, self.n_actions = rt, config, sizes[-1]
        self.q = DeviceMLP(rt, sizes, params, "q")
        self.q_target = DeviceMLP(rt, sizes, params, "q_target")
        self.opt = DeviceAdam(rt, self.q.buffers(), self.q.gradients(), config.learning_rate, config.max_grad_norm)
        self.bufs = _Buffers(rt)
        self.updates = 0

    def learn(self, batch: SampleBatch) -> LearnResult:
        result = self._backward(batch)
        self._step()
        return result

    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        _alone(share)
        result = self._backward(batch)
        return Gradients(self.q.named_grads(), result.td_errors, result.metrics)

    def apply(self, gradients: Gradients) -> LearnResult:
        check_gradients(gradients, self.q.grad_shapes())
        self.q.take_grads(gradients.arrays)
        self._step()
        return gradients.result()

    def _backward(self, batch: SampleBatch) -> LearnResult:
        """The Q-network's gradient into its dw/db buffers; the TD errors and metrics."""
        cfg, b, a = self.config, len(batch), self.n_actions
        grad, td = self.bufs.get("grad", (b, a)), self.bufs.get("td", (b,))
        loss, q_taken = self.bufs.get("loss", (b,)), self.bufs.get("q_taken", (b,))
        next_q = self.q_target.forward(batch.next_obs, b)[-1]
        acts = self.q.forward(batch.obs, b)
        self.rt.launch("dqn_td", b, acts[-1], next_q, batch.action, batch.reward, batch.terminated, batch.weights,
                       cfg.gamma, a, b, int(cfg.huber), grad, td, loss, q_taken)
        self.q.backward(acts, grad, b)
        return LearnResult(td, {"losses/td_loss": DeviceMean(self.rt, loss),
                                "losses/q_values": DeviceMean(self.rt, q_taken)})

    def _step(self) -> None:
        """Clipping and one Adam step (DeviceAdam), and the hard target copy every target_update_interval."""
        self.opt.step()
        self.updates += 1
        if self.updates % self.config.target_update_interval == 0:
            self.q_target.copy_from(self.q)

    def policy_params(self) -> Params:
        return self.q.dump()

    def _nets(self) -> dict[str, DeviceMLP]:
        return {"q": self.q, "q_target": self.q_target}

    def _optimizers(self) -> dict[str, DeviceAdam]:
        return {"q": self.opt}


class CLDDPGAct(_CLAct):
    """μ(s) plus noise from Philox draws on the device, as the torch adapter's DDPGAct: Gaussian (ddpg_act) or
    Ornstein–Uhlenbeck (ddpg_act_ou). The OU states live in a device buffer that the same launch reads and
    writes: no extra transfer per step (only a rare fill when an episode ends), and the noise comes from the
    kernel's own draw, as the Gaussian does (the alternative, the normal read back and the process run on
    the host, would add a read per step and still differ from torch by the same ulp of log/cos)."""

    def __init__(self, rt: CLRuntime, sizes: list[int], params: Params, seed: int,
                 noise_type: str = "gaussian") -> None:
        super().__init__(rt, DeviceMLP(rt, sizes, params, "actor", tanh_out=True), seed)
        self.ou = noise_type == "ornstein-uhlenbeck"
        self.x: cla.Array | None = None  # the Ornstein–Uhlenbeck states, (n, action_dim)

    def act(self, obs: np.ndarray, explore: float) -> np.ndarray:
        actions = self._forward(obs)
        if self.ou and explore > 0:
            if self.x is None or self.x.shape != actions.shape:  # other rows, other envs: new processes
                self.x = self.rt.reals(actions.shape)
            theta_dt, scale = ou_coefficients(explore)
            self.rt.launch("ddpg_act_ou", actions.size, actions, self.x, theta_dt, scale, _u32(self.key),
                           _u32(self.call))
        else:
            self.rt.launch("ddpg_act", actions.size, actions, float(explore), _u32(self.key), _u32(self.call))
        self.call += 1
        return actions.get(queue=self.rt.queue)

    def new_episodes(self, rows: np.ndarray) -> None:
        if self.x is None:
            return
        for row in np.flatnonzero(rows):  # an episode ends every few hundred steps: a fill per row is cheap
            self.x[int(row)].fill(0.0, queue=self.rt.queue)

    def noise_state(self) -> np.ndarray | None:
        """The Ornstein–Uhlenbeck states (n, action_dim) on the host; None before the first noisy act or for
        Gaussian noise."""
        return None if self.x is None else self.x.get(queue=self.rt.queue)


class CLActorCritic(LearnKernel):
    """What DDPG's and TD3's learn kernels share: the tanh actor, its target and Adam, and the actor's gradient
    through a critic."""

    def __init__(self, rt: CLRuntime, learning_rate: float, actor_sizes: list[int], params: Params) -> None:
        self.rt = rt
        self.obs_dim, self.act_dim = actor_sizes[0], actor_sizes[-1]
        self.actor = DeviceMLP(rt, actor_sizes, params, "actor", tanh_out=True)
        self.actor_target = DeviceMLP(rt, actor_sizes, params, "actor_target", tanh_out=True)
        self.actor_opt = DeviceAdam(rt, self.actor.buffers(), self.actor.gradients(), learning_rate)
        self.bufs = _Buffers(rt)
        self.updates = 0

    def _concat(self, name: str, obs: cla.Array, action: cla.Array, b: int) -> cla.Array:
        out = self.bufs.get(name, (b, self.obs_dim + self.act_dim))
        self.rt.launch("concat_cols", out.size, obs, action, out, self.obs_dim, self.act_dim)
        return out

    def _actor_grad(self, batch: SampleBatch, critic: DeviceMLP) -> DeviceMean:
        """The gradient of −mean Q(s, μ(s)) through `critic` into the actor's dw/db (it reaches μ through the
        critic's action input); the loss. `critic`'s own dw/db are overwritten on the way. The critic's activation
        buffers are reused here: the in-order queue has finished with them in the critics' gradient."""
        b, rt = len(batch), self.rt
        actor_q = self.bufs.get("actor_q", (b, 1))
        actor_acts = self.actor.forward(batch.obs, b)
        critic_pi = critic.forward(self._concat("x_pi", batch.obs, actor_acts[-1], b), b)
        cl.enqueue_copy(rt.queue, actor_q.data, critic_pi[-1].data)
        g_pi = self.bufs.get("g_pi", (b, 1))
        rt.launch("fill", b, g_pi, -1.0 / b)
        d_input = critic.backward(critic_pi, g_pi, b, input_grad=True)
        g_action = self.bufs.get("g_action", (b, self.act_dim))
        rt.launch("slice_cols", g_action.size, d_input, g_action, self.obs_dim + self.act_dim, self.obs_dim,
                  self.act_dim)
        self.actor.backward(actor_acts, g_action, b)
        return DeviceMean(rt, actor_q, sign=-1.0)

    def policy_params(self) -> Params:
        return self.actor.dump()


class CLDDPGLearn(CLActorCritic, CriticFirstLearn):
    def __init__(self, rt: CLRuntime, config: DDPGConfig, actor_sizes: list[int], critic_sizes: list[int],
                 params: Params) -> None:
        super().__init__(rt, config.learning_rate, actor_sizes, params)
        self.config = config
        self.critic = DeviceMLP(rt, critic_sizes, params, "critic")
        self.critic_target = DeviceMLP(rt, critic_sizes, params, "critic_target")
        self.critic_opt = DeviceAdam(rt, self.critic.buffers(), self.critic.gradients(), config.learning_rate)
        self.critic_ahead = DeviceMLP(rt, critic_sizes, params, "critic")  # `grads`' scratch: the stepped critic

    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        _alone(share)
        td, metrics = self._critic_grad(batch)
        self.critic_opt.step_ahead(self.critic_ahead.buffers())  # the critic as `apply` will step it, a copy
        metrics["losses/actor_loss"] = self._actor_grad(batch, self.critic_ahead)
        return Gradients({**self.critic.named_grads(), **self.actor.named_grads()}, td, metrics)

    def apply(self, gradients: Gradients) -> LearnResult:
        check_gradients(gradients, {**self.critic.grad_shapes(), **self.actor.grad_shapes()})
        self.critic.take_grads(gradients.arrays)
        self.critic_opt.step()
        self.actor.take_grads(gradients.arrays)
        self._step_actor_and_targets()
        return gradients.result()

    def _critic_grad(self, batch: SampleBatch) -> tuple[cla.Array, dict[str, DeviceMean]]:
        """y = r + γ(1−d) Q'(s', μ'(s')) and the gradient of mean w·δ² into the critic's dw/db; the TD errors and
        the critic's metrics."""
        cfg, b, rt = self.config, len(batch), self.rt
        g_q, td, loss = self.bufs.get("g_q", (b, 1)), self.bufs.get("td", (b,)), self.bufs.get("loss", (b,))
        q_taken = self.bufs.get("q_taken", (b,))
        next_action = self.actor_target.forward(batch.next_obs, b)[-1]
        next_q = self.critic_target.forward(self._concat("x_next", batch.next_obs, next_action, b), b)[-1]
        critic_acts = self.critic.forward(self._concat("x", batch.obs, batch.action, b), b)
        rt.launch("ddpg_critic_td", b, critic_acts[-1], next_q, batch.reward, batch.terminated, batch.weights,
                  cfg.gamma, b, g_q, td, loss, q_taken)
        self.critic.backward(critic_acts, g_q, b)
        return td, {"losses/td_loss": DeviceMean(rt, loss), "losses/q_values": DeviceMean(rt, q_taken)}

    def _step_actor_and_targets(self) -> None:
        self.actor_opt.step()
        polyak(self.rt, self.actor_target, self.actor, self.config.tau)
        polyak(self.rt, self.critic_target, self.critic, self.config.tau)
        self.updates += 1

    def _nets(self) -> dict[str, DeviceMLP]:
        return {"actor": self.actor, "actor_target": self.actor_target, "critic": self.critic,
                "critic_target": self.critic_target}

    def _optimizers(self) -> dict[str, DeviceAdam]:
        return {"actor": self.actor_opt, "critic": self.critic_opt}


#: What the DQN and DDPG registry entries name for the OpenCL backend (pearl.algos.dqn.DQN.kernels, ...).
DQN_KERNELS = AlgoKernels(
    act=lambda rt, config, nets, params, seed: CLDQNAct(rt, nets["q"], params, seed),
    learn=lambda rt, config, nets, params, seed: CLDQNLearn(rt, config, nets["q"], params))
DDPG_KERNELS = AlgoKernels(
    act=lambda rt, config, nets, params, seed: CLDDPGAct(rt, nets["actor"], params, seed, config.noise_type),
    learn=lambda rt, config, nets, params, seed: CLDDPGLearn(rt, config, nets["actor"], nets["critic"], params))
