"""One actor worker of the Ray launcher: a vector of envs stepped until its share of a segment is collected.

A plain class, no Ray: `pearl.runtime.ray.launcher` places it as a Ray actor (`worker_class`; a test may drive
it in process). It holds a `VectorActor` and its `ActorShare`, built as every launcher builds them
(`pearl.runtime.actors.build_actor`, with the seeds `Seeds` gives, one CPU thread), so the same seed gives the
same transitions whichever launcher runs it. One `collect` call returns one batch of the worker's whole share of
a segment: transitions travel in batches, never one step per call. A step that straddles into the next
segment keeps its later rows for the next call (as the sequential launcher's pending rows).

`collect` returns two values, the batch and what was measured (`Collected`), which the Ray launcher asks
for as two object refs: the driver reads the small one and hands the batch's ref on to the learner role,
so transitions go from worker to learner through the object store without passing through the driver.
Weights come as the object ref of a published policy and its version (the segment tag), wrapped in a
list so that Ray does not fetch them with the call: the worker fetches them only when its next step
needs a newer version than it holds.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pearl.algos.base import OffPolicyConfig
from pearl.device import DeviceId
from pearl.errors import PearlError
from pearl.kernels import Implementation
from pearl.runtime.actors import ActorFailed, actor_adapter, build_actor
from pearl.runtime.protocol import Episode
from pearl.runtime.ray.session import answer, first_line, remote_class, require_ray
from pearl.runtime.seeds import ActorSeeds
from pearl.schedule import ActorShare, Schedule
from pearl.types import EnvSpec, Params, TransitionBatch, WeightSnapshot



class WorkerRestarted(PearlError):
    """A collect call reached a worker that was not set up: Ray restarted it after its process died."""


@dataclass
class Collected:
    """What one `collect` call sends back: the worker's share of segment k and what it measured."""

    segment: int
    rows: int  # the batch's: exactly schedule.share(segment, actor), in collection order
    episodes: list[Episode] = field(default_factory=list)  # finished since the previous call
    seconds: dict[str, float] = field(default_factory=dict)  # the worker's kernel clock, cumulative
    calls: dict[str, int] = field(default_factory=dict)
    dropped: int = 0  # rows its last step produced past its last share
    nbytes: int = 0  # the batch's bytes
    loads: int = 0  # weight versions the worker fetched so far, and their bytes (`pearl.traffic`)
    load_bytes: int = 0


@dataclass
class InFlight:
    """A segment whose collection was asked for: the weights it acts with and each worker's two futures (the
    batch, then what was measured)."""

    tag: int
    weights: Any  # the object ref of the published policy
    futures: list[list[Any]]


def worker_class() -> Any:
    """``ray.remote(ActorWorker)``, made once and only when a worker is first placed."""
    return remote_class(ActorWorker)


class ActorWorker:
    """A VectorActor and its ActorShare (see the module docstring); `setup` builds them, `collect` steps."""

    def __init__(self, actor_id: int, config: OffPolicyConfig, spec: EnvSpec, device: DeviceId, descriptor: str | None,
                 schedule: Schedule, implementation: Implementation | None = None) -> None:
        # small arguments only: Ray keeps them to construct the worker again when it restarts it
        self.id, self.config, self.spec, self.schedule = actor_id, config, spec, schedule
        self.device, self.descriptor, self.implementation = device, descriptor, implementation
        self.share: ActorShare | None = None
        self.pending: deque[TransitionBatch] = deque()
        self.loads = self.load_bytes = 0

    def setup(self, seeds: ActorSeeds, collected: int, policy: Params) -> int:
        """(Re)build the envs and the act kernel (with `policy`), seeded by `seeds`, at the actor's transition
        number `collected`; the process id (a fresh worker, or one Ray restarted, starts from here)."""
        self.close()
        policy = {n: np.array(v) for n, v in policy.items()}  # writable copies of the object store's arrays
        self.share = build_actor(actor_adapter(self.device, self.descriptor), self.id, self.config, self.spec, policy,
                                 seeds, self.schedule, collected, self.implementation)
        self.pending = deque()
        return os.getpid()

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this worker runs on (asked from inside the role)."""
        return str(require_ray().get_runtime_context().get_node_id())

    def collect(self, k: int, tag: int, weights: Params | list[Any]) -> tuple[TransitionBatch, Collected]:
        """Step until this worker's share of segment k is collected, acting with `weights` (segment `tag`'s:
        the parameters, or a list holding their object ref, fetched only if a step needs them); the batch
        of the share and what was measured."""
        share, sched = self.share, self.schedule
        if share is None:
            raise WorkerRestarted(f"actor worker {self.id} was asked to collect before its setup (Ray restarted it)")
        while share.collected < sched.steps_before(k + 1, self.id):
            need = share.to_load()
            if need is not None:
                if need != tag:
                    raise PearlError(f"actor worker {self.id}: segment {k} needs the weights of segment {need}, "
                                     f"got those of {tag}")
                params = {n: np.array(v) for n, v in _fetch(weights).items()}
                share.load(tag, WeightSnapshot(tag, params))
                self.loads += 1
                self.load_bytes += sum(int(v.nbytes) for v in params.values())
            batch = share.step()
            if len(batch):
                self.pending.append(batch)
        clock = share.actor.clock
        batch = self._take(sched.share(k, self.id))
        return batch, Collected(k, len(batch), share.actor.drain_episodes(), dict(clock.seconds), dict(clock.calls),
                                share.dropped, batch.nbytes, self.loads, self.load_bytes)

    def _take(self, n: int) -> TransitionBatch:
        """The first n pending rows as one batch, splitting a batch that holds more."""
        parts: list[TransitionBatch] = []
        while n > 0:
            batch = self.pending.popleft()
            if len(batch) > n:
                self.pending.appendleft(batch.tail(n))
                batch = batch.head(n)
            parts.append(batch)
            n -= len(batch)
        return concat(parts, self.spec, self.id)

    def close(self) -> None:
        if self.share is not None:
            self.share.actor.close()
            self.share = None


def _fetch(weights: Params | list[Any]) -> Params:
    """The parameters themselves, fetching them from Ray's object store when given as [object ref]."""
    if isinstance(weights, list):
        return require_ray().get(weights[0])  # only ever given a ref inside a Ray actor
    return weights


def concat(parts: list[TransitionBatch], spec: EnvSpec, actor_id: int) -> TransitionBatch:
    """One batch of the parts' rows in order (an empty one of the right shapes for no parts)."""
    if not parts:
        return TransitionBatch(np.zeros((0, spec.obs_dim), np.float32), np.zeros((0, *spec.action_shape),
                               spec.action_dtype), np.zeros(0, np.float32), np.zeros((0, spec.obs_dim), np.float32),
                               np.zeros(0, np.float32), actor_id)
    if len(parts) == 1:
        return parts[0]
    fields = ("obs", "action", "reward", "next_obs", "terminated")
    return TransitionBatch(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields), actor_id,
                           parts[0].policy_version)


def get_from_workers(refs: list[Any], doing: str, timeout: float | None = None,
                     waiting: Callable[[list[Any], float], str] | None = None) -> list[Any]:
    """``ray.get`` of what actor workers (or other roles) answer; an error or a death while `doing` ends the run
    with its message (`session.answer`: a PearlError as it was raised, anything else as ActorFailed); with
    `waiting`, a progress line every `session.PROGRESS_S` while some have not answered."""
    late = (f"the actor workers were not running after {timeout or 0:.0f} s {doing}: the cluster may lack the "
            "resources they ask for (`ray status` shows what is pending)")
    return answer(refs, timeout, late, f"an actor worker failed {doing}",
                  lambda why: ActorFailed(f"an actor worker died {doing}: {why}"), waiting)


def set_up_again(worker: Any, i: int, old_pid: int, seed: ActorSeeds, collected: int, weights: Any,
                 timeout: float) -> list[Any]:
    """Wait until Ray runs worker i in a new process (its pid is no longer `old_pid`: a killed one may still
    answer for a moment), then set it up at `collected` rows with `seed` and `weights`; its new pid and node.
    Calls that reach it while it restarts are sent again."""
    ray = require_ray()
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ray.get(worker.pid.remote()) != old_pid:
                return get_from_workers([worker.setup.remote(seed, collected, weights), worker.node_id.remote()],
                                        "restarting")
        except ray.exceptions.ActorUnavailableError:
            pass
        except ray.exceptions.RayActorError as exc:
            raise ActorFailed(f"actor {i} could not be restarted: {first_line(exc)}") from None
        if time.monotonic() > deadline:
            raise ActorFailed(f"actor {i} was not restarted within {timeout:.0f} s")
        time.sleep(0.05)
