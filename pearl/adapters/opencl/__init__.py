"""The OpenCL adapter (opencl:<platform>:<device>). `OpenCLAdapter` is imported on first use, since importing it
imports pyopencl: pearl.adapters.opencl.icd must run before the OpenCL loader first reads its environment."""

from __future__ import annotations

__all__ = ["OpenCLAdapter"]


def __getattr__(name: str):
    if name == "OpenCLAdapter":
        from pearl.adapters.opencl.adapter import OpenCLAdapter

        return OpenCLAdapter
    raise AttributeError(name)
