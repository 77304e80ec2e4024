"""A learner group's processes, below the runtime so that the profiler can time a group too: the other
learners' processes (`open_group`, `leave_group`; the body `serve`), and one update as learner 0 leads it
(`lead_update`) and as every learner takes its part (`group_update`). `pearl.runtime.learner_group` builds the
run's group from these; `pearl.profiler` times a group of two with them."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from pearl.adapters.base import Adapter, GroupComm, LearnKernel
from pearl.algos.base import OffPolicyConfig
from pearl.children import close_stderr, read_payload, start_child, stderr_tail
from pearl.kernels import Precision
from pearl.types import EnvSpec, LearnResult, Params, SampleBatch

JOIN_GRACE_S = 5.0  # how long the other learners get to leave the group after STOP before they are killed


def group_update(kernel: LearnKernel, comm: GroupComm, batch: SampleBatch) -> LearnResult:
    """One update of one learner of a group on its rows: gradients averaged over the group, then the step."""
    return kernel.apply(kernel.grads(batch, comm.share()))


def lead_update(kernel: LearnKernel, comm: GroupComm, batch: SampleBatch) -> tuple[Any, dict[str, Any]]:
    """Learner 0's update on the whole batch (on its device): each learner's rows sent, its own part learnt, and
    every learner's TD errors (in batch order) and the averaged losses gathered back."""
    mine = comm.post(GroupComm.UPDATE, batch)
    assert mine is not None
    result = group_update(kernel, comm, mine)
    return comm.gather(result.td_errors, result.metrics)


@dataclass(frozen=True)
class LearnerArgs:
    """What learner `rank` (≥ 1) of a group is started with: learner 0's learn state, and where to join."""

    rank: int
    learners: int
    port: int
    config: OffPolicyConfig
    spec: EnvSpec
    device: str  # the adapter's own id text (`Adapter.device_id`), which open_adapter reads
    threads: int | None
    seed: int
    state: Params  # learner 0's learn state dict when the group starts
    parent_pid: int  # a learner process exits when its parent (learner 0's process) is gone
    host: str = "127.0.0.1"  # where learner 0 opened the group's rendezvous
    precision: Precision = Precision.FP32  # learner 0's learn arithmetic, which every learner computes in


def open_group(adapter: Adapter, kernel: LearnKernel, config: OffPolicyConfig, spec: EnvSpec, learners: int,
               threads: int | None, seed: int, procs: list[subprocess.Popen],
               start: Callable[[Callable[[int], LearnerArgs]], None] | None = None,
               host: str = "127.0.0.1", precision: Precision = Precision.FP32) -> GroupComm:
    """Learner 0's end of a new group of `learners` on `adapter`'s device, `kernel` being learner 0's, its
    rendezvous at `host`: the others are started from its state and joined. `start(args_of_rank)` starts them
    (the Ray launcher's actors); by default they are processes of this host, put into `procs` as soon as they
    start, so that a caller can name one that died before the group formed."""
    state = kernel.state_dict()

    def start_others(port: int) -> None:
        def args(rank: int) -> LearnerArgs:
            return LearnerArgs(rank, learners, port, config, spec, adapter.device_id, threads, seed, state,
                               os.getpid(), host, precision)

        if start is not None:
            start(args)
        else:
            procs[:] = start_learners(args, learners)

    return adapter.host_group(learners, spec, config.batch_size, start_others, host)


def leave_group(comm: GroupComm) -> None:
    """Learner 0 tells the others to stop and leaves the group (one already gone has nothing to be told)."""
    try:
        comm.post(GroupComm.STOP)
    except RuntimeError:
        pass
    comm.close()


def start_learners(make_args: Callable[[int], LearnerArgs], learners: int) -> list[subprocess.Popen]:
    """Start learners 1 … learners − 1, each a fresh interpreter given `make_args(rank)` (`pearl.children`)."""
    return [start_child("from pearl.adapters.learner_group import serve; serve()", make_args(rank))
            for rank in range(1, learners)]


def stop_learners(procs: list[subprocess.Popen]) -> None:
    """Wait for the learners to leave (after STOP), then kill what is left."""
    for proc in procs:
        try:
            proc.wait(JOIN_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        close_stderr(proc)


def dead_learner(procs: list[subprocess.Popen]) -> str:
    """'learner R exited with code C: the last line of its stderr' for the first of the learners that exited,
    else ''."""
    for rank, proc in enumerate(procs, start=1):
        code = proc.poll()
        if code is not None and code != 0:
            return f"learner {rank} exited with code {code}{stderr_tail(proc, 500, last_line=True)}"
    return ""


def serve() -> None:
    """A learner process's entry point: read its pickled LearnerArgs from stdin and train until STOP, or until
    its parent is gone."""
    args: LearnerArgs = read_payload()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; learner 0 handles it
    _exit_with_parent(args.parent_pid)
    run(args)


def run(args: LearnerArgs) -> None:
    """Learner `args.rank`: build its kernel from learner 0's state, join the group and learn until STOP."""
    from pearl.adapters import open_adapter  # the hardware library loads in this process only
    from pearl.algos.params import init_params

    adapter = open_adapter(args.device, args.threads)
    kernel = adapter.make_learn(args.config, args.spec, init_params(args.config, args.spec, args.seed), args.seed,
                                args.precision)
    kernel.load_state_dict(args.state)
    comm = adapter.join_group(args.rank, args.learners, args.port, args.spec, args.config.batch_size, args.host)
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
