"""Shared by the OpenCL tests: the first OpenCL device that works here (pearl's discovery probes each one), or
a clean skip that says why there is none."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def _first() -> tuple[str | None, str]:
    from pearl.adapters.opencl.discovery import discover_opencl

    devices, missing = discover_opencl()
    for d in devices:
        if d.usable and d.kind.value != "fpga":  # boards need a binary; tests build from source
            return d.id, ""
    reasons = [f"{d.id} ({d.name}): {d.problem}" for d in devices if not d.usable] + [why for _, why in missing]
    return None, "no OpenCL CPU or GPU device that works on this machine: " + ("; ".join(reasons) or "none found")


def first_opencl_device() -> str:
    pytest.importorskip("pyopencl")
    device, why = _first()
    if device is None:
        pytest.skip(why, allow_module_level=True)  # module-level callers skip their whole module
    return device
