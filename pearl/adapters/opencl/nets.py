"""A device-resident MLP with its gradients and Adam state, driving the kernels of nn.cl and optim.cl.

Parameters, gradients and optimiser moments live in device buffers from construction to the end of the run;
only `load`/`dump` (weight sync, checkpoints) move them through the host. Activation buffers are kept per
batch size, so a steady run allocates nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from pearl.adapters.opencl.runtime import CLRuntime
from pearl.types import Params

ACT_NONE, ACT_RELU, ACT_TANH = 0, 1, 2
SUMSQ_WORK_ITEMS = 64  # partial sums per gradient buffer for the global norm
TILE = 16  # gemm_tiled's tile; batches below it (acting on a few envs) use the one-row-per-item kernels


@dataclass
class Layer:
    w: cla.Array
    b: cla.Array
    dw: cla.Array
    db: cla.Array


class DeviceMLP:
    def __init__(self, rt: CLRuntime, sizes: list[int], params: Params, net: str, tanh_out: bool = False) -> None:
        self.rt, self.sizes, self.net, self.tanh_out = rt, sizes, net, tanh_out
        self.layers = [Layer(rt.reals((o, i)), rt.reals(o), rt.reals((o, i)), rt.reals(o))
                       for i, o in zip(sizes[:-1], sizes[1:])]
        self._acts: dict[int, list[cla.Array]] = {}
        self._grads: dict[int, list[cla.Array]] = {}
        self.load(params)

    # ---------------------------------------------------------------- parameters
    def load(self, params: Params, net: str | None = None) -> None:
        """Copy `<net>.<i>.weight/bias` from host params into the device buffers (shapes must match; nothing
        is copied unless all do).

        The uploads are asynchronous, from private copies that each upload's event keeps alive: an actor's
        weight load costs no round trip to the device, and the caller may reuse `params` at once. Kernels on
        the same (in-order) queue run after them."""
        net = net or self.net
        uploads = []
        for i, layer in enumerate(self.layers):
            for attr, buf in (("weight", layer.w), ("bias", layer.b)):
                name = f"{net}.{i}.{attr}"
                if name not in params:
                    raise ValueError(f"parameters lack {name!r}")
                value = np.array(params[name], dtype=self.rt.real, order="C")  # always a copy: see above
                if value.shape != buf.shape:
                    raise ValueError(f"{name} has shape {value.shape}, the network expects {buf.shape}")
                uploads.append((buf, value))
        for buf, value in uploads:
            buf.set(value, queue=self.rt.queue, async_=True)

    def dump(self, net: str | None = None) -> Params:
        net = net or self.net
        out: Params = {}
        for i, layer in enumerate(self.layers):
            out[f"{net}.{i}.weight"] = layer.w.get(queue=self.rt.queue)
            out[f"{net}.{i}.bias"] = layer.b.get(queue=self.rt.queue)
        return out

    def names(self, net: str | None = None) -> list[str]:
        """The parameter names of `buffers()`, in its order."""
        net = net or self.net
        return [f"{net}.{i}.{attr}" for i in range(len(self.layers)) for attr in ("weight", "bias")]

    def buffers(self) -> list[cla.Array]:
        return [buf for layer in self.layers for buf in (layer.w, layer.b)]

    def gradients(self) -> list[cla.Array]:
        return [buf for layer in self.layers for buf in (layer.dw, layer.db)]

    def named_grads(self) -> dict[str, cla.Array]:
        """Copies of the gradients `backward` last wrote, by parameter name (a `Gradients`' arrays)."""
        return {name: g.copy(queue=self.rt.queue) for name, g in zip(self.names(), self.gradients())}

    def take_grads(self, arrays: dict) -> None:
        """The gradients the optimiser steps with ← arrays[name] (device arrays, or host arrays uploaded)."""
        for name, g in zip(self.names(), self.gradients()):
            src = arrays[name]
            if isinstance(src, cla.Array):
                if src is not g:
                    cl.enqueue_copy(self.rt.queue, g.data, src.data)
            else:
                g.set(np.ascontiguousarray(src, dtype=self.rt.real), queue=self.rt.queue)

    def grad_shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(buf.shape) for name, buf in zip(self.names(), self.buffers())}

    def copy_from(self, other: "DeviceMLP") -> None:
        """Hard target update: device-to-device copies, no host round trip."""
        for dst, src in zip(self.buffers(), other.buffers()):
            cl.enqueue_copy(self.rt.queue, dst.data, src.data)

    # ---------------------------------------------------------------- forward / backward
    def forward(self, x: cla.Array, batch: int) -> list[cla.Array]:
        """Activations [x, h1, ..., output]; the output buffer is reused by the next call with this batch size."""
        if batch not in self._acts:
            self._acts[batch] = [self.rt.reals((batch, n)) for n in self.sizes[1:]]
        acts = [x, *self._acts[batch]]
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            act = (ACT_TANH if self.tanh_out else ACT_NONE) if i == last else ACT_RELU
            n_in, n_out = self.sizes[i], self.sizes[i + 1]
            if batch >= TILE:  # Y = X Wᵀ + b
                self._gemm(acts[i], n_in, 1, layer.w, 1, n_in, acts[i + 1], batch, n_out, n_in, bias=layer.b, act=act)
            else:
                self.rt.launch("linear_forward", batch * n_out, acts[i], layer.w, layer.b, acts[i + 1], n_in, n_out,
                               act)
        return acts

    def _gemm(self, a: cla.Array, sam: int, sak: int, b: cla.Array, sbk: int, sbn: int, c: cla.Array, m: int,
              n: int, k: int, bias: cla.Array | None = None, act: int = ACT_NONE,
              mask: cla.Array | None = None) -> None:
        rounded = (-(-n // TILE) * TILE, -(-m // TILE) * TILE)
        self.rt.launch("gemm_tiled", rounded, a, sam, sak, b, sbk, sbn, c, m, n, k,
                       bias if bias is not None else c, int(bias is not None), act,
                       mask if mask is not None else c, int(mask is not None), local_size=(TILE, TILE))

    def backward(self, acts: list[cla.Array], grad_out: cla.Array, batch: int,
                 input_grad: bool = False) -> cla.Array | None:
        """Fill every layer's dw/db from d(loss)/d(output); return d(loss)/d(input) when asked.

        grad_out is modified in place when the output is tanh (its derivative is applied there).
        """
        if batch not in self._grads:
            self._grads[batch] = [self.rt.reals((batch, n)) for n in self.sizes[:-1]]
        dins = self._grads[batch]
        if self.tanh_out:
            self.rt.launch("tanh_backward", batch * self.sizes[-1], grad_out, acts[-1])
        g = grad_out
        tiled = batch >= TILE
        for i in reversed(range(len(self.layers))):
            layer, n_in, n_out = self.layers[i], self.sizes[i], self.sizes[i + 1]
            if tiled:  # dW = Gᵀ X
                self._gemm(g, 1, n_out, acts[i], n_in, 1, layer.dw, n_out, n_in, batch)
            else:
                self.rt.launch("linear_backward_weight", n_out * n_in, g, acts[i], layer.dw, batch, n_in, n_out)
            self.rt.launch("linear_backward_bias", n_out, g, layer.db, batch, n_out)
            if i > 0 or input_grad:
                if tiled:  # dX = G W, times relu'(X) below the first layer
                    self._gemm(g, n_out, 1, layer.w, n_in, 1, dins[i], batch, n_in, n_out,
                               mask=acts[i] if i > 0 else None)
                else:
                    self.rt.launch("linear_backward_input", batch * n_in, g, layer.w, acts[i], dins[i], n_in, n_out,
                                   int(i > 0))
                g = dins[i]
        return dins[0] if input_grad else None


class DeviceAdam:
    """torch.optim.Adam's update with defaults (β1 0.9, β2 0.999, ε 1e-8), optionally after global-norm clipping."""

    def __init__(self, rt: CLRuntime, params: list[cla.Array], grads: list[cla.Array], lr: float,
                 max_grad_norm: float = 0.0, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.rt, self.params, self.grads, self.lr = rt, params, grads, lr
        self.b1, self.b2, self.eps, self.max_grad_norm = betas[0], betas[1], eps, max_grad_norm
        self.m = [rt.reals(p.shape) for p in params]
        self.v = [rt.reals(p.shape) for p in params]
        self.scale = rt.to_device(np.ones(1, dtype=rt.real))
        self.partial = rt.reals(SUMSQ_WORK_ITEMS * len(grads))
        self.t = 0
        self._scratch: tuple[list[cla.Array], list[cla.Array]] | None = None  # `step_ahead`'s moments

    def state(self, net: DeviceMLP, name: str) -> Params:
        """Both moments per parameter and the step, named as `LearnKernel.state_dict` says."""
        out: Params = {"adam.step." + name: np.asarray(self.t, dtype=np.int64)}
        for param, m, v in zip(net.names(name), self.m, self.v):
            out["adam.exp_avg." + param] = m.get(queue=self.rt.queue)
            out["adam.exp_avg_sq." + param] = v.get(queue=self.rt.queue)
        return out

    def load_state(self, state: Params, net: DeviceMLP, name: str) -> None:
        self.t = int(state["adam.step." + name])
        for param, m, v in zip(net.names(name), self.m, self.v):
            m.set(np.ascontiguousarray(state["adam.exp_avg." + param], dtype=self.rt.real), queue=self.rt.queue)
            v.set(np.ascontiguousarray(state["adam.exp_avg_sq." + param], dtype=self.rt.real), queue=self.rt.queue)

    def step(self) -> None:
        """θ ← Adam(θ, grad), clipping first when max_grad_norm is set."""
        self.t += 1
        self._launch(self.params, self.m, self.v, self.t)

    def step_ahead(self, out: list[cla.Array]) -> None:
        """out (buffers shaped like the parameters) ← the parameters `step` would give now, bit for bit; the
        parameters, the moments and the step count stay as they are (a split learn's actor gradient is taken
        through the critic so stepped: LearnKernel)."""
        if self._scratch is None:
            self._scratch = [self.rt.reals(p.shape) for p in self.params], [self.rt.reals(p.shape) for p in self.params]
        m, v = self._scratch
        for dst, src in zip([*out, *m, *v], [*self.params, *self.m, *self.v]):
            cl.enqueue_copy(self.rt.queue, dst.data, src.data)
        self._launch(out, m, v, self.t + 1)

    def _launch(self, params: list[cla.Array], m: list[cla.Array], v: list[cla.Array], t: int) -> None:
        if self.max_grad_norm > 0:
            for k, g in enumerate(self.grads):
                self.rt.launch("sumsq_partial", SUMSQ_WORK_ITEMS, g, g.size, self.partial, k * SUMSQ_WORK_ITEMS)
            self.rt.launch("clip_scale", 1, self.partial, self.partial.size, self.max_grad_norm, self.scale)
        step_size = self.lr / (1.0 - self.b1**t)
        inv_sqrt_bc2 = 1.0 / np.sqrt(1.0 - self.b2**t)
        for p, g, mi, vi in zip(params, self.grads, m, v):
            self.rt.launch("adam_step", p.size, p, g, mi, vi, self.scale, step_size, inv_sqrt_bc2, self.b1, self.b2,
                           self.eps)


def polyak(rt: CLRuntime, target: DeviceMLP, online: DeviceMLP, tau: float) -> None:
    for t, o in zip(target.buffers(), online.buffers()):
        rt.launch("polyak", t.size, t, o, tau)


class DeviceMean:
    """A metric read lazily: float() pulls the buffer and averages it (so learn never waits for the host)."""

    def __init__(self, rt: CLRuntime, buf: cla.Array, sign: float = 1.0) -> None:
        self.rt, self.buf, self.sign = rt, buf, sign

    def __float__(self) -> float:
        return self.sign * float(self.buf.get(queue=self.rt.queue).mean())
