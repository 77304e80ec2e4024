"""Are two `pearl profile --quick` runs, back to back, the same measurement? (Not a test: it prints.)

    python benchmarks/profile_repeatability.py [--algo dqn|ddpg|all] [--device D ...] [--threshold-us 100]

Runs the quick profile twice in this process and compares the medians of every (workload, kernel, device,
batch) whose median is above the threshold in the first run: the ratio run2/run1 per entry, and how many lie
within ±25 %.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from pearl.errors import PearlError
from pearl.profiling.profiler import ProfileOptions, run_profile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=["dqn", "ddpg", "all"], default="all")
    parser.add_argument("--device", action="append", dest="devices")
    parser.add_argument("--threshold-us", type=float, default=100.0)
    args = parser.parse_args()
    options = ProfileOptions(quick=True, algos=("dqn", "ddpg") if args.algo == "all" else (args.algo,),
                             devices=tuple(args.devices) if args.devices else None)
    try:
        runs, walls = [], []
        for _ in range(2):
            t0 = time.perf_counter()
            runs.append(run_profile(options))
            walls.append(time.perf_counter() - t0)
    except PearlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    first = {(k.workload, k.kernel, k.device, k.batch): k.median_s for k in runs[0].kernels}
    second = {(k.workload, k.kernel, k.device, k.batch): k.median_s for k in runs[1].kernels}
    rows = [(key, first[key], second[key]) for key in first if first[key] * 1e6 > args.threshold_us and key in second]
    print(f"machine: {runs[0].host.get('cpu')}, {os.cpu_count()} CPUs, {platform.platform()}")
    print(f"quick profiles: {walls[0]:.1f} s and {walls[1]:.1f} s; entries above {args.threshold_us:g} µs: {len(rows)}")
    print(f"{'workload':34} {'kernel':16} {'device':11} {'batch':>5} {'run1 µs':>10} {'run2 µs':>10} {'ratio':>6}")
    within = 0
    for (workload, kernel, device, batch), a, b in sorted(rows):
        ratio = b / a
        within += abs(ratio - 1) <= 0.25
        mark = "" if abs(ratio - 1) <= 0.25 else "  <- outside"
        print(f"{workload:34} {kernel:16} {device:11} {batch:5d} {a * 1e6:10.1f} {b * 1e6:10.1f} {ratio:6.2f}{mark}")
    print(f"within ±25 %: {within} of {len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
