"""The learner role on Ray: `RayLearnerRole`, the actor Ray runs, and `RayLearnerHandle`, the driver's side of it.

The learner is a `LearnerRole` (replay, the learn kernel, the in-training evaluations) placed as a Ray actor
on the learner's node and device; its replay lives in the role, or is the replay server's shards, of which
it is the client. A worker's batch reaches it as an object ref that the driver passes on unread; its
published weights are an object ref too, versioned by segment, which a worker fetches only when it needs a
newer version. What the driver gets back (states, the best policy) comes from the object store read-only,
so it is copied before anyone may write it.

A learner group (``--learners N``): the role's learner becomes learner 0 (`form_group`) and starts the other
learners as `RayGroupMember` actors with the placements the driver checked, its own node's address the
group's rendezvous; they run `pearl.adapters.learner_group.run` until learner 0 posts STOP (`close_group`). They are
owned by the role, so they end with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from pearl.adapters.learner_group import JOIN_GRACE_S, LearnerArgs, run
from pearl.device import DeviceId
from pearl.errors import ConfigError, PearlError
from pearl.runtime.checkpoint import Checkpoint
from pearl.runtime.job import Job
from pearl.runtime.learner_group import GroupLearner, form_group
from pearl.runtime.learner_role import LearnerRole, LearnerStatus
from pearl.runtime.actors import RoleLost
from pearl.runtime.protocol import KernelClock
from pearl.runtime.ray.replay_client import RemoteShardedReplay, ShardedReplayKernels
from pearl.runtime.ray.session import answer, first_line, lacking, remote_class, require_ray
from pearl.runtime.seeds import Seeds
from pearl.traffic import INSERTS
from pearl.types import Params, TransitionBatch

__all__ = ["RayGroupMember", "RayLearnerHandle", "RayLearnerRole", "learner_class", "member_class"]

WORK = "work"  # the role's clock of its per-segment calls (`RayLearnerRole.busy`)



def learner_class() -> Any:
    """``ray.remote(RayLearnerRole)``, made once and only when a learner is first placed."""
    return remote_class(RayLearnerRole)


def member_class() -> Any:
    """``ray.remote(RayGroupMember)``, made once and only when a learner group is first formed."""
    return remote_class(RayGroupMember)


class RayGroupMember:
    """Learner r ≥ 1 of a learner group as Ray places it: `serve` learns until learner 0 posts STOP."""

    def where(self) -> tuple[str, int]:
        """Its node id and process id, asked from inside."""
        return str(require_ray().get_runtime_context().get_node_id()), os.getpid()

    def serve(self, args: LearnerArgs) -> int:
        run(args)
        return args.rank


class RayLearnerRole(LearnerRole):
    """The learner's role as the Ray launcher places it: replay in the role, or the replay server's shards
    (their handles given), and the node it runs on, asked from inside."""

    def __init__(self, job: Job, devices: list[DeviceId], shards: list[Any] | None = None) -> None:
        kernels = None
        if shards:
            cfg = job.config
            kernels = ShardedReplayKernels(RemoteShardedReplay(shards, cfg.buffer_size, job.spec, cfg.prioritized,
                                                               cfg.alpha, cfg.priority_eps, Seeds(job.seed).replay))
        self.sharded = bool(shards)
        self.work = KernelClock()  # the role's own work, under WORK (`busy`)
        super().__init__(job, devices, None, kernels)

    def restore(self, resume: Checkpoint) -> None:
        try:
            super().restore(resume)
        except PearlError as exc:
            if not self.sharded:
                raise
            raise ConfigError(f"{resume.path}: its replay does not fit the replay shards: {exc}") from None

    def insert(self, *batches: TransitionBatch) -> int:
        with self.work.time(WORK):
            for batch in batches:
                if len(batch):  # the batches inserted, in the role or into a replay shard (`pearl.traffic`)
                    self.sent.add(INSERTS, nbytes=batch.nbytes)
            return super().insert(*batches)

    def train(self, updates: int, beta: float) -> int:
        with self.work.time(WORK):
            return super().train(updates, beta)

    def policy(self) -> Params:
        with self.work.time(WORK):
            return super().policy()

    def busy(self) -> float:
        """Seconds the role spent in its per-segment work (inserting, training, publishing), Ray's own threads'
        share of its process included: the driver's waits say when the workers were late, not when the learner
        was idle, so the run's `learner_wait_s` is its wall time less this (`RayLauncher._finish`)."""
        return self.work.seconds[WORK]

    def node_id(self) -> str:
        return str(require_ray().get_runtime_context().get_node_id())

    def pid(self) -> int:
        return os.getpid()

    def ready(self) -> int:
        """The update count (a call that returns once the role is built)."""
        return self.learner.updates

    def form_group(self, members: list[dict[str, Any]], check_every: int) -> list[tuple[str, int]]:
        """This role's learner as learner 0 of a group of ``len(members) + 1``, learner r started with the Ray
        options ``members[r - 1]`` (placed by the driver, its CPUs, GPUs and node); the node and process id of
        each."""
        ray = require_ray()
        self.members: list[Any] = []
        self.serving: list[Any] = []
        self.wheres: list[Any] = []

        def start(args_of: Any) -> None:
            for rank, options in enumerate(members, start=1):
                member = member_class().options(**options).remote()
                self.members.append(member)
                self.wheres.append(member.where.remote())  # before `serve`, which holds the actor until STOP
                self.serving.append(member.serve.remote(args_of(rank)))

        host = ray.util.get_node_ip_address()  # the other learners may run on other nodes
        self.learner = form_group(self.learner, self.job, [], check_every, self.who_failed, start, host)
        return [(str(node), int(pid)) for node, pid in ray.get(self.wheres)]

    def who_failed(self) -> str:
        """'learner R died: ...' or 'learner R failed: ...' for the first group member that ended otherwise than
        by STOP, or that Ray never started; else ''."""
        ray = require_ray()
        started, _ = ray.wait(self.wheres, num_returns=len(self.wheres), timeout=0)
        done, _ = ray.wait(self.serving, num_returns=len(self.serving), timeout=0)
        for rank, ref in enumerate(self.serving, start=1):
            if ref not in done:
                if self.wheres[rank - 1] not in started:
                    return (f"learner {rank} was not started: Ray has not placed it (`ray status` shows what is "
                            "pending)")
                continue
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                return f"learner {rank} died: {first_line(exc)}"
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause if exc.cause is not None else exc
                lacks = lacking(cause, exc)  # its node lacks the algorithm (a plugin) or a module of its arguments
                return f"learner {rank} failed: {lacks or f'{type(cause).__name__}: {first_line(cause)}'}"
        return ""

    def close_group(self) -> None:
        """Tell the other learners to stop, give them `JOIN_GRACE_S` to leave, then end the ones left."""
        if not isinstance(self.learner, GroupLearner):
            return
        ray = require_ray()
        self.learner.close()
        ray.wait(self.serving, num_returns=len(self.serving), timeout=JOIN_GRACE_S)
        for member in self.members:
            ray.kill(member, no_restart=True)


class RayLearnerHandle:
    """The driver's side of the placed learner role: the calls `SegmentLauncher` makes (a
    `pearl.runtime.launcher.LearnerHandle`), sent to the Ray actor.

    The per-segment calls (insert, train, publish) are sent without waiting: Ray runs one caller's calls to an
    actor in order, so the learner applies them in the schedule's order while the driver goes on to collect
    the next segment. Their errors surface at the next health check or answered call. The others (status,
    evaluate, state, ...) wait for the answer, and so for every call sent before them."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.pending: list[Any] = []
        self.trains = 0  # train calls sent (`pearl.traffic`'s calls; the launcher counts its others with them)

    def _call(self, method: str, *args: Any, timeout: float | None = None,
              waiting: Callable[[list[Any], float], str] | None = None) -> Any:
        return _role_get(getattr(self.handle, method).remote(*args), timeout, waiting)

    def check(self) -> None:
        """Raise the error of a per-segment call that failed (as ActorFailed, or as its pearl error)."""
        if self.pending:
            ray = require_ray()
            done, self.pending = ray.wait(self.pending, num_returns=len(self.pending), timeout=0)
            for ref in done:
                _role_get(ref)

    def close_group(self, timeout: float) -> None:
        """Let a learner group's other learners leave before the role goes (they end with it in any case); best
        effort."""
        try:
            self._call("close_group", timeout=timeout)
        except (PearlError, OSError):
            pass

    def drain(self, timeout: float | None = None) -> None:
        """Wait for every per-segment call sent so far and raise the first error among them: before the run's
        state is read for a checkpoint or its end, so that a failed update never reaches either."""
        pending, self.pending = self.pending, []
        for ref in pending:
            _role_get(ref, timeout)

    def insert(self, *batches: TransitionBatch) -> int:
        self.pending.append(self.handle.insert.remote(*batches))
        return sum(len(b) for b in batches)  # the rows the role inserts: it skips only empty batches

    def insert_refs(self, refs: list[Any]) -> None:
        self.pending.append(self.handle.insert.remote(*refs))  # Ray resolves them in the learner's process

    def train(self, updates: int, beta: float) -> None:
        self.pending.append(self.handle.train.remote(updates, beta))
        self.trains += 1

    def policy_ref(self) -> Any:
        return self.handle.policy.remote()

    def policy(self) -> Params:
        return {k: np.array(v) for k, v in _role_get(self.policy_ref()).items()}

    def evaluate(self, steps: int) -> Any:
        return self._call("evaluate", steps)

    def status(self) -> LearnerStatus:
        return self._call("status")

    def state(self, include_replay: bool, timeout: float | None = None) -> tuple[Params, Params | None]:
        learn, replay = self._call("state", include_replay, timeout=timeout)
        return _writable(learn), None if replay is None else _writable(replay)

    def best_policy(self) -> Any:
        best = self._call("best_policy")
        if best is not None and best.best is not None:
            best.best = _writable(best.best)
        return best

    def clocks(self) -> list[KernelClock]:
        return self._call("clocks")

    def busy(self) -> float:
        return self._call("busy")

def _writable(state: Params) -> Params:
    return {k: np.array(v) for k, v in state.items()}  # copies of the object store's read-only arrays


def _role_get(ref: Any, timeout: float | None = None, waiting: Callable[[list[Any], float], str] | None = None
              ) -> Any:
    """``ray.get`` of a learner call (`session.answer`): its pearl error as itself, any other failure as
    ActorFailed, its death as RoleLost; with `waiting`, a progress line while it has not answered."""
    return answer(ref, timeout, f"the learner did not answer within {timeout or 0:.0f} s", "the learner failed",
                  lambda why: RoleLost(f"the learner died: {why}"), waiting)
