"""A learner group's processes, below the runtime so that the profiler can time a group too: the other
learners' processes (`LearnerArgs`, `start_learners`, the body `serve`), and one update as learner 0 leads it
(`lead_update`) and as every learner takes its part (`group_update`). `pearl.runtime.learner_group` builds the
run's group from these; `pearl.profiling` times a group of two with them."""

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
from typing import Any, Callable

from pearl.adapters.base import GroupComm, LearnKernel
from pearl.algos.base import OffPolicyConfig
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
        proc = subprocess.Popen([sys.executable, "-c", "from pearl.adapters.group import serve; serve()"],
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
