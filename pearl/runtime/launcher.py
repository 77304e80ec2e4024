"""What every launcher shares: the launcher interface, the learner's segment loop, and the types they report.

A launcher runs the roles (actors, replay manager, learner) of one training job to its step budget,
following the schedule of `pearl.schedule`; it decides only where the roles run and how messages
travel. The interface is small:

    launcher.start()                          start the roles (processes, Ray actors); nothing learns yet
    stats = launcher.run(record, progress, max_seconds)   train to the budget (or the time limit)
    launcher.checkpoint_now()                 save where an interrupted run stopped
    launcher.stop()                           stop every role and free what they hold; safe to call twice

`SegmentLauncher` implements `run` once for all of them: for each segment it asks the launcher to bring
that segment's transitions into replay (`_collect`, in actor order), has the learner run the schedule's
updates, asks the launcher to publish the weights (`_publish`), evaluates and checkpoints at fixed points. The
learner is a role, `LearnerRole` (replay, learn kernel, evaluations): in this process for the sequential and
local launchers, a Ray actor the loop drives through the same calls for the Ray launcher (`LearnerHandle` names
them). So the launchers differ only in where the roles run and how transitions and weights travel, and a seed
gives the same learning on each: every launcher takes each role's seed from one `Seeds`.

Each launcher class declares what it can do in its `capabilities` (`LauncherCapabilities`); the rest of pearl
asks that declaration (through `pearl.training.launchers.launcher_capabilities`), never the launcher's name.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol

import numpy as np

from pearl.adapters.base import Adapter
from pearl.algos.base import OffPolicyConfig
from pearl.device import DeviceId
from pearl.replay import linear_beta
from pearl.runtime.actors import RestartPolicy, RoleLost
from pearl.runtime.checkpoint import Checkpoint, Checkpointer
from pearl.runtime.energy import EnergyMeter
from pearl.runtime.evaluate import BestPolicy, Evaluation
from pearl.runtime.job import Job, LauncherCapabilities
from pearl.runtime.learner_role import LearnerRole, LearnerStatus
from pearl.runtime.protocol import Episode, KernelClock, Learner, ReplayManager
from pearl.runtime.record import RunRecord
from pearl.runtime.seeds import Seeds
from pearl.traffic import Tally
from pearl.types import Params, TransitionBatch


SHARES_POLL_S = 50e-6  # how often a learner that no actor can wake looks at its actors' transitions


class LearnerHandle(Protocol):
    """The calls the segment loop makes on the learner's role, wherever the role runs: `LearnerRole` in this
    process, or `pearl.runtime.ray.learner.RayLearnerHandle`, the driver's proxy of the role placed on Ray."""

    def insert(self, *batches: TransitionBatch) -> int:
        """Insert the batches in order; the rows inserted."""
        ...

    def train(self, updates: int, beta: float) -> int | None:
        """Run `updates` updates (the update count after them, where the role answers at once)."""
        ...

    def policy(self) -> Params:
        """The weights to publish, the caller's own."""
        ...

    def evaluate(self, steps: int) -> Evaluation | None:
        """Evaluate the current policy when an in-training evaluation is due at `steps` env steps."""
        ...

    def status(self) -> LearnerStatus:
        ...

    def state(self, include_replay: bool) -> tuple[Params, Params | None]:
        """The learn kernel's state dict and, when asked, replay's: what a checkpoint holds."""
        ...

    def best_policy(self) -> BestPolicy | None:
        ...

    def clocks(self) -> list[KernelClock]:
        ...


@dataclass
class LoopStats:
    steps: int = 0
    updates: int = 0
    wall_s: float = 0.0
    learn_start_s: float | None = None
    learn_start_steps: int = 0
    episodes: list[Episode] = field(default_factory=list)
    kernel_seconds: dict[str, float] = field(default_factory=dict)
    kernel_calls: dict[str, int] = field(default_factory=dict)
    final_params: Params = field(default_factory=dict)
    best: BestPolicy | None = None  # in-training evaluations and the best policy they found
    dropped_steps: int = 0  # env steps an actor's last step produced past its share (not inserted)
    waits: dict[str, float] = field(default_factory=dict)  # seconds each side waited (process launchers)
    restarts: int = 0  # actor processes started again after dying
    lost_steps_max: int = 0  # at most this many transitions were lost with them (one step of n_envs each)
    #: each time the roles were placed again from the newest checkpoint after a role that holds the run's state
    #: died (`SegmentLauncher._recover`): what was lost, where, and the checkpoint the run went on from
    recoveries: list[str] = field(default_factory=list)
    redone_steps: int = 0  # env steps collected again after those recoveries (past their checkpoints)
    start_steps: int = 0  # env steps and updates a resumed run started from (0 for a fresh run)
    start_updates: int = 0
    checkpoints: list[str] = field(default_factory=list)  # files written, oldest first
    checkpoint_s: float = 0.0  # time spent writing them (inside wall_s)
    eval_s: float = 0.0  # time spent in in-training evaluations (inside wall_s)
    #: in-training evaluations and checkpoints after learning started (inside wall_s): the learning phase's
    #: rates leave them out, since a plan predicts training, and the roles wait through them
    paused_s: float = 0.0
    roles: dict[str, str] = field(default_factory=dict)  # where each role ran (Ray: its node), asked from inside it
    #: what the run counted it sent on each edge (`pearl.traffic.Tally.to_dict`), against its traffic statement
    traffic: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the learning phase's energy as the meter read it (`EnergyMeter.stop`); {} without a meter
    energy: dict = field(default_factory=dict)


@dataclass
class LogState:
    """Counters since the previous metrics line, so each line reports rates over its own interval."""

    steps: int = 0
    updates: int = 0
    episodes: list[Episode] = field(default_factory=list)

    def line(self, cfg: OffPolicyConfig, steps: int, updates: int, status: LearnerStatus, elapsed: float,
             interval: float) -> dict:
        interval = max(interval, 1e-9)
        line = {"global_step": steps, "time": round(elapsed, 3),
                "charts/SPS": (steps - self.steps) / interval,
                "charts/updates_per_s": (updates - self.updates) / interval,
                "charts/learner_samples_per_s": (updates - self.updates) * cfg.batch_size / interval,
                "charts/exploration": cfg.exploration(steps), "charts/updates": updates,
                "replay/size": status.replay_size}
        if steps > cfg.learning_starts:  # cumulative updates per env step since learning started
            line["charts/replay_ratio"] = updates / (steps - cfg.learning_starts)
        if self.episodes:
            returns = [e.ret for e in self.episodes]
            line["charts/episodic_return"] = float(np.mean(returns))
            line["charts/episodic_length"] = float(np.mean([e.length for e in self.episodes]))
            line["charts/episodes"] = len(self.episodes)
        line.update(status.metrics)
        self.steps, self.updates, self.episodes = steps, updates, []
        return line


class SegmentLauncher(ABC):
    """The learner's side of the schedule, for every launcher; subclasses move transitions and weights."""

    name = ""
    capabilities: ClassVar[LauncherCapabilities] = LauncherCapabilities()  # each launcher declares its own

    def __init__(self, job: Job, resume: Checkpoint | None = None, checkpointer: Checkpointer | None = None) -> None:
        self.job, self.config, self.spec, self.placement = job, job.config, job.spec, job.placement
        self.checkpointer = checkpointer
        self._go_on_from(resume)
        self.role: LearnerHandle = self._make_role()  # the Ray launcher places its role at start
        self.start_steps = self.steps
        self.restart_policy = RestartPolicy(0)  # a launcher that restarts actors sets its own limit
        self.dropped = 0
        self.replay_size = 0  # replay's size at the last metrics line
        self._kept: tuple[Params, Params | None] | None = None  # the role's state, kept when it stopped early
        self.evaluations: list[Evaluation] = []  # the in-training evaluations so far
        self.next_eval = job.eval_every  # env steps at which the next one is due
        self.sent = Tally()  # what this side counted it sent (the learner's role counts its own)
        #: counts the learning phase's joules where the trainer gives one (`pearl.runtime.energy`)
        self.energy: EnergyMeter | None = None

    def _go_on_from(self, resume: Checkpoint | None) -> None:
        """Start the schedule at `resume` (None: at its beginning): its segment, env steps, updates and seeds."""
        job = self.job
        self.resume = resume
        self.schedule = job.schedule(resume)
        self.first_segment = self.schedule.segment_at(resume.steps) if resume is not None else 0
        self.steps = self.schedule.steps_through(self.first_segment - 1) if resume is not None else 0
        self.seeds = Seeds(job.seed, self.steps)
        self.updates = resume.updates if resume is not None else 0  # the learner's, as the schedule made them

    def _make_role(self) -> Any:
        """The learner's role in this process: replay, learner and evaluations on their devices."""
        role = LearnerRole(self.job, self._learner_devices(), self.resume)
        self.policy = role.learner.kernel.policy_params()  # what the actors start with
        return role

    def _local_role(self) -> LearnerRole:
        """The learner's role where it runs in this process (the sequential and local launchers')."""
        if not isinstance(self.role, LearnerRole):
            raise TypeError(f"the {self.name} launcher's learner does not run in this process")
        return self.role

    @property
    def adapters(self) -> dict[DeviceId, Adapter]:
        return self._local_role().adapters

    @property
    def learner(self) -> Learner:
        return self._local_role().learner

    @property
    def replay(self) -> ReplayManager:
        return self._local_role().replay

    @property
    def restarts(self) -> int:
        """Actors started again after dying, all actors together."""
        return self.restart_policy.count

    @property
    def restart_log(self) -> list[str]:
        """Why each restart happened."""
        return self.restart_policy.log

    def _learner_devices(self) -> list[DeviceId]:
        """The devices this process opens (the local launcher's actors open their own)."""
        return self.placement.devices()

    # ------------------------------------------------------------------------------ the interface
    @classmethod
    def check_available(cls) -> None:
        """A PearlError saying what to install when this launcher cannot run here (found without importing it)."""
        return None  # the launchers of pearl's own dependencies run everywhere

    @abstractmethod
    def start(self) -> None:
        """Start the roles; nothing is collected or learnt until `run`."""

    @abstractmethod
    def stop(self) -> None:
        """Stop every role and free what they hold (safe to call twice, and after a failed start)."""

    def run(self, record: RunRecord | None = None, progress: Callable[[int], None] | None = None,
            max_seconds: float | None = None) -> LoopStats:
        """Start, train to the step budget (or max_seconds), stop: every role stops, whatever ends the run."""
        try:
            self.start()
            return self._loop(record, progress, max_seconds)
        finally:
            self.stop()

    def checkpoint_now(self) -> str | None:
        """A checkpoint of where an interrupted run stopped (taken after `stop`); the path, or None when there
        is no checkpointer or nothing new since the start. A learner stopped inside a segment's updates is saved
        with the updates it made (its learn state's count): the resumed run goes on with the next segment."""
        if self.checkpointer is None or self.steps == self.start_steps:
            return None
        if isinstance(self.role, LearnerRole):  # stopped inside a segment's updates: count the ones it made
            self.updates = self.role.updates
        self._checkpoint()
        return str(self.checkpointer.written[-1])

    # ---------------------------------------------------------------------- what subclasses provide
    @abstractmethod
    def _collect(self, k: int, insert: Callable[[TransitionBatch], None], wait: Callable[[], None]) -> None:
        """Hand segment k's transitions to insert, actor 0's share first; call wait() between polls."""

    @abstractmethod
    def _publish(self, tag: int) -> None:
        """Make the learner's current policy available to the actors as the weights of segment `tag`."""

    def _episodes(self) -> list[Episode]:
        """Episodes the actors finished since the last call."""
        return []

    def _clocks(self) -> tuple[dict[str, float], dict[str, int]]:
        """Seconds and calls per kernel over every role."""
        return {}, {}

    def _health(self) -> None:
        """Raise if a role failed (and restart what may be restarted); roles in this process cannot fail apart."""
        return None

    # ----------------------------------------------------------------------------- the segment loop
    def _loop(self, record: RunRecord | None, progress: Callable[[int], None] | None,
              max_seconds: float | None) -> LoopStats:
        stats = LoopStats(start_steps=self.steps, start_updates=self.updates, steps=self.steps)
        self._t0 = self._last_log = self._last_health = time.perf_counter()
        self._stats, self._record, self._progress = stats, record, progress
        self._log = LogState(steps=self.steps, updates=self.updates)
        self.waited = 0.0
        if progress is not None:  # the loop starts here: a progress bar's rate counts from now, as wall_s does
            progress(self.steps)

        k = self.first_segment
        while k < self.schedule.segments:
            try:
                self._run_segment(k, stats)
                if k == self.schedule.segments - 1 or \
                        (max_seconds is not None and time.perf_counter() - self._t0 >= max_seconds):
                    self._settle()
                    break
            except RoleLost as lost:  # the roles placed again from the newest checkpoint, or the error raised
                k = self._recover(lost)
                continue
            k += 1
        return self._finish(stats)

    def _settle(self) -> None:
        """Before the end: wait until every role has done what it was asked, raising a failure among it (roles
        in this process have nothing in flight)."""
        return None

    def _run_segment(self, k: int, stats: LoopStats) -> None:
        """Segment k of the schedule: collect, train, publish, and the evaluation and checkpoint due after it."""
        cfg, sched, role = self.config, self.schedule, self.role

        def insert(batch: TransitionBatch) -> None:
            self.steps += role.insert(batch)

        self._collect(k, insert, self._wait)
        updates = sched.updates_after(k) if self.job.learn else 0
        if updates and stats.learn_start_s is None:
            stats.learn_start_s, stats.learn_start_steps = time.perf_counter() - self._t0, self.steps
            if self.energy is not None:
                self.energy.start()
        if updates:
            role.train(updates, linear_beta(cfg.beta0, self.steps, cfg.total_steps))
            self.updates += updates
        self._publish(k)
        if self._eval_due():
            t0 = time.perf_counter()
            self._evaluate()
            stats.eval_s += self._paused(stats, t0)
        if self.checkpointer is not None and self.checkpointer.due(self.updates):
            t0 = time.perf_counter()
            self._checkpoint()
            self._paused(stats, t0)
        self._tick(force=k == sched.segments - 1)

    @staticmethod
    def _paused(stats: LoopStats, t0: float) -> float:
        """The seconds since t0, counted in `stats.paused_s` once learning has started."""
        seconds = time.perf_counter() - t0
        if stats.learn_start_s is not None:
            stats.paused_s += seconds
        return seconds

    def _recover(self, lost: RoleLost) -> int:
        """After `lost`: the roles placed again from the run's newest checkpoint, and the segment to go on from
        (a launcher that can; the others raise `lost`, which ends the run)."""
        raise lost

    def _eval_due(self) -> bool:
        """An in-training evaluation is due (the rule of `BestPolicy.due`, kept here so that a remote role is
        asked only when one is)."""
        job = self.job
        return job.learn and job.eval_every > 0 and job.eval_every_episodes > 0 and self.updates > 0 \
            and self.steps >= self.next_eval

    def _evaluate(self) -> None:
        evaluation = self.role.evaluate(self.steps)
        if evaluation is not None:
            self.evaluations.append(evaluation)
        while self.next_eval <= self.steps:
            self.next_eval += self.job.eval_every

    def _wait(self) -> None:
        """Called while the learner waits for transitions: a short sleep, health checks, metrics lines."""
        t0 = time.perf_counter()
        self._sleep()
        self.waited += time.perf_counter() - t0
        self._tick()

    def _sleep(self) -> None:
        """One wait for the actors' transitions (a launcher whose actors can wake it overrides this)."""
        time.sleep(SHARES_POLL_S)



    def _tick(self, force: bool = False) -> None:
        now = time.perf_counter()
        if now - self._last_health >= 0.2:
            self._last_health = now
            self._health()
        if force or now - self._last_log >= 1.0:
            self._flush(now)

    def _flush(self, now: float) -> None:
        episodes = self._episodes()
        self._stats.episodes.extend(episodes)
        self._log.episodes += episodes
        if self._record is not None:
            status = self._status()
            self.replay_size = status.replay_size
            line = self._log.line(self.config, self.steps, self.updates, status, now - self._t0, now - self._last_log)
            if self.evaluations:
                line["eval/mean_return"] = self.evaluations[-1].mean
                line["eval/best_mean_return"] = max(e.mean for e in self.evaluations)
            self._record.log({**line, **self._extra_metrics()})
        self._last_log = now
        if self._progress is not None:
            self._progress(self.steps)

    def _status(self) -> LearnerStatus:
        return self.role.status()

    def _extra_metrics(self) -> dict[str, Any]:
        return {}

    def _finish(self, stats: LoopStats) -> LoopStats:
        stats.wall_s = time.perf_counter() - self._t0
        if self.energy is not None:
            stats.energy = self.energy.stop()
        stats.steps, stats.updates = self.steps, self.updates
        self._stats = stats
        self._flush(time.perf_counter())
        if self.checkpointer is not None:
            self._checkpoint()  # the end of the run (or of its max_seconds)
            stats.checkpoints = [str(p) for p in self.checkpointer.written]
            stats.checkpoint_s = self.checkpointer.seconds
        stats.kernel_seconds, stats.kernel_calls = self._clocks()
        status = self._status()
        self.replay_size = status.replay_size
        self.sent.merge(status.traffic)  # what the learner's role counted it moved
        stats.final_params = self.role.policy()
        stats.best = self.role.best_policy()
        stats.dropped_steps = self.dropped
        stats.traffic = self.sent.to_dict()
        return stats

    def _checkpoint(self) -> None:
        assert self.checkpointer is not None
        learn, replay = self._kept if self._kept is not None else self.role.state(self.checkpointer.include_replay)
        self.checkpointer.save(self.steps, self.updates, learn, replay)
