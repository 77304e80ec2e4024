"""Progress of long work on stderr (the CLI's bars, and the quickstart's from the Python API).

The rate shown is the average since the first call: the training loop calls once as it starts and once as it
ends, so a training bar's last figure is the summary's env steps/s (steps over the loop's wall time), the same
quantity. tqdm's own rate is not shown: it is smoothed over the last few updates and counted from the bar's
creation (a recent rate: 743 steps/s at the end of a DDPG run whose summary said 1,447, the random steps
before learning_starts being the fast part).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

import click

# tqdm's layouts with its rate (smoothed) left out; ours goes in the postfix
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"
BAR_FORMAT_NO_TOTAL = "{desc}: {n_fmt} [{elapsed}{postfix}]"


class Progress:
    """A context manager called with the units done so far: a tqdm bar on a terminal; when stderr is a file or
    a pipe and `lines` is set, a line such as `profile: 40/157 timings (25%), 10 s, 4 timings/s` every `every`
    seconds and one when the work ends (only for work that ran that long, so short commands stay quiet);
    nothing when disabled (--json). `clock` is injectable for tests."""

    EVERY_S = 10.0

    def __init__(self, total: int | None, enabled: bool, label: str, unit: str = "step", every: float = EVERY_S,
                 lines: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.bar = None
        self.total, self.label, self.unit, self.every, self.clock = total, label, unit, every, clock
        self.lines = lines and enabled and not sys.stderr.isatty()
        self.done, self.printed = 0, 0
        self.t0 = self.last = self.at = clock()  # at: the last call
        self.origin: tuple[float, int] | None = None  # (time, units done) of the first call: the rate's start
        if enabled and not self.lines and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=unit, desc=label, file=sys.stderr, dynamic_ncols=True,
                            bar_format=BAR_FORMAT if total else BAR_FORMAT_NO_TOTAL)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.printed and exc_type is None:
            self._line(self.clock(), "done in ")

    def __call__(self, done: int) -> None:
        now = self.clock()
        self.done, self.at = done, now
        if self.origin is None:
            self.origin = (now, done)
        if self.bar is not None:
            rate = self.rate_text()
            if rate:
                self.bar.set_postfix_str(rate, refresh=False)
            self.bar.update(done - self.bar.n)
        elif self.lines and now - self.last >= self.every:
            self.last = now
            self._line(now, "")

    def rate(self) -> float | None:
        """Units per second from the first call to the last (None until time has passed between them): it stops
        at the last call, so what follows the work (evaluation, closing) does not dilute it."""
        if self.origin is None or self.at <= self.origin[0]:
            return None
        return (self.done - self.origin[1]) / (self.at - self.origin[0])

    def rate_text(self) -> str:
        rate = self.rate()
        return "" if rate is None else f"{rate:,.0f} {self.unit}s/s"

    def _line(self, now: float, when: str) -> None:
        units = f"{self.unit}s" if self.done != 1 else self.unit
        count = f"{self.done:,}/{self.total:,} {units} ({self.done / self.total:.0%})" if self.total \
            else f"{self.done:,} {units}"
        rate = self.rate_text()
        click.echo(f"{self.label}: {count}, {when}{now - self.t0:.0f} s{', ' + rate if rate else ''}", err=True)
        self.printed += 1
