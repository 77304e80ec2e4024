"""What the cost model answers in: `Estimate` (seconds, with the source label of the figures behind it) and
`PowerEstimate`; the labels (measured, scaled, modelled) and how a combination takes the worst of them; and
`Series`, one (workload, kernel, device)'s timings by batch with their monotone envelope, answering any batch
by interpolation or extrapolation, as pearl/costmodel/model.py's docstring states (kernel_time's t(b)).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from pearl.profile.format import IN_SITU, KernelTiming

__all__ = ["MEASURED", "MODELLED", "SCALED", "Estimate", "PowerEstimate", "Series", "combine", "piecewise"]

MEASURED, SCALED, MODELLED = "measured", "scaled", "modelled"
# a combination of figures takes the worst label; a figure folded from a run on this machine is measured
_RANK = {MEASURED: 0, IN_SITU: 0, SCALED: 1, MODELLED: 2}


@dataclass(frozen=True)
class Estimate:
    """A time in seconds; `extrapolated` when the batch lies outside the measured range."""

    seconds: float
    extrapolated: bool
    source: str
    #: the measured workload a scaled estimate came from (None unless source is "scaled" or a modelled
    #: figure was scaled)
    scaled_from: str | None = None
    #: the way the device runs the kernel at this figure, where the profile times it more than one way (eager,
    #: captured: the faster); None where it has one way only
    implementation: str | None = None
    #: the share of `seconds` the device itself is busy (its own clock's figure ÷ the wall time, at most 1),
    #: where the profile timed the kernel by the device's clock; None: all of it
    device_share: float | None = None


@dataclass(frozen=True)
class PowerEstimate:
    idle_w: float
    busy_w: float
    source: str
    method: str


def combine(*sources: str) -> str:
    worst = max((_RANK.get(s, _RANK[MODELLED]) for s in sources), default=0)
    return (MEASURED, SCALED, MODELLED)[worst]


@dataclass(frozen=True)
class Series:
    """The timings of one (workload, kernel, device), sorted by batch, with their monotone envelope."""

    batches: tuple[int, ...]
    raw: tuple[float, ...]
    adjusted: tuple[float, ...]
    #: source of adjusted[i]: that of the raw point whose median it is (the running max's argmax)
    sources: tuple[str, ...]
    #: each batch's device-clock median ÷ its wall median, at most 1 (None where not timed by the device's clock)
    shares: tuple[float | None, ...] = ()

    @classmethod
    def of(cls, timings: list[KernelTiming], device_source: str) -> Series:
        timings = sorted(timings, key=lambda t: t.batch)
        adjusted, sources = [], []
        best, best_source = float("-inf"), MEASURED
        for t in timings:
            if t.median_s >= best:  # a tie keeps the point's own measurement
                best, best_source = t.median_s, combine(t.source, device_source)
            adjusted.append(best)
            sources.append(best_source)
        return cls(tuple(t.batch for t in timings), tuple(t.median_s for t in timings), tuple(adjusted),
                   tuple(sources), tuple(min(1.0, t.device_s / t.median_s) if t.device_s else None for t in timings))

    def share_at(self, batch: int) -> float | None:
        """The device-busy share of the measured batch nearest `batch` (by ratio) that has one; None if none has."""
        timed = [(abs(math.log(batch / b)), s) for b, s in zip(self.batches, self.shares) if s is not None]
        return min(timed)[1] if timed else None

    def at(self, batch: int) -> Estimate:
        b, y, src = self.batches, self.adjusted, self.sources
        i = bisect.bisect_left(b, batch)
        if i < len(b) and b[i] == batch:
            return Estimate(y[i], False, src[i])
        if i == 0:
            return Estimate(y[0], True, src[0])
        if i == len(b):
            if len(b) == 1:
                return Estimate(y[0], True, src[0])
            slope = max(0.0, (y[-1] - y[-2]) / (b[-1] - b[-2]))
            return Estimate(y[-1] + slope * (batch - b[-1]), True, combine(src[-1], src[-2]))
        lo, hi = i - 1, i
        t = y[lo] + (y[hi] - y[lo]) * ((batch - b[lo]) / (b[hi] - b[lo]))
        return Estimate(min(max(t, y[lo]), y[hi]), False, combine(src[lo], src[hi]))


def piecewise(points: list[tuple[int, float]], x: int) -> float:
    """Linear between the points (sorted by x), proportional to x above the last, the first's below it."""
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1] * x / points[-1][0]
    i = bisect.bisect_right([p[0] for p in points], x)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
