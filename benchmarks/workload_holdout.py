"""How good are scaled figures? Measure several workload shapes, hold each out, predict it from the others.

    python benchmarks/workload_holdout.py [--out FILE] [--profile FILE] [--passes 2] [--device cpu ...] [--each]

Profiles (quick grid) the shapes of SHAPES on this machine into one profile (--out, default
profiles/holdout-<host>.json), `--passes` times (default 2; each timing keeps its lowest median, as load from
other work only adds time), or reads one written before (--profile). Then, for every workload W of it:
a CostModel of the profile without W (its workload entry and every timing of it, so W takes no part in the
device's work fit either) predicts each of W's measured kernel timings from the nearest other workload of the
same algo, scaled by their work (pearl/costmodel/model.py, "Scaled figures"). The error is
|predicted − measured| / measured. The table gives, per kernel and device, the number of points and the
median and worst error of the scaled prediction, and beside them those of the nearest's time unscaled (what a
plan would use without scaling), so the table shows what the scaling adds. --each prints every point.
Only measured timings take part. A bad option or profile prints one `error: ...` line and exits 2.
"""

from __future__ import annotations

import argparse
import platform
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from pearl.costmodel import CostModel
from pearl.errors import PearlError
from pearl.profile.format import Profile, ProfileError, load_profile, merge_profiles, save_profile

#: (algo, env, hidden, batch size): networks of 64-64 to 400-300, batches 32 to 256, observations of 2 to 6
SHAPES = [
    ("dqn", "Acrobot-v1", (64, 64), 32),
    ("dqn", "Acrobot-v1", (128, 128), 64),
    ("dqn", "Acrobot-v1", (256, 256), 128),
    ("dqn", "Acrobot-v1", (400, 300), 256),
    ("dqn", "CartPole-v1", (256, 256), 64),
    ("dqn", "MountainCar-v0", (128, 128), 128),
    ("ddpg", "Pendulum-v1", (64, 64), 64),
    ("ddpg", "Pendulum-v1", (256, 256), 128),
    ("ddpg", "Pendulum-v1", (400, 300), 256),
    ("ddpg", "MountainCarContinuous-v0", (400, 300), 100),
]

Row = tuple[str, str, str, int, str, float, float, float]


def measure(devices: tuple[str, ...], out: Path, passes: int) -> Profile:
    """Every shape profiled `passes` times, the passes one after the other; each timing keeps the lowest of its
    passes' medians (load from other work on a shared machine only ever adds time)."""
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.profiler import run_profile
    from pearl.runtime.local import PROBES

    merged: Profile | None = None
    for i in range(passes):
        for algo, env, hidden, batch in SHAPES:
            print(f"pass {i + 1}/{passes}: profiling {algo} {env} hidden {hidden} batch {batch}", flush=True)
            one = run_profile(ProfileOptions(quick=True, algos=(algo,), env=env, hidden=hidden, batch_size=batch,
                                             devices=devices or None), probes=PROBES)
            merged = one if merged is None else _lowest(merge_profiles(merged, one, str(out)), merged)
            save_profile(merged, out)  # an interrupted sweep keeps what it measured
    assert merged is not None
    return merged


def _lowest(new: Profile, old: Profile) -> Profile:
    """`new` with each kernel timing replaced by `old`'s of the same point where that one is lower."""
    before = {(t.workload, t.kernel, t.device, t.batch): t for t in old.kernels}
    kernels = []
    for t in new.kernels:
        o = before.get((t.workload, t.kernel, t.device, t.batch))
        kernels.append(o if o is not None and o.median_s < t.median_s else t)
    return replace(new, kernels=kernels)


def holdout(profile: Profile) -> list[Row]:
    """(workload, kernel, device, batch, nearest, scaled s, unscaled s, measured s) for each measured timing."""
    rows = []
    for held in profile.workloads:
        rest = replace(profile, workloads=[w for w in profile.workloads if w.key != held.key],
                       kernels=[t for t in profile.kernels if t.workload != held.key], in_situ=[], weight_sync=[])
        model = CostModel(rest)
        for t in profile.kernels:
            if t.workload != held.key or t.source != "measured":
                continue
            try:
                scaled = model.kernel_time(t.kernel, t.device, held, t.batch)
            except KeyError:
                continue  # no other workload of that algo times that kernel on that device
            nearest = scaled.scaled_from
            unscaled = model.kernel_time(t.kernel, t.device, nearest, t.batch).seconds
            rows.append((held.key, t.kernel, t.device, t.batch, nearest, scaled.seconds, unscaled, t.median_s))
    return rows


def _error(predicted: float, measured: float) -> float:
    return abs(predicted - measured) / measured if measured > 0 else float("nan")


def report(rows: list[Row], each: bool) -> None:
    if each:
        print(f"{'held out':<34} {'kernel':<16} {'device':<11} {'batch':>5} {'from':<34} {'scaled':>7} "
              f"{'unscaled':>8}")
        for key, kernel, device, batch, nearest, scaled, unscaled, measured in rows:
            print(f"{key:<34} {kernel:<16} {device:<11} {batch:>5} {nearest:<34} {_error(scaled, measured):>7.1%} "
                  f"{_error(unscaled, measured):>8.1%}")
        print()
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _, kernel, device, _, _, scaled, unscaled, measured in rows:
        groups.setdefault((kernel, device), []).append((_error(scaled, measured), _error(unscaled, measured)))
    print("each workload held out, predicted from the nearest other one: |predicted - measured| / measured")
    print(f"{'kernel':<16} {'device':<11} {'points':>6} {'scaled median':>14} {'worst':>8} "
          f"{'unscaled median':>16} {'worst':>8}")
    for (kernel, device), errors in sorted(groups.items()):
        e = np.asarray(errors)
        print(f"{kernel:<16} {device:<11} {len(e):>6} {np.nanmedian(e[:, 0]):>14.1%} {np.nanmax(e[:, 0]):>8.1%} "
              f"{np.nanmedian(e[:, 1]):>16.1%} {np.nanmax(e[:, 1]):>8.1%}")
    every = np.asarray([(_error(s, m), _error(u, m)) for *_, s, u, m in rows])
    print(f"overall: {len(every)} points, scaled median {np.nanmedian(every[:, 0]):.1%} (worst "
          f"{np.nanmax(every[:, 0]):.1%}), unscaled median {np.nanmedian(every[:, 1]):.1%} (worst "
          f"{np.nanmax(every[:, 1]):.1%})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=f"profiles/holdout-{platform.node() or 'host'}.json",
                        help="profile to write the measured shapes to (%(default)s)")
    parser.add_argument("--profile", default=None, help="read this profile instead of measuring")
    parser.add_argument("--device", action="append", default=[], help="profile only this device (repeatable)")
    parser.add_argument("--passes", type=int, default=2, help="profile every shape this many times (%(default)s)")
    parser.add_argument("--each", action="store_true", help="also print every held-out point")
    args = parser.parse_args(argv)
    if args.passes < 1:
        print(f"error: --passes must be at least 1, got {args.passes}")
        return 2
    try:
        profile = load_profile(args.profile) if args.profile else measure(tuple(args.device), Path(args.out),
                                                                           args.passes)
        rows = holdout(profile)
    except (PearlError, ProfileError, OSError, ValueError) as exc:
        print(f"error: {exc}")
        return 2
    if not rows:
        print("error: the profile has no two workloads of one algo to predict each other from")
        return 2
    report(rows, args.each)
    return 0


if __name__ == "__main__":
    sys.exit(main())
