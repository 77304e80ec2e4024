"""The MLP every algorithm uses, with its forward and backward passes written out, and moving its parameters to
and from `Params` dicts.

The networks are small (a few hundred units), so on a CPU the time of a `learn` call beyond its matrix products
is per-operation overhead: module calls, the autograd engine, and optimizer and clipping code looping over one
tensor per layer. Hence:

- a network keeps all its weights and biases as views into ONE flat tensor, and a trained network its
  gradients as views into ONE flat gradient tensor: clipping by global norm is one norm and one multiply,
  Adam steps one tensor, and copying or Polyak-averaging a target is one op;
- backpropagation is explicit (no autograd): `MLP.forward` keeps every layer's output, `MLP.backward` computes
  the products autograd would (grad_W = gᵀ·x, grad_b = Σ_rows g, grad_x = g·W, and ReLU passing g where its
  output is positive), writing parameter gradients straight into the flat gradient's views;
- in `learn`, where the batch size is fixed, activations and backpropagated gradients go into buffers kept
  from one update to the next (see `MLP._buffers` for why);
- under bf16-mixed (`pearl.kernels.Precision`), a network given a `compute` type runs the products of its wide
  layers in it (`MIXED_MIN_WIDTH`; thin first and last layers keep the parameters' type): its weights are cast
  into one bfloat16 copy whenever they have changed (once per update for a network stepped once, not once per
  product), those layers' activations and backpropagated gradients are bfloat16, while the output, the
  parameters, their gradients and everything computed from the output (loss, targets, TD errors) keep the
  parameters' type. torch's bfloat16 matrix products accumulate in float32 on CPU and CUDA, so each product
  rounds once, to bfloat16's 8-bit mantissa, when it is written.

The code is plain torch on whatever device the tensors live on (CPU or CUDA). Callers run it under
`torch.no_grad()`; no tensor here requires grad, so no graph is recorded in any case.
"""

from __future__ import annotations

import numpy as np
import torch

from pearl.adapters.base import ActKernel
from pearl.adapters.torch.graphs import captured_forward
from pearl.algos.params import float_type
from pearl.kernels import Implementation, Precision
from pearl.rng import CounterDraws
from pearl.types import GroupShare, Params


def _layer_views(flat: torch.Tensor, sizes: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Weight (out, in) and bias (out,) views into flat, laid out layer by layer: W0, b0, W1, b1, …"""
    weights, biases, start = [], [], 0
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        weights.append(flat[start:start + fan_out * fan_in].view(fan_out, fan_in))
        start += fan_out * fan_in
        biases.append(flat[start:start + fan_out])
        start += fan_out
    return weights, biases


def _param_count(sizes: list[int]) -> int:
    return sum(fan_in * fan_out + fan_out for fan_in, fan_out in zip(sizes[:-1], sizes[1:]))


def _mm_into(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """out ← a·b. MKL's CPU gemm is much slower when the result has only a few columns (the weight
    gradient of a first layer with 3 or 4 inputs) than for its transpose bᵀ·aᵀ, a few long rows; for such
    shapes the transpose is computed and copied in. The sums are the same either way."""
    if out.shape[1] < 16 <= out.shape[0]:
        out.copy_(torch.mm(b.t(), a.t()).t())
    else:
        torch.mm(a, b, out=out)


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a·b as a new tensor, transposed for the shapes `_mm_into` transposes (for its reason): the product of a
    bfloat16 pass, whose result is cast into the parameters' type afterwards (torch's mm writes its inputs' type)."""
    return torch.mm(b.t(), a.t()).t() if b.shape[1] < 16 <= a.shape[0] else torch.mm(a, b)


#: Under bf16-mixed, a layer whose inputs or outputs are fewer than this runs its products in the parameters'
#: type: such thin products (an observation of 3 or 4 into the first layer, one Q value out of the last) do too
#: little arithmetic for bf16 units to pay, and a bfloat16 product of those shapes took 2-3× the float32 one on
#: a Zen 4 CPU with bf16 units (docs/MEASUREMENTS.md, "bf16-mixed learn on CPUs with bf16 units").
MIXED_MIN_WIDTH = 32


def compute_type(precision: Precision) -> torch.dtype | None:
    """The type a learn's products run in under precision: bfloat16 for bf16-mixed, None (the parameters' own
    type) for fp32."""
    return torch.bfloat16 if Precision.parse(precision) is Precision.BF16_MIXED else None


def _relu_backward_(grad: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """grad where the ReLU's output is positive, else 0, in place. threshold_backward is the kernel autograd runs
    for ReLU; the mask-and-multiply spelling is slower on CPU (its comparison makes a bool tensor and its
    multiply another pass over the data). It is an aten op, not public API, so
    tests/test_torch_private_ops.py checks it against the mask spelling."""
    return torch.ops.aten.threshold_backward.grad_input(grad, out, 0.0, grad_input=grad)


class MLP:
    """Linear layers with ReLU between them; optionally tanh on the output (DDPG's actor).

    `flat` holds every parameter; `weights[i]` (out, in) and `biases[i]` are views into it, as torch's Linear
    stores them. After `trainable()`, `grad` holds every gradient, with `weight_grads` / `bias_grads` views.
    Calling the network gives its output; `forward` gives every layer's output, which `backward` takes.

    With a `compute` type (bfloat16 under bf16-mixed), `low` holds `flat` cast to it, made again on the first
    product after the parameters change: whatever changes `flat` (an Adam step, a Polyak update, a copy or a load)
    calls `changed()`. `casts` counts those casts.
    """

    def __init__(self, sizes: list[int], device: torch.device, tanh_out: bool = False,
                 dtype: torch.dtype = torch.float32, compute: torch.dtype | None = None) -> None:
        self.sizes = list(sizes)
        self.tanh_out = tanh_out
        self.flat = torch.zeros(_param_count(self.sizes), dtype=dtype, device=device)
        self.weights, self.biases = _layer_views(self.flat, self.sizes)
        #: the type the products run in when it is not the parameters' (bfloat16 under bf16-mixed); None: theirs
        self.compute = compute
        self.low = torch.empty(0 if compute is None else self.flat.numel(), dtype=compute or dtype, device=device)
        self.low_weights, self.low_biases = _layer_views(self.low, self.sizes) if compute is not None else ([], [])
        #: each layer's product type: `compute` for a layer at least MIXED_MIN_WIDTH wide on both sides, else the
        #: parameters' (every layer's without `compute`)
        self.layer_types = [compute if compute is not None and min(fan_in, fan_out) >= MIXED_MIN_WIDTH else dtype
                            for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:])]
        self._low_stale = True
        self.casts = 0
        self.grad: torch.Tensor | None = None
        self.weight_grads: list[torch.Tensor] = []
        self.bias_grads: list[torch.Tensor] = []
        self._workspace: dict[tuple[str, int], list[torch.Tensor]] = {}

    def trainable(self) -> torch.Tensor:
        """Allocate the flat gradient that `backward` writes; returns it."""
        self.grad = torch.zeros_like(self.flat)
        self.weight_grads, self.bias_grads = _layer_views(self.grad, self.sizes)
        return self.grad

    def _buffers(self, slot: str, rows: int, widths: list[int], dtype: torch.dtype | None = None
                 ) -> list[torch.Tensor]:
        """Tensors (rows, width) of dtype (default: the parameters') kept between calls under slot. Fresh
        activation-sized tensors on every update make glibc's malloc hand memory back to the OS and fault it in
        again: hundreds of page faults per DDPG update with 2 threads, a tenth of its time."""
        key = (slot, rows)
        if key not in self._workspace:
            self._workspace[key] = [self.flat.new_empty(rows, width, dtype=dtype or self.flat.dtype)
                                    for width in widths]
        return self._workspace[key]

    def changed(self) -> None:
        """The parameters have changed: the next product casts them into `low` again (nothing without `compute`)."""
        self._low_stale = True

    def _low_layers(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The weight and bias views of `low`, cast from `flat` first when the parameters changed since the last
        cast: one cast per version of the weights, however many products read them."""
        if self._low_stale:
            self.low.copy_(self.flat)
            self.casts += 1
            self._low_stale = False
        return self.low_weights, self.low_biases

    def __call__(self, x: torch.Tensor, slot: str | None = None) -> torch.Tensor:
        return self.forward(x, slot)[-1]

    def forward(self, x: torch.Tensor, slot: str | None = None) -> list[torch.Tensor]:
        """Every layer's output, the input first and the network's output last: what `backward` needs.

        slot (for a fixed batch size, as in `learn`) writes the outputs into buffers kept under that name, which
        the next call with the same slot overwrites; None allocates them afresh (`act`, whose batch varies).
        With a `compute` type, see `_forward_mixed`.
        """
        if self.compute is not None:
            return self._forward_mixed(x, slot)
        outs = [x]
        n_layers = len(self.weights)
        bufs = self._buffers(f"forward {slot}", x.shape[0], self.sizes[1:]) if slot is not None else [None] * n_layers
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.addmm(b, outs[-1], w.t(), out=bufs[i])  # x·Wᵀ + b, what Linear computes
            if i < n_layers - 1:
                h.relu_()
            elif self.tanh_out:
                h.tanh_()
            outs.append(h)
        return outs

    def _forward_mixed(self, x: torch.Tensor, slot: str | None) -> list[torch.Tensor]:
        """`forward` with each layer's product in its `layer_types` entry: every hidden output in the type of the
        layer that reads it, the output layer's in the parameters' type (tanh applied there), as what reads it (a
        loss, a target, the next network's input) computes in it."""
        types, n_layers, rows = self.layer_types, len(self.weights), x.shape[0]
        outs = [x.to(types[0])]
        for i in range(n_layers):
            w, b = self._layer(i)
            h = torch.addmm(b, outs[-1], w.t(), out=self._buffer(slot, "product", i, rows, types[i]))
            if i < n_layers - 1:
                h.relu_()
            reader = types[i + 1] if i < n_layers - 1 else self.flat.dtype
            if h.dtype != reader:
                h = h.to(reader) if slot is None else self._buffer(slot, "cast", i, rows, reader).copy_(h)
            outs.append(h)
        if self.tanh_out:
            outs[-1].tanh_()
        return outs

    def backward(self, outs: list[torch.Tensor], grad_out: torch.Tensor, param_grads: bool = True,
                 input_grad: slice | None = None) -> torch.Tensor | None:
        """Backpropagate grad_out (∂loss/∂output) through the layers whose outputs `forward` returned.

        param_grads writes ∂loss/∂θ into `grad` (overwriting it: no zeroing needed). input_grad names the input
        columns whose gradient ∂loss/∂input[:, input_grad] to return; None returns None. DDPG's actor step
        wants only the critic's action columns, and none of its weight gradients.
        With a `compute` type, see `_backward_mixed`.
        """
        if self.compute is not None:
            return self._backward_mixed(outs, grad_out, param_grads, input_grad)
        # The gradients reaching the hidden layers live in kept buffers: they never leave this call.
        hidden_grads = self._buffers("backward", grad_out.shape[0], self.sizes[1:-1])
        g = grad_out * (1.0 - outs[-1] * outs[-1]) if self.tanh_out else grad_out  # tanh' = 1 − tanh²
        for i in reversed(range(len(self.weights))):
            if param_grads:
                _mm_into(g.t(), outs[i], self.weight_grads[i])
                torch.sum(g, dim=0, out=self.bias_grads[i])
            if i > 0:
                g = torch.mm(g, self.weights[i], out=hidden_grads[i - 1])
                _relu_backward_(g, outs[i])  # outs[i] is the ReLU output that layer i read
        return None if input_grad is None else torch.mm(g, self.weights[0][:, input_grad])

    def _backward_mixed(self, outs: list[torch.Tensor], grad_out: torch.Tensor, param_grads: bool,
                        input_grad: slice | None) -> torch.Tensor | None:
        """`backward` on `_forward_mixed`'s outputs, each layer's products in its `layer_types` entry: a weight
        gradient is cast into `grad` (the parameters' type, what clipping and Adam step with); bias gradients are
        sums in the parameters' type, the output layer's over the gradient before any cast; the input gradient
        returned is in the parameters' type."""
        types, rows, last = self.layer_types, grad_out.shape[0], len(self.weights) - 1
        top = grad_out * (1.0 - outs[-1] * outs[-1]) if self.tanh_out else grad_out
        g = top.to(types[last])
        for i in reversed(range(last + 1)):
            w, _ = self._layer(i)
            if param_grads:
                if types[i] == self.flat.dtype:
                    _mm_into(g.t(), outs[i], self.weight_grads[i])
                else:
                    self.weight_grads[i].copy_(_mm(g.t(), outs[i]))
                torch.sum(top if i == last else g, dim=0, dtype=self.flat.dtype, out=self.bias_grads[i])
            if i > 0:
                g = torch.mm(g, w, out=self._buffer("backward", "grad", i - 1, rows, types[i]))
                _relu_backward_(g, outs[i])  # outs[i]: the ReLU output layer i read, in layer i's type
                if types[i - 1] != types[i]:
                    g = self._buffer("backward", "cast", i - 1, rows, types[i - 1]).copy_(g)
        return None if input_grad is None else torch.mm(g, self._layer(0)[0][:, input_grad]).to(self.flat.dtype)

    def _layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer i's weight and bias in the type its products run in (`layer_types`)."""
        if self.layer_types[i] == self.flat.dtype:
            return self.weights[i], self.biases[i]
        weights, biases = self._low_layers()
        return weights[i], biases[i]

    def _buffer(self, slot: str | None, role: str, i: int, rows: int, dtype: torch.dtype) -> torch.Tensor | None:
        """A kept (rows, width of layer i's output) tensor of dtype for a mixed pass under slot; None (allocate)
        without a slot."""
        if slot is None:
            return None
        return self._buffers(f"mixed {role} {slot} {i}", rows, [self.sizes[i + 1]], dtype)[0]

    def dump(self, net: str) -> Params:
        """Host copies of the parameters, named `<net>.<i>.weight/bias` (see `dump_net`)."""
        return dump_net(self, net)

    def load(self, params: Params, net: str) -> None:
        """Copy `<net>.<i>.weight/bias` from params in (see `load_net`)."""
        load_net(self, params, net)

    def copy_from(self, other: MLP) -> None:
        self.flat.copy_(other.flat)
        self.changed()

    def lerp_to(self, other: MLP, weight: float) -> None:
        """self ← self + weight · (other − self): Polyak averaging of a target network."""
        self.flat.lerp_(other.flat, weight)
        self.changed()


def clip_grad_norm_(grad: torch.Tensor, max_norm: float) -> None:
    """Scale grad in place so its global L2 norm is at most max_norm, as torch.nn.utils.clip_grad_norm_ does
    (scale = max_norm / (norm + 1e-6), clamped to ≤ 1), on one flat tensor. The scale stays a tensor, so
    nothing waits for the device."""
    norm = torch.linalg.vector_norm(grad)
    grad.mul_(norm.add_(1e-6).reciprocal_().mul_(max_norm).clamp_(max=1.0))


#: Every this many Adam steps, the moments' denormal entries are set to 0 (`flush_denormals_`).
DENORMAL_FLUSH_INTERVAL = 16


def flush_denormals_(*tensors: torch.Tensor) -> None:
    """Set every denormal entry (non-zero, below 2⁻¹²⁶ in magnitude) of each tensor to 0, in place.

    Adam calls this on its moments every DENORMAL_FLUSH_INTERVAL steps. A weight whose gradient stays exactly 0
    (every input weight of a dead ReLU) has its first moment multiplied by β1 = 0.9 each step. The moment reaches
    a few units of 2⁻¹⁴⁹ and then stays there for good: 0.9 × k·2⁻¹⁴⁹ rounds back to k·2⁻¹⁴⁹ for k ≤ 4. x86
    arithmetic on denormals is slow, so every later step costs more as more units die (measured: see
    docs/MEASUREMENTS.md, "Denormal Adam moments"). Such a moment moves its weight by at most lr × 2⁻¹²⁶ / ε
    (1e-33 at lr 1e-3) a step.
    This is done here, not by the CPU's flush-to-zero mode: that mode is per thread (torch's intra-op threads
    keep the one they started with), and it would change every float of the user's process (numpy included)."""
    for tensor in tensors:
        tensor.masked_fill_(tensor.abs() < torch.finfo(tensor.dtype).tiny, 0.0)


def flush_moments_when_due(step: int, *moments: torch.Tensor) -> None:
    """After Adam's step number `step` (from 1): flush the moments' denormals on every DENORMAL_FLUSH_INTERVAL-th
    step, the one schedule of every Adam in this adapter."""
    if step % DENORMAL_FLUSH_INTERVAL == 0:
        flush_denormals_(*moments)


class HostSteps:
    """The steps an Adam has taken as the host counts them (its device `step_count` holds the same number), and
    the denormal flush they schedule: deciding reads no device tensor, and a captured graph of a step bakes in
    whether it flushes (`flush_due`, `pearl.adapters.torch.graphs`)."""

    _taken: int = 0

    @property
    def taken(self) -> int:
        return self._taken

    @taken.setter
    def taken(self, value: int) -> None:
        self._taken = value

    def flush_due(self) -> bool:
        """The coming step flushes the moments' denormals."""
        return (self._taken + 1) % DENORMAL_FLUSH_INTERVAL == 0

    def _counted(self, *moments: torch.Tensor) -> None:
        """After a step: count it, and flush the moments when it is due."""
        self._taken += 1
        flush_moments_when_due(self._taken, *moments)


class FlatAdam(HostSteps):
    """Adam on one network's flat parameters, as torch.optim.Adam(fused=True) steps them: the same fused kernel
    on the same state (both moments, and the step count as a float32 tensor on the device), called directly.
    torch.optim's per-step Python (hooks, grouping tensors by device and dtype) costs as much as the kernel
    itself at these sizes, so calling the kernel directly nearly halves a small network's Adam step.
    `torch._fused_adam_` is private, so tests/test_torch_private_ops.py checks it step
    for step against torch.optim.Adam. The CPU kernel needs torch >= 2.4, as fused=True does."""

    def __init__(self, net: MLP, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        grad = net.trainable()
        self.net = net
        self.lr, self.betas, self.eps = lr, betas, eps
        self.step_count = torch.zeros((), dtype=torch.float32, device=net.flat.device)
        # The kernel takes lists (one entry per parameter tensor); here every list has one flat tensor.
        self._params, self._grads = [net.flat], [grad]
        self._exp_avgs, self._exp_avg_sqs = [torch.zeros_like(net.flat)], [torch.zeros_like(net.flat)]
        self._steps = [self.step_count]
        self._taken = 0  # step_count as a Python int (HostSteps)

    def state(self, net: MLP, name: str) -> Params:
        """Both moments per parameter (`adam.exp_avg.<name>.<i>.weight`, ...) and `adam.step.<name>`."""
        out: Params = {"adam.step." + name: np.asarray(int(self.step_count.item()), dtype=np.int64)}
        for key, flat in (("exp_avg", self._exp_avgs[0]), ("exp_avg_sq", self._exp_avg_sqs[0])):
            for param, view in named_views(flat, net.sizes, name).items():
                out[f"adam.{key}.{param}"] = view.cpu().numpy().copy()
        return out

    def load_state(self, state: Params, net: MLP, name: str) -> None:
        self._taken = int(state["adam.step." + name])
        self.step_count.fill_(float(self._taken))
        for key, flat in (("exp_avg", self._exp_avgs[0]), ("exp_avg_sq", self._exp_avg_sqs[0])):
            for param, view in named_views(flat, net.sizes, name).items():
                view.copy_(torch.from_numpy(np.asarray(state[f"adam.{key}.{param}"])))

    def step(self) -> None:
        """θ ← Adam(θ, grad): the gradient `backward` last wrote."""
        self.step_count.add_(1)
        self._fused(self._params, self._exp_avgs, self._exp_avg_sqs, self._steps)
        self.net.changed()
        self._counted(self._exp_avgs[0], self._exp_avg_sqs[0])

    def step_ahead(self, out: MLP) -> None:
        """out's parameters ← the ones `step` would give now, bit for bit; the parameters and the moments stay as
        they are (a split learn's actor gradient is taken through the critic so stepped: LearnKernel)."""
        out.flat.copy_(self._params[0])
        moments = [self._exp_avgs[0].clone()], [self._exp_avg_sqs[0].clone()]
        self._fused([out.flat], *moments, [self.step_count + 1])
        out.changed()

    def _fused(self, params: list[torch.Tensor], exp_avgs: list[torch.Tensor], exp_avg_sqs: list[torch.Tensor],
               steps: list[torch.Tensor]) -> None:
        fused_adam_step(params, self._grads, exp_avgs, exp_avg_sqs, steps, self.lr, self.betas, self.eps)


def fused_adam_step(params: list[torch.Tensor], grads: list[torch.Tensor], exp_avgs: list[torch.Tensor],
                    exp_avg_sqs: list[torch.Tensor], steps: list[torch.Tensor], lr: float,
                    betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
    """One Adam step of each tensor in params, in place, by the fused kernel torch.optim.Adam(fused=True) runs
    (the one call of the private `torch._fused_adam_` in pearl, which tests/test_torch_private_ops.py checks
    against torch.optim.Adam through `FlatAdam`); the step counts in `steps` must be incremented first."""
    torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=lr, beta1=betas[0], beta2=betas[1],
                       weight_decay=0.0, eps=eps, amsgrad=False, maximize=False)


def named_views(flat: torch.Tensor, sizes: list[int], net: str) -> dict[str, torch.Tensor]:
    """`<net>.<i>.weight/bias` → its view into flat (a network's parameters, or a tensor laid out like them)."""
    weights, biases = _layer_views(flat, sizes)
    out = {}
    for i, (weight, bias) in enumerate(zip(weights, biases)):
        out[f"{net}.{i}.weight"], out[f"{net}.{i}.bias"] = weight, bias
    return out


def named_grads(module: MLP, net: str) -> dict[str, torch.Tensor]:
    """A copy of the gradient `backward` last wrote, as `<net>.<i>.weight/bias` views (a `Gradients`' arrays)."""
    assert module.grad is not None, "named_grads needs a trainable network"
    return named_views(module.grad.clone(), module.sizes, net)


def critic_grads(critics: dict[str, MLP], share: GroupShare | None) -> dict[str, torch.Tensor]:
    """Copies of the critics' gradients by parameter name (a `Gradients`' arrays); in a learner group, averaged
    over it and written back into each critic's gradient, so that the scratch Adam step an actor-critic takes its
    actor gradient through (LearnKernel) steps with the group's."""
    arrays = {k: v for name, critic in critics.items() for k, v in named_grads(critic, name).items()}
    if share is not None:
        arrays = share.average(arrays)
        for name, critic in critics.items():
            take_grads(critic, arrays, name)
    return arrays


def take_grads(module: MLP, arrays: dict[str, torch.Tensor], net: str) -> None:
    """Copy `<net>.<i>.weight/bias` from a `Gradients`' arrays into the gradient the optimiser steps with."""
    assert module.grad is not None, "take_grads needs a trainable network"
    for name, view in named_views(module.grad, module.sizes, net).items():
        view.copy_(arrays[name])


def grad_shapes(module: MLP, net: str) -> dict[str, tuple[int, ...]]:
    """Each parameter's name and shape: what a `Gradients` must hold for this network."""
    return {name: tuple(view.shape) for name, view in named_views(module.flat, module.sizes, net).items()}


def load_net(module: MLP, params: Params, net: str) -> None:
    """Copy `<net>.<i>.weight/bias` from params into module (shapes must match exactly)."""
    for i, layer in enumerate(zip(module.weights, module.biases)):
        for attr, target in zip(("weight", "bias"), layer):
            copy_param(params, f"{net}.{i}.{attr}", target)
    module.changed()


def torch_float_type(params: Params) -> torch.dtype:
    """The torch type of `pearl.algos.params.float_type`: what kernels built from `params` compute in."""
    return torch.float64 if float_type(params) is np.float64 else torch.float32


def copy_param(params: Params, name: str, target: torch.Tensor) -> None:
    """params[name] copied into target: ValueError when it is missing or its shape is not target's."""
    if name not in params:
        raise ValueError(f"parameters lack {name!r}")
    value = np.asarray(params[name])
    if tuple(value.shape) != tuple(target.shape):
        raise ValueError(f"{name} has shape {value.shape}, the network expects {tuple(target.shape)}")
    target.copy_(torch.from_numpy(value))


def dump_net(module: MLP, net: str) -> Params:
    """The module's parameters as host copies named `<net>.<i>.weight/bias`."""
    out: Params = {}
    for i, (weight, bias) in enumerate(zip(module.weights, module.biases)):
        out[f"{net}.{i}.weight"] = weight.cpu().numpy().copy()
        out[f"{net}.{i}.bias"] = bias.cpu().numpy().copy()
    return out


def write_net(module: MLP, out: Params, net: str) -> None:
    """Copy the module's parameters straight into the host arrays out[`<net>.<i>.weight/bias`] (one copy per
    tensor, no intermediate array): how weights reach the parallel launcher's shared weight board."""
    for i, (weight, bias) in enumerate(zip(module.weights, module.biases)):
        torch.from_numpy(out[f"{net}.{i}.weight"]).copy_(weight)
        torch.from_numpy(out[f"{net}.{i}.bias"]).copy_(bias)


def build(sizes: list[int], params: Params, net: str, device: torch.device, tanh_out: bool = False,
          compute: torch.dtype | None = None) -> MLP:
    """The network `net` of params on device; `compute`: its products' type when not the parameters' (MLP)."""
    module = MLP(sizes, device, tanh_out, torch_float_type(params), compute)
    load_net(module, params, net)
    return module


class PolicyAct(ActKernel):
    """What every torch act kernel holds: its policy network `net` on device, and the Philox draws (key = seed,
    counter = (element, call)) its exploration takes, the OpenCL adapter's draws."""

    def __init__(self, net: str, sizes: list[int], params: Params, device: torch.device, seed: int,
                 tanh_out: bool = False) -> None:
        self.device, self.net_name = device, net
        self.net = build(sizes, params, net, device, tanh_out)
        self.draws = CounterDraws(seed)
        #: on a GPU, the forward pass as CUDA graphs, one per batch size (graphs.CapturedForward); None on the host
        self.graphs = captured_forward(self.net, self.net.flat.dtype, device)

    @property
    def implementation(self) -> Implementation:  # type: ignore[override]
        return Implementation.EAGER if self.graphs is None else Implementation.CAPTURED

    def eager(self) -> "PolicyAct":
        self.graphs = None
        return self

    def set_params(self, params: Params) -> None:
        load_net(self.net, params, self.net_name)

    def forward(self, obs: np.ndarray) -> torch.Tensor:
        """The network's output for the observations obs (on device; on a GPU a graph's output, valid until the
        next call)."""
        if self.graphs is not None:
            return self.graphs(obs)
        return self.net(torch.as_tensor(obs, dtype=self.net.flat.dtype, device=self.device))
