"""Power per device, in this order: NVML for NVIDIA GPUs, RAPL (/sys/class/powercap) for CPUs where it is
readable, else the device descriptor's model idle + (peak − idle) × utilisation.

A CPU descriptor that states its `cores` describes that whole chip; a host CPU device with fewer lanes (a
virtual machine's share of a server, a small part) is charged lanes / cores of its idle and peak figures,
never more than the whole (`from_descriptor`). Per-core power is thus assumed uniform: the descriptor's
figures divided by its cores. A descriptor without `cores` is used as it is.

Measured figures carry source "measured" and the method; descriptor figures carry "modelled". The profiler
reports idle power and busy power (all lanes busy); the planner scales between them by utilisation.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pearl.adapters.energy import RaplCounter, rapl_domains
from pearl.descriptors import DeviceDescriptor
from pearl.device import DeviceId


@dataclass(frozen=True)
class PowerReading:
    idle_w: float
    busy_w: float
    source: str
    method: str
    descriptor: str | None = None  # the descriptor file the figures came from (method "descriptor")
    scale: float = 1.0  # the share of the descriptor's figures charged: lanes / cores for a CPU, else 1


def from_descriptor(descriptor: DeviceDescriptor, lanes: int | None = None) -> PowerReading:
    """The descriptor's model at utilisation 0 (idle) and 1 (busy); for a host device with `lanes` cores of
    a descriptor that states its `cores`, lanes / cores of those figures (at most all of them)."""
    scale = min(1.0, lanes / descriptor.cores) if lanes is not None and descriptor.cores else 1.0
    return PowerReading(descriptor.figures["idle_w"] * scale, descriptor.figures["peak_w"] * scale, "modelled",
                        "descriptor", descriptor.source.name, scale)


def _rapl_watts(domains: list[Path], work: Callable[[], None], seconds: float) -> float:
    """The packages' mean watts while work() runs for `seconds` (the counter counts a wrap within the window)."""
    counter, t0 = RaplCounter(domains), time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        work()
    return counter.joules() / (time.perf_counter() - t0)


def rapl(busy: Callable[[], None], seconds: float) -> PowerReading | None:
    """CPU package power idle (sleeping) and busy (running busy() repeatedly), or None when unreadable."""
    domains = rapl_domains()
    if not domains:
        return None
    idle = _rapl_watts(domains, lambda: time.sleep(0.01), seconds)
    loaded = _rapl_watts(domains, busy, seconds)
    return PowerReading(idle, max(idle, loaded), "measured", "rapl")


def nvml(index: int, busy: Callable[[], None], seconds: float) -> PowerReading | None:
    """GPU board power idle and while busy() runs, sampled every 20 ms, or None without NVML."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        read = lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0  # noqa: E731 - milliwatts to watts
        idle = _mean_while(read, lambda: time.sleep(0.01), seconds)
        loaded = _mean_while(read, busy, seconds)
        return PowerReading(idle, max(idle, loaded), "measured", "nvml")
    except pynvml.NVMLError:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _mean_while(read: Callable[[], float], work: Callable[[], None], seconds: float) -> float:
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(read())
            stop.wait(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    deadline = time.perf_counter() + seconds
    try:
        while time.perf_counter() < deadline:
            work()
    finally:
        stop.set()
        thread.join()
    return sum(samples) / max(1, len(samples))


def read(reader: str, device: DeviceId, busy: Callable[[], None], seconds: float) -> PowerReading | None:
    """A device's power by the reader its kind names (`Backend.power`): one of READERS, or "module:function"
    (device, busy, seconds) of a plugin's; None when there is no reader or it cannot read here."""
    if not reader:
        return None
    if reader in READERS:
        return READERS[reader](device, busy, seconds)
    from pearl.backends import resolve

    return resolve(reader)(device, busy, seconds)


#: the readers a device kind can name: NVML reads an NVIDIA board by its index, RAPL the host's package
READERS: dict[str, Callable[[DeviceId, Callable[[], None], float], PowerReading | None]] = {
    "nvml": lambda device, busy, seconds: nvml(device.index[0], busy, seconds),
    "rapl": lambda device, busy, seconds: rapl(busy, seconds) if rapl_domains() else None,
}
