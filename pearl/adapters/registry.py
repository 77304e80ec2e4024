"""Which devices this machine has, and opening an adapter for a device id.

Backends are imported lazily and a missing one is reported with its reason, never fatal: a machine without
CUDA or without an OpenCL platform still lists and uses what it has. Every device found is probed (a tiny
kernel built, run and checked on OpenCL; a tiny op on CUDA) before anything uses it; one whose probe fails is
listed with its `problem` and left out by every caller that was not told to use it (`usable_devices`), and
opening it is one DeviceError saying why. Probes run once a process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pearl.adapters.base import Adapter, DeviceInfo
from pearl.device import DeviceId, DeviceKind
from pearl.errors import BackendMissing, DeviceError


@dataclass
class Discovery:
    #: every device found, usable or not (`DeviceInfo.problem` says why not)
    devices: list[DeviceInfo] = field(default_factory=list)
    #: (backend, why it is unavailable)
    missing: list[tuple[str, str]] = field(default_factory=list)
    #: (driver file, why the loader skips it): an OpenCL `.icd` file naming a library that does not exist
    broken: list[tuple[str, str]] = field(default_factory=list)

    @property
    def usable(self) -> list[DeviceInfo]:
        return [d for d in self.devices if d.usable]

    @property
    def unusable(self) -> list[DeviceInfo]:
        return [d for d in self.devices if not d.usable]

    def warnings(self) -> list[str]:
        """One line per device left out and per driver file skipped: what a command that goes on without them
        says."""
        return ([f"{d.id} ({d.name}) left out: {d.problem}" for d in self.unusable]
                + [f"OpenCL driver file {path} skipped: {why}" for path, why in self.broken])


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
    from pearl.adapters.opencl.icd import broken_icds

    found.broken = [(str(icd.path), why) for icd, why in broken_icds()]
    return found


def import_pyopencl():
    """pyopencl, imported after this environment's pip-installed OpenCL drivers are made visible to its loader
    (pearl.adapters.opencl.icd); ImportError when it is not installed."""
    from pearl.adapters.opencl.icd import expose_environment_icds

    expose_environment_icds()
    import pyopencl

    return pyopencl


def discover_opencl() -> tuple[list[DeviceInfo], list[tuple[str, str]]]:
    """OpenCL platforms and devices, listed with ids opencl:<platform>:<device>, each probed."""
    try:
        cl = import_pyopencl()
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
                     + ("; runs precompiled binaries: pass --descriptor" if kind is DeviceKind.FPGA else ""),
                problem="" if kind is DeviceKind.FPGA else opencl_problem(f"opencl:{p}:{d}", dev)))
    if not devices:
        return [], [("opencl", "OpenCL platforms exist but expose no device")]
    return _point_to_working(devices), []


def _point_to_working(devices: list[DeviceInfo]) -> list[DeviceInfo]:
    """An unusable OpenCL device's advice names a device of the same kind that works here, when there is one,
    rather than what to install."""
    from dataclasses import replace

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
        import_pyopencl()
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
        from pearl.adapters.opencl.runtime import find_device
        from pearl.descriptors import load_descriptor

        # a board's binary is checked against its descriptor instead; only this device is probed, the others
        # only to name one that works when it fails
        if descriptor is None and opencl_problem(device_id, find_device(parsed)):
            listed = next(d for d in discover_opencl()[0] if d.id == device_id)
            raise DeviceError(f"{device_id} cannot be used: {listed.problem}")

        return OpenCLAdapter(parsed, load_descriptor(descriptor) if descriptor is not None else None)
    raise DeviceError(f"{device_id} is a what-if device: a profile models it, this machine has none; "
                      "run on a device `pearl devices` lists (or emulate it, see `pearl train --emulate`)")
