"""The parallel launcher: actor processes beside a learner process that prefetches its samples.

    actor process 0 ─┐ transitions (shared-memory ring per actor)
    actor process 1 ─┼──────────────────────────────► replay thread ──sample queue (1)──► learner (main thread)
          ...        ┘                                 insert, sample,  ◄──priority updates──┘   │
          ▲                                            priority update                          │
          └──────────────── weight board (shared memory, seqlock, every K updates) ◄─────────────┘

- Actors (`actor_process.main`) step their own vector of envs, call `act` batched over them on the
  placement's act device, and write transitions into their ring: no pickling per step. Each is a fresh
  interpreter (as multiprocessing's spawn method starts), launched with subprocess so that the user's
  script is never imported again in the child: `pearl.train` works from a script without a main guard.
- The replay thread owns the replay manager (its storage lives on the placement's replay device): it
  drains the rings into replay, keeps one sampled batch ready, and applies priority updates. Prefetching
  means the batch for update t+1 is sampled while update t runs, so the priority update of step t lands
  after the sample of step t+1: that sample sees priorities one update old (prioritized replay only).
- The learner (this process's main thread) takes the ready batch, runs `learn` on the placement's learn
  device, hands the TD errors back, and publishes weights every K = weight_sync_interval updates; it never
  waits for an actor to read them.
- The rate limiter (`RateLimiter`) holds updates per env step at the algorithm's ρ; the run record reports
  the measured ratio. Collection-only runs (learn=False) insert but never update, and are not throttled.

Shutdown (end of run, Ctrl-C, SIGTERM, an actor failure): the stop flag is raised, actors are joined (and
terminated after a grace period), the replay thread is joined, and the segment is unlinked from /dev/shm;
metrics lines already written stay.
"""

from __future__ import annotations

import dataclasses
import math
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from pearl.adapters import open_adapter
from pearl.algos.base import OffPolicyConfig
from pearl.algos.params import ParamLayout, init_params
from pearl.errors import PearlError
from pearl.replay import linear_beta
from pearl.runtime import actor_process, shm
from pearl.runtime.checkpoint import Checkpoint, Checkpointer, actor_seed, learning_resumes_at, restore
from pearl.runtime.limiter import RateLimiter
from pearl.runtime.local import LogState, LoopStats, Placement
from pearl.runtime.protocol import Episode, Learner, ReplayManager, merge_clocks
from pearl.runtime.record import RunRecord
from pearl.types import EnvSpec, PriorityUpdate, SampleBatch, TransitionBatch

STARTUP_TIMEOUT_S = 300.0  # an OpenCL actor may compile its program first
# The replay thread shares the GIL with the learner, so it must not poll: it sleeps until the learner takes
# a batch (or hands back priorities), and otherwise wakes this often to drain the actors' rings.
PUMP_IDLE_S = 1e-3
# Without the replay thread the learner drains the rings itself, every few updates (each drain costs ~10 µs
# even when empty; rings hold thousands of rows, so a few updates' delay loses nothing) and whenever the
# limiter makes it wait.
SERVICE_EVERY = 4
JOIN_GRACE_S = 5.0  # how long finished actors get to exit before they are terminated
EPISODE_RING = 4096


class ActorFailed(PearlError):
    """An actor process stopped with an error (its message is passed on)."""


@dataclass
class _Progress:
    """What the replay thread has seen, read by the learner thread (plain ints: atomic under the GIL)."""

    inserted: int = 0
    dropped: int = 0  # rows produced past total_steps (the last step of several actors can overshoot)
    episodes: deque = field(default_factory=deque)
    error: BaseException | None = None


class ParallelLauncher:
    """Actors in processes, replay and learner in this one; same interface as `LocalLauncher`."""

    def __init__(self, config: OffPolicyConfig, spec: EnvSpec, placement: Placement, seed: int,
                 threads: int | None = None, descriptor: str | None = None, actors: int = 1,
                 learn: bool = True, ring_capacity: int | None = None, prefetch: bool | None = None,
                 max_restarts: int = 3, resume: Checkpoint | None = None,
                 checkpointer: Checkpointer | None = None) -> None:
        """prefetch: sample on the replay thread while the learner trains (True), or on the learner's thread
        between updates (False). None picks the thread when replay lives on an accelerator, whose kernels run
        asynchronously, and the learner's thread for host replay: there both threads need the GIL for their
        Python work, and on a 2-core EPYC the thread made DQN CartPole slower (2,007 against 2,218 env
        steps/s; samples took 233 µs instead of 51)."""
        self.config, self.spec, self.placement, self.seed = config, spec, placement, seed
        self.n_actors, self.learn, self.descriptor = actors, learn, descriptor
        self.prefetch = prefetch if prefetch is not None else placement.replay != "cpu"
        # the learner process opens only the replay and learn devices; actors open their own
        here = sorted({placement.replay, placement.learn})
        self.adapters = {d: open_adapter(d, threads, descriptor if d.startswith("opencl") else None) for d in here}
        self.params = init_params(config, spec, seed)
        self.replay = ReplayManager(self.adapters[placement.replay].make_replay(config, spec, seed + 2),
                                    config.batch_size)
        self.learner = Learner(self.adapters[placement.learn].make_learn(config, spec, self.params),
                               self.adapters[placement.learn], config)
        self.resume, self.checkpointer = resume, checkpointer
        self.start_steps = resume.steps if resume is not None else 0
        if resume is not None:
            restore(resume, self.learner.kernel, self.replay.kernels)
            self.learner.published_version = self.learner.updates
        self.policy = self.learner.kernel.policy_params()
        # Updates run once learn_after env steps are in replay. Resumed without replay, the learner waits for
        # that many new transitions and then keeps ρ from its saved update count: the limiter's learning
        # start moves to where ρ·(S − L') equals that count when replay is full enough again.
        self.learn_after = learning_resumes_at(config.learning_starts, resume)
        self.limiter = None
        if learn:
            limiter = RateLimiter.for_config(config, actors)
            if resume is not None and resume.replay is None:
                limiter = dataclasses.replace(
                    limiter, learning_starts=self.learn_after - math.ceil(self.learner.updates / config.replay_ratio))
            self.limiter = limiter
        self.ring_capacity = ring_capacity or max(4096, 8 * config.n_envs)
        if self.ring_capacity < config.n_envs:
            raise PearlError(f"ring_capacity {self.ring_capacity} is smaller than one step of {config.n_envs} envs")
        self.actors: list[Any] = []  # processes, for callers that count them
        self._actor_args: list[actor_process.ActorArgs] = []
        self.max_restarts, self.restarts = max_restarts, 0
        self._pump: _ReplayPump | None = None
        self.restart_log: list[str] = []  # why each restart happened

    # ------------------------------------------------------------------------------------------ setup
    def _layout(self) -> tuple[shm.Layout, ParamLayout]:
        params = ParamLayout.of(self.policy)
        specs = shm.counter_specs(self.n_actors) + shm.WeightBoard.specs(params)
        for i in range(self.n_actors):
            specs += shm.ring_specs(f"ring{i}", self.ring_capacity, self.spec)
            specs += actor_process.episode_specs(f"episodes{i}", EPISODE_RING)
        return shm.Layout.of(specs), params

    def _start_actors(self, segment: shm.Segment, layout: shm.Layout, params: ParamLayout) -> None:
        for i in range(self.n_actors):
            args = actor_process.ActorArgs(
                actor_id=i, segment=segment.name, layout=layout, params=params, config=self.config, spec=self.spec,
                device=self.placement.act, descriptor=self.descriptor if self.placement.act.startswith("opencl")
                else None, seed=actor_seed(self.seed, i, self.start_steps), limiter=self.limiter,
                parent_pid=os.getpid(), start_steps=self.start_steps)
            self._actor_args.append(args)
            self.actors.append(actor_process.start(args))

    # -------------------------------------------------------------------------------------------- run
    def run(self, record: RunRecord | None = None, progress: Callable[[int], None] | None = None,
            max_seconds: float | None = None) -> LoopStats:
        """Train for config.total_steps env steps (or max_seconds); always cleans up processes and memory."""
        layout, params = self._layout()
        shm.sweep_stale()
        segment = shm.Segment(layout)
        previous = _raise_on_sigterm()
        pump: _ReplayPump | None = None
        try:
            board = shm.WeightBoard(segment, params)
            board.publish(self.policy, self.learner.updates)
            self._start_actors(segment, layout, params)
            pump = self._pump = _ReplayPump(self.replay, segment, self.n_actors, self.config, self.learn,
                                            self.prefetch, start_steps=self.start_steps, learn_after=self.learn_after)
            if self.prefetch:
                pump.start()
            self._wait_until_ready(segment, pump)
            return self._learn_loop(segment, board, pump, record, progress, max_seconds)
        finally:  # each step runs even if an earlier one fails: no process or segment may outlive the run
            segment["run"][shm.RUN_INTS.index("stop")] = 1
            try:
                if pump is not None:
                    pump.stop()
            finally:
                try:
                    self._stop_actors()
                finally:
                    signal.signal(signal.SIGTERM, previous)
                    segment.close()
                    segment.unlink()

    def _learn_loop(self, segment: shm.Segment, board: shm.WeightBoard, pump: "_ReplayPump",
                    record: RunRecord | None, progress: Callable[[int], None] | None,
                    max_seconds: float | None) -> LoopStats:
        cfg, learner, limiter = self.config, self.learner, self.limiter
        run = segment["run"]
        updates_at = shm.RUN_INTS.index("updates")
        run[updates_at] = learner.updates
        stats = LoopStats(start_steps=self.start_steps, start_updates=learner.updates)
        start = last_log = last_health = time.perf_counter()
        log = LogState(steps=self.start_steps, updates=learner.updates)
        idle = 0.0
        target_updates = limiter.updates_allowed(cfg.total_steps) if limiter else 0
        rounds = 0

        def flush(now: float, since: float) -> None:
            """Episodes seen so far into the stats, one metrics line for the interval, progress."""
            episodes = pump.take_episodes()
            stats.episodes.extend(episodes)
            log.episodes += episodes
            if record is not None:
                record.log({**log.line(cfg, pump.progress.inserted, learner.updates, learner, self.replay.size,
                                       now - start, now - since), "runtime/actor_restarts": self.restarts})
            if progress is not None:
                progress(pump.progress.inserted)

        while True:
            rounds += 1
            if not pump.threaded and rounds % SERVICE_EVERY == 0:
                pump.service()
            now = time.perf_counter()
            steps = pump.progress.inserted
            if limiter is not None and limiter.learner_may_update(steps, learner.updates):
                if stats.learn_start_s is None:
                    stats.learn_start_s, stats.learn_start_steps = now - start, steps
                batch = pump.next_batch()
                if batch is None:  # the replay thread stopped
                    break
                pump.give_priorities(learner.update(batch))
                run[updates_at] = learner.updates
                if learner.snapshot_due() and self._snapshot_taken(segment, board):
                    learner.publish(board.publish)
                if self.checkpointer is not None and self.checkpointer.due(learner.updates):
                    self._checkpoint(pump)
            else:
                if steps >= cfg.total_steps and learner.updates >= target_updates:
                    break
                t0 = time.perf_counter()
                if pump.threaded or not pump.service():  # nothing new in the rings: wait a little
                    shm.wait_briefly()
                idle += time.perf_counter() - t0
            now = time.perf_counter()
            if now - last_health >= 0.2:
                last_health = now
                self._check_health(segment, pump)
            out_of_time = max_seconds is not None and now - start >= max_seconds
            if now - last_log >= 1.0 or out_of_time:
                flush(now, last_log)
                last_log = now
            if out_of_time:
                break
        end = time.perf_counter()
        stats.wall_s = end - start
        flush(end, last_log)
        stats.steps = pump.progress.inserted
        stats.updates = learner.updates
        pump.stop()
        if self.checkpointer is not None:
            self._checkpoint(pump)  # the end of the run (or of its max_seconds); the pump has stopped
            stats.checkpoints = [str(p) for p in self.checkpointer.written]
            stats.checkpoint_s = self.checkpointer.seconds
        self._collect_clocks(segment, pump, stats, idle)
        stats.final_params = learner.kernel.policy_params()
        stats.dropped_steps = pump.progress.dropped
        stats.restarts = self.restarts
        stats.lost_steps_max = self.restarts * self.config.n_envs
        return stats

    def checkpoint_now(self) -> str | None:
        """A checkpoint of where an interrupted run stopped (Ctrl-C, SIGTERM, a failed actor), taken after
        `run` has stopped the actors and the replay thread; the path, or None when there is nothing new."""
        pump = self._pump
        if self.checkpointer is None or pump is None or pump.progress.inserted == self.start_steps:
            return None
        self._checkpoint(pump)
        return str(self.checkpointer.written[-1])

    def _checkpoint(self, pump: "_ReplayPump") -> None:
        """A checkpoint of the learner and replay as they are now; the replay thread is held meanwhile, so
        the replay state and its step count agree."""
        assert self.checkpointer is not None
        with pump.lock:
            replay = self.replay.kernels.state_dict() if self.checkpointer.include_replay else None
            steps = pump.progress.inserted
        self.checkpointer.save(steps, self.learner.updates, self.learner.kernel.state_dict(), replay)

    def _snapshot_taken(self, segment: shm.Segment, board: shm.WeightBoard) -> bool:
        """Whether an actor has loaded the snapshot on the board. Until one has, a newer snapshot would only
        overwrite it unread, so the learner skips the copy (it costs it ~20 µs, and more while an actor
        reads the same memory); the next snapshot then goes out right after an actor's read."""
        return int(segment["actor.ints"][:, shm.ACTOR_INTS.index("weights_seq")].max()) >= board.sequence()

    def _wait_until_ready(self, segment: shm.Segment, pump: "_ReplayPump") -> None:
        """Wait for every actor to be set up (env, adapter, weights), then let them all start at once: the
        run's clock starts here, so start-up time is not counted as training time."""
        status = segment["actor.ints"][:, shm.ACTOR_INTS.index("status")]
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not (status == shm.RUNNING).all():
            self._check_health(segment, pump)
            if time.monotonic() > deadline:
                raise ActorFailed(f"the actors were not ready after {STARTUP_TIMEOUT_S:.0f} s")
            shm.wait_briefly(1e-3)
        segment["run"][shm.RUN_INTS.index("go")] = 1

    def _check_health(self, segment: shm.Segment, pump: "_ReplayPump") -> None:
        """Raise if the replay thread or an actor failed (an actor's own message is passed on)."""
        if pump.progress.error is not None:
            raise pump.progress.error
        status = shm.ACTOR_INTS.index("status")
        for i, proc in enumerate(self.actors):
            state = int(segment["actor.ints"][i, status])
            code = proc.poll()
            if state == shm.FAILED:
                message = shm.read_error(segment, i)
                reason = f"failed: {message.splitlines()[0] if message else 'no message'}"
            elif state != shm.FINISHED and code is not None:
                reason = f"exited with code {code} before finishing{actor_process.stderr_tail(proc)}"
            else:
                continue
            if self.restarts >= self.max_restarts:
                raise ActorFailed(f"actor {i} {reason} (after {self.restarts} restart(s); the limit is "
                                  f"{self.max_restarts})")
            self._restart(segment, i, reason)

    def _restart(self, segment: shm.Segment, i: int, reason: str) -> None:
        """Start actor i again on its ring and counters. Rows it had pushed are kept; what it lost is at most
        the step it was taking (n_envs transitions) and its unfinished episodes."""
        proc = self.actors[i]
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        actor_process.close_stderr(proc)
        self.restarts += 1
        self.restart_log.append(f"actor {i} {reason}")
        segment["actor.ints"][i, shm.ACTOR_INTS.index("status")] = shm.STARTING
        segment["actor.error"][i] = 0
        args = dataclasses.replace(self._actor_args[i], seed=self._actor_args[i].seed + 104_729 * self.restarts)
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
            actor_process.close_stderr(proc)

    def _collect_clocks(self, segment: shm.Segment, pump: "_ReplayPump", stats: LoopStats, idle: float) -> None:
        seconds, calls = merge_clocks((pump.replay.clock, self.learner.clock))
        floats, ints = segment["actor.floats"], segment["actor.ints"]
        for kernel in ("act", "env_step", "weight_sync"):
            seconds[kernel] = seconds.get(kernel, 0.0) + float(floats[:, shm.ACTOR_FLOATS.index(kernel)].sum())
        calls["act"] = int(ints[:, shm.ACTOR_INTS.index("act_calls")].sum())
        calls["env_step"] = int(ints[:, shm.ACTOR_INTS.index("env_calls")].sum())
        if not self.config.prioritized:  # uniform replay: the learner skips the no-op priority update
            seconds.setdefault("priority_update", 0.0)
            calls.setdefault("priority_update", 0)
        stats.kernel_seconds, stats.kernel_calls = seconds, calls
        stats.waits = {"learner_idle_s": idle,
                       "actor_limiter_wait_s": float(floats[:, shm.ACTOR_FLOATS.index("limiter_wait")].sum()),
                       "actor_ring_wait_s": float(floats[:, shm.ACTOR_FLOATS.index("ring_wait")].sum()),
                       "learner_sample_wait_s": pump.sample_wait}


class _ReplayPump(threading.Thread):
    """The replay manager's thread: drain rings into replay, keep one sample ready, apply priorities."""

    def __init__(self, replay: ReplayManager, segment: shm.Segment, actors: int, config: OffPolicyConfig,
                 learn: bool, threaded: bool = True, start_steps: int = 0, learn_after: int | None = None) -> None:
        super().__init__(name="pearl-replay", daemon=True)
        self.threaded = threaded  # False: the learner thread calls service() itself (no prefetch)
        self.replay, self.config, self.learn = replay, config, learn
        self.rings = [shm.Ring(segment, f"ring{i}") for i in range(actors)]
        self.episode_rings = [shm.Ring(segment, f"episodes{i}", actor_process.EPISODE_FIELDS)
                              for i in range(actors)]
        self.progress = _Progress(inserted=start_steps)
        self.learn_after = config.learning_starts if learn_after is None else learn_after
        self.lock = threading.Lock()  # held while servicing; a checkpoint holds it to read replay whole
        self.ready: queue.Queue[SampleBatch | None] = queue.Queue(maxsize=1)
        self.priorities: queue.SimpleQueue[PriorityUpdate] = queue.SimpleQueue()
        self.sample_wait = 0.0  # seconds the learner waited for a batch
        self._halt = threading.Event()
        self._wake = threading.Event()  # set by the learner when it takes a batch or returns priorities

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                self._wake.clear()
                drained = self.service()
                if not drained:  # rows arriving: loop at once; else sleep until woken or PUMP_IDLE_S
                    self._wake.wait(PUMP_IDLE_S)
        except BaseException as exc:  # noqa: B036 — handed to the learner thread, which raises it
            self.progress.error = exc
        finally:
            try:
                self.ready.put_nowait(None)  # wake a learner waiting for a batch
            except queue.Full:
                pass

    def service(self) -> bool:
        """One round of the replay manager's work; True when rows arrived."""
        with self.lock:
            self._apply_priorities()
            drained = self._drain()
            if self.threaded:
                self._prefetch()
        return drained

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()
        if self.threaded and self.is_alive() and threading.current_thread() is not self:
            self.join()

    # the learner thread's side
    def next_batch(self) -> SampleBatch | None:
        if not self.threaded:  # sample here and now (the learner loop has just serviced the rings)
            return self.replay.sample(self._beta())
        t0 = time.perf_counter()
        while True:
            try:
                batch = self.ready.get(timeout=0.1)  # wakes when the replay thread puts one
                break
            except queue.Empty:
                if self.progress.error is not None:
                    raise self.progress.error from None
        if batch is None and self.progress.error is not None:
            raise self.progress.error
        self._wake.set()  # the slot is free: sample the next batch while this one trains
        self.sample_wait += time.perf_counter() - t0
        return batch

    def give_priorities(self, update: PriorityUpdate) -> None:
        if not self.config.prioritized:
            return
        if not self.threaded:
            self.replay.update_priorities(update)
            return
        self.priorities.put(update)
        self._wake.set()

    def take_episodes(self) -> list[Episode]:
        out = []
        while self.progress.episodes:
            out.append(self.progress.episodes.popleft())
        return out

    # the replay thread's side
    def _apply_priorities(self) -> bool:
        busy = False
        while True:
            try:
                update = self.priorities.get_nowait()
            except queue.Empty:
                return busy
            self.replay.update_priorities(update)
            busy = True

    def _drain(self) -> bool:
        got = 0
        for ring in self.rings:
            got += ring.pop(self._insert)
        for ring in self.episode_rings:
            ring.pop(self._episodes)
        return got > 0

    def _insert(self, rows: dict[str, np.ndarray]) -> None:
        room = self.config.total_steps - self.progress.inserted
        n = len(rows["reward"])
        keep = min(n, max(room, 0))
        if keep:
            self.replay.insert(TransitionBatch(*(rows[f][:keep] for f in shm.RING_FIELDS)))
        self.progress.dropped += n - keep
        self.progress.inserted += keep

    def _episodes(self, rows: dict[str, np.ndarray]) -> None:
        for ret, length in zip(rows["ret"], rows["length"]):
            self.progress.episodes.append(Episode(float(ret), int(length)))

    def _prefetch(self) -> bool:
        if not self.learn or self.ready.full() or self.progress.inserted <= self.learn_after:
            return False
        self.ready.put_nowait(self.replay.sample(self._beta()))  # the only producer, and the slot was free
        return True

    def _beta(self) -> float:
        return linear_beta(self.config.beta0, self.progress.inserted, self.config.total_steps)


def _raise_on_sigterm() -> Any:
    """SIGTERM ends the run like Ctrl-C does (cleanup runs); returns the handler to restore."""
    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)
    if threading.current_thread() is not threading.main_thread():
        return signal.getsignal(signal.SIGTERM)
    return signal.signal(signal.SIGTERM, handler)
