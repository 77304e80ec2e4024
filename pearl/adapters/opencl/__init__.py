"""The OpenCL adapter (opencl:<platform>:<device>). Importing this package imports pyopencl."""

from pearl.adapters.opencl.adapter import OpenCLAdapter

__all__ = ["OpenCLAdapter"]
