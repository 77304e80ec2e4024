"""The OpenCL adapter: every device kernel on any OpenCL device (PoCL's CPU device, a GPU, an FPGA board).

CPU and GPU devices build the program from the `.cl` sources. An FPGA board (OpenCL device type ACCELERATOR)
only runs a precompiled binary named by a device descriptor; the adapter never compiles for it at run time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl as cl

from pearl.adapters.base import ActKernel, Adapter, LearnKernel, ReplayKernels
from pearl.adapters.opencl.runtime import BinaryMismatch, CLRuntime, find_device
from pearl.algos.base import OffPolicyConfig
from pearl.algos.params import float_type, network_sizes
from pearl.descriptors import DeviceDescriptor
from pearl.device import DeviceId
from pearl.errors import DeviceError
from pearl.kernels import DEVICE_KERNELS, Implementation, Precision
from pearl.types import EnvSpec, Params


class OpenCLAdapter(Adapter):
    backend = "opencl"
    implements = frozenset(DEVICE_KERNELS)

    def __init__(self, device: DeviceId | str, descriptor: DeviceDescriptor | None = None) -> None:
        """`device`: opencl:P:D; `descriptor`: a board's, whose precompiled kernel binary the device loads."""
        parsed = DeviceId.of(device)
        device_id = str(parsed)
        super().__init__(device_id)
        device = find_device(parsed)
        spec = descriptor.binary if descriptor is not None else None
        if spec is None and device.type & cl.device_type.ACCELERATOR:
            raise DeviceError(f"{device_id} ({device.name.strip()}) is an accelerator board: it runs a precompiled "
                              "kernel binary; pass --descriptor devices/<board>.toml naming it")
        self.descriptor = descriptor
        self.rt = CLRuntime.open(parsed, (spec.path, spec.sha256, spec.target) if spec else None)
        self.available = frozenset(spec.kernels) if spec else self.implements

    def _need(self, kernel: str) -> None:
        if kernel not in self.available:
            raise BinaryMismatch(f"the kernel binary for {self.device_id} does not implement {kernel!r} "
                                 f"(its descriptor lists {', '.join(sorted(self.available))})")

    def make_act(self, config: OffPolicyConfig, spec: EnvSpec, params: Params, seed: int,
                 implementation: Implementation | None = None) -> ActKernel:
        self._need("act")
        act = self.algo_kernels(config).act(self._runtime(params), config, network_sizes(config, spec), params, seed)
        return self.implemented(act, implementation, f"{config.algo}'s act")

    def make_learn(self, config: OffPolicyConfig, spec: EnvSpec, params: Params, seed: int = 0,
                   precision: Precision = Precision.FP32,
                   implementation: Implementation | None = None) -> LearnKernel:
        precision = Precision.parse(precision)
        if precision is not Precision.FP32:  # the .cl kernels' `real` is float (or double), never bfloat16
            raise DeviceError(f"{self.device_id}: the opencl adapter computes learn in {Precision.FP32.value} only, "
                              f"not {precision.value}; run {precision.value} learn on cpu or cuda:N")
        self._need("learn")
        learn = self.algo_kernels(config).learn(self._runtime(params), config, network_sizes(config, spec), params,
                                                seed)
        return self.implemented(learn, implementation, f"{config.algo}'s learn")

    def _runtime(self, params: Params) -> CLRuntime:
        """The program kernels built from `params` run in: the double one for float64 parameters (`float_type`),
        whose batches the caller uploads in float64 too."""
        return self.rt.in_float64() if float_type(params) is np.float64 else self.rt

    def make_replay(self, config: OffPolicyConfig, spec: EnvSpec, seed: int) -> ReplayKernels:
        for kernel in ("replay_insert", "replay_sample", "priority_update"):
            self._need(kernel)
        from pearl.adapters.opencl.replay import OpenCLReplay

        return OpenCLReplay(self.rt, config, spec, seed)

    def from_host(self, x: np.ndarray) -> Any:
        """Device copy in the kernels' types: float32, and int32 for integer arrays (discrete actions)."""
        x = np.asarray(x)
        dtype = np.int32 if x.dtype.kind in "iub" else np.float32
        return self.rt.to_device(x.astype(dtype, copy=False))

    def synchronize(self) -> None:
        self.rt.finish()
