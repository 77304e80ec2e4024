"""The body of one actor process: step a vector of envs, act batched, write transitions to shared memory.

Started by the local launcher (`pearl.runtime.local`) with the spawn start method, so it imports its own
adapter (and hardware library) instead of inheriting the learner's. Everything it needs arrives in one
picklable `ActorArgs`; after that it talks to the learner only through the run's shared-memory segment:

- its transition ring and episode ring (it is their only writer),
- its row of counters (transitions handed on, time per kernel, status),
- the weight boards: before each step it acts with the weights the schedule gives the step's segment,
  waiting on that segment's board until the learner has published them,
- the run flags (go, stop).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import traceback
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from pearl.algos.base import OffPolicyConfig
from pearl.algos.params import ParamLayout
from pearl.device import DeviceId
from pearl.children import read_payload, start_child
from pearl.runtime import shm
from pearl.runtime.seeds import ActorSeeds
from pearl.schedule import Schedule
from pearl.types import EnvSpec, WeightSnapshot

PARENT_CHECK_S = 0.5  # how often an actor checks that its learner is still alive
RING_POLL_S = 50e-6  # a full ring empties within one segment of the learner
# Where the OS has no eventfd (shm.await_wake), an actor waiting for weights polls for them once a millisecond:
# each wake-up takes a core from the learner (with 100 µs polls, DDPG Pendulum's 2-thread learn ran at 8.4 ms an
# update against 4.95 ms bare on the 2-core EPYC).
WEIGHTS_POLL_S = 1e-3


@dataclass(frozen=True)
class ActorArgs:
    actor_id: int
    segment: str
    layout: shm.Layout
    params: ParamLayout
    config: OffPolicyConfig
    spec: EnvSpec
    device: DeviceId
    descriptor: str | None
    seeds: ActorSeeds
    schedule: Schedule
    slots: int  # weight boards, one per recent segment: W(k) is on board k mod slots
    collected: int  # transitions this actor had handed on before (its share so far)
    parent_pid: int
    wake_actor: int | None = None  # the learner writes it when it publishes weights (shm.await_wake)
    wake_learner: int | None = None  # this actor writes it when it has handed on its share of a segment


def process_env(device: DeviceId, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment an actor process starts with: this one's, and its act device's slice (a MIG instance's
    UUID as CUDA_VISIBLE_DEVICES, or an MPS share's percentage and pipe directory)."""
    from pearl.adapters.slices import slice_env

    base = os.environ if base is None else base
    return {**base, **slice_env(device, base)}


def start(args: ActorArgs) -> subprocess.Popen:
    """Start an actor in a fresh interpreter, with its act device's environment and its wake-up channels; its
    stderr goes to a temporary file (`pearl.children.stderr_tail`)."""
    fds = tuple(fd for fd in (args.wake_actor, args.wake_learner) if fd is not None)
    return start_child("from pearl.runtime.actor_process import serve; serve()", args, process_env(args.device), fds)


def serve() -> None:
    """The child's entry point: read the pickled ActorArgs from stdin and run."""
    main(read_payload())


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
    from pearl.runtime.actors import actor_adapter, build_actor  # imported here, as the envs and adapters they load

    cfg, me = args.config, args.actor_id
    run, mine, myf = segment["run"], segment["actor.ints"][args.actor_id], segment["actor.floats"][args.actor_id]
    col = {name: shm.ACTOR_INTS.index(name) for name in shm.ACTOR_INTS}
    fcol = {name: shm.ACTOR_FLOATS.index(name) for name in shm.ACTOR_FLOATS}
    stop, go = shm.RUN_INTS.index("stop"), shm.RUN_INTS.index("go")
    boards = [shm.WeightBoard(segment, args.params, f"weights{s}") for s in range(args.slots)]
    sched = args.schedule
    tag = sched.weights_for(sched.locate(me, args.collected)[0])
    params = _wait_for_weights(boards[tag % args.slots], tag, run, stop)
    _count_load(mine, params)
    share = build_actor(actor_adapter(args.device, args.descriptor), me, cfg, args.spec, params, args.seeds, sched,
                        args.collected)
    share.weights = tag
    mine[col["produced"]] = share.collected
    ring, episodes = shm.Ring(segment, f"ring{me}"), shm.Ring(segment, f"episodes{me}", EPISODE_FIELDS)
    mine[col["status"]] = shm.RUNNING
    last_parent_check = time.monotonic()

    def keep_waiting(seconds: float = RING_POLL_S, wake: int | None = None) -> bool:
        """Between two polls of a full ring, or until the learner wakes it for new weights: False once the run
        is over."""
        nonlocal last_parent_check
        if wake is None:
            shm.wait_briefly(seconds)
        else:
            shm.await_wake(wake, PARENT_CHECK_S, seconds)
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
    while not run[stop] and not share.done:
        seg_index = share.segment()
        need = sched.weights_for(seg_index)  # share.needs(), with the segment kept for the wake-up below
        if share.weights != need:
            t0 = time.perf_counter()
            while (got := boards[need % args.slots].read_tag(need)) is None:
                if not keep_waiting(WEIGHTS_POLL_S, args.wake_actor):
                    return
            myf[fcol["weights_wait"]] += time.perf_counter() - t0
            share.load(need, WeightSnapshot(need, got))
            mine[col["syncs"]] += 1
            _count_load(mine, got)
        batch = share.step()
        t0 = time.perf_counter()
        if len(batch) and not ring.push({f: getattr(batch, f) for f in shm.RING_FIELDS}, keep_waiting):
            return
        if share.done or share.segment() != seg_index:  # a share is whole in the ring: the learner may take it
            shm.wake(args.wake_learner)
        for episode in share.actor.drain_episodes():
            episodes.push({"ret": np.array([episode.ret]), "length": np.array([float(episode.length)])},
                          keep_waiting)
            mine[col["episodes"]] += 1
        myf[fcol["ring_wait"]] += time.perf_counter() - t0
        mine[col["produced"]] = share.collected  # after the rows are in the ring
        mine[col["dropped"]] = share.dropped
        clock = share.actor.clock
        for kernel in ("act", "env_step", "weight_sync"):
            myf[fcol[kernel]] = clock.seconds.get(kernel, 0.0)
        mine[col["act_calls"]] = clock.calls.get("act", 0)
        mine[col["env_calls"]] = clock.calls.get("env_step", 0)
        mine[col["policy_version"]] = share.weights
    share.actor.close()


EPISODE_FIELDS = ("ret", "length")
_LOADS, _LOAD_BYTES = shm.ACTOR_INTS.index("loads"), shm.ACTOR_INTS.index("load_bytes")


def _count_load(mine: np.ndarray, params: dict[str, np.ndarray]) -> None:
    """One copy of a weight board into the actor (`pearl.traffic`'s weight loads)."""
    mine[_LOADS] += 1
    mine[_LOAD_BYTES] += sum(int(v.nbytes) for v in params.values())


def episode_specs(prefix: str, capacity: int) -> list[tuple[str, tuple[int, ...], str]]:
    return [(f"{prefix}.ret", (capacity,), "f8"), (f"{prefix}.length", (capacity,), "f8"),
            (f"{prefix}.ctl", (2,), "i8")]


def _wait_for_weights(board: shm.WeightBoard, tag: int, run: np.ndarray, stop: int) -> dict:
    """The weights of segment `tag` (the learner publishes the starting ones before it starts the actors)."""
    while True:
        got = board.read_tag(tag)
        if got is not None:
            return got
        if run[stop]:
            raise RuntimeError("the run stopped before the first weights were published")
        shm.wait_briefly(1e-3)
