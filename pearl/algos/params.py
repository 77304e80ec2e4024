"""Network shapes and seeded initial parameters, in numpy.

Every adapter starts from the arrays made here, so the torch and OpenCL adapters (and a test's plain
re-statement of the maths) can be compared from identical weights. Names are ``<net>.<layer>.weight`` of
shape (out, in) and ``<net>.<layer>.bias`` of shape (out,), as torch's Linear stores them.

Initialisation matches torch.nn.Linear's default: weight and bias ~ U(−1/√fan_in, 1/√fan_in).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pearl.algos.base import OffPolicyConfig
from pearl.algos.registry import algorithm
from pearl.types import EnvSpec, Params


def network_sizes(config: OffPolicyConfig, spec: EnvSpec) -> dict[str, list[int]]:
    """Layer widths, input first, of each trained network (the registry entry's `networks`)."""
    return algorithm(config.algo).network_sizes(spec.obs_dim, spec.action_dim, config.hidden)


def policy_net(algo: str) -> str:
    """The network `act` needs (and weight_sync copies)."""
    return algorithm(algo).policy_net


def target_name(net: str) -> str:
    return f"{net}_target"


def layer_names(net: str, sizes: list[int]) -> list[tuple[str, str]]:
    return [(f"{net}.{i}.weight", f"{net}.{i}.bias") for i in range(len(sizes) - 1)]


def init_mlp(rng: np.random.Generator, net: str, sizes: list[int]) -> Params:
    params: Params = {}
    for (w_name, b_name), fan_in, fan_out in zip(layer_names(net, sizes), sizes[:-1], sizes[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        params[w_name] = rng.uniform(-bound, bound, size=(fan_out, fan_in)).astype(np.float32)
        params[b_name] = rng.uniform(-bound, bound, size=(fan_out,)).astype(np.float32)
    return params


def init_params(config: OffPolicyConfig, spec: EnvSpec, seed: int) -> Params:
    """Seeded parameters of every network and of its target (a copy, for the networks the registry entry
    declares targets of: `Algorithm.state`), in a fixed order."""
    rng = np.random.default_rng(seed)
    params: Params = {}
    nets = network_sizes(config, spec)
    targets = set(algorithm(config.algo).target_nets(nets))
    for net, sizes in nets.items():
        online = init_mlp(rng, net, sizes)
        params.update(online)
        if net in targets:
            params.update({name.replace(f"{net}.", f"{target_name(net)}.", 1): value.copy()
                           for name, value in online.items()})
    return params


def float_type(params: Params) -> type[np.floating]:
    """The floating type kernels built from `params` compute in: float64 when every floating array of it is
    float64, else float32. `init_params` and every checkpoint give float32; tests build kernels from float64
    parameters to hold a hand-derived path's arithmetic to its autograd reference free of float32's rounding
    (tests/test_reference_learn.py)."""
    kinds = {dtype for dtype in (np.asarray(v).dtype for v in params.values()) if dtype.kind == "f"}
    return np.float64 if kinds == {np.dtype(np.float64)} else np.float32


def subset(params: Params, net: str) -> Params:
    """The parameters of one network."""
    prefix = f"{net}."
    return {k: v for k, v in params.items() if k.startswith(prefix)}


def param_count(config: OffPolicyConfig, spec: EnvSpec, net: str | None = None) -> int:
    """Trainable parameters (targets excluded) of every network, or of the one named."""
    nets = network_sizes(config, spec)
    chosen = nets.values() if net is None else [nets[net]]
    return sum(a * b + b for sizes in chosen for a, b in zip(sizes[:-1], sizes[1:]))


@dataclass(frozen=True)
class ParamLayout:
    """Where each named parameter sits in one flat float32 buffer, such as the runtime's shared weight board (in
    the order the learner lists them, layer by layer, so an adapter that keeps a network in one flat buffer can
    copy it in one go)."""

    entries: tuple[tuple[str, tuple[int, ...], int], ...]  # (name, shape, offset in elements)
    size: int

    @classmethod
    def of(cls, params: Params) -> "ParamLayout":
        offset, out = 0, []
        for name in params:
            shape = tuple(np.shape(params[name]))
            out.append((name, shape, offset))
            offset += int(np.prod(shape, dtype=np.int64))
        return cls(tuple(out), offset)

    def views(self, flat: np.ndarray) -> Params:
        """Each named parameter as a view into flat, a buffer of `size` elements laid out like this."""
        return {name: flat[o:o + int(np.prod(shape, dtype=np.int64))].reshape(shape) for name, shape, o in self.entries}
