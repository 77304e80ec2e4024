"""Networks and optimisers for learn kernels written as autograd losses (the references of reference.py),
CleanRL-style: the loss reads as the paper's, and torch derives every gradient.

A network keeps its parameters as ONE flat leaf tensor (as nets.MLP does), so Adam, Polyak averaging and the
checkpoint's names work on one tensor per network; the forward pass takes weight and bias views of it each call,
and autograd sums their gradients into the flat tensor's. Names and state layout are those of nets.py and
`LearnKernel.state_dict` (``<net>.<i>.weight``, ``adam.exp_avg.<param>``, ``adam.step.<net>``), so a checkpoint
reads the same whichever way a kernel computes its gradients.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from pearl.adapters.torch.nets import (_layer_views, _param_count, copy_param, flush_moments_when_due, named_views,
                                      torch_float_type)
from pearl.rng import CounterDraws, learn_key, normal
from pearl.types import GroupShare, Params

#: TD3's and SAC's twin critics (clipped double-Q)
CRITICS = ("qf1", "qf2")


class Net:
    """An MLP (ReLU between layers, optionally tanh on the output) whose parameters are one flat leaf tensor."""

    def __init__(self, sizes: list[int], params: Params, net: str, device: torch.device, tanh_out: bool = False,
                 trained: bool = True) -> None:
        self.sizes, self.tanh_out = list(sizes), tanh_out
        self.flat = torch.zeros(_param_count(self.sizes), dtype=torch_float_type(params), device=device)
        self.load(params, net)
        self.flat.requires_grad_(trained)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        weights, biases = _layer_views(self.flat, self.sizes)
        for i, (w, b) in enumerate(zip(weights, biases)):
            x = F.linear(x, w, b)
            if i < len(weights) - 1:
                x = torch.relu(x)
        return torch.tanh(x) if self.tanh_out else x

    def dump(self, net: str) -> Params:
        return {name: view.cpu().numpy().copy() for name, view in named_views(self.flat.detach(), self.sizes,
                                                                                   net).items()}

    @torch.no_grad()
    def load(self, params: Params, net: str) -> None:
        for name, view in named_views(self.flat.detach(), self.sizes, net).items():
            copy_param(params, name, view)

    @torch.no_grad()
    def lerp_to(self, other: "Net", weight: float) -> None:
        """self ← self + weight · (other − self): Polyak averaging of a target network."""
        self.flat.lerp_(other.flat, weight)

    def at(self, flat: torch.Tensor) -> "Net":
        """This network with the parameters `flat` (laid out as `self.flat`) instead of its own."""
        other = copy.copy(self)
        other.flat = flat
        return other

    def named(self, flat: torch.Tensor, net: str) -> dict[str, torch.Tensor]:
        """`<net>.<i>.weight/bias` → its view into flat, a tensor laid out like the parameters (a gradient)."""
        return named_views(flat, self.sizes, net)

    def flat_of(self, arrays: dict[str, torch.Tensor], net: str) -> torch.Tensor:
        """The named arrays `<net>.<i>.weight/bias` laid out as `self.flat` (a `Gradients`' arrays to step with)."""
        return torch.cat([arrays[name].reshape(-1) for name in self.named(self.flat, net)])

    def shapes(self, net: str) -> dict[str, tuple[int, ...]]:
        return {name: tuple(view.shape) for name, view in self.named(self.flat, net).items()}

    def write(self, out: Params, net: str) -> None:
        """Copy the parameters straight into the host arrays out[`<net>.<i>.weight/bias`]."""
        for name, view in named_views(self.flat.detach(), self.sizes, net).items():
            torch.from_numpy(out[name]).copy_(view)


class Adam:
    """torch.optim.Adam on one leaf tensor, its state named as `LearnKernel.state_dict` names it: both moments per
    named part (`views` splits a tensor laid out like the parameter into its named parts) and the step count."""

    def __init__(self, param: torch.Tensor, lr: float, views: Callable[[torch.Tensor], dict[str, torch.Tensor]]
                 ) -> None:
        self.param, self.views = param, views
        self.optimizer = torch.optim.Adam([param], lr=lr)
        self._ahead: tuple[torch.Tensor, torch.optim.Adam] | None = None  # `ahead`'s scratch parameters and Adam

    def step(self, grad: torch.Tensor) -> None:
        """param ← Adam(param, grad)."""
        self.param.grad = grad
        self.optimizer.step()
        self.param.grad = None
        state = self.optimizer.state[self.param]
        flush_moments_when_due(int(state["step"]), state["exp_avg"], state["exp_avg_sq"])

    @torch.no_grad()
    def ahead(self, grad: torch.Tensor) -> torch.Tensor:
        """The parameters `step(grad)` would give now, bit for bit (the same torch.optim.Adam step on copies of
        the parameters and the state), in a scratch tensor that the next call overwrites; the parameters and
        the state stay as they are."""
        if self._ahead is None:
            scratch = self.param.detach().clone().requires_grad_(self.param.requires_grad)
            self._ahead = scratch, torch.optim.Adam([scratch], **self.optimizer.defaults)
        scratch, optimizer = self._ahead
        scratch.copy_(self.param)
        kept = self.optimizer.state.get(self.param, {})
        optimizer.state.clear()
        if kept:
            optimizer.state[scratch] = {k: v.clone() for k, v in kept.items()}
        scratch.grad = grad
        optimizer.step()
        scratch.grad = None
        return scratch

    def state(self, _net: object, name: str) -> Params:
        kept = self.optimizer.state.get(self.param, {})
        step = int(kept["step"].item()) if kept else 0
        out: Params = {f"adam.step.{name}": np.asarray(step, dtype=np.int64)}
        for key in ("exp_avg", "exp_avg_sq"):
            moment = kept[key] if kept else torch.zeros_like(self.param)
            out.update({f"adam.{key}.{part}": view.cpu().numpy().copy()
                        for part, view in self.views(moment.detach()).items()})
        return out

    def load_state(self, state: Params, _net: object, name: str) -> None:
        step = int(state[f"adam.step.{name}"])
        if step == 0:
            self.optimizer.state.clear()  # a fresh Adam: torch makes its state at the first step
            return
        moments = {}
        for key in ("exp_avg", "exp_avg_sq"):
            moment = torch.zeros_like(self.param, memory_format=torch.preserve_format).detach()
            for part, view in self.views(moment).items():
                view.copy_(torch.from_numpy(np.asarray(state[f"adam.{key}.{part}"])))
            moments[key] = moment
        self.optimizer.state[self.param] = {"step": torch.tensor(float(step), dtype=torch.float32), **moments}


def net_adam(net: Net, name: str, lr: float) -> Adam:
    return Adam(net.flat, lr, lambda t: named_views(t, net.sizes, name))


class LearnDraws:
    """Standard normals for update k of a learn kernel: Philox at key `learn_key(seed)`, counters (element,
    k), computed on the host (so CPU and CUDA draw the same bits) and moved to the device. A function of the seed
    and the update index alone: every launcher, and a resumed run, draws the same."""

    def __init__(self, seed: int, device: torch.device, dtype: torch.dtype = torch.float32) -> None:
        self.draws = CounterDraws(learn_key(seed))
        self.device, self.dtype = device, dtype
        self._buffers: dict[int, torch.Tensor] = {}  # staged draws, by count: a captured graph reads these
        self._staged: int | None = None

    def normals(self, update: int, n: int) -> torch.Tensor:
        """Update `update`'s n normals on the device: the staged buffer while draws are staged (its address is
        what a captured graph of the update reads), else a fresh tensor."""
        if self._staged is not None:
            if n != self._staged:
                raise RuntimeError(f"{n} draws asked while {self._staged} are staged")
            return self._buffers[n]
        return torch.from_numpy(self._host(update, n)).to(self.device, self.dtype)

    def stage(self, update: int, n: int) -> None:
        """Copy update's n normals into the device buffer kept for n draws, which `normals` hands out until
        `unstage`: a CUDA graph of the update reads the draws there, copied in before each replay."""
        if n not in self._buffers:
            self._buffers[n] = torch.empty(n, dtype=self.dtype, device=self.device)
        self._buffers[n].copy_(torch.from_numpy(self._host(update, n)))
        self._staged = n

    def unstage(self) -> None:
        self._staged = None

    def _host(self, update: int, n: int) -> np.ndarray:
        self.draws.call = update
        r0, r1 = self.draws.next(n)
        return normal(r0, r1)


def min_q(critics: dict[str, "Net"], obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """min(Q1, Q2)(obs, action), one value per row: clipped double-Q."""
    sa = torch.cat([obs, action], dim=1)
    return torch.minimum(critics["qf1"](sa), critics["qf2"](sa)).squeeze(1)


def twin_critic_grads(critics: dict[str, "Net"], batch, y: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """Both critics' importance-weighted squared errors against the target y: the loss, Q1 at the batch's actions
    (TD errors are y − Q1) and each critic's gradient (flat, in CRITICS order)."""
    sa = torch.cat([batch.obs, batch.action], dim=1)
    q1, q2 = critics["qf1"](sa).squeeze(1), critics["qf2"](sa).squeeze(1)
    loss = (batch.weights * ((y - q1).square() + (y - q2).square())).mean()
    grads = torch.autograd.grad(loss, [critics[q].flat for q in CRITICS])
    return loss, q1, grads


def twin_critic_step(critics: dict[str, "Net"], optimizers: dict, batch, y: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """`twin_critic_grads`, then one Adam step of each critic with its gradient; returns what it returns."""
    loss, q1, grads = twin_critic_grads(critics, batch, y)
    for q, grad in zip(CRITICS, grads):
        optimizers[q].step(grad)
    return loss, q1, grads


def critics_ahead(critics: dict[str, "Net"], optimizers: dict, grads: tuple[torch.Tensor, ...],
                  which: tuple[str, ...] = CRITICS) -> dict[str, "Net"]:
    """The critics named in `which` as their Adam steps with `grads` (in CRITICS order) would leave them, as
    scratch networks: what a split learn takes the actor's gradient through (LearnKernel)."""
    by_name = dict(zip(CRITICS, grads))
    return {q: critics[q].at(optimizers[q].ahead(by_name[q])) for q in which}


def average_flat(share: GroupShare, names: tuple[str, ...], grads: tuple[torch.Tensor, ...]
                 ) -> tuple[torch.Tensor, ...]:
    """Flat gradients (one per name, in that order) averaged over a learner group (`GroupShare.average`)."""
    averaged = share.average(dict(zip(names, grads)))
    return tuple(averaged[name] for name in names)


def critic_grad_arrays(critics: dict[str, "Net"], grads: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
    """The critics' flat gradients as a `Gradients`' named arrays."""
    out: dict[str, torch.Tensor] = {}
    for q, grad in zip(CRITICS, grads):
        out.update(critics[q].named(grad, q))
    return out
