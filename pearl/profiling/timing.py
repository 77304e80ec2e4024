"""Timing done right: warm up, wait for the device before stopping the clock, repeat until a minimum duration
(and a minimum count), report the median and the 10th/90th percentiles with the sample count."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Stats:
    median_s: float
    p10_s: float
    p90_s: float
    samples: int


def durations(call: Callable[..., object], sync: Callable[[], None], *, min_time: float, warmup: int = 3,
              min_samples: int = 5, max_samples: int = 100_000,
              prepare: Callable[[], Any] | None = None) -> list[float]:
    """Seconds of each timed call, one call at a time, each ended by sync().

    With prepare, every call is call(prepare()): the preparation (and any device work it queued, which sync()
    waits for) stays outside the clock.
    """
    def once(timed: list[float] | None) -> None:
        args = ()
        if prepare is not None:
            args = (prepare(),)
            sync()
        t0 = time.perf_counter()
        call(*args)
        sync()
        if timed is not None:
            timed.append(time.perf_counter() - t0)

    for _ in range(warmup):
        once(None)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < max_samples and (len(times) < min_samples or time.perf_counter() - start < min_time):
        once(times)
    return times


def measure(call: Callable[..., object], sync: Callable[[], None], *, min_time: float, warmup: int = 3,
            min_samples: int = 5, max_samples: int = 100_000, prepare: Callable[[], Any] | None = None) -> Stats:
    """`durations`, summarised."""
    times = durations(call, sync, min_time=min_time, warmup=warmup, min_samples=min_samples,
                      max_samples=max_samples, prepare=prepare)
    p10, median, p90 = np.percentile(times, [10, 50, 90])
    return Stats(float(median), float(p10), float(p90), len(times))
