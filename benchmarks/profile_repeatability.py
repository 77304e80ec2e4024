"""Are two `pearl profile --quick` runs, back to back, the same measurement? (Not a test: it prints.)

    python benchmarks/profile_repeatability.py [--algo dqn|ddpg|all] [--device D ...] [--threshold-us 100]
                                               [--runs N]

Runs the quick profile N times (default 2) back to back in this process and compares each run with the one
before it: for every (workload, kernel, device, batch) whose median is above the threshold in the earlier
run, the ratio later/earlier, and how many lie within ±25 %. With more than two runs it ends with one line
per pair, so one pair's luck (this machine's speed drifts over seconds) is not taken for the rule.
`benchmarks/machine_drift.py` measures how steady the machine itself is over the same span: the ceiling for
this comparison.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from pearl.errors import PearlError
from pearl.profile.format import Profile
from pearl.profiler.options import ProfileOptions
from pearl.profiler.profiler import run_profile
from pearl.runtime.local import PROBES


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=["dqn", "ddpg", "all"], default="all")
    parser.add_argument("--device", action="append", dest="devices")
    parser.add_argument("--threshold-us", type=float, default=100.0)
    parser.add_argument("--runs", type=int, default=2, help="quick profiles to take back to back (at least 2)")
    args = parser.parse_args()
    options = ProfileOptions(quick=True, algos=("dqn", "ddpg") if args.algo == "all" else (args.algo,),
                             devices=tuple(args.devices) if args.devices else None)
    if args.runs < 2:
        parser.error("--runs must be at least 2")
    try:
        runs, walls = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            runs.append(run_profile(options, probes=PROBES))
            walls.append(time.perf_counter() - t0)
    except PearlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"machine: {runs[0].host.get('cpu')}, {os.cpu_count()} CPUs, {platform.platform()}")
    print(f"quick profiles: {', '.join(f'{w:.1f} s' for w in walls)}")
    summary = []
    for i in range(1, len(runs)):
        within, total = compare(runs[i - 1], runs[i], args.threshold_us, f"run{i}", f"run{i + 1}")
        summary.append(f"run{i} -> run{i + 1}: {within} of {total} within ±25 %")
    if len(summary) > 1:
        print("\n".join(summary))
    return 0


def compare(earlier: Profile, later: Profile, threshold_us: float, a: str, b: str) -> tuple[int, int]:
    """Print the per-entry table of two profiles; return (entries within ±25 %, entries above the threshold)."""
    first = {(k.workload, k.kernel, k.device, k.batch): k.median_s for k in earlier.kernels}
    second = {(k.workload, k.kernel, k.device, k.batch): k.median_s for k in later.kernels}
    rows = [(key, first[key], second[key]) for key in first if first[key] * 1e6 > threshold_us and key in second]
    print(f"\n{a} -> {b}: entries above {threshold_us:g} µs in {a}: {len(rows)}")
    print(f"{'workload':34} {'kernel':16} {'device':11} {'batch':>5} {a + ' µs':>10} {b + ' µs':>10} {'ratio':>6}")
    within = 0
    for (workload, kernel, device, batch), x, y in sorted(rows):
        ratio = y / x
        within += abs(ratio - 1) <= 0.25
        mark = "" if abs(ratio - 1) <= 0.25 else "  <- outside"
        print(f"{workload:34} {kernel:16} {device:11} {batch:5d} {x * 1e6:10.1f} {y * 1e6:10.1f} {ratio:6.2f}{mark}")
    print(f"within ±25 %: {within} of {len(rows)}")
    return within, len(rows)


if __name__ == "__main__":
    sys.exit(main())
