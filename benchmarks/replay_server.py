"""Time the replay server through Ray on one node against pearl's in-process replay, side by side.

    python benchmarks/replay_server.py [--capacity 1048576] [--rounds 6] [--seconds 0.15]

Prioritized replay of --capacity CartPole-v1 transitions, filled and given random priorities first, on:

- ``in process``: the torch cpu adapter's replay (`open_adapter("cpu").make_replay`), what the local
  launchers use today;
- ``sharded S=4 (no Ray)``: `ShardedReplay` with four in-process shards, so the cost of sharding itself
  (two passes over the shards, reassembly) is told apart from Ray's;
- ``Ray S=1`` and ``Ray S=4``: `RemoteShardedReplay` over 1 and 4 `ReplayShard` actors on a local Ray
  instance started by `pearl.runtime.ray.session.start_local_ray` (loopback, no dashboard).

Operations: ``sample B`` (B = 64, 128 rows, beta 0.4: union draws, gather, importance weights, and for Ray two
batched round trips), ``sample 128 x8`` (`ShardedReplay.sample_many`: 8 batches against one reading of the
shards, two round trips in all; the time per batch; in process: 8 calls), ``insert 64`` (one batch of 64
rows, to completion: for Ray the send plus `flush`), ``insert 64 x16`` (16 batches sent back to back, then one
flush; the time per batch, i.e. pipelined throughput) and ``update 128`` (priority update of 128 slots, to
completion; the learner itself sends it without waiting). Each figure is the median and 90th percentile of
single calls, pooled over --rounds rounds that visit every side in turn (rotating the order; the garbage
collector off while timing), after a warm-up.
Not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pearl.hostinfo import cpu_name
from pearl.adapters import open_adapter
from pearl.algos import DQNConfig
from pearl.envs import env_spec
from pearl.profiler.timing import durations
from pearl.runtime.ray import session
from pearl.runtime.ray.placement import ShardPlacement
from pearl.runtime.ray.replay_client import RemoteShardedReplay
from pearl.runtime.replay_server import ShardedReplay
from pearl.runtime.replay_shard import encode_indices
from pearl.types import EnvSpec, PriorityUpdate, TransitionBatch

INSERT_ROWS = 64
UPDATE_ROWS = 128
PIPELINE = 16
MANY = 8


@dataclass
class Side:
    """One replay under test: how to sample, insert, wait for its sent work, and update priorities."""

    name: str
    sample: Callable[[int], object]
    sample_many: Callable[[int, int], object]
    insert: Callable[[TransitionBatch], object]
    sync: Callable[[], None]
    update: Callable[[np.ndarray, np.ndarray], object]
    indices: Callable[[int], np.ndarray]


def transitions(rng: np.random.Generator, count: int, spec: EnvSpec) -> TransitionBatch:
    obs = rng.normal(size=(count, spec.obs_dim)).astype(np.float32)
    return TransitionBatch(obs, rng.integers(0, spec.action_dim, count), rng.normal(size=count).astype(np.float32),
                           rng.normal(size=(count, spec.obs_dim)).astype(np.float32),
                           (rng.random(count) < 0.01).astype(np.float32))


def fill(insert: Callable[[TransitionBatch], object], capacity: int, spec: EnvSpec, chunk: int = 1 << 16) -> None:
    rng = np.random.default_rng(0)
    for start in range(0, capacity, chunk):
        insert(transitions(rng, min(chunk, capacity - start), spec))


def torch_side(config: DQNConfig, spec: EnvSpec) -> Side:
    replay = open_adapter("cpu").make_replay(config, spec, seed=0)
    fill(replay.insert, config.buffer_size, spec)
    replay.update_priorities(PriorityUpdate(np.arange(config.buffer_size),
                                            np.random.default_rng(1).exponential(size=config.buffer_size)))
    def many(k: int, b: int) -> None:
        for _ in range(k):
            replay.sample(b, 0.4)

    return Side("in process (torch cpu)", lambda b: replay.sample(b, 0.4), many, replay.insert, lambda: None,
                lambda i, td: replay.update_priorities(PriorityUpdate(i, td)), lambda b: replay.sample(b, 0.4).indices)


def sharded_side(name: str, replay: ShardedReplay, spec: EnvSpec, sync: Callable[[], None]) -> Side:
    fill(replay.insert, replay.capacity, spec, chunk=min(1 << 16, replay.shard_capacity))  # whole batches per shard
    rng = np.random.default_rng(1)
    for s in range(replay.num_shards):  # random priorities everywhere, in batches a shard takes at once
        replay.update_priorities(encode_indices(s, np.arange(replay.shard_capacity)),
                                 rng.exponential(size=replay.shard_capacity))
    sync()
    return Side(name, lambda b: replay.sample(b, 0.4), lambda k, b: replay.sample_many(k, b, 0.4), replay.insert,
                sync, replay.update_priorities,
                lambda b: replay.sample(b, 0.4).indices)


def operations(side: Side, spec: EnvSpec) -> dict[str, tuple[Callable[[], object], Callable[[], None], int]]:
    """op name -> (call, sync, batches per call)."""
    rng = np.random.default_rng(2)
    batch = transitions(rng, INSERT_ROWS, spec)
    idx = side.indices(UPDATE_ROWS)
    td = rng.normal(size=UPDATE_ROWS).astype(np.float32)

    def pipelined() -> None:
        for _ in range(PIPELINE):
            side.insert(batch)

    return {"sample 64": (lambda: side.sample(64), lambda: None, 1),
            "sample 128": (lambda: side.sample(128), lambda: None, 1),
            f"sample 128 x{MANY}": (lambda: side.sample_many(MANY, 128), lambda: None, MANY),
            f"insert {INSERT_ROWS}": (lambda: side.insert(batch), side.sync, 1),
            f"insert {INSERT_ROWS} x{PIPELINE}": (pipelined, side.sync, PIPELINE),
            f"update {UPDATE_ROWS}": (lambda: side.update(idx, td), side.sync, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacity", type=int, default=1 << 20)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=0.15, help="time per side, op and round")
    args = parser.parse_args()

    spec = env_spec("CartPole-v1")
    config = DQNConfig(buffer_size=args.capacity, prioritized=True, batch_size=128)
    t0 = time.perf_counter()
    session.start_local_ray()
    try:
        sides = [torch_side(config, spec),
                 sharded_side("sharded S=4 (no Ray)", ShardedReplay.from_config(config, spec, 4, seed=0), spec,
                              lambda: None)]
        for shards in (1, 4):
            remote = RemoteShardedReplay.place(config, spec, shards, seed=0, placement=ShardPlacement(num_cpus=0.25))
            sides.append(sharded_side(f"Ray S={shards}", remote, spec, remote.flush))
        print(f"filled in {time.perf_counter() - t0:.1f} s", flush=True)
        ops = {side.name: operations(side, spec) for side in sides}
        names = list(ops[sides[0].name])
        times: dict[tuple[str, str], list[float]] = {(s.name, op): [] for s in sides for op in names}
        for r in range(args.rounds):
            order = sides[r % len(sides):] + sides[:r % len(sides)]
            for op in names:
                for side in order:
                    call, sync, per = ops[side.name][op]
                    got = durations(call, sync, min_time=args.seconds, warmup=3 if r else 20, min_samples=5)
                    times[(side.name, op)] += [t / per for t in got]
        report(sides, names, times, args.capacity, time.perf_counter() - t0)
    finally:
        session.shutdown()


def report(sides: list[Side], names: list[str], times: dict[tuple[str, str], list[float]], capacity: int,
           wall: float) -> None:
    print(f"\nmachine: {cpu_name()}, {os.cpu_count()} cores; replay capacity {capacity:,}, prioritized, "
          f"CartPole-v1; {wall:.0f} s in all")
    width = max(len(s.name) for s in sides)
    print("\nper call: median / p90 in µs (calls timed)")
    print(f"{'op':<16}" + "".join(f"{s.name:>{width + 4}}" for s in sides))
    for op in names:
        cells = []
        for s in sides:
            us = np.asarray(times[(s.name, op)]) * 1e6
            cells.append(f"{np.median(us):,.0f} / {np.percentile(us, 90):,.0f} ({us.size})")
        print(f"{op:<16}" + "".join(f"{c:>{width + 4}}" for c in cells))
    print("\nthroughput at the median: rows/s")
    print(f"{'op':<16}" + "".join(f"{s.name:>{width + 4}}" for s in sides))
    for op in names:
        rows = int(op.split()[1])
        cells = [f"{rows / np.median(times[(s.name, op)]):,.0f}" for s in sides]
        print(f"{op:<16}" + "".join(f"{c:>{width + 4}}" for c in cells))


if __name__ == "__main__":
    main()
