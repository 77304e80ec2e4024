"""The profiler's timing of an actor's step: its whole iteration at each env count of the act grid, as an actor
process runs it.

The runtime sits above the profiler, so its actor loop reaches here as a factory (`ActorLoop`) from whoever
composes the two (`pearl profile`, `pearl train` and the quick start pass pearl.runtime.actor_process's
`IterationProbe`: the process's own iteration, with its schedule and counter bookkeeping, its shared-memory ring
write and its learner wake-up). Without one, `BareActorLoop` stands in: one act call, one step of a vector env
with its resets and bookkeeping, the transitions copied into host arrays, which is what the process's iteration
does less that bookkeeping.
"""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from pearl.adapters import Adapter, DeviceInfo
from pearl.algos import OffPolicyConfig
from pearl.algos.params import init_params
from pearl.envs import EnvStepper
from pearl.profile.format import ActorStepTiming, Workload
from pearl.profiler.grids import IN_SITU_TIME_FACTOR, Grid
from pearl.profiler.timing import Point, Stats, rate_s
from pearl.types import EnvSpec, TransitionBatch


#: rows of the ring the timed actor writes its transitions into (as the local launcher's smallest ring)
ACTOR_RING_ROWS = 4096


class TimedLoop(Protocol):
    """One actor iteration a call; close() releases its envs."""

    def __call__(self) -> None: ...

    def close(self) -> None: ...


#: (adapter, config, spec, envs) → an actor's iteration at `envs` environments, acting on the adapter's device
ActorLoop = Callable[[Adapter, OffPolicyConfig, EnvSpec, int], TimedLoop]


class ActorSteps:
    """An actor's iteration at each env count of the act grid, `loop`'s (the module docstring; None: the bare loop),
    as points of the kernel grid's interleaved rounds (profiler._kernels), each timed IN_SITU_TIME_FACTOR × a
    kernel point's time. The cost model weighs the actor's iteration against the learner's, so the two are timed
    over the same span of the host: timed in a phase of their own, a slow spell over that phase moves every actor
    figure while the learner's holds (measured: see docs/MEASUREMENTS.md, "How steady").
    close() releases the envs."""

    def __init__(self, adapter: Adapter, config: OffPolicyConfig, spec: EnvSpec, grid: Grid,
                 loop: ActorLoop | None = None) -> None:
        make = loop or BareActorLoop
        self.envs = grid.act
        self.loops: list[TimedLoop] = []
        try:
            for envs in grid.act:
                self.loops.append(make(adapter, config, spec, envs))
        except BaseException:
            self.close()
            raise
        self.points = [Point(timed, adapter.synchronize, min_time=IN_SITU_TIME_FACTOR * grid.min_time)
                       for timed in self.loops]

    def timings(self, info: DeviceInfo, workload: Workload, stats: list[Stats]) -> list[ActorStepTiming]:
        """The profile's entries from the stats of `points`, in their order: each the mean iteration, which prices
        the actor's rate as the learner's in-situ mean does the learner's (timing.stats_of)."""
        return [ActorStepTiming(workload.key, info.id, envs, rate_s(s), s.samples, "measured")
                for envs, s in zip(self.envs, stats)]

    def close(self) -> None:
        for timed in self.loops:
            timed.close()


class BareActorLoop:
    """One actor iteration a call: act on the observations, step the vector env, write the transitions."""

    def __init__(self, adapter: Adapter, config: OffPolicyConfig, spec: EnvSpec, envs: int) -> None:
        self.act = adapter.make_act(config, spec, init_params(config, spec, seed=0), seed=0)
        self.stepper = EnvStepper(spec.env_id, spec, envs, seed=0)
        self.ring = _HostRing(spec, max(ACTOR_RING_ROWS, envs))
        self.explore = config.exploration(config.total_steps)

    def __call__(self) -> None:
        batch, restart = self.stepper.step(self.act.act(self.stepper.obs, self.explore))
        if restart.any():
            self.act.new_episodes(restart)
        self.stepper.finished.clear()
        self.ring.push(batch)

    def close(self) -> None:
        self.stepper.close()


class _HostRing:
    """Transitions copied row by row into preallocated host arrays, wrapping around: an actor's ring write
    without the shared memory's reader."""

    def __init__(self, spec: EnvSpec, rows: int) -> None:
        self.rows, self.head = rows, 0
        self.arrays = {"obs": np.zeros((rows, spec.obs_dim), np.float32),
                       "action": np.zeros((rows, *spec.action_shape), spec.action_dtype),
                       "reward": np.zeros(rows, np.float32), "next_obs": np.zeros((rows, spec.obs_dim), np.float32),
                       "terminated": np.zeros(rows, np.float32)}

    def push(self, batch: TransitionBatch) -> None:
        n = len(batch)
        if self.head + n > self.rows:
            self.head = 0
        for name, rows in self.arrays.items():
            rows[self.head:self.head + n] = getattr(batch, name)
        self.head += n

