"""The profiler's timings of the learner besides its kernels: learn at the host's lanes as torch's intra-op
threads, alone and beside a stand-in actor process (pearl/profiler/standin.py); one update of a learner group
of two; the learner's whole iteration as the runtime runs it (`LearnerLoop`, which the kernel grid times among
its points); and both halves of a weight sync.
"""

from __future__ import annotations

import math
import time
from functools import partial
from typing import Callable, Protocol

import numpy as np

from pearl.adapters import Adapter, DeviceInfo, LearnKernel, ReplayKernels, open_adapter
from pearl.adapters.learner_group import lead_update, leave_group, open_group, stop_learners
from pearl.algos import OffPolicyConfig
from pearl.algos.params import ParamLayout, init_params
from pearl.device import HOST_DEVICE
from pearl.errors import DeviceError
from pearl.kernels import Precision
from pearl.profile.format import GroupLearnTiming, InSituTiming, KernelTiming, WeightSyncTiming, Workload
from pearl.profiler import standin
from pearl.profiler.grids import IN_SITU_TIME_FACTOR, Grid, prefill, random_transitions
from pearl.profiler.timing import Point, Stats, durations, measure, measure_interleaved, rate_s, stats_of
from pearl.traffic import launcher_inserts
from pearl.types import EnvSpec, PriorityUpdate, TransitionBatch


def threaded_learn(info: DeviceInfo, workload: Workload, config: OffPolicyConfig, spec: EnvSpec,
                   grid: Grid, actor_update_s: float | None = None,
                   precision: Precision = Precision.FP32) -> list[KernelTiming]:
    """learn at the preset's batch with the host's lanes as intra-op threads, on `cpu` with more than one lane
    ([] elsewhere), alone and then beside a stand-in actor process (pearl/profiler/standin.py) that spins an
    actor's work for one update (actor_update_s: its iterations for the update's env steps and its share of a
    weight load, the profiler's `_actor_update_s`; at most standin.BUSIEST of an update) every update, recorded
    with that share (`beside`). Each figure carries learn at one thread timed in the same alternating blocks
    (`one_thread_s`): the cost model's thread factor is their ratio, which this machine's drift between two
    moments would swing otherwise. torch's thread count is the process's, so it is set for each block and put
    back to 1. `precision`: learn's arithmetic (bf16-mixed scales with threads otherwise than float32: its
    products are faster, the rest is the same work), which the figures are labelled with."""
    lanes = info.lanes
    if info.device_id != HOST_DEVICE or lanes < 2:
        return []
    rng = np.random.default_rng(3)
    adapter = open_adapter(info.device_id, threads=lanes)
    try:
        replay = adapter.make_replay(config, spec, seed=3)
        prefill(replay, spec, grid.prefill, rng)
        learner = adapter.make_learn(config, spec, init_params(config, spec, seed=3), precision=precision)
        learn = partial(learner.learn, replay.sample(config.batch_size, 0.4))
        alone = measure(learn, adapter.synchronize, min_time=grid.min_time / grid.rounds, warmup=grid.warmup,
                        min_samples=1)  # the stand-in's pace
        busy = 0.0 if actor_update_s is None else min(standin.BUSIEST, actor_update_s / alone.median_s)
        one, *figures = _alternating(learn, adapter.synchronize, grid, partial(open_adapter, info.device_id),
                                     lanes, None if actor_update_s is None else
                                     standin.Pace(busy * alone.median_s, alone.median_s, 60.0))
    finally:
        open_adapter(info.device_id, threads=1)
    return [KernelTiming(workload.key, "learn", info.id, config.batch_size, stats.median_s, stats.p10_s,
                         stats.p90_s, stats.samples, "measured", threads=lanes, beside=busy if near else 0.0,
                         one_thread_s=one.median_s, precision=precision.value)
            for stats, near in zip(figures, (False, True))]


def _alternating(call: Callable[[], object], sync: Callable[[], None], grid: Grid,
                 set_threads: Callable[..., object], lanes: int, pace: standin.Pace | None) -> list[Stats]:
    """[call at one thread, at `lanes` threads alone, and (with a pace) at `lanes` threads beside a stand-in
    actor keeping that pace], timed in the grid's interleaved rounds (timing.measure_interleaved; the stand-in
    paused for the blocks alone), so that the figures sample the same span of this machine."""
    actor = standin.start(pace) if pace else None

    def condition(threads: int, near: bool) -> None:
        set_threads(threads=threads)
        if actor is not None:
            (standin.resume if near else standin.pause)(actor)

    blocks = [(1, False), (lanes, False)] + ([(lanes, True)] if pace else [])
    try:
        return measure_interleaved([Point(call, sync, before=partial(condition, *b)) for b in blocks],
                                   rounds=grid.rounds, min_time=grid.min_time, warmup=1,
                                   min_samples=grid.min_samples)
    finally:
        if actor is not None:
            standin.stop(actor)


def group_learn(adapter: Adapter, info: DeviceInfo, workload: Workload, config: OffPolicyConfig,
                spec: EnvSpec, grid: Grid) -> list[GroupLearnTiming]:
    """One update of a learner group of two one-thread learners on `cpu` (learner 0 here, the other a process
    started as the local launcher starts it), as learner 0 leads it, at the preset's batch; [] elsewhere, or where
    the adapter cannot train in a group. On a host of one lane the two share it: a node of a cluster whose group
    has one learner on each node (pearl.planner.cluster_problem `_spread_group` says why that timing stands)."""
    if info.device_id != HOST_DEVICE:
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
    batch, waits = replay.sample(config.batch_size, 0.4), []

    def update() -> None:  # learner 0's seconds in the collectives of each call, as the run's `group_comm` clock
        before = comm.comm_s
        lead_update(learner, comm, batch)
        waits.append(comm.comm_s - before)

    try:
        # 5 × a grid point's time: an update of milliseconds made of collectives swings with the host's spells
        times = durations(update, adapter.synchronize, min_time=IN_SITU_TIME_FACTOR * grid.min_time,
                          warmup=grid.warmup, min_samples=grid.min_samples)
    finally:
        leave_group(comm)
        stop_learners(procs)
    return [GroupLearnTiming(workload.key, info.id, 2, stats_of(times).median_s, len(times), "measured",
                             float(np.median(waits[-len(times):])))]


class TimedLearner(Protocol):
    """The runtime's learner role around the profiler's kernels: `insert` a batch, `train` some updates (sample,
    learn, priority update each), as the role does them (pearl.runtime.learner_role.LearnerProbe)."""

    def insert(self, *batches: TransitionBatch) -> int: ...

    def train(self, updates: int, beta: float) -> int: ...


#: (adapter, config, replay, learn kernel) → the runtime's learner role around them (the runtime lends it through
#: profiler.RuntimeProbes; None: LearnerLoop calls the kernels bare)
LearnerRun = Callable[[Adapter, OffPolicyConfig, ReplayKernels, LearnKernel], TimedLearner]


#: learner iterations a timed in-situ call runs, the device waited for once at its end, as in a run
IN_SITU_CHAIN = 4
#: seconds the learner sleeps before its timed first iteration of a segment (`LearnerLoop.after_pause`): about what
#: it waits for the actors' shares at one update a segment, beside one actor of one env
SEGMENT_PAUSE_S = 0.5e-3


class LearnerLoop:
    """The learner's iteration as the runtime runs it, replay and learn on one device: the replay inserts as the
    launchers make them (`pearl.traffic.launcher_inserts`, one actor's schedule: an actor's share of a segment in one
    call, so one call every U updates for a segment of U updates), a sample, a learn and (prioritized replay) a
    priority update, each sample fresh from a replay of `prefill` rows. A call (`chain`) runs IN_SITU_CHAIN
    iterations; the profiler times it as one more point of the kernel grid's interleaved rounds (profiler._kernels),
    so that the in-situ figure and the kernels it is divided by sample the same span of the machine (`timing`).

    A segment's first iteration runs after the learner waited for the actors' shares, and runs slower than the
    ones after it: `after_pause` is one iteration timed after a sleep of SEGMENT_PAUSE_S (`pause`, untimed), one more
    point of the same rounds: a learn after a short sleep runs colder than one back to back, and a run of one
    update a segment pays that on every update (measured: see docs/MEASUREMENTS.md, "What a profile times besides
    the kernels")."""

    def __init__(self, adapter: Adapter, config: OffPolicyConfig, spec: EnvSpec, grid: Grid,
                 run: LearnerRun | None = None) -> None:
        rng = np.random.default_rng(1)
        self.replay = adapter.make_replay(config, spec, seed=1)
        prefill(self.replay, spec, grid.prefill, rng)
        self.learner = adapter.make_learn(config, spec, init_params(config, spec, seed=1))
        #: the runtime's role around these kernels, when lent: the iteration then runs its per-update path
        self.role = None if run is None else run(adapter, config, self.replay, self.learner)
        self.config, self.i = config, 0
        self.shape = launcher_inserts(config)
        pool = max(2, min(64, 4096 // self.shape.rows))  # distinct batches, a few thousand rows in all
        self.pool = [random_transitions(spec, self.shape.rows, rng) for _ in range(pool)]

    def inserted_before(self, i: int) -> int:
        """Insert calls made before iteration i: the shape's calls an update, spread as evenly as whole calls allow
        (every U-th iteration inserts a segment's share when a segment of U updates has one actor)."""
        return math.floor(i * self.shape.per_update + 1e-9)

    def chain(self) -> None:
        if self.role is not None:  # the role's train call runs the chain's updates, as a segment's
            self._insert(IN_SITU_CHAIN)
            self.role.train(IN_SITU_CHAIN, 0.4)
            return
        for _ in range(IN_SITU_CHAIN):
            self.iteration()

    @staticmethod
    def pause() -> None:
        time.sleep(SEGMENT_PAUSE_S)

    def after_pause(self, _: None) -> None:
        """One iteration, called with `pause`'s result (nothing): timing.durations sleeps outside the clock."""
        self.iteration()

    def _insert(self, iterations: int) -> None:
        """The inserts due over the next `iterations` iterations (through the role, when lent)."""
        insert = self.replay.insert if self.role is None else self.role.insert
        for k in range(self.inserted_before(self.i), self.inserted_before(self.i + iterations)):
            insert(self.pool[k % len(self.pool)])
        self.i += iterations

    def iteration(self) -> None:
        if self.role is not None:
            self._insert(1)
            self.role.train(1, 0.4)
            return
        self._insert(1)
        batch = self.replay.sample(self.config.batch_size, 0.4)
        td = self.learner.learn(batch).td_errors
        if self.config.prioritized:
            self.replay.update_priorities(PriorityUpdate(batch.indices, td))

    def timing(self, info: DeviceInfo, workload: Workload, stats: Stats, first: Stats) -> InSituTiming:
        """The figure from the stats of its chains and of its iterations after a pause: `iteration_s` the mean
        chain ÷ IN_SITU_CHAIN (the mean over its iterations, as the format says), `first_iteration_s` the mean
        iteration after a pause. Means, not medians: the iteration prices the learner's rate, which its slow
        calls weigh on as much as the rest (timing.stats_of; the cost model's in-situ factor carries that tail
        into the learner's kernels, whose grid figures are medians)."""
        return InSituTiming(workload.key, info.id, rate_s(stats) / IN_SITU_CHAIN, stats.samples * IN_SITU_CHAIN,
                            self.shape.per_update, self.shape.rows, self.config.batch_size, self.config.prioritized,
                            "measured", rate_s(first), implementation=self.learner.implementation.value)


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

