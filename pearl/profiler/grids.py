"""What the profiler's timings share: the measuring grids (`quick`, `full`: the batch sizes of each kernel's sweep
and the time and count rules of every figure), and the random transitions every timed replay is filled with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pearl.adapters import ReplayKernels
from pearl.algos import OffPolicyConfig
from pearl.traffic import launcher_inserts
from pearl.types import EnvSpec, TransitionBatch


@dataclass(frozen=True)
class Grid:
    act: tuple[int, ...]
    insert: tuple[int, ...]
    batch_factors: tuple[float, ...]  # sample / learn / priority_update batches, as multiples of the preset's
    min_time: float  # per figure, spread over `rounds` blocks (timing.measure_interleaved)
    rounds: int
    warmup: int
    min_samples: int
    prefill: int
    transfer_bytes: int
    power_seconds: float


GRIDS = {
    # quick: 80 ms and 5 calls per point in 5 rounds, short enough that a quick profile of every preset takes
    # minutes, not hours (measured: see docs/MEASUREMENTS.md, "Profiles")
    "quick": Grid(act=(1, 8, 32), insert=(1, 8, 32), batch_factors=(0.5, 1.0, 2.0), min_time=0.08, rounds=5,
                  warmup=3, min_samples=5, prefill=2_000, transfer_bytes=1 << 22, power_seconds=0.5),
    "full": Grid(act=(1, 2, 4, 8, 16, 32, 64), insert=(1, 4, 16, 64, 256), batch_factors=(0.25, 0.5, 1.0, 2.0, 4.0),
                 min_time=0.3, rounds=5, warmup=5, min_samples=10, prefill=20_000, transfer_bytes=1 << 26,
                 power_seconds=2.0),
}

IN_SITU_TIME_FACTOR = 5  # the actor step is timed for 5 × a grid point's min_time: 0.4 s quick, 1.5 s full


def insert_sizes(grid: Grid, config: OffPolicyConfig) -> tuple[int, ...]:
    """The grid's insert sizes and the rows the launchers insert at a time, one actor's share of a segment
    (`pearl.traffic.launcher_inserts`: 256 for the DQN CartPole-v1 preset), which the planner prices inserts at."""
    return tuple(sorted({*grid.insert, min(launcher_inserts(config).rows, config.buffer_size)}))


def random_transitions(spec: EnvSpec, m: int, rng: np.random.Generator) -> TransitionBatch:
    action = (rng.integers(0, spec.action_dim, m) if spec.discrete
              else rng.uniform(-1, 1, (m, spec.action_dim)).astype(np.float32))
    obs = rng.normal(size=(m, spec.obs_dim)).astype(np.float32)
    return TransitionBatch(obs, action, rng.normal(size=m).astype(np.float32),
                           rng.normal(size=(m, spec.obs_dim)).astype(np.float32),
                           (rng.random(m) < 0.05).astype(np.float32))


def prefill(replay: ReplayKernels, spec: EnvSpec, rows: int, rng: np.random.Generator) -> None:
    """rows random transitions into replay, in inserts of up to 1,000."""
    for start in range(0, rows, 1000):
        replay.insert(random_transitions(spec, min(1000, rows - start), rng))

