"""Timing done right: warm up, wait for the device before stopping the clock, repeat until a minimum
duration (and a minimum count), report the median and the 10th/90th percentiles with the sample count."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Stats:
    median_s: float
    p10_s: float
    p90_s: float
    samples: int


def measure(call: Callable[[], object], sync: Callable[[], None], *, min_time: float, warmup: int = 3,
            min_samples: int = 5, max_samples: int = 100_000, setup: Callable[[], None] | None = None) -> Stats:
    """Time call() one call at a time (setup, untimed, before each); sync() ends each timed call."""
    for _ in range(warmup):
        if setup is not None:
            setup()
        call()
        sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < max_samples and (len(times) < min_samples or time.perf_counter() - start < min_time):
        if setup is not None:
            setup()
            sync()
        t0 = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - t0)
    p10, median, p90 = np.percentile(times, [10, 50, 90])
    return Stats(float(median), float(p10), float(p90), len(times))
