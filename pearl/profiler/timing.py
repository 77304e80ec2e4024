"""Timing done right: warm up, wait for the device before stopping the clock, repeat until a minimum duration
(and a minimum count) with the garbage collector off, report the median and the 10th/90th percentiles with
the sample count.

`measure_interleaved` spreads each figure's samples over rounds that visit every figure in turn: on a shared
host a kernel's speed drifts on a scale of a block's time (measured: see docs/MEASUREMENTS.md, "How steady"), so
one contiguous block per figure reports whichever level that block caught, and two profiles of one machine
disagree. The rounds start after an untimed one: the first timed round of the first OpenCL sweep in a process
runs cold, slower than the rest, however many warm-up calls each point had first.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Stats:
    median_s: float
    p10_s: float
    p90_s: float
    samples: int
    #: the mean: what a figure that prices a rate (calls per second over many calls) needs, where the median,
    #: robust for a kernel's batch curve, leaves out the slow tail a run's calls pay all the same (`stats_of`)
    mean_s: float | None = None
    #: the median of the same calls by the device's own clock (a point timed with one: `Point.clock`)
    device_s: float | None = None


def durations(call: Callable[..., object], sync: Callable[[], None], *, min_time: float, warmup: int = 3,
              min_samples: int = 5, max_samples: int = 100_000,
              prepare: Callable[[], Any] | None = None, clock: Any = None,
              device: list[float] | None = None) -> list[float]:
    """Seconds of each timed call, one call at a time, each ended by sync().

    With prepare, every call is call(prepare()): the preparation (and any device work it queued, which sync()
    waits for) stays outside the clock. With a device clock (`pearl.adapters.base.DeviceClock`), each timed
    call's seconds by the device's clock are appended to `device` as well.
    """
    def once(timed: list[float] | None) -> None:
        args = ()
        if prepare is not None:
            args = (prepare(),)
            sync()
        t0 = time.perf_counter()
        if clock is not None:
            clock.start()
        call(*args)
        if clock is not None:
            clock.stop()
        sync()
        if timed is not None:
            timed.append(time.perf_counter() - t0)
            if clock is not None and device is not None:
                device.append(clock.seconds())

    for _ in range(warmup):
        once(None)
    times: list[float] = []
    with _no_gc():
        start = time.perf_counter()
        while len(times) < max_samples and (len(times) < min_samples or time.perf_counter() - start < min_time):
            once(times)
    return times


@contextmanager
def _no_gc():
    """The cyclic garbage collector off for a timed block (as timeit does): a collection of the heap that torch
    and pyopencl objects make is a pause of its own that lands on whichever call allocates at the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def measure(call: Callable[..., object], sync: Callable[[], None], *, min_time: float, warmup: int = 3,
            min_samples: int = 5, max_samples: int = 100_000, prepare: Callable[[], Any] | None = None) -> Stats:
    """`durations`, summarised."""
    return stats_of(durations(call, sync, min_time=min_time, warmup=warmup, min_samples=min_samples,
                            max_samples=max_samples, prepare=prepare))


@dataclass(frozen=True)
class Point:
    """One figure to measure: call (with prepare's result when prepare is given), ended by sync(); before, when
    given, is called ahead of each of its blocks: the condition the figure is timed under (torch's threads, a
    stand-in process running or paused), which the other points' blocks may change; min_time, when given, is this
    figure's time in all in place of the sweep's (a figure that needs longer to settle than the rest)."""

    call: Callable[..., object]
    sync: Callable[[], None]
    prepare: Callable[[], Any] | None = None
    before: Callable[[], None] | None = None
    min_time: float | None = None
    #: the device's own clock, where it has one: the figure's `device_s` beside its wall time
    clock: Any = None


def measure_interleaved(points: list[Point], *, rounds: int, min_time: float, warmup: int = 3, min_samples: int = 5,
                        after: Callable[[int, int], None] | None = None) -> list[Stats]:
    """Stats of every point, each from `rounds` blocks of at least min_time/rounds (the point's own min_time where
    it has one) and min_samples/rounds calls: round r measures point 0, 1, ... in turn, so every figure samples the
    whole span of the sweep. An untimed round comes first (`warmup` calls, then a block's worth, per point); each
    timed block starts with one untimed call (caches the other points displaced). after(round, point) is called
    when a timed block is done."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    per_block = max(1, -(-min_samples // rounds))

    def block(p: Point, calls: int, device: list[float] | None = None) -> list[float]:
        if p.before is not None:
            p.before()
        own = min_time if p.min_time is None else p.min_time
        return durations(p.call, p.sync, min_time=own / rounds, warmup=calls, min_samples=per_block,
                         prepare=p.prepare, clock=p.clock, device=device)

    for p in points:
        block(p, warmup)
    times: list[list[float]] = [[] for _ in points]
    device: list[list[float]] = [[] for _ in points]
    for r in range(rounds):
        for i, p in enumerate(points):
            times[i] += block(p, 1, device[i])
            if after is not None:
                after(r, i)
    return [replace(stats_of(t), device_s=float(np.median(d))) if d else stats_of(t) for t, d in zip(times, device)]


def stats_of(times: list[float]) -> Stats:
    """The median, p10 and p90 of times, their count and their mean.

    On a shared host a call's time is skewed to the right (a host that drifts, interrupts, a neighbour's spell),
    so a run's calls have a mean above their median (tests/test_rate_figures.py). A run's rate is its calls' mean
    time, so the figures that price one (the learner's in-situ iteration, the actor's
    step) take the mean; the kernel grid keeps the median."""
    p10, median, p90 = np.percentile(times, [10, 50, 90])
    return Stats(float(median), float(p10), float(p90), len(times), float(np.mean(times)))


def rate_s(stats: Stats) -> float:
    """Seconds a call for a figure that prices a rate: the mean (`stats_of`), the median of stats made without one."""
    return stats.median_s if stats.mean_s is None else stats.mean_s
