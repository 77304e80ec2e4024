"""Energy counters: the cumulative joules a device's hardware has drawn, read where the hardware keeps a count.

- RAPL (`/sys/class/powercap/intel-rapl:N/energy_uj`, one per CPU package, on Intel and on AMD since Zen): the
  host's packages together, the resource `HOST_RESOURCE` that `cpu` and OpenCL's CPU devices share. Readable
  by root only on Linux >= 5.10 and absent in most virtual machines. Each counter wraps at its
  `max_energy_range_uj`; a reader that reads it at least once a wrap period counts every joule.
- NVML's total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`, millijoules since the driver loaded, on
  Volta and newer): one NVIDIA board, whole (a MIG instance or an MPS share draws from its GPU's board).

A device kind names its counter in `Backend.energy`; `counter_for` asks it. A counter that cannot be read here
is an `Unread`: the resource and why, so that resource's share of a run's energy stays the plan's model and the
run says so. This module and the kinds' counter functions are the only code that touches these counters (NVML
through `pearl.adapters.slices.open_nvml`, which imports pynvml on first use); the profiler's RAPL power window
reads its packages through `RaplCounter` too.
"""

from __future__ import annotations

import glob
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pearl.device import HOST_RESOURCE, DeviceId

POWERCAP = Path("/sys/class/powercap")


class EnergyCounter(Protocol):
    """Joules drawn since the counter was opened, by one physical resource."""

    resource: str  # what draws it: devices on one resource share one counter
    method: str  # "rapl", "nvml", or a plugin's name

    def joules(self) -> float:
        """Joules since opened. Call at least once per wrap period of the hardware's count (RAPL: minutes)."""
        ...


@dataclass(frozen=True)
class Unread:
    """A resource whose energy this process cannot read, and why."""

    resource: str
    why: str


def rapl_domains(root: Path = POWERCAP) -> list[Path]:
    """Package-level RAPL energy counters under `root` that this process can read (root-only on Linux >= 5.10)."""
    readable = []
    for path in sorted(glob.glob(str(root / "intel-rapl:*" / "energy_uj"))):
        if Path(path).parent.name.count(":") == 1:  # intel-rapl:N is a package; intel-rapl:N:M its sub-domains
            try:
                int(Path(path).read_text())
                readable.append(Path(path))
            except (OSError, ValueError):
                continue
    return readable


@dataclass
class RaplCounter:
    """The host's RAPL packages summed, each package's wraps counted (its `max_energy_range_uj`)."""

    domains: list[Path]
    resource: str = HOST_RESOURCE
    method: str = "rapl"
    _ranges: list[int] = field(init=False, default_factory=list)
    _last: list[int] = field(init=False, default_factory=list)
    _microjoules: int = field(init=False, default=0)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.domains:
            raise ValueError("a RAPL counter reads at least one package's energy_uj")
        self._ranges = [_max_range(p) for p in self.domains]
        self._last = [int(p.read_text()) for p in self.domains]

    def joules(self) -> float:
        with self._lock:  # a meter's poll thread and its stop() may read at once
            for i, path in enumerate(self.domains):
                now = int(path.read_text())
                step = now - self._last[i]
                if step < 0:  # wrapped once since the last read
                    step += self._ranges[i]
                self._microjoules += step
                self._last[i] = now
            return self._microjoules / 1e6


def _max_range(energy_uj: Path) -> int:
    """A package counter's wrap point; 2^32 µJ where the file is absent or unreadable (the narrowest counters)."""
    try:
        return int((energy_uj.parent / "max_energy_range_uj").read_text()) + 1
    except (OSError, ValueError):
        return 1 << 32


def host_counter(root: Path = POWERCAP) -> EnergyCounter | Unread:
    """The host's RAPL counter, or why there is none."""
    domains = rapl_domains(root)
    if not domains:
        return Unread(HOST_RESOURCE, f"no RAPL package counter is readable here ({root}/intel-rapl:*/energy_uj: "
                                     "absent in most virtual machines, readable by root only on Linux >= 5.10)")
    return RaplCounter(domains)


@dataclass
class NvmlCounter:
    """One NVIDIA board's total-energy counter (millijoules since the driver loaded; 64 bits, never wraps)."""

    nvml: Any  # pynvml, or anything with its functions (tests give synthetic answers)
    handle: Any
    resource: str
    method: str = "nvml"
    _start_mj: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._start_mj = int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def joules(self) -> float:
        return (int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)) - self._start_mj) / 1e3


def nvml_board_counter(nvml: Any, index: int, resource: str) -> EnergyCounter | Unread:
    """Board `index`'s counter through an initialised NVML, or why it cannot be read."""
    try:
        return NvmlCounter(nvml, nvml.nvmlDeviceGetHandleByIndex(index), resource)
    except nvml.NVMLError as exc:  # NOT_SUPPORTED before Volta
        return Unread(resource, f"NVML reads no total-energy counter on GPU {index} ({exc})")


def cuda_counter(device: DeviceId) -> EnergyCounter | Unread:
    """A CUDA device's board counter (a slice's is its GPU's: the resource is the whole GPU), or why none."""
    from pearl.adapters.slices import open_nvml

    whole = device.whole
    nvml, why = open_nvml()
    if nvml is None:
        return Unread(str(whole), why)
    return nvml_board_counter(nvml, whole.index[0], str(whole))


def cpu_counter(device: DeviceId) -> EnergyCounter | Unread:
    return host_counter()


def counter_for(device: DeviceId) -> EnergyCounter | Unread:
    """The counter `device`'s kind names (`Backend.energy`), or why it has none."""
    backend = device.backend
    if not backend.energy:
        return Unread(str(device.whole), f"pearl reads no energy counter on a {backend.id_form} device")
    return backend.call("energy", device)
