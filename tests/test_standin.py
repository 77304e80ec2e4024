"""The stand-in actor process the profiler times learn beside (pearl/profiler/standin.py): it starts, keeps the
pace it is given, pauses and resumes, and is gone after stop."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pearl.profiler import standin

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's CPU time in /proc")


def _cpu_seconds(proc) -> float:
    """user + system CPU seconds of a child process, from /proc/<pid>/stat (fields 14 and 15, in clock ticks)."""
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_stand_in_spins_its_share_of_each_period_and_pauses() -> None:
    """Spinning 5 ms of every 20 ms, the stand-in uses about a quarter of a core over a second (bounds wide
    enough for a loaded machine: it spins at least its share of what it was given, and sleeps the rest); paused,
    it uses none; after stop it is gone."""
    proc = standin.start(standin.Pace(work_s=0.005, period_s=0.020, seconds=30.0))
    try:
        start, t0 = _cpu_seconds(proc), time.monotonic()
        time.sleep(1.0)
        share = (_cpu_seconds(proc) - start) / (time.monotonic() - t0)
        assert 0.1 < share < 0.6, share
        standin.pause(proc)
        time.sleep(0.1)
        paused = _cpu_seconds(proc)
        time.sleep(0.5)
        assert _cpu_seconds(proc) - paused < 0.02
        standin.resume(proc)
        time.sleep(0.5)
        assert _cpu_seconds(proc) - paused > 0.05
    finally:
        standin.stop(proc)
    assert proc.poll() is not None and not Path(f"/proc/{proc.pid}").exists()


def test_the_stand_in_ends_by_itself_after_its_seconds() -> None:
    proc = standin.start(standin.Pace(work_s=0.001, period_s=0.010, seconds=0.3))
    try:
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            standin.stop(proc)
    assert not Path(f"/proc/{proc.pid}").exists()
