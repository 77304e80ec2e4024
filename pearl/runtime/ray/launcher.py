"""The Ray launcher (``--launcher ray``): every role a Ray actor placed by the plan, the driver runs the loop.

`RayLauncher` starts or joins Ray (`session`), places the learner, the replay shards and the actor workers
(`placement`, checked against the cluster before any starts), and runs `SegmentLauncher`'s segment loop over
them: workers collect ahead while the learner trains, batches and weights go between roles as object refs,
a worker that dies is restarted and asked again, a learner or replay shard that dies has the run go on from its
newest checkpoint on the nodes left, and at the end every role is stopped and a Ray instance that pearl started
is shut down. Every role is a named actor in the run's own namespace (`runs`): joining a cluster
first removes the runs whose driver is gone, and `stop` kills every actor of the run's namespace, whatever
ended the run (its end, an error, Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pearl.adapters.slices import slice_env
from pearl.device import DeviceId
from pearl.errors import PearlError
from pearl.runtime.actors import ActorFailed, RestartPolicy, RoleLost
from pearl.runtime.checkpoint import Checkpoint, Checkpointer, latest
from pearl.runtime.job import Job, LauncherCapabilities, RoleNodes
from pearl.runtime.launcher import LoopStats, SegmentLauncher
from pearl.runtime.learner_group import DEBUG_CHECK_EVERY
from pearl.runtime.local import raise_on_sigterm
from pearl.runtime.protocol import Episode, KernelClock, merge_clocks
from pearl.runtime.ray.learner import RayLearnerHandle, learner_class
from pearl.runtime.ray.nodes import await_node_deaths, described, lost_nodes
from pearl.runtime.ray.placement import (GivenPlacements, Placements, ShardPlacement, check_roles, cluster_nodes,
                                         plan_node_ids, plan_placements, progress, role_placements)
from pearl.runtime.ray.replay_client import remote_shards
from pearl.runtime.ray.runs import RunNamespace, remove_lost_runs
from pearl.runtime.ray.session import check_installed, connect, first_line, require_ray, shutdown, start_local_ray
from pearl.runtime.ray.worker import (Collected, InFlight, WorkerRestarted, get_from_workers, set_up_again,
                                      worker_class)
from pearl.runtime.record import RunRecord
from pearl.traffic import CALLS, TRANSITIONS, WEIGHTS
from pearl.types import TransitionBatch

__all__ = ["RayLauncher"]

STARTUP_TIMEOUT_S = 300.0  # roles are placed, started and set up (envs, act kernel, learner) within this
STOP_STATE_TIMEOUT_S = 120.0  # an interrupted run's learner hands over its state for the checkpoint within this


class RayLauncher(SegmentLauncher):
    """Every role a Ray actor placed by the plan: actor workers, the learner (with replay, or a client of the
    replay server's shards), the replay shards; the driver (this process) runs only the segment loop,
    checkpoints, evaluations' timing and the metrics lines.

    The workers collect segment k + 1 .. k + lag while the learner trains on segment k: `start` asks every
    worker for segments first .. first + lag (with the starting policy, the learner's, as one object ref);
    `_collect(k)` waits for what each worker measured of segment k and sends the learner the refs of the
    batches, in actor order; the loop sends the segment's updates; `_publish(k)` asks the learner for W(k)
    (an object ref, never fetched by the driver) and every worker for segment k + 1 + lag, which acts with
    it. Ray runs one caller's calls to an actor in order, so each worker collects its segments in turn and
    the learner inserts, trains and publishes in the schedule's order. Which rows reach replay and which
    weights each step acts with are the schedule's, so the parameters equal the sequential and the local
    launcher's bit for bit.

    A worker that dies is restarted by Ray (``max_restarts``); the driver sets it up again at the rows the
    learner received from it (reseeded, as the local launcher's actors) and asks again for every segment in
    flight. A role that holds the run's state (the learner, a learner of its group, a replay shard) cannot be
    set up again where it stopped: its death (`RoleLost`, with its process or its node) has every role placed
    again on the nodes left, from the run's newest checkpoint (`_recover`), while restarts are left.
    """

    name = "ray"
    capabilities = LauncherCapabilities(concurrent_roles=True, replay_shards=True, cluster_plans=True,
                                        actor_restarts=True, learner_group=True, on_this_host=False,
                                        traffic="ray")

    @classmethod
    def check_available(cls) -> None:
        check_installed()

    def __init__(self, job: Job, resume: Checkpoint | None = None, checkpointer: Checkpointer | None = None,
                 address: str | None = None, max_restarts: int = 3,
                 actor_placement: ShardPlacement | None = None, replay_shards: int = 0,
                 replay_placement: ShardPlacement | None = None,
                 learner_placement: ShardPlacement | None = None, role_nodes: RoleNodes | None = None,
                 member_placement: ShardPlacement | None = None) -> None:
        """`role_nodes` (a cluster plan's): each role pinned to the Ray node of its plan node (see
        `plan_node_ids`); the placements given explicitly win over it. `member_placement`: learners 1 … N − 1
        of a learner group, each (by default learner 0's)."""
        super().__init__(job, resume, checkpointer)
        self.plan_nodes = role_nodes
        self.node_ids: dict[str, str] = {}  # plan node → Ray node id, once resolved
        self.shard_nodes: list[str] = []  # the Ray node each replay shard runs on, asked from inside it
        self.replay_shards, self.replay_placement = replay_shards, replay_placement
        self.learner_placement = learner_placement
        self.shard_handles: list[Any] = []
        self.address, self.actor_placement = address, actor_placement
        self.restart_policy = RestartPolicy(max_restarts)
        self.workers: list[Any] = []
        self.pids: list[int] = []
        self.nodes: list[str] = []  # the Ray node each worker runs on, asked from inside it
        self.learner_node: str | None = None  # the learner role's, asked from inside it
        self.member_nodes: list[str] = []  # learners 1 … N − 1 of a learner group, asked from inside each
        self.member_pids: list[int] = []  # their processes'
        self.member_placement = member_placement  # theirs; by default learner 0's (near it)
        self.inflight: dict[int, InFlight] = {}
        self.discarded: list[Any] = []  # futures a worker's death made void (read at stop, so Ray reports none)
        self.episodes: list[Episode] = []
        self.clocks: dict[int, KernelClock] = {}  # each worker's latest clock
        self.retired: list[KernelClock] = []  # the clocks of workers that died
        self.dropped_by: dict[int, int] = {}
        self.loads_by: dict[int, tuple[int, int]] = {}  # each worker's weight loads and their bytes, so far
        self.started_here = False  # pearl started the local Ray instance
        self.joined = False  # this launcher connected the driver (and disconnects it at stop)
        self.finished = False
        self.namespace = RunNamespace()  # the run's namespace on the cluster, where its roles are named
        self._previous_sigterm: Any = None
        self._terminated = threading.Event()  # set by the SIGTERM handler
        self.recoveries: list[str] = []  # each placing of the roles again from a checkpoint (`_recover`)
        self.redone_steps = 0
        self.retired_loads = (0, 0)  # the weight loads (and bytes) of workers killed by a recovery

    def _make_role(self) -> Any:
        return None  # placed by `start`, once Ray runs

    @property
    def adapters(self) -> dict[DeviceId, Any]:
        return {}  # the driver opens no device: the roles open theirs

    def _learner_devices(self) -> list[DeviceId]:
        return sorted({self.placement.replay, self.placement.learn}, key=str)  # the workers open the act device

    # --------------------------------------------------------------------------------- start / stop
    def start(self) -> None:
        ray = self._join()
        self._previous_sigterm = raise_on_sigterm(self._terminated)  # after ray.init, which installs its own
        self.namespace.open()  # the run's lease first: a run found without one is taken for lost
        self._start_roles(ray)

    def _start_roles(self, ray: ModuleType) -> None:
        """Place and start every role at the schedule's `first_segment` (the learner restored from `resume`),
        and ask the workers for the first segments."""
        learner, members, shards, workers = self._placements(ray)
        learner = dataclasses.replace(learner, env={**learner.env, **slice_env(self.placement.learn)})
        members = [dataclasses.replace(m, env=learner.env) for m in members]
        acts = self.act_devices()
        workers = [dataclasses.replace(w, env={**w.env, **slice_env(acts[i])}) for i, w in enumerate(workers)]
        member_roles = [(f"learner {r}", m) for r, m in enumerate(members, start=1)]
        shard_roles = [(f"replay shard {i}", shard) for i, shard in enumerate(shards)]
        worker_roles = [(f"actor worker {i}", w) for i, w in enumerate(workers)]
        # every role, before any is started: one that fits no node would have Ray wait for it for ever
        check_roles([(self._learner_name, learner), *member_roles, *shard_roles, *worker_roles])
        # each wait for roles to start says every PROGRESS_S what they ask for while Ray has not started them
        if self.replay_shards:
            self.shard_handles = remote_shards(self.config, self.spec, self.replay_shards, shards,
                                               self.namespace.options)
            asked = [h.node_id.remote() for h in self.shard_handles]  # asked from inside each shard
            self.shard_nodes = get_from_workers(asked, "setting up", STARTUP_TIMEOUT_S,
                                                progress(shard_roles, asked))
        handle = learner_class().options(**learner.options(), **self.namespace.options("learner")).remote(
            self.job, self._learner_devices(), self.shard_handles or None)
        self.role = RayLearnerHandle(handle)
        if self.resume is not None:
            self.role.pending.append(handle.restore.remote(ray.put(self.resume)))
        self.learner_node = self.role._call("node_id", timeout=STARTUP_TIMEOUT_S,  # asked from inside the role
                                            waiting=progress([(self._learner_name, learner)]))
        self.updates = self.role._call("ready")
        self.role.check()
        if members:
            check_every = DEBUG_CHECK_EVERY if os.environ.get("PEARL_DEBUG") else 0
            where = self.role._call("form_group", [
                {**m.options(), **self.namespace.options(f"learner-{r}")} for r, m in enumerate(members, start=1)],
                check_every, timeout=STARTUP_TIMEOUT_S, waiting=progress(member_roles))
            self.member_nodes, self.member_pids = [n for n, _ in where], [pid for _, pid in where]
        cls, sched = worker_class(), self.schedule
        self.workers = [cls.options(**workers[i].options(), **self.namespace.options(f"worker-{i}")).remote(
            i, self.config, self.spec, acts[i], self.job.descriptor_for(acts[i]), sched,
            self.placement.act_way_on(acts[i]))
            for i in range(self.job.actors)]
        first = self.role.policy_ref()
        setups = [w.setup.remote(self.seeds.actor(i), sched.steps_before(self.first_segment, i), first)
                  for i, w in enumerate(self.workers)]
        self.pids = get_from_workers(setups, "setting up", STARTUP_TIMEOUT_S, progress(worker_roles, setups))
        self.nodes = get_from_workers([w.node_id.remote() for w in self.workers], "setting up")  # asked from inside
        for k in range(self.first_segment, min(self.first_segment + sched.lag + 1, sched.segments)):
            self._submit(k, sched.weights_for(k), first)

    def _join(self) -> ModuleType:
        """Connect the driver: to the cluster at the address, to Ray already running in this process, or to
        a local instance started here (loopback only, no dashboard)."""
        running = sys.modules.get("ray")
        if self.address is not None:
            connect(self.address)
            self.joined = True
        elif running is None or not running.is_initialized():
            start_local_ray()
            self.started_here = self.joined = True
            return require_ray()  # a new instance: no earlier run on it
        # else the caller's Ray: theirs to shut down
        remove_lost_runs(self.namespace.name)
        return require_ray()

    def act_devices(self) -> list[DeviceId]:
        """Each worker's act device: the job's, or for a cluster plan that spreads the actors its node's."""
        if self.plan_nodes is None:
            return [self.placement.act] * self.job.actors
        return [self.plan_nodes.worker(i, self.placement.act)[1] for i in range(self.job.actors)]

    def _placements(self, ray: ModuleType) -> Placements:
        """Each role's placement (`placement.role_placements`), or with `plan_nodes` each pinned to its plan node
        (`_plan_placements`)."""
        if self.plan_nodes is not None:
            return self._plan_placements(ray, self.plan_nodes)
        return role_placements(self.job, self._given(), self.replay_shards, cluster_nodes(ray),
                               str(ray.get_runtime_context().get_node_id()))

    def run(self, record: RunRecord | None = None, progress: Callable[[int], None] | None = None,
            max_seconds: float | None = None) -> LoopStats:
        """The segment loop; SIGTERM ends it as SystemExit(143) also when it lands inside a Ray call: Ray turns
        the handler's exception into its own SystemExit(1) there (3 and 4 of 6 SIGTERMs in two tries did)."""
        try:
            return super().run(record, progress, max_seconds)
        except BaseException:
            if self._terminated.is_set():
                raise SystemExit(128 + signal.SIGTERM) from None
            raise

    def _plan_placements(self, ray: ModuleType, nodes: RoleNodes) -> Placements:
        """A cluster plan's placements (`placement.plan_placements`), on the Ray nodes of its plan nodes."""
        self.node_ids = ids = plan_node_ids(nodes.names())
        cpus_of = {n["NodeID"]: float(n.get("Resources", {}).get("CPU", 0.0)) for n in ray.nodes() if n.get("Alive")}
        return plan_placements(self.job, self._given(), self.replay_shards, nodes, ids, cpus_of)

    def _given(self) -> GivenPlacements:
        return GivenPlacements(self.actor_placement, self.learner_placement, self.replay_placement,
                               self.member_placement, self.restart_policy.limit)

    def stop(self) -> None:
        ray = sys.modules.get("ray")
        workers, self.workers, self.inflight = self.workers, [], {}
        role, shards, self.shard_handles = self.role, self.shard_handles, []
        self.role = None
        try:
            if ray is not None and ray.is_initialized():
                for w in workers:
                    ray.kill(w, no_restart=True)
                self._drop_discarded(ray)
                if role is not None:
                    self._keep_state(role)
                    if self.job.learners > 1:
                        role.close_group(STOP_STATE_TIMEOUT_S)
                    ray.kill(role.handle, no_restart=True)
                for s in shards:
                    ray.kill(s)
        finally:
            try:
                self.namespace.close()  # every actor of the run, also when the kills above were interrupted
            finally:
                if self._previous_sigterm is not None:
                    signal.signal(signal.SIGTERM, self._previous_sigterm)
                    self._previous_sigterm = None
                if self.joined:
                    self.joined = False
                    shutdown()  # a local instance pearl started stops with every process it ran

    def _keep_state(self, role: RayLearnerHandle) -> None:
        """Before the learner stops early: its state, so that a checkpoint taken after `stop` (an interrupted
        run's) holds what it learnt. Best effort: a learner that died, hangs or failed an update leaves none."""
        if self.finished or self.checkpointer is None or self.steps == self.start_steps:
            return
        try:
            role.drain(STOP_STATE_TIMEOUT_S)
            self._kept = role.state(self.checkpointer.include_replay, timeout=STOP_STATE_TIMEOUT_S)
        except (PearlError, OSError):
            self._kept = None

    # ------------------------------------------------------------------------------------ recovery
    def _recover(self, lost: RoleLost) -> int:
        """A role that holds the run's state died (the learner, a learner of its group, a replay shard; with
        its node, maybe): while restarts are left (one counted), every role is killed and placed again on the
        nodes left, the learner restored from the newest checkpoint (or the run started over where none was
        written yet), and the loop goes on from the checkpoint's segment. The run then holds the bits a
        `pearl train --resume` from that checkpoint gives. Past the limit, ActorFailed saying what was lost."""
        ray = require_ray()
        await_node_deaths(ray, self._role_node_ids())
        what = f"{lost}{lost_nodes(ray, self._role_node_ids())}"
        try:
            self.restart_policy.check_loss(what)
        except ActorFailed as exc:
            self._kill_roles(ray)  # what the others hold is mid-step: the newest checkpoint is where to resume
            raise ActorFailed(f"{exc}{self._resume_hint()}") from None
        checkpoint = self._newest_checkpoint()
        redone = self.steps - (checkpoint.steps if checkpoint is not None else 0)
        self._kill_roles(ray)
        self._go_on_from(checkpoint)
        if self.job.eval_every > 0:  # the next evaluation past the checkpoint, as the run had it
            self.next_eval = (self.steps // self.job.eval_every + 1) * self.job.eval_every
        if self.checkpointer is not None:
            self.checkpointer.last_updates = self.updates
        self.namespace.generation += 1  # new names: a dead role's may not be free yet
        try:
            self._start_roles(ray)
        except PearlError as exc:
            raise ActorFailed(f"{what}; the roles could not be placed again on the nodes left: {exc}"
                              f"{self._resume_hint()}") from None
        self.redone_steps += redone
        origin = f"{checkpoint.path.name} ({checkpoint.steps:,} env steps)" if checkpoint is not None \
            else "the start (no checkpoint yet)"
        recovery = f"{what}; went on from {origin}, {redone:,} env steps collected again"
        self.restart_policy.admit_loss(recovery)
        self.recoveries.append(recovery)
        return self.first_segment

    def _newest_checkpoint(self) -> Checkpoint | None:
        """The run's newest whole checkpoint: the one it resumed from or wrote, or None (none yet)."""
        if self.checkpointer is None or not self.checkpointer.written:
            return self.resume
        checkpoint, _ = latest(self.checkpointer.folder)
        return checkpoint if checkpoint is not None else self.resume

    def _resume_hint(self) -> str:
        """What to do after a role lost for good: go on from the newest checkpoint, when the run writes them."""
        if self.checkpointer is None:
            return ""
        return (f"; once the cluster can hold the run again, `pearl train --resume {self.checkpointer.folder.parent}` "
                "goes on from its newest checkpoint")

    def _role_node_ids(self) -> set[str]:
        return {self.learner_node, *self.member_nodes, *self.nodes, *self.shard_nodes} - {None}

    def _kill_roles(self, ray: ModuleType) -> None:
        """Kill every role of the run (not its lease): they are placed again from a checkpoint."""
        self.discarded.extend(f for flight in self.inflight.values() for futures in flight.futures for f in futures)
        if self.role is not None:
            self.discarded.extend(self.role.pending)  # the failed calls among them are the loss being recovered
        for w in self.workers:
            ray.kill(w, no_restart=True)
        if self.role is not None:
            ray.kill(self.role.handle, no_restart=True)  # the other learners of its group end with it
        for h in self.shard_handles:
            ray.kill(h, no_restart=True)
        self._drop_discarded(ray)
        self.retired.extend(self.clocks.values())
        self.retired_loads = tuple(a + b for a, b in zip(self.retired_loads, self._loads(), strict=True))
        self.workers, self.shard_handles, self.role, self.inflight = [], [], None, {}
        self.clocks, self.loads_by, self.dropped_by = {}, {}, {}
        self.learner_node, self.member_nodes, self.nodes, self.shard_nodes = None, [], [], []

    def _loads(self) -> tuple[int, int]:
        """The weight loads of the workers now placed, and their bytes."""
        return sum(n for n, _ in self.loads_by.values()), sum(b for _, b in self.loads_by.values())

    def _settle(self) -> None:
        self.role.drain()

    def _checkpoint(self) -> None:
        if self._kept is None:
            self.role.drain()  # a failed update (a learner of the group lost mid-step) must not be saved
        super()._checkpoint()

    def checkpoint_now(self) -> str | None:
        if self._kept is None and self.role is None:
            return None  # the learner stopped without handing over its state (it died, or hung)
        return super().checkpoint_now()

    def _drop_discarded(self, ray: ModuleType) -> None:
        """Read the void futures' errors: Ray prints an error that no one read when its future is freed."""
        discarded, self.discarded = self.discarded, []
        for ref in discarded:
            try:
                ray.get(ref, timeout=1.0)
            except Exception:  # noqa: BLE001 - their errors are the known deaths, already handled
                pass

    # ------------------------------------------------------------------------------ the schedule's hooks
    def _submit(self, k: int, tag: int, weights: Any) -> None:
        self.inflight[k] = InFlight(tag, weights, [self._ask(w, k, tag, weights) for w in self.workers])
        self.sent.add(CALLS, len(self.workers))

    @staticmethod
    def _ask(worker: Any, k: int, tag: int, weights: Any) -> list[Any]:
        """Worker's share of segment k: the futures of its batch and of what it measured. The weights' ref goes
        in a list, so the worker fetches them only when it needs a newer version than it holds."""
        return list(worker.collect.options(num_returns=2).remote(k, tag, [weights]))

    def _collect(self, k: int, insert: Callable[[TransitionBatch], None], wait: Callable[[], None]) -> None:
        """Wait for what every worker measured of segment k, then send the learner its batches' refs in actor
        order, in one call (so replay holds whole segments whenever the run is interrupted)."""
        ray = require_ray()
        while True:
            futures = [f[1] for f in self.inflight[k].futures]
            t0 = time.perf_counter()
            _, waiting = ray.wait(futures, num_returns=len(futures), timeout=0.2)
            self.waited += time.perf_counter() - t0
            if not waiting:
                break
            wait()
        got = [self._result(k, i) for i in range(len(self.workers))]
        self.role.insert_refs([f[0] for f in self.inflight.pop(k).futures])
        self.sent.add(CALLS)
        self.steps += sum(c.rows for c in got)
        for i, collected in enumerate(got):
            self.sent.add(TRANSITIONS, nbytes=collected.nbytes)
            self.loads_by[i] = (collected.loads, collected.load_bytes)
            self.episodes.extend(collected.episodes)
            clock = self.clocks.setdefault(i, KernelClock())
            clock.seconds.update(collected.seconds)
            clock.calls.update(collected.calls)
            self.dropped_by[i] = collected.dropped
        self.dropped = sum(self.dropped_by.values())

    def _publish(self, tag: int) -> None:
        """W(tag) as an object ref the learner makes, and every worker asked for the segment that acts with it."""
        k = tag + 1 + self.schedule.lag
        if k < self.schedule.segments:
            self._submit(k, tag, self.role.policy_ref())
            self.sent.add(CALLS)
            self.sent.add(WEIGHTS, messages=0, publishes=1)

    def _health(self) -> None:
        if self.role is not None:
            self.role.check()

    def _episodes(self) -> list[Episode]:
        out, self.episodes = self.episodes, []
        return out

    def _extra_metrics(self) -> dict[str, Any]:
        return {"runtime/actor_restarts": self.restarts}

    def _clocks(self) -> tuple[dict[str, float], dict[str, int]]:
        seconds, calls = merge_clocks((*self.clocks.values(), *self.retired, *self.role.clocks()))
        if not self.config.prioritized:  # uniform replay: the learner skips the no-op priority update
            seconds.setdefault("priority_update", 0.0)
            calls.setdefault("priority_update", 0)
        return seconds, calls

    def _finish(self, stats: LoopStats) -> LoopStats:
        loads, nbytes = (a + b for a, b in zip(self.retired_loads, self._loads(), strict=True))
        self.sent.add(WEIGHTS, loads, nbytes, loads=loads)
        self.sent.add(CALLS, self.role.trains)
        stats = super()._finish(stats)
        self.finished = True
        worker_restarts = self.restarts - len(self.recoveries)
        stats.restarts, stats.lost_steps_max = self.restarts, worker_restarts * self.config.n_envs
        stats.recoveries, stats.redone_steps = list(self.recoveries), self.redone_steps
        # the learner's idle time is its wall time less its role's work and the run's pauses for evaluations and
        # checkpoints (neither work nor a wait, as in the local launcher's record); the driver's own wait for the
        # workers' segments is kept apart (the learner is busy with earlier segments meanwhile)
        idle = stats.wall_s - self.role.busy() - stats.paused_s
        stats.waits = {"learner_wait_s": max(0.0, idle), "driver_wait_s": self.waited}
        stats.roles = self.role_nodes()
        return stats

    @property
    def _learner_name(self) -> str:
        """The learner role's name in errors and the roles line: learner 0 of a group, else the learner."""
        return "learner 0" if self.job.learners > 1 else "learner"

    def role_nodes(self) -> dict[str, str]:
        """Each role's node, as each role reported it (`nodes.described`)."""
        named = [(self._learner_name, self.learner_node)]
        named += [(f"learner {r}", n) for r, n in enumerate(self.member_nodes, 1)]
        named += [(f"actor worker {i}", n) for i, n in enumerate(self.nodes)]
        named += [(f"replay shard {i}", n) for i, n in enumerate(self.shard_nodes)]
        return described(require_ray(), named, self.node_ids)

    # ------------------------------------------------------------------------------------ failures
    def _result(self, k: int, i: int) -> Collected:
        """What worker i measured of segment k; a worker that died (or failed) is restarted and asked again."""
        ray = require_ray()
        while True:
            try:
                return ray.get(self.inflight[k].futures[i][1])
            except ray.exceptions.RayActorError as exc:
                self._restart(k, i, f"died: {first_line(exc)}{lost_nodes(ray, self._role_node_ids())}")
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause if exc.cause is not None else exc
                if isinstance(cause, WorkerRestarted):  # it died after the call was sent; Ray restarted it
                    self._restart(k, i, "died (Ray restarted it)")
                    continue
                reason = f"failed: {type(cause).__name__}: {first_line(cause)}"
                self.restart_policy.check(i, reason)
                ray.kill(self.workers[i], no_restart=False)  # its state is unknown: Ray starts it afresh
                self._restart(k, i, reason)

    def _restart(self, k: int, i: int, reason: str) -> None:
        """Set worker i up again (Ray restarted its process) at the rows the learner received from it, and ask
        it again for every segment in flight, k first."""
        restarts = self.restart_policy.admit(i, reason)
        if i in self.clocks:
            self.retired.append(self.clocks.pop(i))
        seed = self.seeds.actor(i, restarts)
        worker = self.workers[i]
        self.pids[i], self.nodes[i] = set_up_again(worker, i, self.pids[i], seed, self.schedule.steps_before(k, i),
                                                   self.inflight[k].weights, STARTUP_TIMEOUT_S)
        for j in sorted(self.inflight):
            flight = self.inflight[j]
            self.discarded.extend(flight.futures[i])
            flight.futures[i] = self._ask(worker, j, flight.tag, flight.weights)
