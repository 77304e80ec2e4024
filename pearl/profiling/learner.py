"""The profiler's timings of the learner beyond the kernel grid: learn at the host's lanes as torch's intra-op
threads, alone and beside a stand-in actor process (pearl/profiling/standin.py); one update of a learner group
of two; the learner's whole iteration in situ, as the runtime runs it; and both halves of a weight sync.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Callable

import numpy as np

from pearl.adapters import Adapter, DeviceInfo, open_adapter
from pearl.adapters.group import lead_update, leave_group, open_group, stop_learners
from pearl.algos import OffPolicyConfig
from pearl.algos.params import ParamLayout, init_params
from pearl.device import HOST_DEVICE
from pearl.errors import DeviceError
from pearl.profile.format import GroupLearnTiming, InSituTiming, KernelTiming, WeightSyncTiming, Workload
from pearl.profiling import standin
from pearl.profiling.grids import IN_SITU_TIME_FACTOR, Grid, prefill, random_transitions
from pearl.profiling.timing import Stats, durations, measure, stats_of
from pearl.types import EnvSpec, PriorityUpdate


def threaded_learn(info: DeviceInfo, workload: Workload, config: OffPolicyConfig, spec: EnvSpec,
                   grid: Grid, actor_update_s: float | None = None) -> list[KernelTiming]:
    """learn at the preset's batch with the host's lanes as intra-op threads, on `cpu` with more than one lane
    ([] elsewhere), alone and then beside a stand-in actor process (pearl/profiling/standin.py) that spins an
    actor's work for one update (actor_update_s: its iterations for the update's env steps and its share of a
    weight load, the profiler's `_actor_update_s`; at most standin.BUSIEST of an update) every update, recorded
    with that share (`beside`): torch's thread count is the process's, so it is set for these figures and put
    back to 1."""
    lanes = info.lanes
    if info.device_id != HOST_DEVICE or lanes < 2:
        return []
    rng = np.random.default_rng(3)
    adapter = open_adapter(info.device_id, threads=lanes)
    timing = {"min_time": grid.min_time, "warmup": grid.warmup, "min_samples": grid.min_samples}
    try:
        replay = adapter.make_replay(config, spec, seed=3)
        prefill(replay, spec, grid.prefill, rng)
        learner = adapter.make_learn(config, spec, init_params(config, spec, seed=3))
        learn = partial(learner.learn, replay.sample(config.batch_size, 0.4))
        alone = measure(learn, adapter.synchronize, **timing)
        figures = [(alone, False)]
        busy = 0.0
        if actor_update_s is not None:  # no actor timed (env steps are not this profile's): the figure alone
            busy = min(standin.BUSIEST, actor_update_s / alone.median_s)
            figures = _beside_standin(learn, adapter.synchronize, grid,
                                      standin.Pace(busy * alone.median_s, alone.median_s, 60.0))
    finally:
        open_adapter(info.device_id, threads=1)
    return [KernelTiming(workload.key, "learn", info.id, config.batch_size, stats.median_s, stats.p10_s,
                         stats.p90_s, stats.samples, "measured", threads=lanes, beside=busy if near else 0.0)
            for stats, near in figures]


def _beside_standin(call: Callable[[], object], sync: Callable[[], None], grid: Grid,
                    pace: standin.Pace) -> list[tuple[Stats, bool]]:
    """[(call alone, False), (call beside the stand-in, True)], timed in alternating blocks of the grid's rounds
    (the stand-in paused for the blocks alone), so that both figures sample the same span of this machine."""
    times: dict[bool, list[float]] = {False: [], True: []}
    per_block = max(1, -(-grid.min_samples // grid.rounds))
    actor = standin.start(pace)
    try:
        for _ in range(grid.rounds):
            for near in (False, True):
                (standin.resume if near else standin.pause)(actor)
                times[near] += durations(call, sync, min_time=grid.min_time / grid.rounds, warmup=1,
                                         min_samples=per_block)
    finally:
        standin.stop(actor)
    return [(stats_of(times[near]), near) for near in (False, True)]


def group_learn(adapter: Adapter, info: DeviceInfo, workload: Workload, config: OffPolicyConfig,
                spec: EnvSpec, grid: Grid) -> list[GroupLearnTiming]:
    """One update of a learner group of two one-thread learners on `cpu` (learner 0 here, the other a process
    started as the local launcher starts it), as learner 0 leads it, at the preset's batch; [] elsewhere, on one
    lane, or where the adapter cannot train in a group."""
    if info.device_id != HOST_DEVICE or info.lanes < 2:
        return []
    rng = np.random.default_rng(3)
    replay = adapter.make_replay(config, spec, seed=3)
    prefill(replay, spec, grid.prefill, rng)
    learner = adapter.make_learn(config, spec, init_params(config, spec, seed=3))
    procs: list = []
    try:
        comm = open_group(adapter, learner, config, spec, 2, 1, 3, procs)
    except DeviceError:
        return []
    try:
        stats = measure(partial(lead_update, learner, comm, replay.sample(config.batch_size, 0.4)),
                        adapter.synchronize, min_time=grid.min_time, warmup=grid.warmup, min_samples=grid.min_samples)
    finally:
        leave_group(comm)
        stop_learners(procs)
    return [GroupLearnTiming(workload.key, info.id, 2, stats.median_s, stats.samples, "measured")]


def in_situ(adapter: Adapter, info: DeviceInfo, workload: Workload, config: OffPolicyConfig,
            spec: EnvSpec, grid: Grid) -> InSituTiming:
    """The learner's iteration as the runtime runs it, replay and learn on this device: per update, 1/ρ env
    steps inserted in calls of n_envs rows, a sample, a learn and (prioritized replay) a priority update, each
    sample fresh from a replay of `prefill` rows. The device is waited for only at the end, as in a run."""
    loop = _LearnerLoop(adapter, config, spec, grid)
    done, seconds = _time_loop(loop, adapter, grid)
    return InSituTiming(workload.key, info.id, seconds, done, loop.inserts, loop.rows, config.batch_size,
                        config.prioritized, "measured")


class _LearnerLoop:
    """One learner iteration a call (`in_situ`)."""

    def __init__(self, adapter: Adapter, config: OffPolicyConfig, spec: EnvSpec, grid: Grid) -> None:
        rng = np.random.default_rng(1)
        self.replay = adapter.make_replay(config, spec, seed=1)
        prefill(self.replay, spec, grid.prefill, rng)
        self.learner = adapter.make_learn(config, spec, init_params(config, spec, seed=1))
        self.config, self.rows, self.i = config, config.n_envs, 0
        self.inserts = max(1, round(1.0 / (config.replay_ratio * self.rows)))
        self.pool = [random_transitions(spec, self.rows, rng) for _ in range(64)]

    def __call__(self) -> None:
        for j in range(self.inserts):
            self.replay.insert(self.pool[(self.i * self.inserts + j) % len(self.pool)])
        self.i += 1
        batch = self.replay.sample(self.config.batch_size, 0.4)
        td = self.learner.learn(batch).td_errors
        if self.config.prioritized:
            self.replay.update_priorities(PriorityUpdate(batch.indices, td))


def _time_loop(loop: Callable[[], None], adapter: Adapter, grid: Grid) -> tuple[int, float]:
    """(iterations, mean seconds of one) of `loop` run for the in-situ time, after a warm-up, the device waited
    for at both ends only."""
    for _ in range(grid.warmup * 4):
        loop()
    adapter.synchronize()
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < IN_SITU_TIME_FACTOR * grid.min_time or done < grid.min_samples:
        loop()
        done += 1
    adapter.synchronize()
    return done, (time.perf_counter() - t0) / done


def weight_sync(adapter: Adapter, info: DeviceInfo, workload: Workload, config: OffPolicyConfig,
                spec: EnvSpec, grid: Grid) -> WeightSyncTiming:
    """Both halves of one weight sync through host memory, as the parallel runtime does it: the learner writes
    its policy into views of one flat float32 array (the shared board); an actor copies the array out and
    loads it into its act kernel."""
    sync = adapter.synchronize
    timing = {"min_time": grid.min_time, "warmup": grid.warmup, "min_samples": grid.min_samples}
    params = init_params(config, spec, seed=2)
    learner = adapter.make_learn(config, spec, params)
    layout = ParamLayout.of(learner.policy_params())
    flat = np.zeros(layout.size, np.float32)
    publish = measure(partial(learner.write_policy, layout.views(flat)), sync, **timing)
    act = adapter.make_act(config, spec, params, seed=2)

    def load() -> None:  # as an actor does: WeightBoard.read copies the board, then the act kernel loads it
        act.set_params(layout.views(flat.copy()))

    loading = measure(load, sync, **timing)
    return WeightSyncTiming(workload.key, info.id, publish.median_s, loading.median_s,
                            min(publish.samples, loading.samples), "measured")

