"""The MLP every algorithm uses, and moving its parameters to and from `Params` dicts."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from pearl.types import Params


class MLP(nn.Module):
    """Linear layers with ReLU between them; optionally tanh on the output (DDPG's actor)."""

    def __init__(self, sizes: list[int], tanh_out: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.tanh_out = tanh_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        x = self.layers[-1](x)
        return torch.tanh(x) if self.tanh_out else x


def load_net(module: MLP, params: Params, net: str) -> None:
    """Copy `<net>.<i>.weight/bias` from params into module (shapes must match exactly)."""
    with torch.no_grad():
        for i, layer in enumerate(module.layers):
            for attr in ("weight", "bias"):
                name = f"{net}.{i}.{attr}"
                if name not in params:
                    raise ValueError(f"parameters lack {name!r}")
                target = getattr(layer, attr)
                value = np.asarray(params[name], dtype=np.float32)
                if tuple(value.shape) != tuple(target.shape):
                    raise ValueError(f"{name} has shape {value.shape}, the network expects {tuple(target.shape)}")
                target.copy_(torch.from_numpy(value))


def dump_net(module: MLP, net: str) -> Params:
    """The module's parameters as host copies named `<net>.<i>.weight/bias`."""
    out: Params = {}
    for i, layer in enumerate(module.layers):
        out[f"{net}.{i}.weight"] = layer.weight.detach().cpu().numpy().copy()
        out[f"{net}.{i}.bias"] = layer.bias.detach().cpu().numpy().copy()
    return out


def build(sizes: list[int], params: Params, net: str, device: torch.device, tanh_out: bool = False) -> MLP:
    module = MLP(sizes, tanh_out).to(device)
    load_net(module, params, net)
    return module
