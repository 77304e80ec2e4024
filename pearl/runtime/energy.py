"""A run's energy over its learning phase, read from the hardware's counters (`pearl.adapters.energy`).

`open_meter(devices)` gathers one counter per physical resource the run draws on: the host always (env steps
and every process run there), and each device of the placement, merged by resource (PoCL's CPU device is the
host's). A resource without a counter here is listed, with why, in `unmeasured`. The counters count joules
between `start()` (when learning starts, as the learning phase's rates do) and `stop()` (the loop's end), and
are polled in between so that a RAPL counter's wraps are all counted.

What a run records (summary.json's `energy`): `source` "measured" (every resource read), "partly measured"
or "modelled" (none read); `method` (the counters read: "rapl", "nvml", "nvml+rapl"); `joules_by_resource`
and `joules`, their sum; `seconds` (the learning phase's wall time, evaluations and checkpoints inside it
included, as the counters ran through them); `power_w` = joules ÷ seconds; `unmeasured` (resource → why). The
trainer adds `j_per_env_step` = power × the learning phase's time per step when every resource was read: the
plan predicts power × period ÷ steps, and pauses for evaluations make no steps. `pearl compare` adds the plan's
power for the unmeasured resources of a partly measured run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from pearl.adapters.energy import EnergyCounter, Unread, counter_for
from pearl.device import HOST_DEVICE, DeviceId

#: how often a running meter reads its counters: well inside a RAPL counter's wrap period (minutes at a
#: server's power), and cheap (a file read, an NVML call)
POLL_S = 1.0


@dataclass
class EnergyMeter:
    counters: dict[str, EnergyCounter] = field(default_factory=dict)  # by resource
    unmeasured: dict[str, str] = field(default_factory=dict)  # resource → why this process reads no counter
    poll_s: float = POLL_S
    _start: dict[str, float] = field(init=False, default_factory=dict)
    _t0: float | None = field(init=False, default=None)
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _thread: threading.Thread | None = field(init=False, default=None)
    result: dict | None = field(init=False, default=None)

    def start(self) -> None:
        """The learning phase starts: count from here (once; a later call changes nothing)."""
        if not self.counters or self._t0 is not None:
            return
        self._start = {r: c.joules() for r, c in self.counters.items()}
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._poll, name="pearl-energy", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_s):
            for counter in self.counters.values():
                counter.joules()

    def stop(self) -> dict:
        """The learning phase ends: what it drew (the record's `energy`, without `j_per_env_step`); the first
        call's answer again on later calls."""
        if self.result is None:
            self.result = self._read()
        return self.result

    def _read(self) -> dict:
        if not self.counters:
            return {"source": "modelled", "unmeasured": dict(self.unmeasured)}
        if self._t0 is None:
            return {"source": "modelled", "unmeasured": {**dict.fromkeys(self.counters, "the run never reached "
                                                                          "its learning phase"), **self.unmeasured}}
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        seconds = time.perf_counter() - self._t0
        joules = {r: c.joules() - self._start[r] for r, c in self.counters.items()}
        total = sum(joules.values())
        return {"source": "partly measured" if self.unmeasured else "measured",
                "method": "+".join(sorted({c.method for c in self.counters.values()})),
                "joules": total, "joules_by_resource": joules, "seconds": seconds,
                "power_w": total / seconds if seconds > 0 else None, "unmeasured": dict(self.unmeasured)}


def open_meter(devices: Iterable[DeviceId]) -> EnergyMeter:
    """A meter over the host and `devices`: a counter per resource where it can be read, else why not."""
    meter = EnergyMeter()
    for device in sorted({HOST_DEVICE, *(d.whole for d in devices)}, key=str):
        counter = counter_for(device)
        if isinstance(counter, Unread):
            meter.unmeasured.setdefault(counter.resource, counter.why)
        else:
            meter.counters.setdefault(counter.resource, counter)
    return meter


def unmeasured(why: str) -> EnergyMeter:
    """A meter that reads nothing and says why (a launcher whose roles run where this process reads no
    counter)."""
    return EnergyMeter(unmeasured={"all": why})
