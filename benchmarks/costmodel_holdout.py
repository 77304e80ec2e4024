"""How well does the cost model interpolate? Leave-one-out over each kernel's measured batch sizes.

    python benchmarks/costmodel_holdout.py [profiles/reference.json] [--each]

For every (workload, kernel, device) of the profile with at least 3 measured batch sizes, each interior batch
size (not the smallest, not the largest) is held out in turn: a CostModel built from the other measured batch
sizes of that series predicts it, and the error is |predicted − measured| / measured, measured being the
held-out raw median. The table gives, per kernel and device (over workloads), the number of held-out points
and the median and largest error; the last line is the median over all held-out points. --each also prints
every held-out point. Only measured entries take part (modelled ones come from the roofline, not the clock).

A missing or invalid profile prints one `error: ...` line and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from pearl.costmodel import CostModel
from pearl.profile.format import KernelTiming, Profile, ProfileError, load_profile

DEFAULT_PROFILE = Path("profiles/reference.json")


def holdout_errors(profile: Profile) -> list[tuple[str, str, str, int, float, float]]:
    """(workload, kernel, device, held-out batch, predicted s, measured s) for every interior measured batch."""
    series: dict[tuple[str, str, str], list[KernelTiming]] = {}
    for t in profile.kernels:
        if t.source == "measured":
            series.setdefault((t.workload, t.kernel, t.device), []).append(t)
    out = []
    for (workload, kernel, device), timings in sorted(series.items()):
        timings = sorted(timings, key=lambda t: t.batch)
        if len({t.batch for t in timings}) < 3:
            continue
        for i in range(1, len(timings) - 1):
            held = timings[i]
            rest = timings[:i] + timings[i + 1:]
            model = CostModel(replace(profile, kernels=rest, env_step=[], transfers=[], power=[]))
            predicted = model.kernel_time(kernel, device, workload, held.batch).seconds
            out.append((workload, kernel, device, held.batch, predicted, held.median_s))
    return out


def relative_error(predicted: float, measured: float) -> float:
    return abs(predicted - measured) / measured if measured > 0 else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("profile", nargs="?", default=str(DEFAULT_PROFILE), help="profile JSON (%(default)s)")
    parser.add_argument("--each", action="store_true", help="also print every held-out point")
    args = parser.parse_args(argv)
    path = Path(args.profile)
    if not path.is_file():
        print(f"error: {path}: no such profile; `pearl profile --out {path}` makes one")
        return 2
    try:
        profile = load_profile(path)
        rows = holdout_errors(profile)
    except (ProfileError, ValueError) as exc:
        print(f"error: {exc}")
        return 2
    if not rows:
        print(f"{path}: no (workload, kernel, device) has 3 or more measured batch sizes; nothing to hold out")
        return 0

    if args.each:
        print(f"{'workload':<36} {'kernel':<16} {'device':<14} {'batch':>7} {'predicted s':>12} "
              f"{'measured s':>12} {'error':>8}")
        for workload, kernel, device, batch, predicted, measured in rows:
            print(f"{workload:<36} {kernel:<16} {device:<14} {batch:>7} {predicted:>12.4g} {measured:>12.4g} "
                  f"{relative_error(predicted, measured):>8.1%}")
        print()

    groups: dict[tuple[str, str], list[float]] = {}
    for _, kernel, device, _, predicted, measured in rows:
        groups.setdefault((kernel, device), []).append(relative_error(predicted, measured))
    print(f"held-out interior batch sizes of {path}: |predicted - measured| / measured")
    print(f"{'kernel':<16} {'device':<14} {'points':>6} {'median':>8} {'max':>8}")
    for (kernel, device), errors in sorted(groups.items()):
        e = np.asarray(errors)
        print(f"{kernel:<16} {device:<14} {len(e):>6} {np.nanmedian(e):>8.1%} {np.nanmax(e):>8.1%}")
    overall = np.asarray([relative_error(p, m) for *_, p, m in rows])
    print(f"overall median error {np.nanmedian(overall):.1%} over {len(overall)} held-out points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
