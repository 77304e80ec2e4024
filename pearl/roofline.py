"""The what-if model: the time of a kernel on a device that is not present, from its descriptor.

    roofline_time(work, figures) = launches · launch_latency_s
                                   + max(flops / fp32_peak_flops, bytes / memory_bandwidth_bytes_per_s)

and at bf16-mixed (`roofline_time(work, figures, Precision.BF16_MIXED)`, learn only) flops / bf16_peak_flops in
place of the float32 term: the products and their gradients are most of learn's flops; Adam's and Polyak's
elementwise float32 work is memory-bound in either case, and the bytes are counted in float32 as before (the
bf16 weight copies and activations would halve some of them: the model errs slow).

`kernel_work(kernel, workload, batch)` counts the work of one call. Conventions: a multiply-add is 2 flops,
any other add or multiply 1; bytes are float32 (4 bytes) reads plus writes of parameters, activations and
transitions; caches are ignored (every operand comes from memory once per use counted below). Elementwise
work of order batch × layer width (bias adds, activations, loss, TD targets, tanh, argmax, exploration noise,
importance weights, the priority formula) is not counted in flops: it is small next to the matrix products.
Nor is act's exploration counted in bytes: DDPG's Ornstein–Uhlenbeck noise reads and writes its per-env state
(8 bytes per action element) in the same launch as the Gaussian's, beside the actor's parameters and
activations.

Everything algorithm-specific comes from the workload's registry entry (pearl/algos/registry.py): its networks
(`networks`), the one `act` runs (`policy_net`), what one learn call does (`learn_work`: forward-pass
equivalents per network, Adam steps, Polyak averages) and how many floats an action takes (`action_kind`).
The formulas below are those entries worked out. Networks, widths input first:

    dqn:   q      = [obs_dim, *hidden, action_dim]                       (+ a target of the same shape)
    ddpg:  actor  = [obs_dim, *hidden, action_dim]
           critic = [obs_dim + action_dim, *hidden, 1]                   (+ a target of each)

For an MLP with widths n_0 .. n_L (L layers) write

    W = Σ_{l<L} n_l · n_{l+1}              weights (multiply-adds per item of a forward pass)
    P = Σ_{l<L} (n_l · n_{l+1} + n_{l+1})  parameters, biases included
    A = Σ_{l<L} (n_l + n_{l+1})            activations each layer reads (its input) and writes (its output)

Building blocks, for N items:

    F(net, N)  forward         flops 2·N·W       bytes 4·(P + N·A)    launches L    (one launch per layer)
    B(net, N)  backward        2 × F in flops, bytes and launches (weight and input gradients: two products
                               per layer; parameters read and gradients written, activations and their
                               gradients read and written)
    I(net, N)  input-backward  1 × F (gradient with respect to the input only, no weight gradients)
    Adam(P)                    flops 10·P        bytes 28·P           launches 1
                               (≈10 flops per parameter; reads θ, g, m, v and writes θ, m, v: 7 floats,
                               of which m, v read + written are the 16 bytes/param of optimiser state)
    Polyak(P)  θ' ← τθ + (1−τ)θ'   flops 3·P   bytes 12·P (reads θ and θ', writes θ')   launches 1

Kernels (N = batch; T = floats per transition = 2·obs_dim + a + 2, the 2 being reward and done, with
a = 1 for dqn, whose action is one index, and a = action_dim for ddpg; K = 16 the sum-tree arity;
D = the sum tree's depth, the smallest d >= 1 with 16**d >= buffer_size, i.e. max(1, ⌈log16 buffer_size⌉)):

    act              F(policy, N), policy = q (dqn) or actor (ddpg)
    learn (dqn)      F(q_target, N) + F(q, N) + B(q, N) + Adam(P_q)
                     = flops 8·N·W_q + 10·P_q     bytes 16·(P_q + N·A_q) + 28·P_q
                       launches 4·L_q + 1
    learn (ddpg)     critic update:  F(actor_target, N) + F(critic_target, N) + F(critic, N) + B(critic, N)
                     actor update:   F(actor, N) + F(critic, N) + I(critic, N) + B(actor, N)
                     then Adam(P_a) + Adam(P_c) and Polyak(P_a) + Polyak(P_c) (the targets, from the online
                     nets: all four nets are touched)
                     = 4·F(actor) + 6·F(critic) + Adam(P_a + P_c) (2 launches) + Polyak(P_a + P_c) (2 launches)
                     = flops 8·N·W_a + 12·N·W_c + 13·(P_a + P_c)
                       bytes 16·(P_a + N·A_a) + 24·(P_c + N·A_c) + 40·(P_a + P_c)
                       launches 4·L_a + 6·L_c + 4
    replay_insert    N transitions written:                  flops 0    bytes 4·N·T              launches 1
                     (setting the new slots' priority leaves is not counted)
    replay_sample    N transitions gathered (read + write) and a descent of D levels per item, reading the
                     K = 16 children of one node per level and running their sum (15 adds):
                                                             flops 15·N·D    bytes 4·N·(2·T + 16·D)
                                                             launches 2 (descent + weights, gather)
    priority_update  N leaves (read |δ|, write the leaf), then D levels of parents, each recomputed as the
                     sum of its 16 children (read 16, 15 adds, write 1):
                                                             flops 15·N·D    bytes 4·N·(2 + 17·D)
                                                             launches 1 + D (leaves, then one per level)

env_step runs on the host CPU and weight_sync is a transfer: neither has a roofline (ValueError).

Pure Python: this module imports no torch and no pyopencl.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from pearl.algos.base import LearnWork
from pearl.algos.registry import algorithm
from pearl.kernels import KERNEL_NAMES, PRIORITIZED_SAMPLE, Precision
from pearl.profile.format import Workload
from pearl.replay.sumtree import DEFAULT_ARITY as SUMTREE_ARITY  # children per sum-tree node, as replay uses
from pearl.replay.sumtree import tree_depth

__all__ = ["SUMTREE_ARITY", "Work", "kernel_work", "network_sizes", "roofline_time", "transition_floats",
           "tree_depth"]

F32 = 4  # bytes per float32


@dataclass(frozen=True)
class Work:
    """The work of one kernel call: floating-point operations, bytes moved to or from memory, launches."""

    flops: float
    bytes: float
    launches: int

    def __add__(self, other: Work) -> Work:
        return Work(self.flops + other.flops, self.bytes + other.bytes, self.launches + other.launches)

    def __mul__(self, k: float) -> Work:  # a fractional k: work done on some updates only, averaged
        return Work(self.flops * k, self.bytes * k, self.launches * k)

    __rmul__ = __mul__


def network_sizes(workload: Workload) -> dict[str, list[int]]:
    """Layer widths, input first, of each trained network of the workload (targets have the same shapes), from
    its algorithm's registry entry; ConfigError for an algorithm the registry does not know."""
    return algorithm(workload.algo).network_sizes(workload.obs_dim, workload.action_dim, tuple(workload.hidden))


def transition_floats(workload: Workload) -> int:
    """Floats per stored transition: obs, next obs, action (1 index for discrete actions, action_dim for
    continuous ones), reward, done."""
    return 2 * workload.obs_dim + algorithm(workload.algo).action_floats(workload.action_dim) + 2


def _forward(sizes: list[int], n: int) -> Work:
    pairs = list(pairwise(sizes))
    weights = sum(a * b for a, b in pairs)
    params = sum(a * b + b for a, b in pairs)
    activations = sum(a + b for a, b in pairs)
    return Work(2.0 * n * weights, float(F32 * (params + n * activations)), len(pairs))


def _param_count(sizes: list[int]) -> int:
    return sum(a * b + b for a, b in pairwise(sizes))


def _adam(params: int) -> Work:
    return Work(10.0 * params, 7.0 * F32 * params, 1)


def _polyak(params: int) -> Work:
    return Work(3.0 * params, 3.0 * F32 * params, 1)


def _per_update(work: Work, rate: float) -> Work:
    """work done on `rate` of the updates, per update (left as it is when every update does it)."""
    return work if rate == 1.0 else work * rate


def _learn(work: LearnWork, nets: dict[str, list[int]], n: int) -> Work:
    """Σ count · F(net, n) over the forward-pass equivalents, then one Adam per trained net and one Polyak per
    averaged target (times the fraction of updates that do them), in the entry's order (so the sum is the same
    float for float as the formulas above)."""
    terms = [_forward(nets[net], n) * count for net, count in work.forward_passes]
    terms += [_per_update(_adam(_param_count(nets[net])), rate) for net, rate in work.adam_steps()]
    terms += [_per_update(_polyak(_param_count(nets[net])), rate) for net, rate in work.polyak_steps()]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def kernel_work(kernel: str, workload: Workload, batch: int) -> Work:
    """The work of one call of `kernel` for `workload` at `batch` (formulas in the module docstring)."""
    if kernel == PRIORITIZED_SAMPLE:  # the formula below has the sum tree's descent in it already
        kernel = "replay_sample"
    if kernel not in KERNEL_NAMES:
        raise KeyError(f"unknown kernel {kernel!r}; kernels are {', '.join(KERNEL_NAMES)}")
    if kernel in ("env_step", "weight_sync"):
        raise ValueError(f"{kernel!r} has no roofline: env_step runs on the host CPU and weight_sync is a transfer")
    if isinstance(batch, bool) or int(batch) != batch or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    n = int(batch)
    entry = algorithm(workload.algo)
    nets = network_sizes(workload)
    if kernel == "act":
        return _forward(nets[entry.policy_net], n)
    if kernel == "learn":
        return _learn(entry.work_of(workload.settings), nets, n)
    t = transition_floats(workload)
    depth = tree_depth(workload.buffer_size)
    k = SUMTREE_ARITY
    if kernel == "replay_insert":
        return Work(0.0, float(F32 * n * t), 1)
    if kernel == "replay_sample":
        return Work(float((k - 1) * n * depth), float(F32 * n * (2 * t + k * depth)), 2)
    # priority_update
    return Work(float((k - 1) * n * depth), float(F32 * n * (2 + (k + 1) * depth)), 1 + depth)


#: the descriptor figure a product's flops run at, by learn's precision
PEAK = {Precision.FP32: "fp32_peak_flops", Precision.BF16_MIXED: "bf16_peak_flops"}


def roofline_time(work: Work, figures: dict[str, float], precision: Precision = Precision.FP32) -> float:
    """launches · launch_latency_s + max(flops / peak, bytes / memory_bandwidth_bytes_per_s), peak being
    fp32_peak_flops, or bf16_peak_flops at bf16-mixed (KeyError where the figures state none).

    `figures` is a descriptor's [figures] table (pearl.descriptors.DeviceDescriptor.figures).
    """
    peak = PEAK[Precision.parse(precision)]
    missing = [f for f in ("launch_latency_s", peak, "memory_bandwidth_bytes_per_s") if f not in figures]
    if missing:
        raise KeyError(f"the device figures lack {', '.join(missing)}")
    return work.launches * figures["launch_latency_s"] + max(
        _ratio(work.flops, figures[peak], peak),
        _ratio(work.bytes, figures["memory_bandwidth_bytes_per_s"], "memory_bandwidth_bytes_per_s"))


def _ratio(amount: float, rate: float, name: str) -> float:
    if amount == 0:
        return 0.0
    if rate <= 0:
        raise ValueError(f"figure {name} is {rate}: the roofline cannot cost {amount:g} of work at that rate")
    return amount / rate
