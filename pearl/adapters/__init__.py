"""Adapters run kernels on one device kind each; only this package imports hardware libraries."""

from pearl.adapters.base import ActKernel, Adapter, DeviceInfo, LearnKernel, ReplayKernels, host_array
from pearl.adapters.registry import Discovery, discover, open_adapter

__all__ = ["ActKernel", "Adapter", "DeviceInfo", "Discovery", "LearnKernel", "ReplayKernels", "discover",
           "host_array", "open_adapter"]
