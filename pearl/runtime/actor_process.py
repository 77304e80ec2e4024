"""The body of one actor process: step a vector of envs, act batched, write transitions to shared memory.

Started by `ParallelLauncher` with the spawn start method, so it imports its own adapter (and hardware
library) instead of inheriting the learner's. Everything it needs arrives in one picklable `ActorArgs`;
after that it talks to the learner only through the run's shared-memory segment:

- its transition ring and episode ring (it is their only writer),
- its row of counters (env steps produced, time per kernel, status),
- the weight board (it loads a snapshot whenever a newer one is complete),
- the run flags (stop) and the learner's update count, which the rate limiter reads.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass

import numpy as np

from pearl.algos.base import OffPolicyConfig
from pearl.algos.params import ParamLayout
from pearl.runtime import shm
from pearl.runtime.limiter import RateLimiter
from pearl.types import EnvSpec, WeightSnapshot

PARENT_CHECK_S = 0.5  # how often an actor checks that its learner is still alive
RING_POLL_S = 50e-6  # a full ring empties within one drain of the learner's replay thread
# A throttled actor is a train_freq round or more ahead of the learner (tens of ms of updates), so polling
# each millisecond loses nothing, and wakes the core the learner may share less often.
LIMITER_POLL_S = 1e-3


@dataclass(frozen=True)
class ActorArgs:
    actor_id: int
    segment: str
    layout: shm.Layout
    params: ParamLayout
    config: OffPolicyConfig
    spec: EnvSpec
    device: str
    descriptor: str | None
    seed: int
    limiter: RateLimiter | None  # None: collection only, never throttled
    parent_pid: int
    start_steps: int = 0  # env steps a resumed run had made before (the actors' counters start at 0)


def start(args: ActorArgs) -> subprocess.Popen:
    """Start an actor in a fresh interpreter; its stderr goes to a temporary file (see `stderr_tail`)."""
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-c", "from pearl.runtime.actor_process import serve; serve()"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)
    proc.stderr_file = err  # type: ignore[attr-defined]
    assert proc.stdin is not None
    proc.stdin.write(pickle.dumps(args))
    proc.stdin.close()
    return proc


def stderr_tail(proc: subprocess.Popen, limit: int = 2000) -> str:
    """The end of what an actor printed to stderr, for an error message ('' when nothing)."""
    err = getattr(proc, "stderr_file", None)
    if err is None:
        return ""
    err.seek(0)
    text = err.read().decode("utf-8", "replace").strip()
    return f": {text[-limit:]}" if text else ""


def close_stderr(proc: subprocess.Popen) -> None:
    err = getattr(proc, "stderr_file", None)
    if err is not None:
        err.close()


def serve() -> None:
    """The child's entry point: read the pickled ActorArgs from stdin and run."""
    main(pickle.load(sys.stdin.buffer))


def main(args: ActorArgs) -> None:
    """Process entry point: run the actor until the run stops, recording a failure for the learner."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the learner handles it
    segment = shm.Segment(args.layout, args.segment)
    ints = segment["actor.ints"][args.actor_id]
    try:
        _run(args, segment)
        ints[shm.ACTOR_INTS.index("status")] = shm.FINISHED
    except BaseException as exc:  # noqa: B036 — whatever stops an actor must reach the learner
        shm.write_error(segment, args.actor_id, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
        ints[shm.ACTOR_INTS.index("status")] = shm.FAILED
    finally:
        segment.close()


def _run(args: ActorArgs, segment: shm.Segment) -> None:
    from pearl.adapters import open_adapter  # imported here: the hardware library loads in this process only
    from pearl.runtime.protocol import VectorActor

    cfg, me = args.config, args.actor_id
    run, ints, floats = segment["run"], segment["actor.ints"], segment["actor.floats"]
    mine, myf = ints[me], floats[me]
    col = {name: shm.ACTOR_INTS.index(name) for name in shm.ACTOR_INTS}
    fcol = {name: shm.ACTOR_FLOATS.index(name) for name in shm.ACTOR_FLOATS}
    stop, updates_at = shm.RUN_INTS.index("stop"), shm.RUN_INTS.index("updates")
    produced_col = col["produced"]

    board = shm.WeightBoard(segment, args.params)
    seen, version, params = _wait_for_weights(board, run, stop)
    mine[col["weights_seq"]] = seen
    adapter = open_adapter(args.device, 1, args.descriptor)
    actor = VectorActor(me, args.spec.env_id, args.spec, cfg.n_envs,
                        adapter.make_act(cfg, args.spec, params, args.seed + 1), args.seed)
    actor.policy_version = version
    ring, episodes = shm.Ring(segment, f"ring{me}"), shm.Ring(segment, f"episodes{me}", EPISODE_FIELDS)
    mine[col["status"]] = shm.RUNNING
    last_parent_check = time.monotonic()
    go = shm.RUN_INTS.index("go")

    def keep_waiting(seconds: float = RING_POLL_S) -> bool:
        """Between two polls of a full ring or a closed limiter: False once the run is over."""
        nonlocal last_parent_check
        shm.wait_briefly(seconds)
        now = time.monotonic()
        if now - last_parent_check > PARENT_CHECK_S:
            last_parent_check = now
            if os.getppid() != args.parent_pid:  # the learner died without cleaning up: remove the segment
                segment.unlink()
                raise RuntimeError("the learner process is gone")
        return not run[stop]

    while not run[go]:  # every actor starts stepping at once, when all are ready
        if not keep_waiting():
            return
    while not run[stop]:
        total = args.start_steps + int(ints[:, produced_col].sum())
        if total >= cfg.total_steps:
            break
        if args.limiter is not None:
            t0 = time.perf_counter()
            while not args.limiter.actor_may_step(total, int(run[updates_at]), actor.n):
                if not keep_waiting(LIMITER_POLL_S):
                    return
                total = args.start_steps + int(ints[:, produced_col].sum())
            myf[fcol["limiter_wait"]] += time.perf_counter() - t0
        got = board.read(seen)
        if got is not None:
            seen, v, params = got
            actor.load_weights(WeightSnapshot(v, params))
            mine[col["syncs"]] += 1
            mine[col["weights_seq"]] = seen
        batch = actor.step(cfg.exploration(total), random=total < cfg.learning_starts)
        t0 = time.perf_counter()
        if len(batch) and not ring.push({f: getattr(batch, f) for f in shm.RING_FIELDS}, keep_waiting):
            return
        for episode in actor.drain_episodes():
            episodes.push({"ret": np.array([episode.ret]), "length": np.array([float(episode.length)])},
                          keep_waiting)
            mine[col["episodes"]] += 1
        myf[fcol["ring_wait"]] += time.perf_counter() - t0
        mine[produced_col] += len(batch)  # after the rows are in the ring
        for kernel in ("act", "env_step", "weight_sync"):
            myf[fcol[kernel]] = actor.clock.seconds.get(kernel, 0.0)
        mine[col["act_calls"]] = actor.clock.calls.get("act", 0)
        mine[col["env_calls"]] = actor.clock.calls.get("env_step", 0)
        mine[col["policy_version"]] = actor.policy_version
    actor.close()


EPISODE_FIELDS = ("ret", "length")


def episode_specs(prefix: str, capacity: int) -> list[tuple[str, tuple[int, ...], str]]:
    return [(f"{prefix}.ret", (capacity,), "f8"), (f"{prefix}.length", (capacity,), "f8"),
            (f"{prefix}.ctl", (2,), "i8")]


def _wait_for_weights(board: shm.WeightBoard, run: np.ndarray, stop: int) -> tuple[int, int, dict]:
    """The first snapshot (the learner publishes one before starting actors)."""
    while True:
        got = board.read(0)
        if got is not None:
            return got
        if run[stop]:
            raise RuntimeError("the run stopped before the first weights were published")
        shm.wait_briefly(1e-3)
