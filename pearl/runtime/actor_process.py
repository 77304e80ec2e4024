"""The body of one actor process: step a vector of envs, act batched, write transitions to shared memory.

Started by the local launcher (`pearl.runtime.local`) with the spawn start method, so it imports its own
adapter (and hardware library) instead of inheriting the learner's. Everything it needs arrives in one
picklable `ActorArgs`; after that it talks to the learner only through the run's shared-memory segment:

- its transition ring and episode ring (it is their only writer),
- its row of counters (transitions handed on, time per kernel, status),
- the weight boards: before each step it acts with the weights the schedule gives the step's segment,
  waiting on that segment's board until the learner has published them (unless the weights it holds are the
  same ones, `ActorShare.to_load`: before learning starts it runs ahead as far as its ring lets it),
- the run flags (go, stop).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import traceback
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from pearl.algos.base import OffPolicyConfig
from pearl.algos.params import ParamLayout
from pearl.device import DeviceId
from pearl.children import read_payload, start_child
from pearl.kernels import Implementation
from pearl.runtime import shm
from pearl.runtime.seeds import ActorSeeds
from pearl.schedule import ActorShare, Schedule
from pearl.types import EnvSpec, WeightSnapshot

if TYPE_CHECKING:
    from pearl.adapters import Adapter

PARENT_CHECK_S = 0.5  # how often an actor checks that its learner is still alive
RING_POLL_S = 50e-6  # a full ring empties within one segment of the learner
# Where the OS has no eventfd (shm.await_wake), an actor waiting for weights polls for them once a millisecond:
# each wake-up takes a core from the learner, so polls much more often than that slow a multi-threaded learn
# down on a small host.
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
    implementation: Implementation | None = None  # how act runs (the plan's way; None: the adapter's)


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
    stop, go = shm.RUN_INTS.index("stop"), shm.RUN_INTS.index("go")
    boards = [shm.WeightBoard(segment, args.params, f"weights{s}") for s in range(args.slots)]
    sched = args.schedule
    tag = sched.weights_for(sched.locate(me, args.collected)[0])
    params = _wait_for_weights(boards[tag % args.slots], tag, run, stop)
    _count_load(mine, params)
    share = build_actor(actor_adapter(args.device, args.descriptor), me, cfg, args.spec, params, args.seeds, sched,
                        args.collected, args.implementation)
    share.weights = tag
    mine[_COL["produced"]] = share.collected
    ring, episodes = shm.Ring(segment, f"ring{me}"), shm.Ring(segment, f"episodes{me}", EPISODE_FIELDS)
    iteration = ActorIteration(share, ring, episodes, mine, myf, args.wake_learner)
    mine[_COL["status"]] = shm.RUNNING
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
        seg_index, need = iteration.begin()
        if need is not None:
            t0 = time.perf_counter()
            while (got := boards[need % args.slots].read_tag(need)) is None:
                if not keep_waiting(WEIGHTS_POLL_S, args.wake_actor):
                    return
            myf[_FCOL["weights_wait"]] += time.perf_counter() - t0
            share.load(need, WeightSnapshot(need, got))
            mine[_COL["syncs"]] += 1
            _count_load(mine, got)
        if not iteration.step(seg_index, keep_waiting):
            return
    share.actor.close()


EPISODE_FIELDS = ("ret", "length")
_COL = {name: shm.ACTOR_INTS.index(name) for name in shm.ACTOR_INTS}
_FCOL = {name: shm.ACTOR_FLOATS.index(name) for name in shm.ACTOR_FLOATS}


class ActorIteration:
    """One iteration of an actor process past its weights: its share's step, the rows into its ring, the learner
    woken when a share is whole, its episodes handed on, its row of counters written. The process runs it, and
    the profiler times it as it is (`IterationProbe`), so a profile's actor step is what a process spends."""

    def __init__(self, share: ActorShare, ring: shm.Ring, episodes: shm.Ring, mine: np.ndarray, myf: np.ndarray,
                 wake_learner: int | None) -> None:
        self.share, self.ring, self.episodes = share, ring, episodes
        self.mine, self.myf, self.wake_learner = mine, myf, wake_learner

    def begin(self) -> tuple[int, int | None]:
        """The segment the next step falls in, and the tag of the weights it must load first (None: the loaded
        ones do)."""
        return self.share.segment(), self.share.to_load()

    def step(self, seg_index: int, wait: Callable[[], bool]) -> bool:
        """One step, its rows pushed (calling wait() while the ring is full): False when a wait gave up."""
        share, mine, myf = self.share, self.mine, self.myf
        batch = share.step()
        t0 = time.perf_counter()
        if len(batch) and not self.ring.push({f: getattr(batch, f) for f in shm.RING_FIELDS}, wait):
            return False
        if share.done or share.segment() != seg_index:  # a share is whole in the ring: the learner may take it
            shm.wake(self.wake_learner)
        for episode in share.actor.drain_episodes():
            self.episodes.push({"ret": np.array([episode.ret]), "length": np.array([float(episode.length)])}, wait)
            mine[_COL["episodes"]] += 1
        myf[_FCOL["ring_wait"]] += time.perf_counter() - t0
        mine[_COL["produced"]] = share.collected  # after the rows are in the ring
        mine[_COL["dropped"]] = share.dropped
        clock = share.actor.clock
        for kernel in ("act", "env_step", "weight_sync"):
            myf[_FCOL[kernel]] = clock.seconds.get(kernel, 0.0)
        mine[_COL["act_calls"]] = clock.calls.get("act", 0)
        mine[_COL["env_calls"]] = clock.calls.get("env_step", 0)
        mine[_COL["policy_version"]] = share.weights
        return True


class IterationProbe:
    """An actor process's iteration, for the profiler to time (`pearl.profiler.actor`): `ActorIteration` on a
    `VectorActor` of `envs` environments, its rings in this process's memory and emptied after each step (taking
    the rows is the learner's work), in one segment longer than any timing, so no weights are loaded (the planner
    prices the loads on their own) and the exploration is the schedule's last."""

    def __init__(self, adapter: "Adapter", config: OffPolicyConfig, spec: EnvSpec, envs: int) -> None:
        from pearl.algos.params import init_params
        from pearl.runtime.protocol import VectorActor

        config = replace(config, n_envs=envs, learning_starts=0)
        act = adapter.make_act(config, spec, init_params(config, spec, seed=0), seed=0)
        self.actor = VectorActor(0, spec.env_id, spec, envs, act, seed=0)
        long = PROBE_STEPS
        schedule = Schedule(total_steps=2 * long, segment_steps=long, updates_per_segment=0, learning_starts=0,
                            actors=1, lag=0)
        share = ActorShare(self.actor, schedule, config, collected=long // 2)  # past any exploration decay
        share.weights = schedule.weights_for(share.segment())
        capacity = max(PROBE_RING_ROWS, envs)
        memory = {name: np.zeros(shape, dtype) for name, shape, dtype in
                  [*shm.ring_specs("ring", capacity, spec), *episode_specs("episodes", capacity)]}
        self.rings = shm.Ring(memory, "ring"), shm.Ring(memory, "episodes", EPISODE_FIELDS)
        self.iteration = ActorIteration(share, *self.rings, np.zeros(len(shm.ACTOR_INTS), np.int64),
                                        np.zeros(len(shm.ACTOR_FLOATS)), None)

    def __call__(self) -> None:
        seg_index, need = self.iteration.begin()
        if need is not None or self.iteration.share.done:
            raise RuntimeError("the probe's segment ran out: time fewer steps than PROBE_STEPS // 2")
        self.iteration.step(seg_index, _never)
        for ring in self.rings:
            ring.ctl[shm.TAIL] = ring.ctl[shm.HEAD]

    def close(self) -> None:
        self.actor.close()


#: env steps of the probe's one segment, half of them still ahead when it starts
PROBE_STEPS = 1 << 40
#: rows of the probe's rings (as the local launcher's smallest)
PROBE_RING_ROWS = 4096


def _never() -> bool:
    raise RuntimeError("the probe's ring is emptied after every step, so it is never full")
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
