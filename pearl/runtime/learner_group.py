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

The local launcher starts the other learners as processes of their own (`start_learners`, the body is
`serve`); each exits when learner 0 posts STOP, or when its parent process is gone.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable

from pearl.adapters.base import Adapter, GroupComm, LearnKernel
from pearl.algos.base import OffPolicyConfig
from pearl.errors import PearlError
from pearl.runtime.protocol import Learner
from pearl.types import EnvSpec, LearnResult, Params, PriorityUpdate, SampleBatch

JOIN_GRACE_S = 5.0  # how long the other learners get to leave the group after STOP before they are killed
#: updates between two comparisons of the learners' state under `pearl --debug` (PEARL_DEBUG=1)
DEBUG_CHECK_EVERY = 100


class LearnerGroupFailed(PearlError):
    """A learner of the group died or drifted from learner 0: the run ends (its last checkpoint resumes it)."""


def group_update(kernel: LearnKernel, comm: GroupComm, batch: SampleBatch) -> LearnResult:
    """One update of one learner of a group on its rows: gradients averaged over the group, then the step."""
    return kernel.apply(kernel.grads(batch, comm.share()))


class GroupLearner(Learner):
    """Learner 0 of a group: `update` takes the whole sampled batch, as a learner on its own does."""

    def __init__(self, kernel: LearnKernel, adapter: Adapter, config: OffPolicyConfig, comm: GroupComm,
                 check_every: int = 0, who_failed: Callable[[], str] | None = None) -> None:
        super().__init__(kernel, adapter, config)
        self.comm, self.check_every = comm, check_every
        self.closed = False
        self.who_failed = who_failed or (lambda: "")

    def update(self, batch: SampleBatch) -> PriorityUpdate:
        with self.clock.time("learn"):
            batch = self.adapter.adopt(batch)
            try:
                mine = self.comm.post(GroupComm.UPDATE, batch)
                assert mine is not None
                result = group_update(self.kernel, self.comm, mine)
                td_errors, metrics = self.comm.gather(result.td_errors, result.metrics)
            except RuntimeError as exc:  # gloo: a learner's connection closed, or a collective timed out
                raise LearnerGroupFailed(self._failure(exc)) from None
        self.last_metrics = metrics
        if self.check_every and self.updates % self.check_every == 0:
            self.check()
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
        try:
            self.comm.post(GroupComm.STOP)
        except RuntimeError:  # one is gone already: nothing to tell it
            pass
        self.comm.close()

    def _failure(self, exc: RuntimeError, wait_s: float = 2.0) -> str:
        deadline = time.monotonic() + wait_s  # the learner whose connection closed may still be exiting
        while not (who := self.who_failed()) and time.monotonic() < deadline:
            time.sleep(0.05)
        if who:
            return f"a learner of the group failed: {who}"
        return f"the learner group failed at update {self.updates + 1:,}: {str(exc).splitlines()[0][:200]}"


# ------------------------------------------------------------------------------------- the other learners
@dataclass(frozen=True)
class LearnerArgs:
    """What learner `rank` (≥ 1) of a group is started with: learner 0's learn state, and where to join."""

    rank: int
    learners: int
    port: int
    config: OffPolicyConfig
    spec: EnvSpec
    device: str
    threads: int | None
    seed: int
    state: Params  # learner 0's learn state dict when the group starts
    parent_pid: int


def start_learners(make_args: Callable[[int], LearnerArgs], learners: int) -> list[subprocess.Popen]:
    """Start learners 1 … learners − 1, each a fresh interpreter given `make_args(rank)` on stdin; its stderr goes
    to a temporary file (`stderr_tail`)."""
    procs = []
    for rank in range(1, learners):
        err = tempfile.TemporaryFile()
        proc = subprocess.Popen([sys.executable, "-c", "from pearl.runtime.learner_group import serve; serve()"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)
        proc.stderr_file = err  # type: ignore[attr-defined]
        assert proc.stdin is not None
        proc.stdin.write(pickle.dumps(make_args(rank)))
        proc.stdin.close()
        procs.append(proc)
    return procs


def stop_learners(procs: list[subprocess.Popen]) -> None:
    """Wait for the learners to leave (after STOP), then kill what is left."""
    for proc in procs:
        try:
            proc.wait(JOIN_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = getattr(proc, "stderr_file", None)
        if err is not None:
            err.close()


def dead_learner(procs: list[subprocess.Popen]) -> str:
    """'learner R exited with code C: its stderr' for the first of the learners that exited, else ''."""
    for rank, proc in enumerate(procs, start=1):
        code = proc.poll()
        if code is not None and code != 0:
            return f"learner {rank} exited with code {code}{stderr_tail(proc)}"
    return ""


def stderr_tail(proc: subprocess.Popen, limit: int = 500) -> str:
    err = getattr(proc, "stderr_file", None)
    if err is None:
        return ""
    err.seek(0)
    text = err.read().decode("utf-8", "replace").strip()
    return f": {text.splitlines()[-1][:limit]}" if text else ""


def serve() -> None:
    """A learner process's entry point: read its pickled LearnerArgs from stdin and train until STOP."""
    run(pickle.load(sys.stdin.buffer))


def run(args: LearnerArgs) -> None:
    from pearl.adapters import open_adapter  # the hardware library loads in this process only
    from pearl.algos.params import init_params

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; learner 0 handles it
    adapter = open_adapter(args.device, args.threads)
    kernel = adapter.make_learn(args.config, args.spec, init_params(args.config, args.spec, args.seed), args.seed)
    kernel.load_state_dict(args.state)
    _exit_with_parent(args.parent_pid)
    comm = adapter.join_group(args.rank, args.learners, args.port, args.spec, args.config.batch_size)
    try:
        while True:
            command, batch = comm.receive()
            if command == GroupComm.STOP:
                break
            if command == GroupComm.DIGEST:
                comm.differing(kernel.state_dict())
                continue
            assert batch is not None
            result = group_update(kernel, comm, batch)
            comm.gather(result.td_errors, result.metrics)
    finally:
        comm.close()


def _exit_with_parent(parent_pid: int, every_s: float = 0.5) -> None:
    """Exit once learner 0's process is gone (killed without telling the group): a thread watches for it, since
    this learner may be blocked in a collective."""
    def watch() -> None:
        while True:
            time.sleep(every_s)
            if os.getppid() != parent_pid:
                os._exit(1)
    threading.Thread(target=watch, daemon=True, name="pearl-parent-watch").start()
