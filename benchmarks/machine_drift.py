"""How steady is this machine? Fixed work, timed in short blocks for a while. (Not a test: it prints.)

    python benchmarks/machine_drift.py [--seconds 120] [--window 20] [--device D ...]

`profile_repeatability.py` asks whether two quick profiles agree within ±25 %. That can only hold where the
machine itself runs the same work at the same speed from one profile to the next, so this script measures
that ceiling: four pieces of work that never change (a pure-Python loop, like the interpreter and dispatch
overhead that dominates small kernels; a numpy vector operation; a 256×256 torch matmul on one thread and
on two) and pearl's DQN learn at batch 64 on each device (default: every device a profile measures), one
learner repeating one sampled batch, take turns in 50 ms blocks. Each block gives a median; each window of
--window seconds (about one quick profile) gives the median of its blocks. If consecutive windows of fixed
work differ by more than 25 %, no profiler on this machine can meet the line, whatever it estimates.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from typing import Callable

import numpy as np
import torch

from pearl.adapters import open_adapter
from pearl.algos import algorithm, preset
from pearl.algos.params import init_params
from pearl.envs import env_spec
from pearl.errors import PearlError
from pearl.hostinfo import cpu_name
from pearl.profiler.options import ProfileOptions
from pearl.profiler.grids import GRIDS, prefill
from pearl.profiler.profiler import plan_devices

BLOCK_S = 0.05


def works(devices: list[str]) -> dict[str, tuple[Callable[[], object], int]]:
    """name -> (the fixed work, torch threads while it runs)."""
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    x = np.arange(20_000, dtype=np.float64)

    def python_loop() -> int:
        total = 0
        for i in range(20_000):
            total += i * i
        return total

    fixed = {"python loop": (python_loop, 1), "numpy x*x sum": (lambda: (x * x).sum(), 1),
             "matmul 1 thread": (lambda: torch.mm(a, b), 1), "matmul 2 threads": (lambda: torch.mm(a, b), 2)}
    threads = torch.get_num_threads()  # as a profile runs pearl's kernels
    return fixed | {f"learn64 {d}": (fixed_learn(d), threads) for d in devices}


def fixed_learn(device: str) -> Callable[[], object]:
    """One DQN learn step at batch 64 on device, ended by the device's synchronize: always the same batch,
    sampled once from a replay prefilled as a quick profile prefills it."""
    env = algorithm("dqn").profile_env
    config, spec = preset("dqn", env), env_spec(env)
    adapter, rng = open_adapter(device, threads=1), np.random.default_rng(0)
    replay = adapter.make_replay(config, spec, seed=0)
    prefill(replay, spec, GRIDS["quick"].prefill, rng)
    learner = adapter.make_learn(config, spec, init_params(config, spec, seed=0))
    batch = replay.sample(64, 0.4)

    def learn() -> None:
        learner.learn(batch)
        adapter.synchronize()

    return learn


def block_median(work: Callable[[], object]) -> float:
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < BLOCK_S:
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to measure")
    parser.add_argument("--window", type=float, default=20.0, help="seconds per window (about one quick profile)")
    parser.add_argument("--device", action="append", dest="devices", help="a device for pearl's learn (repeatable)")
    args = parser.parse_args()
    if args.window <= 0 or args.seconds < 2 * args.window:
        print("error: --window must be positive and --seconds at least two windows", file=sys.stderr)
        return 2
    try:
        devices = args.devices or [d.id for d in plan_devices(ProfileOptions())]
        todo = works(devices)
    except PearlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    blocks: dict[str, list[tuple[float, float]]] = {name: [] for name in todo}  # (seconds in, block median)
    t_start = time.perf_counter()
    while (now := time.perf_counter() - t_start) < args.seconds:
        for name, (work, threads) in todo.items():
            torch.set_num_threads(threads)
            blocks[name].append((time.perf_counter() - t_start, block_median(work)))
        print(f"\r{now:5.0f} / {args.seconds:.0f} s", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    windows = int(args.seconds // args.window)
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs, {platform.platform()}")
    print(f"{args.seconds:g} s in {windows} windows of {args.window:g} s; each figure the median of its window's "
          f"{BLOCK_S * 1e3:g} ms block medians, µs")
    print(f"{'work':18} " + " ".join(f"{'w' + str(i + 1):>8}" for i in range(windows))
          + f" {'max/min':>8} {'pairs within ±25 %':>19}")
    for name, rows in blocks.items():
        medians = [float(np.median([m for t, m in rows if i * args.window <= t < (i + 1) * args.window]))
                   for i in range(windows)]
        within = sum(abs(b / a - 1) <= 0.25 for a, b in zip(medians, medians[1:]))
        spread = max(m for _, m in rows) / min(m for _, m in rows)
        print(f"{name:18} " + " ".join(f"{m * 1e6:8.1f}" for m in medians)
              + f" {max(medians) / min(medians):8.2f} {within:>12} of {windows - 1}"
              + f"   (blocks: max/min {spread:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
