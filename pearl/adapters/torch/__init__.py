"""The torch adapter (cpu, cuda:N). `TorchAdapter` is imported on first use, since importing it imports torch;
`backend.py`, which registers the cpu and cuda device kinds, imports no torch."""

from __future__ import annotations

__all__ = ["TorchAdapter"]


def __getattr__(name: str):
    if name == "TorchAdapter":
        from pearl.adapters.torch.adapter import TorchAdapter

        return TorchAdapter
    raise AttributeError(name)
