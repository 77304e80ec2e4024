"""Which devices this machine has, and opening an adapter for a device id, through the backend registry.

Each registered device kind (`pearl.backends`) finds its own devices (`Backend.discover`) and opens them
(`Backend.open`); this module asks every kind and never names one. A kind whose library cannot be imported is
reported missing with what to install, never fatal: a machine without CUDA or without an OpenCL platform still
lists and uses what it has. Every device found is probed (a tiny kernel built, run and checked on OpenCL; a tiny
op on CUDA) before anything uses it; one whose probe fails is listed with its `problem` and left out by every
caller that was not told to use it (`usable_devices`), and opening it is one DeviceError saying why. Probes run
once a process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pearl.adapters.base import Adapter, DeviceInfo
from pearl.backends import Backend, backends, broken
from pearl.device import DeviceId
from pearl.errors import BackendMissing, DeviceError
from pearl.kernels import Precision


@dataclass
class Discovery:
    #: every device found, usable or not (`DeviceInfo.problem` says why not)
    devices: list[DeviceInfo] = field(default_factory=list)
    #: (device kind or part of one, why it is unavailable)
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
                + [f"driver file {path} skipped: {why}" for path, why in self.broken])


def discover() -> Discovery:
    """Every registered kind's devices, in registration order."""
    found = Discovery()
    for kind in backends():
        if kind.discover:
            devices, missing = _discover(kind)
            found.devices += devices
            found.missing += missing
        if kind.skipped:
            found.broken += kind.call("skipped")
    found.missing += [(name, f"device plugin left out: {why}") for name, why in broken().items()]
    return found


def _discover(kind: Backend) -> tuple[list[DeviceInfo], list[tuple[str, str]]]:
    try:
        return kind.call("discover")
    except ImportError as exc:
        return [], [(kind.family, f"its library cannot be imported ({exc}); {kind.requires or 'install it'}")]


def precision_problem(device: DeviceId, precision: Precision | str) -> str:
    """'' when learn on `device` can compute `precision` in hardware; else why not: its kind's adapter does not
    compute it, or the device lacks the units (its kind's `precision_check`, timed once a process)."""
    wanted, kind = Precision.parse(precision), device.backend
    if wanted is Precision.FP32:
        return ""
    if wanted.value not in kind.precisions:
        return (f"the {kind.adapter or kind.family} adapter computes learn in {', '.join(kind.precisions)} only"
                if kind.precisions else f"{device} computes no learn")
    return kind.call("precision_check", device, wanted) if kind.precision_check else ""


SLICE_PARTS = ("cuda", "slices", "mig", "mps")


def check_slice_exists(device: DeviceId) -> None:
    """DeviceError, with the reasons `pearl devices` gives, unless the slice `device` exists here."""
    from pearl.adapters.slices import check_slice

    found = discover()
    check_slice(device, [d.device_id for d in found.devices],
                [f"{part}: {why}" for part, why in found.missing if part in SLICE_PARTS])


def open_adapter(device: DeviceId | str, threads: int | None = None, descriptor: str | Path | None = None
                 ) -> Adapter:
    """An adapter for the device (a DeviceId, or its text from the Python API), or a DeviceError /
    BackendMissing that says what to do.

    threads sets the CPU threads a backend may use for one kernel (torch's intra-op threads); descriptor names
    a device descriptor whose precompiled kernel binary a device of a kind that loads binaries uses instead of
    building from source.
    """
    parsed = DeviceId.of(device)  # text that is no id → DeviceError saying what ids look like
    kind = parsed.backend
    if kind.modelled:
        raise DeviceError(f"{parsed} is a what-if device: a profile models it, this machine has none; "
                          "run on a device `pearl devices` lists (or emulate it, see `pearl train --emulate`)")
    if descriptor is not None and not kind.binaries:
        raise DeviceError(f"--descriptor names a precompiled kernel binary; {parsed} builds nothing from one")
    try:
        return kind.call("open", parsed, threads, descriptor)
    except ImportError as exc:
        raise BackendMissing(f"{parsed} needs a library that cannot be imported ({exc}); "
                             f"{kind.requires or 'install it'}") from None
