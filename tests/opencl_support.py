"""Shared by the OpenCL tests: skip cleanly when there is no OpenCL device."""

from __future__ import annotations

import pytest


def first_opencl_device() -> str:
    cl = pytest.importorskip("pyopencl")
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        pytest.skip("no OpenCL platform on this machine")
    for p, platform in enumerate(platforms):
        for d, device in enumerate(platform.get_devices()):
            if not device.type & cl.device_type.ACCELERATOR:  # boards need a binary; tests build from source
                return f"opencl:{p}:{d}"
    pytest.skip("no OpenCL CPU or GPU device on this machine")
