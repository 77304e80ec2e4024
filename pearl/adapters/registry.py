"""Which devices this machine has, and opening an adapter for a device id.

Backends are imported lazily and a missing one is reported with its reason, never fatal: a machine without
CUDA or without an OpenCL platform still lists and uses what it has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pearl.adapters.base import Adapter, DeviceInfo
from pearl.device import DeviceId, DeviceKind
from pearl.errors import BackendMissing, DeviceError


@dataclass
class Discovery:
    devices: list[DeviceInfo] = field(default_factory=list)
    #: (backend, why it is unavailable)
    missing: list[tuple[str, str]] = field(default_factory=list)


def discover() -> Discovery:
    found = Discovery()
    try:
        from pearl.adapters.torch import discover as torch_discover
    except ImportError as exc:
        found.missing.append(("torch", f"torch cannot be imported ({exc}); `pip install torch`"))
    else:
        devices, missing = torch_discover()
        found.devices += devices
        found.missing += missing
    devices, missing = discover_opencl()
    found.devices += devices
    found.missing += missing
    return found


def discover_opencl() -> tuple[list[DeviceInfo], list[tuple[str, str]]]:
    """OpenCL platforms and devices, listed with ids opencl:<platform>:<device>."""
    try:
        import pyopencl as cl
    except ImportError as exc:
        return [], [("opencl", f"pyopencl cannot be imported ({exc}); `pip install pyopencl pocl-binary-distribution`")]
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # raised as "platform not found" when no ICD is installed
        return [], [("opencl", f"no OpenCL platform found ({exc}); "
                               "`pip install pocl-binary-distribution` adds a CPU one")]
    devices = []
    for p, platform in enumerate(platforms):
        for d, dev in enumerate(platform.get_devices()):
            kind = _opencl_kind(cl, dev.type)
            lanes = int(dev.max_compute_units) if kind is DeviceKind.CPU else 1  # a CPU device's lanes: its cores
            devices.append(DeviceInfo(
                f"opencl:{p}:{d}", kind, "opencl", f"{dev.name.strip()} ({platform.name.strip()})",
                lanes, int(dev.global_mem_size),
                note=f"{kind}, {dev.max_compute_units} compute units, {dev.opencl_c_version.strip()}"
                     + ("; runs precompiled binaries: pass --descriptor" if kind is DeviceKind.FPGA else "")))
    if not devices:
        return [], [("opencl", "OpenCL platforms exist but expose no device")]
    return devices, []


def _opencl_kind(cl, type_bits: int) -> DeviceKind:
    """GPU, FPGA (boards report ACCELERATOR or CUSTOM: they run precompiled binaries) or CPU; PoCL's CPU device
    also sets the DEFAULT bit."""
    for kind, bit in ((DeviceKind.GPU, cl.device_type.GPU), (DeviceKind.FPGA, cl.device_type.ACCELERATOR),
                      (DeviceKind.CPU, cl.device_type.CPU)):
        if type_bits & bit:
            return kind
    return DeviceKind.FPGA


SLICE_BACKENDS = ("cuda", "slices", "mig", "mps")


def check_slice_exists(device: DeviceId) -> None:
    """DeviceError, with the reasons `pearl devices` gives, unless the slice `device` exists here."""
    from pearl.adapters.slices import check_slice

    found = discover()
    check_slice(device, [d.device_id for d in found.devices],
                [f"{backend}: {why}" for backend, why in found.missing if backend in SLICE_BACKENDS])


def require_opencl(device_id: str) -> None:
    """BackendMissing, saying how to install it, when pyopencl cannot be imported."""
    try:
        import pyopencl  # noqa: F401
    except ImportError as exc:
        raise BackendMissing(f"{device_id} needs pyopencl, which cannot be imported ({exc}); "
                             "`pip install pyopencl pocl-binary-distribution`") from None


def open_adapter(device: DeviceId | str, threads: int | None = None, descriptor: str | Path | None = None
                 ) -> Adapter:
    """An adapter for the device (a DeviceId, or its text from the Python API), or a DeviceError /
    BackendMissing that says what to do.

    threads sets the CPU threads a backend may use for one kernel (torch's intra-op threads); descriptor names
    a device descriptor whose precompiled kernel binary an OpenCL device loads instead of building from source.
    """
    parsed = DeviceId.of(device)  # text that is no id → DeviceError saying what ids look like
    device_id = str(parsed)
    if parsed.family in ("cpu", "cuda"):
        try:
            from pearl.adapters.torch import TorchAdapter
        except ImportError as exc:
            raise BackendMissing(f"{device_id} needs torch, which cannot be imported ({exc}); "
                                 "`pip install torch`") from None
        if descriptor is not None:
            raise DeviceError(f"--descriptor names a kernel binary for an OpenCL device; {device_id} builds nothing")
        if parsed.slice is not None:
            from pearl.adapters.slices import enter_slice, in_slice_env

            if not in_slice_env(parsed):  # a role's process the launcher started on it was checked there
                check_slice_exists(parsed)
                enter_slice(parsed)
        return TorchAdapter(parsed, threads)
    if parsed.is_opencl:
        require_opencl(device_id)
        from pearl.adapters.opencl import OpenCLAdapter
        from pearl.descriptors import load_descriptor


        return OpenCLAdapter(parsed, load_descriptor(descriptor) if descriptor is not None else None)
    raise DeviceError(f"{device_id} is a what-if device: a profile models it, this machine has none; "
                      "run on a device `pearl devices` lists (or emulate it, see `pearl train --emulate`)")
