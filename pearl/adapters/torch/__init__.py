"""The torch adapter (cpu, cuda:N). Importing this package imports torch."""

from pearl.adapters.torch.adapter import TorchAdapter, discover

__all__ = ["TorchAdapter", "discover"]
