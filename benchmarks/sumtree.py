"""Time batched SumTree.sample and SumTree.update (numpy, host) and print a small table.

    python benchmarks/sumtree.py [--capacity 1048576] [--batch 128] [--arity 16] [--seconds 2]

The tree is filled with random priorities first. Each operation is warmed up, then repeated until
--seconds have passed; every call is timed on its own, and the table gives the median and the 90th
percentile in microseconds per batched call. Values and indices are fresh for every call (drawn before
the timer starts), so the numbers include cache misses on a large tree, as in training.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable

import numpy as np

from pearl.replay import SumTree


def time_op(prepare: Callable[[], object], op: Callable[[object], object], seconds: float,
            warmup: int = 200) -> np.ndarray:
    """Per-call durations (µs) of op(prepare()), repeated until `seconds` of wall time have passed."""
    for _ in range(warmup):
        op(prepare())
    durations = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        arg = prepare()  # outside the timed region
        t0 = time.perf_counter_ns()
        op(arg)
        durations.append(time.perf_counter_ns() - t0)
    return np.asarray(durations, dtype=np.float64) / 1e3


def cpu_name() -> str:
    """platform.processor(), which is often empty on Linux; then the model name from /proc/cpuinfo."""
    name = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        model = ""
    return " / ".join(x for x in (name, model) if x) or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=2**20)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--arity", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=2.0, help="minimum timed duration per operation")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    tree = SumTree(args.capacity, args.arity)
    t0 = time.perf_counter()
    tree.update(np.arange(args.capacity), rng.random(args.capacity))
    fill_s = time.perf_counter() - t0

    ops = {
        "sample": (lambda: None, lambda _: tree.sample(args.batch, rng)),
        "update": (lambda: (rng.integers(0, args.capacity, args.batch), rng.random(args.batch)),
                   lambda a: tree.update(*a)),
    }
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs, "
          f"{platform.python_implementation()} {platform.python_version()}, numpy {np.__version__}")
    print(f"tree: capacity {args.capacity}, arity {args.arity}, depth {tree.depth}; "
          f"fill of all leaves {fill_s * 1e3:.1f} ms")
    print(f"{'op':<8} {'batch':>6} {'calls':>8} {'median µs':>10} {'p90 µs':>10}")
    for name, (prepare, op) in ops.items():
        us = time_op(prepare, op, args.seconds)
        print(f"{name:<8} {args.batch:>6} {us.size:>8} {np.median(us):>10.1f} {np.percentile(us, 90):>10.1f}")


if __name__ == "__main__":
    main()
