"""Finding, probing and opening OpenCL devices (opencl:<platform>:<device>).

pyopencl is imported only after this environment's pip-installed OpenCL drivers are made visible to its loader
(`icd.expose_environment_icds`). Every device found is probed (`probe.probe_device`: a tiny kernel built, run
and checked) once a process; one whose probe fails is listed with its problem, and its advice names a device of
the same kind that works here when there is one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pearl.adapters.base import Adapter, DeviceInfo
from pearl.device import DeviceId, DeviceKind
from pearl.errors import BackendMissing, DeviceError

INSTALL = "`pip install pyopencl pocl-binary-distribution`"


def import_pyopencl():
    """pyopencl, imported after this environment's pip-installed OpenCL drivers are made visible to its loader;
    ImportError when it is not installed."""
    from pearl.adapters.opencl.icd import expose_environment_icds

    expose_environment_icds()
    import pyopencl

    return pyopencl


def discover_opencl() -> tuple[list[DeviceInfo], list[tuple[str, str]]]:
    """OpenCL platforms and devices, listed with ids opencl:<platform>:<device>, each probed."""
    try:
        cl = import_pyopencl()
    except ImportError as exc:
        return [], [("opencl", f"pyopencl cannot be imported ({exc}); {INSTALL}")]
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
                     + ("; runs precompiled binaries: pass --descriptor" if kind is DeviceKind.FPGA else ""),
                problem="" if kind is DeviceKind.FPGA else opencl_problem(f"opencl:{p}:{d}", dev)))
    if not devices:
        return [], [("opencl", "OpenCL platforms exist but expose no device")]
    return _point_to_working(devices), []


def skipped_drivers() -> list[tuple[str, str]]:
    """(driver file, why the loader skips it) for each `.icd` file naming a library that does not exist."""
    from pearl.adapters.opencl.icd import broken_icds

    return [(str(icd.path), why) for icd, why in broken_icds()]


def open_opencl(device: DeviceId, threads: int | None, descriptor: str | Path | None) -> Adapter:
    """The OpenCL adapter for `device`, loading `descriptor`'s precompiled binary when one is named; a device
    whose probe fails is one DeviceError saying why (only this device is probed, the others only to name one that
    works instead)."""
    device_id = str(device)
    require_opencl(device_id)
    from pearl.adapters.opencl import OpenCLAdapter
    from pearl.adapters.opencl.runtime import find_device
    from pearl.descriptors import load_descriptor

    # a board's binary is checked against its descriptor instead
    if descriptor is None and opencl_problem(device_id, find_device(device)):
        listed = next(d for d in discover_opencl()[0] if d.id == device_id)
        raise DeviceError(f"{device_id} cannot be used: {listed.problem}")
    return OpenCLAdapter(device, load_descriptor(descriptor) if descriptor is not None else None)


def energy_counter(device: DeviceId):
    """An OpenCL CPU device's energy is the host's (its RAPL counter, or why none); another kind's has no counter
    pearl reads."""
    from pearl.adapters.energy import Unread, host_counter
    from pearl.adapters.opencl.runtime import find_device

    require_opencl(str(device))
    cl = import_pyopencl()
    kind = _opencl_kind(cl, find_device(device).type)
    if kind is DeviceKind.CPU:
        return host_counter()
    return Unread(str(device), f"an OpenCL {kind} has no energy counter pearl reads")


def _point_to_working(devices: list[DeviceInfo]) -> list[DeviceInfo]:
    """An unusable OpenCL device's advice names a device of the same kind that works here, when there is one,
    rather than what to install."""
    out = []
    for d in devices:
        alternative = next((w for w in devices if w.usable and w.kind is d.kind), None)
        if d.problem and alternative is not None and "; " in d.problem:
            d = replace(d, problem=d.problem.split("; ")[0] + f"; use {alternative.id} ({alternative.name}) instead")
        out.append(d)
    return out


_PROBED: dict[tuple[str, str, str], str] = {}


def opencl_problem(device_id: str, device) -> str:
    """Why the OpenCL device behind device_id cannot work ('' when its probe passes); probed once a process."""
    key = (device_id, device.platform.name, device.name)
    if key not in _PROBED:
        from pearl.adapters.opencl.probe import probe_device

        _PROBED[key] = probe_device(device)
    return _PROBED[key]


def _opencl_kind(cl, type_bits: int) -> DeviceKind:
    """GPU, FPGA (boards report ACCELERATOR or CUSTOM: they run precompiled binaries) or CPU; PoCL's CPU device
    also sets the DEFAULT bit."""
    for kind, bit in ((DeviceKind.GPU, cl.device_type.GPU), (DeviceKind.FPGA, cl.device_type.ACCELERATOR),
                      (DeviceKind.CPU, cl.device_type.CPU)):
        if type_bits & bit:
            return kind
    return DeviceKind.FPGA


def require_opencl(device_id: str) -> None:
    """BackendMissing, saying how to install it, when pyopencl cannot be imported."""
    try:
        import_pyopencl()
    except ImportError as exc:
        raise BackendMissing(f"{device_id} needs pyopencl, which cannot be imported ({exc}); {INSTALL}") from None
