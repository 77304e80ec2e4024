"""A stand-in actor process, for timing learn as the concurrent launchers run it: beside the actors.

On a host whose lanes the learner's T threads fill, an actor process that wakes for its step displaces one of
them, and each parallel region of learn waits for the displaced thread, so a multi-threaded learn of small
layers loses most of its speed beside even a mostly idle actor while 1 thread keeps its speed (measured: see
docs/MEASUREMENTS.md, "What a profile times besides the kernels"). The profiler times learn at the host's
lanes once alone and once beside this stand-in (`learner.threaded_learn`), which keeps pace with the learner as
an actor does: it spins an actor's work for one update's env steps, then sleeps until the next update is due,
for at most `seconds`.
"""

from __future__ import annotations

import os
import select
import signal
import time
from dataclasses import dataclass

from pearl.children import close_stderr, read_payload, start_child, stderr_tail
from pearl.errors import DeviceError

ENTRY = "from pearl.profiler.standin import serve; serve()"


@dataclass(frozen=True)
class Pace:
    work_s: float  # spun every period: an actor's work for one update's env steps
    period_s: float  # the learner's update
    seconds: float  # the stand-in ends by itself after this long, whatever happens to the profiler
    ready_fd: int = -1  # the stand-in writes a byte here once it paces (set by `start`)


#: the most of each update the stand-in is busy: an actor beside a learner waits at least a little for weights
BUSIEST = 0.9
#: seconds the profiler waits for the stand-in's interpreter to start pacing
START_S = 30.0


def start(pace: Pace):
    """The stand-in process, pacing once this returns (stop it with `stop`); DeviceError if it does not start."""
    read, write = os.pipe()
    try:
        proc = start_child(ENTRY, Pace(pace.work_s, pace.period_s, pace.seconds, write), pass_fds=(write,))
        os.close(write)
        write = -1
        if not select.select([read], [], [], START_S)[0] or not os.read(read, 1):
            stop(proc)
            raise DeviceError(f"the stand-in actor process did not start within {START_S:.0f} s"
                              f"{stderr_tail(proc, last_line=True)}")
        return proc
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def pause(proc) -> None:
    os.kill(proc.pid, signal.SIGSTOP)


def resume(proc) -> None:
    """Go on pacing (from now: a period missed while paused is not made up)."""
    os.kill(proc.pid, signal.SIGCONT)


def stop(proc) -> None:
    proc.kill()
    proc.wait()
    close_stderr(proc)


def serve() -> None:
    run(read_payload())


def run(pace: Pace) -> None:
    end = time.monotonic() + pace.seconds
    if pace.ready_fd >= 0:
        os.write(pace.ready_fd, b"1")
        os.close(pace.ready_fd)
    due = time.perf_counter()
    while time.monotonic() < end:
        spin_until = time.perf_counter() + pace.work_s
        while time.perf_counter() < spin_until:
            pass
        due += pace.period_s
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        else:  # behind: start the next period now rather than catch up in a burst
            due = time.perf_counter()
