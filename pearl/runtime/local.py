"""The local launcher: actor processes beside the learner, on one machine, through shared memory.

    actor process 0 ─┐ transitions (a shared-memory ring per actor)
    actor process 1 ─┼──────────────────────────────► learner (this process): insert segment k in actor order,
          ...        ┘                                  its updates, publish W(k)
          ▲                                                                      │
          └──────── weight boards (lag + 2 slots, one per recent segment) ◄──────┘

It runs the schedule of `pearl.schedule`: an actor collects its share of segment k with the weights
of segment k − 1 − lag, which it finds on the board of that segment's slot; the learner waits until each
actor's share of segment k is in its ring, inserts the shares in actor order, runs the segment's updates
and publishes W(k). Which rows an update may sample and which weights an env step acts with are fixed by
the schedule, so the run gives the same parameters as the sequential launcher for the same seed and lag,
and timing only changes how long it takes. With lag ≥ 1 the actors collect segment k while the learner
trains on segment k − 1.

- Actors (`actor_process.main`) step their own vector of envs, call `act` batched over them on the
  placement's act device, and write transitions into their ring: no pickling per step. Each is a fresh
  interpreter (as multiprocessing's spawn method starts), launched with subprocess so that the user's
  script is never imported again in the child: `pearl.train` works from a script without a main guard.
- Boards: W(k) goes to slot k mod (lag + 2). An actor waiting for W(k − 1 − lag) can find it there: the
  learner overwrites that slot only after every actor has finished segment k + 1.
- Rings hold (lag + 2) shares plus one step: an actor runs at most lag + 1 segments ahead of the learner.
- Wake-ups (`shm.await_wake`): an actor waiting for its weights sleeps until the learner publishes them, and
  the learner waiting for the shares sleeps until an actor has handed on a whole share, so neither side's
  wait costs a core or a poll interval of latency (with one-step segments, DDPG's, a poll interval a step
  would make the actor the bottleneck).

Shutdown (end of run, Ctrl-C, SIGTERM, an actor failure): the stop flag is raised, actors are joined (and
terminated after a grace period), and the segment is unlinked from /dev/shm; metrics lines already written
stay. An actor that dies is started again on its ring and counters, up to max_restarts times: the rows it
pushed stay, and it goes on with its share where its counter says (its envs and exploration reseeded, so a
run with a restart is not bit for bit the run without one).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import threading
import time
from collections import deque
from typing import Any, Callable

import numpy as np

from pearl.algos.base import OffPolicyConfig
from pearl.algos.params import ParamLayout
from pearl.device import HOST_DEVICE, DeviceId
from pearl.children import close_stderr, stderr_tail
from pearl.errors import PearlError
from pearl.profiler.profiler import RuntimeProbes
from pearl.runtime import actor_process, shm
from pearl.runtime.actors import ActorFailed, RestartPolicy
from pearl.runtime.checkpoint import Checkpoint, Checkpointer
from pearl.runtime.job import Job, LauncherCapabilities, Placement
from pearl.runtime.launcher import SHARES_POLL_S, LoopStats, SegmentLauncher
from pearl.adapters.learner_group import dead_learner, stop_learners
from pearl.runtime.learner_group import DEBUG_CHECK_EVERY, GroupLearner, LearnerGroupFailed, form_group
from pearl.runtime.learner_role import LearnerProbe
from pearl.runtime.protocol import Episode, merge_clocks
from pearl.traffic import TRANSITIONS, WEIGHTS
from pearl.types import EnvSpec, TransitionBatch

STARTUP_TIMEOUT_S = 300.0  # an OpenCL actor may compile its program first
JOIN_GRACE_S = 5.0  # how long finished actors get to exit before they are terminated
WAKE_TIMEOUT_S = 0.05  # a learner waiting for the actors' shares wakes at least this often for health checks
EPISODE_RING = 4096


class LocalLauncher(SegmentLauncher):
    """Actors in processes, replay and learner in this one (see the module docstring)."""

    name = "local"
    capabilities = LauncherCapabilities(concurrent_roles=True, actor_restarts=True, learner_group=True,
                                        traffic="local")

    def __init__(self, job: Job, resume: Checkpoint | None = None, checkpointer: Checkpointer | None = None,
                 max_restarts: int = 3, ring_capacity: int | None = None) -> None:
        super().__init__(job, resume, checkpointer)
        sched = self.schedule
        one_step = job.config.n_envs
        need = (sched.lag + 2) * max(sched.share(0, a) for a in range(job.actors)) + one_step
        self.ring_capacity = ring_capacity or max(4096, need)
        if self.ring_capacity < need:  # the learner takes a share only once it is whole in the ring
            raise PearlError(f"ring_capacity {self.ring_capacity} is below the {need} rows the schedule keeps in "
                             "flight per actor")
        self.slots = sched.lag + 2
        self.actors: list[subprocess.Popen] = []  # processes, for callers that count them
        self._actor_args: list[actor_process.ActorArgs] = []
        self.restart_policy = RestartPolicy(max_restarts)
        self.episodes: deque[Episode] = deque()
        self._segment: shm.Segment | None = None
        self._previous_sigterm: Any = None
        self.wake_learner: int | None = None  # the actors wake the learner with their shares (shm.await_wake)
        self.wake_actors: list[int | None] = []  # the learner wakes each actor with new weights
        self.learner_procs: list[subprocess.Popen] = []  # learners 1 … N − 1 of a learner group

    def _learner_devices(self) -> list[DeviceId]:
        return sorted({self.placement.replay, self.placement.learn}, key=str)  # actors open the act device themselves

    # --------------------------------------------------------------------------------- start / stop
    def start(self) -> None:
        params = ParamLayout.of(self.policy)
        specs = shm.counter_specs(self.job.actors)
        for s in range(self.slots):
            specs += shm.WeightBoard.specs(params, f"weights{s}")
        for i in range(self.job.actors):
            specs += shm.ring_specs(f"ring{i}", self.ring_capacity, self.spec)
            specs += actor_process.episode_specs(f"episodes{i}", EPISODE_RING)
        layout = shm.Layout.of(specs)
        shm.sweep_stale()
        segment = self._segment = shm.Segment(layout)
        self._previous_sigterm = raise_on_sigterm()  # restored by stop(), which runs once the segment exists
        self.boards = [shm.WeightBoard(segment, params, f"weights{s}") for s in range(self.slots)]
        for tag in range(self.first_segment - 1 - self.schedule.lag, self.first_segment):
            self.boards[tag % self.slots].publish(self.policy, tag)
        self.wake_learner = shm.make_wake()
        self.wake_actors = [shm.make_wake() for _ in range(self.job.actors)]
        self.rings = [shm.Ring(segment, f"ring{i}") for i in range(self.job.actors)]
        self.episode_rings = [shm.Ring(segment, f"episodes{i}", actor_process.EPISODE_FIELDS)
                              for i in range(self.job.actors)]
        for i in range(self.job.actors):
            args = actor_process.ActorArgs(
                actor_id=i, segment=segment.name, layout=layout, params=params, config=self.config, spec=self.spec,
                device=self.placement.act, descriptor=self.job.descriptor_for(self.placement.act),
                seeds=self.seeds.actor(i), schedule=self.schedule, slots=self.slots,
                collected=self.schedule.steps_before(self.first_segment, i), parent_pid=os.getpid(),
                wake_actor=self.wake_actors[i], wake_learner=self.wake_learner,
                implementation=self.placement.act_way)
            self._actor_args.append(args)
            self.actors.append(actor_process.start(args))
        if self.job.learners > 1:
            self._start_group()
        self._wait_until_ready(segment)

    def _start_group(self) -> None:
        """Learners 1 … N − 1 in processes of their own, started from this learner's state; this one becomes
        learner 0 of the group (`pearl.runtime.learner_group`)."""
        role = self._local_role()
        check_every = DEBUG_CHECK_EVERY if os.environ.get("PEARL_DEBUG") else 0
        role.learner = form_group(role.learner, self.job, self.learner_procs, check_every,
                                  lambda: dead_learner(self.learner_procs))

    def stop(self) -> None:
        self._stop_group()
        segment = self._segment
        if segment is None:
            return
        self._segment = None
        segment["run"][shm.RUN_INTS.index("stop")] = 1
        for fd in self.wake_actors:  # an actor waiting for weights sees the stop at once
            shm.wake(fd)
        try:
            self._stop_actors()
        finally:
            for fd in (self.wake_learner, *self.wake_actors):
                if fd is not None:
                    os.close(fd)
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
            segment.close()
            segment.unlink()

    def _stop_group(self) -> None:
        learner = self._local_role().learner
        if isinstance(learner, GroupLearner):
            learner.close()
        procs, self.learner_procs = self.learner_procs, []
        stop_learners(procs)

    # ------------------------------------------------------------------------------ the schedule's hooks
    def _collect(self, k: int, insert: Callable[[TransitionBatch], None], wait: Callable[[], None]) -> None:
        """Wait until every actor's share of segment k is in its ring, then insert the shares in actor order
        (all at once, so replay holds whole segments whenever the run is interrupted)."""
        shares = [self.schedule.share(k, i) for i in range(len(self.rings))]
        while any(ring.pending() < n for ring, n in zip(self.rings, shares)):
            wait()
        for ring, n in zip(self.rings, shares):
            if n:  # a share leaves its ring as one batch (two views when it wraps around)
                nbytes: list[int] = []

                def take(rows: dict[str, np.ndarray], nbytes: list[int] = nbytes) -> None:
                    piece = TransitionBatch(*(rows[f] for f in shm.RING_FIELDS))
                    insert(piece)  # before pop frees the rows for the actor to write again
                    nbytes.append(piece.nbytes)
                ring.pop(take, n)
                self.sent.add(TRANSITIONS, nbytes=sum(nbytes))
        for ring in self.episode_rings:
            ring.pop(self._take_episodes)

    def _publish(self, tag: int) -> None:
        self.learner.publish(lambda write, _version: self.boards[tag % self.slots].publish(write, tag))
        self.sent.add(WEIGHTS, messages=0, publishes=1)
        for fd in self.wake_actors:
            shm.wake(fd)

    def _sleep(self) -> None:
        shm.await_wake(self.wake_learner, WAKE_TIMEOUT_S, SHARES_POLL_S)

    def _episodes(self) -> list[Episode]:
        if self._segment is not None:
            for ring in self.episode_rings:
                ring.pop(self._take_episodes)
        out = list(self.episodes)
        self.episodes.clear()
        return out

    def _take_episodes(self, rows: dict[str, np.ndarray]) -> None:
        for ret, length in zip(rows["ret"], rows["length"]):
            self.episodes.append(Episode(float(ret), int(length)))

    def _extra_metrics(self) -> dict[str, Any]:
        return {"runtime/actor_restarts": self.restarts}

    def _finish(self, stats: LoopStats) -> LoopStats:
        self.dropped = self._dropped()
        self._count_loads()
        stats = super()._finish(stats)
        stats.restarts, stats.lost_steps_max = self.restarts, self.restarts * self.config.n_envs
        stats.waits = dict(self.waits)
        return stats

    def _count_loads(self) -> None:
        """The weight boards the actors copied, as each counted them in its row (`pearl.traffic`)."""
        assert self._segment is not None
        ints = self._segment["actor.ints"]
        loads = int(ints[:, shm.ACTOR_INTS.index("loads")].sum())
        self.sent.add(WEIGHTS, loads, int(ints[:, shm.ACTOR_INTS.index("load_bytes")].sum()), loads=loads)

    def _dropped(self) -> int:
        assert self._segment is not None
        return int(self._segment["actor.ints"][:, shm.ACTOR_INTS.index("dropped")].sum())

    # ------------------------------------------------------------------------------------ processes
    def _wait_until_ready(self, segment: shm.Segment) -> None:
        """Wait for every actor to be set up (env, adapter, weights), then let them all start at once: the
        run's clock starts after this, so start-up time is not counted as training time."""
        status = segment["actor.ints"][:, shm.ACTOR_INTS.index("status")]
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not (status == shm.RUNNING).all():
            self._health()
            if time.monotonic() > deadline:
                raise ActorFailed(f"the actors were not ready after {STARTUP_TIMEOUT_S:.0f} s")
            shm.wait_briefly(1e-3)
        segment["run"][shm.RUN_INTS.index("go")] = 1

    def _health(self) -> None:
        """Raise if an actor failed past the restart limit (an actor's own message is passed on), or a learner of
        the group died."""
        segment = self._segment
        assert segment is not None
        dead = dead_learner(self.learner_procs)
        if dead:
            raise LearnerGroupFailed(f"a learner of the group failed: {dead}")
        status = shm.ACTOR_INTS.index("status")
        for i, proc in enumerate(self.actors):
            state = int(segment["actor.ints"][i, status])
            code = proc.poll()
            if state == shm.FAILED:
                message = shm.read_error(segment, i)
                reason = f"failed: {message.splitlines()[0] if message else 'no message'}"
            elif state != shm.FINISHED and code is not None:
                reason = f"exited with code {code} before finishing{stderr_tail(proc)}"
            else:
                continue
            self._restart(segment, i, reason)

    def _restart(self, segment: shm.Segment, i: int, reason: str) -> None:
        """Start actor i again on its ring and counters (ActorFailed past the restart limit): it goes on with its
        share from the rows it pushed."""
        restarts = self.restart_policy.admit(i, reason)
        proc = self.actors[i]
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        close_stderr(proc)
        ints = segment["actor.ints"][i]
        ints[shm.ACTOR_INTS.index("status")] = shm.STARTING
        segment["actor.error"][i] = 0
        args = dataclasses.replace(self._actor_args[i], seeds=self.seeds.actor(i, restarts),
                                   collected=int(ints[shm.ACTOR_INTS.index("produced")]))
        self.actors[i] = actor_process.start(args)

    def _stop_actors(self) -> None:
        deadline = time.monotonic() + JOIN_GRACE_S
        for proc in self.actors:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.actors:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(1.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            close_stderr(proc)

    def _clocks(self) -> tuple[dict[str, float], dict[str, int]]:
        assert self._segment is not None
        return self._read_clocks(self._segment)

    def _read_clocks(self, segment: shm.Segment) -> tuple[dict[str, float], dict[str, int]]:
        seconds, calls = merge_clocks((self.replay.clock, self.learner.clock))
        floats, ints = segment["actor.floats"], segment["actor.ints"]
        for kernel in ("act", "env_step", "weight_sync"):
            seconds[kernel] = seconds.get(kernel, 0.0) + float(floats[:, shm.ACTOR_FLOATS.index(kernel)].sum())
        calls["act"] = int(ints[:, shm.ACTOR_INTS.index("act_calls")].sum())
        calls["env_step"] = int(ints[:, shm.ACTOR_INTS.index("env_calls")].sum())
        if not self.config.prioritized:  # uniform replay: the learner skips the no-op priority update
            seconds.setdefault("priority_update", 0.0)
            calls.setdefault("priority_update", 0)
        self.waits = {"learner_wait_s": self.waited,
                      "actor_weights_wait_s": float(floats[:, shm.ACTOR_FLOATS.index("weights_wait")].sum()),
                      "actor_ring_wait_s": float(floats[:, shm.ACTOR_FLOATS.index("ring_wait")].sum())}
        return seconds, calls


def raise_on_sigterm(seen: threading.Event | None = None) -> Any:
    """SIGTERM ends the run like Ctrl-C does (cleanup runs), and sets `seen` when given; returns the handler to
    restore."""
    def handler(signum: int, frame: Any) -> None:
        if seen is not None:
            seen.set()
        raise SystemExit(128 + signum)
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


def segment_overhead(config: OffPolicyConfig, spec: EnvSpec, seconds: float) -> float:
    """The learner's loop a segment beyond its kernels as this launcher runs it, for the profiler (`run_profile`'s
    segment_loop): a collect-only run (no updates) of one actor process of one env on the workload's own
    segments, for `seconds` after the actor is ready; (its wall − the learner's waits for the actor's shares −
    its replay inserts and weight publishes) ÷ its segments. What is left is taking the shares out of the rings,
    waking the actors and the segment loop's own bookkeeping, which no kernel timing holds."""
    config = dataclasses.replace(config, n_envs=1, total_steps=SEGMENT_PROBE_STEPS)
    job = Job.of(config, spec, Placement.single(HOST_DEVICE), seed=0, actors=1, threads=1, learn=False)
    launcher = LocalLauncher(job)
    stats = launcher.run(max_seconds=seconds)
    kernels = sum(clock.seconds.get(k, 0.0) for clock in launcher.role.clocks() for k in ("replay_insert",
                                                                                          "weight_sync"))
    segments = max(1, stats.steps // launcher.schedule.segment_steps)
    return max(0.0, (stats.wall_s - stats.waits["learner_wait_s"] - kernels) / segments)


#: env steps of the segment probe's run: more than it reaches in its seconds
SEGMENT_PROBE_STEPS = 1 << 30
#: what this launcher lends the profiler: its actor process's iteration, its learner's segment loop and the
#: learner role's per-update path
PROBES = RuntimeProbes(actor_process.IterationProbe, segment_overhead, LearnerProbe)
