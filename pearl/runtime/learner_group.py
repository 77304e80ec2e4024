"""Several learners training one policy: data-parallel learning, as RLlib's LearnerGroup and MSRL's
data-parallel policy have it.

    learner 0 (the run's learner, with replay) ─ sample B rows ─► scatter: rows of each learner
        │                                                            │
        ├─ grads on its rows ◄──────── average (all-gather, sum in learner order) ────────► grads on its rows ─┤
        ├─ apply                                                                             apply ─┤
        └─ TD errors of all rows (gather) → priorities, losses          learners 1 … N − 1 (processes)

Replay stays one replay, in learner 0: it samples every update's whole batch as one learner would (prioritized
sampling stays exactly one sum tree's), and each learner takes a contiguous part of the batch's rows
(`GroupShare`). The kernels average each gradient across the group as soon as they have it (`LearnKernel`), so
every learner applies the same step and the group stays identical bit for bit (`check` compares their state's
digests); for a seed and a group size every run gives the same bits, and the result equals one learner's on
the whole batch within float rounding (the sum of the parts' means is not the whole's mean bit for bit). Only
learner 0 publishes weights, evaluates and checkpoints: a checkpoint is one learner's state, and a resumed run
may take another group size.

`form_group` makes a run's learner learner 0 of a new group. The local launcher starts the other learners as
processes of their own (`pearl.adapters.learner_group.open_group`, their body is `pearl.adapters.learner_group.serve`), each
exiting when learner 0 posts STOP or when its parent process is gone; the Ray launcher's learner role starts
them as Ray actors placed by the driver (`pearl.runtime.ray.learner`), which run the same body
(`pearl.adapters.learner_group.run`) and rendezvous at the learner's node address.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any, Callable

from pearl.adapters.base import Adapter, GroupComm, LearnKernel
from pearl.adapters.learner_group import LearnerArgs, lead_update, leave_group, open_group
from pearl.algos.base import OffPolicyConfig
from pearl.errors import PearlError
from pearl.kernels import GROUP_COMM
from pearl.runtime.actors import RoleLost
from pearl.runtime.protocol import Learner
from pearl.types import PriorityUpdate, SampleBatch

#: updates between two comparisons of the learners' state under `pearl --debug` (PEARL_DEBUG=1)
DEBUG_CHECK_EVERY = 100


class LearnerGroupFailed(PearlError):
    """A learner of the group died or drifted from learner 0: the run ends (its last checkpoint resumes it)."""


class LearnerGroupLost(LearnerGroupFailed, RoleLost):
    """The group broke inside an update (a learner's connection closed: it died, or its node did): the
    learners' state is gone mid-step, and the run can go on only from its newest checkpoint."""


class GroupLearner(Learner):
    """Learner 0 of a group: `update` takes the whole sampled batch, as a learner on its own does."""

    def __init__(self, kernel: LearnKernel, adapter: Adapter, config: OffPolicyConfig, comm: GroupComm,
                 check_every: int = 0, who_failed: Callable[[], str] | None = None) -> None:
        super().__init__(kernel, adapter, config)
        self.comm, self.check_every = comm, check_every
        self.closed = False
        self.who_failed = who_failed or (lambda: "")

    def update(self, batch: SampleBatch) -> PriorityUpdate:
        comm_s = self.comm.comm_s
        with self.clock.time("learn"):
            batch = self.adapter.adopt(batch)
            try:
                td_errors, metrics = lead_update(self.kernel, self.comm, batch)
            except RuntimeError as exc:  # gloo: a learner's connection closed, or a collective timed out
                raise LearnerGroupLost(self._failure(exc)) from None
        self.clock.add(GROUP_COMM, self.comm.comm_s - comm_s)  # a part of learn's time, shown apart
        self.last_metrics = metrics
        if self.check_every and self.updates % self.check_every == 0:
            try:
                self.check()
            except RuntimeError as exc:  # the digest's collective meets a closed connection as the update's does
                raise LearnerGroupLost(self._failure(exc)) from None
        return PriorityUpdate(batch.indices, td_errors)

    def check(self) -> None:
        """LearnerGroupFailed when a learner's state is not learner 0's bit for bit."""
        self.comm.post(GroupComm.DIGEST)
        differ = self.comm.differing(self.kernel.state_dict())
        if differ:
            raise LearnerGroupFailed(f"learner(s) {', '.join(map(str, differ))} of the group hold other parameters "
                                     f"than learner 0 after {self.updates:,} updates")

    def close(self) -> None:
        """Tell the others to stop and leave the group (safe to call twice)."""
        if self.closed:
            return
        self.closed = True
        leave_group(self.comm)

    def _failure(self, exc: RuntimeError, wait_s: float = 2.0) -> str:
        deadline = time.monotonic() + wait_s  # the learner whose connection closed may still be exiting
        while not (who := self.who_failed()) and time.monotonic() < deadline:
            time.sleep(0.05)
        if who:
            return f"a learner of the group failed: {who}"
        return f"the learner group failed at update {self.updates + 1:,}: {str(exc).splitlines()[0][:200]}"


def form_group(learner: Learner, job: Any, procs: list[subprocess.Popen], check_every: int = 0,
               who_failed: Callable[[], str] | None = None,
               start: Callable[[Callable[[int], LearnerArgs]], None] | None = None,
               host: str = "127.0.0.1") -> GroupLearner:
    """`learner` (a run's, `job` its Job) as learner 0 of a group of `job.learners`, the others started from its
    state (by `start`, else as processes into `procs`); LearnerGroupFailed, naming the learner that died where
    `who_failed` tells it, when the group does not form."""
    try:
        comm = open_group(learner.adapter, learner.kernel, job.config, job.spec, job.learners, job.threads,
                          job.seed, procs, start, host, job.precision)
    except RuntimeError as exc:  # gloo's rendezvous timed out: a learner never joined
        why = (who_failed() if who_failed else "") or str(exc).splitlines()[0][:200]
        raise LearnerGroupFailed(f"the learner group did not form: {why}") from None
    return GroupLearner(learner.kernel, learner.adapter, job.config, comm, check_every, who_failed)
