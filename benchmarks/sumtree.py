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

import numpy as np

from pearl.hostinfo import cpu_name
from pearl.profiler.timing import durations
from pearl.replay import SumTree


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
        us = np.asarray(durations(op, lambda: None, prepare=prepare, min_time=args.seconds, warmup=200,
                                  min_samples=1)) * 1e6
        print(f"{name:<8} {args.batch:>6} {us.size:>8} {np.median(us):>10.1f} {np.percentile(us, 90):>10.1f}")


if __name__ == "__main__":
    main()
