"""Time replay on an OpenCL device against the numpy host path and print a small table.

    python benchmarks/opencl_replay.py [--device opencl:0:0] [--capacity 1048576] [--batch 128] [--seconds 1]

Replay part: prioritized replay of --capacity transitions, filled and given random priorities first.

- ``sample+gather``: OpenCLReplay.sample (stratified descent of the float32 device tree, gather of the B
  rows, importance weights), against ReplayIndex.sample (numpy SumTree) plus a numpy take of the B rows;
- ``update``: OpenCLReplay.update_priorities with the sampled device slots and device TD errors, against
  ReplayIndex.update_priorities (numpy SumTree.update) with host arrays.

Each operation is warmed up, then repeated until --seconds have passed; every call is timed on its own,
OpenCL calls up to queue.finish() (the kernels have run, not just been enqueued), and the table gives the
median and the 90th percentile in microseconds per batched call, and numpy median / OpenCL median.
Not a test: numbers depend on the machine and on the OpenCL implementation (PoCL on a CPU pays a launch
overhead per kernel that a GPU or an FPGA does not pay the same way).
"""

from __future__ import annotations

import argparse
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pearl.adapters.opencl.replay import OpenCLReplay
from pearl.adapters.opencl.runtime import CLRuntime
from pearl.algos import DQNConfig
from pearl.profiler.timing import durations
from pearl.replay import ReplayIndex
from pearl.types import EnvSpec, PriorityUpdate, TransitionBatch


@dataclass
class Row:
    part: str
    op: str
    backend: str
    calls: int
    median_us: float
    p90_us: float


def time_op(prepare: Callable[[], object], op: Callable[[object], object], seconds: float) -> np.ndarray:
    """Per-call microseconds of op(prepare()); op waits for its own device work (queue.finish)."""
    return np.asarray(durations(op, lambda: None, prepare=prepare, min_time=seconds, warmup=50, min_samples=1)) * 1e6


def row(part: str, op: str, backend: str, us: np.ndarray) -> Row:
    return Row(part, op, backend, us.size, float(np.median(us)), float(np.percentile(us, 90)))


def random_transitions(rng: np.random.Generator, count: int, spec: EnvSpec) -> TransitionBatch:
    obs = rng.normal(size=(count, spec.obs_dim)).astype(np.float32)
    return TransitionBatch(obs, rng.integers(0, spec.action_dim, count), rng.normal(size=count).astype(np.float32),
                           rng.normal(size=(count, spec.obs_dim)).astype(np.float32),
                           (rng.random(count) < 0.01).astype(np.float32))


def bench_replay(rt: CLRuntime, capacity: int, batch: int, obs_dim: int, seconds: float, seed: int) -> list[Row]:
    """Prioritized sample+gather and priority update of `batch` items at `capacity`, OpenCL and numpy."""
    spec = EnvSpec("bench", obs_dim=obs_dim, action_kind="discrete", action_dim=4)
    config = DQNConfig(buffer_size=capacity, batch_size=batch, prioritized=True)
    rng = np.random.default_rng(seed)
    chunk = 1 << 16
    fill = [random_transitions(rng, min(chunk, capacity - start), spec) for start in range(0, capacity, chunk)]
    td_all = rng.exponential(size=capacity)
    beta = config.beta0

    # OpenCL: everything resident; the update uses the slots the sample left on the device.
    replay = OpenCLReplay(rt, config, spec, seed)
    for part in fill:
        replay.insert(part)
    replay.update_priorities(PriorityUpdate(np.arange(capacity), td_all))
    td_dev = rt.to_device(rng.exponential(size=batch).astype(np.float32))
    rt.finish()

    def cl_sample(_: object) -> None:
        replay.sample(batch, beta)
        rt.finish()

    def cl_prepare_update() -> object:
        indices = replay.sample(batch, beta).indices
        rt.finish()
        return indices

    def cl_update(indices: object) -> None:
        replay.update_priorities(PriorityUpdate(indices, td_dev))
        rt.finish()

    # numpy: ReplayIndex (the SumTree) picks slots and weights; the rows are a numpy take from host storage.
    index = ReplayIndex(capacity, prioritized=True, alpha=config.alpha, eps=config.priority_eps)
    store = {name: np.zeros((capacity, *shape), dtype=dtype) for name, shape, dtype in
             (("obs", (obs_dim,), np.float32), ("action", (), np.int64), ("reward", (), np.float32),
              ("next_obs", (obs_dim,), np.float32), ("terminated", (), np.float32))}
    for part in fill:
        slots = index.reserve(len(part))
        for name in store:
            store[name][slots] = getattr(part, name)
    index.update_priorities(np.arange(capacity), td_all)
    np_rng = np.random.default_rng(seed)
    td_host = rng.exponential(size=batch).astype(np.float32)

    def np_sample(_: object) -> None:
        picked = index.sample(batch, np_rng, beta)
        {name: arr.take(picked.indices, axis=0) for name, arr in store.items()}

    def np_update(indices: object) -> None:
        index.update_priorities(indices, td_host)

    return [
        row("replay", "sample+gather", "opencl", time_op(lambda: None, cl_sample, seconds)),
        row("replay", "sample+gather", "numpy", time_op(lambda: None, np_sample, seconds)),
        row("replay", "update", "opencl", time_op(cl_prepare_update, cl_update, seconds)),
        row("replay", "update", "numpy", time_op(lambda: index.sample(batch, np_rng, beta).indices, np_update,
                                                 seconds)),
    ]


def print_table(rows: list[Row]) -> None:
    print(f"{'part':<7} {'op':<14} {'backend':<8} {'calls':>7} {'median µs':>10} {'p90 µs':>9} {'numpy/opencl':>13}")
    medians = {(r.part, r.op, r.backend): r.median_us for r in rows}
    for r in rows:
        ratio = ""
        if r.backend == "opencl" and (r.part, r.op, "numpy") in medians:
            ratio = f"{medians[(r.part, r.op, 'numpy')] / r.median_us:.2f}x"
        print(f"{r.part:<7} {r.op:<14} {r.backend:<8} {r.calls:>7} {r.median_us:>10.1f} {r.p90_us:>9.1f} {ratio:>13}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="opencl:0:0")
    parser.add_argument("--capacity", type=int, default=2**20)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--obs-dim", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=1.0, help="minimum timed duration per operation")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.seconds < 1.0:
        parser.error("--seconds must be >= 1")

    rt = CLRuntime.open(args.device)
    print(f"host: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{platform.python_implementation()} {platform.python_version()}, numpy {np.__version__}")
    print(f"device: {args.device} = {rt.device.name.strip()} ({rt.device.platform.name.strip()})")
    print(f"replay: prioritized, capacity {args.capacity}, batch {args.batch}, obs_dim {args.obs_dim}, "
          "discrete actions")
    print_table(bench_replay(rt, args.capacity, args.batch, args.obs_dim, args.seconds, args.seed))


if __name__ == "__main__":
    main()
