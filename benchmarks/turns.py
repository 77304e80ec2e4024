"""Do a one-thread learner and the actors share a crowded host's lanes, or take turns? Stand-ins of fixed work.

    python benchmarks/turns.py [--segments 1500] [--actors 1 2 3]

Each case runs the segment loop of the local launcher with stand-ins: n actor processes spin a fixed share of a
segment's actor work (A/n seconds each, as a segment splits among its actors), then wake the learner through an
eventfd; the learner (this process) waits for every share of segment k, spins l seconds (its update), publishes
and wakes the actors, who collect segment k + 2 with it (policy lag 1: they run a segment ahead). Printed per case:
the measured period (seconds a segment, over the last two thirds of the run) and two predictions of it, each
÷ the measurement:
  - sharing: the planner's processor sharing without turns, the largest of the learner's process l + κ·n·h and
    one actor's h + κ·(l + (n − 1)·h), κ = (N − L)/((N − 1)·L), N = n + 1 processes on L lanes (and of h, l
    alone when N ≤ L);
  - turns: as sharing, and with as many actors as lanes (n = L) whose work outruns the lane the learner leaves
    them (n·h > (L − 1)·l) also n·h + l: the learner, woken while the actors hold every lane, runs only once
    they stop, the actors then wait for its weights, and their shares run one after another
    (pearl/planner/accounting.py, contention[turns], which says what real runs measured).
The summary line gives the median and worst |prediction − measured| / measured of each over the cases where
the processes outnumber the lanes. Nothing else should run meanwhile; the figures are this machine's.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import select
import statistics
import sys
import time

import numpy as np


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def wait(fd: int) -> None:
    if select.select([fd], [], [], 0.01)[0]:
        try:
            os.eventfd_read(fd)
        except BlockingIOError:
            pass


def actor(i: int, work: float, segments: int, done_buf, published_buf, wake_learner: int, wake_me: int) -> None:
    done, published = np.frombuffer(done_buf, np.int64), np.frombuffer(published_buf, np.int64)
    for k in range(segments):
        while published[0] < k - 2:  # segment k acts with the weights of segment k − 2
            wait(wake_me)
        spin(work)
        done[i] = k
        os.eventfd_write(wake_learner, 1)


def period(n: int, actor_work: float, learner_work: float, segments: int) -> float:
    """Seconds a segment of n actor stand-ins (actor_work each) and a learner stand-in (learner_work)."""
    done_buf, published_buf = mp.RawArray("b", 8 * n), mp.RawArray("b", 8)
    done, published = np.frombuffer(done_buf, np.int64), np.frombuffer(published_buf, np.int64)
    done[:], published[0] = -1, -1
    wake_learner = os.eventfd(0, os.EFD_NONBLOCK)
    wakes = [os.eventfd(0, os.EFD_NONBLOCK) for _ in range(n)]
    procs = [mp.Process(target=actor, args=(i, actor_work, segments, done_buf, published_buf, wake_learner, wakes[i]))
             for i in range(n)]
    for p in procs:
        p.start()
    start = segments // 3
    t0 = 0.0
    for k in range(segments):
        while done.min() < k:
            wait(wake_learner)
        if k == start:
            t0 = time.perf_counter()
        spin(learner_work)
        published[0] = k
        for fd in wakes:
            os.eventfd_write(fd, 1)
    seconds = (time.perf_counter() - t0) / (segments - start)
    for p in procs:
        p.join()
    for fd in (wake_learner, *wakes):
        os.close(fd)
    return seconds


def sharing(n: int, h: float, l: float, lanes: int) -> float:
    N = n + 1
    if N <= lanes:
        return max(h, l)
    kappa = (N - lanes) / ((N - 1) * lanes)
    return max(h, l, l + kappa * n * h, h + kappa * (l + (n - 1) * h))


def turns(n: int, h: float, l: float, lanes: int) -> float:
    shared = sharing(n, h, l, lanes)
    if n != lanes or n * h <= (lanes - 1) * l:
        return shared
    return max(shared, n * h + l)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=1500, help="segments a case runs")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 3], help="actor counts to run")
    args = parser.parse_args()
    lanes = len(os.sched_getaffinity(0))
    if args.segments < 30 or min(args.actors) < 1:
        print("error: --segments ≥ 30 and --actors ≥ 1", file=sys.stderr)
        raise SystemExit(2)
    mp.set_start_method("fork")
    print(f"{lanes} lanes; a segment's actor work A (split among n actors) and the learner's l, in ms", flush=True)
    errors: dict[str, list[float]] = {"sharing": [], "turns": []}
    for total_ms in (0.4, 0.8, 1.6, 3.2):
        for learner_ms in (0.3, 0.7, 1.5):
            for n in args.actors:
                h, l = total_ms / 1000 / n, learner_ms / 1000
                measured = period(n, h, l, args.segments)
                shared, turned = sharing(n, h, l, lanes), turns(n, h, l, lanes)
                if n + 1 > lanes:
                    errors["sharing"].append(abs(shared - measured) / measured)
                    errors["turns"].append(abs(turned - measured) / measured)
                print(f"A {total_ms:.1f}  l {learner_ms:.1f}  n {n}: measured {measured * 1e3:6.3f}  sharing "
                      f"{shared * 1e3:6.3f} ({shared / measured:4.2f}×)  turns {turned * 1e3:6.3f} "
                      f"({turned / measured:4.2f}×)", flush=True)
    for name, errs in errors.items():
        if errs:
            print(f"{name}: over {len(errs)} crowded cases, median error {statistics.median(errs):.1%}, "
                  f"worst {max(errs):.1%}")


if __name__ == "__main__":
    main()
