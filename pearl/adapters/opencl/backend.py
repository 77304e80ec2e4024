"""The opencl device kind, as the backend registry (`pearl.backends`) knows it. Imports no pyopencl: the
functions named here are imported when a device of the kind is found or opened."""

from __future__ import annotations

from pearl.backends import Backend
from pearl.device import DeviceKind

#: an OpenCL device (a CPU, a GPU, an FPGA board running precompiled binaries); no learner group, no power reader;
#: a CPU device's energy is the host's (RAPL), a board's has no counter pearl reads
OPENCL = Backend(family="opencl", adapter="opencl", id_form="opencl:P:D", index_parts=2,
                 requires="`pip install pyopencl pocl-binary-distribution`",
                 discover="pearl.adapters.opencl.discovery:discover_opencl",
                 skipped="pearl.adapters.opencl.discovery:skipped_drivers",
                 open="pearl.adapters.opencl.discovery:open_opencl",
                energy="pearl.adapters.opencl.discovery:energy_counter",
                 what_if_kinds=(DeviceKind.FPGA,), binaries=True, emulates=True)
