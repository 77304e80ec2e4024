"""The sequential launcher: every role in this process, in turn, following the schedule.

For each segment the actors step in turn (actor 0 until its share is collected, then actor 1, ...), each
acting with the weights the schedule gives that segment (it keeps the last lag + 2 published policies),
then the learner inserts the segment and runs its updates. With policy lag 0 this is the published
presets' schedule exactly (collect train_freq steps, then gradient_steps updates); with the same lag it
gives the same parameters as the local (multi-process) launcher, bit for bit, only slower, since nothing
overlaps.
"""

from __future__ import annotations

from collections import deque
from typing import Callable

from pearl.runtime.actors import build_actor
from pearl.runtime.checkpoint import Checkpoint, Checkpointer
from pearl.runtime.job import Job, LauncherCapabilities
from pearl.runtime.launcher import SegmentLauncher
from pearl.runtime.protocol import Episode, merge_clocks
from pearl.schedule import ActorShare
from pearl.traffic import TRANSITIONS, WEIGHTS
from pearl.types import Params, TransitionBatch, WeightSnapshot


class SequentialLauncher(SegmentLauncher):
    name = "sequential"
    capabilities = LauncherCapabilities(traffic="sequential")  # every role in turn, in this process

    def __init__(self, job: Job, resume: Checkpoint | None = None, checkpointer: Checkpointer | None = None) -> None:
        super().__init__(job, resume, checkpointer)
        self.shares: list[ActorShare] = []
        self.pending: list[deque[TransitionBatch]] = []
        # the published policies by segment tag; segments before the first use the starting policy
        self.published: dict[int, Params] = {}

    def start(self) -> None:
        job, sched = self.job, self.schedule
        act_adapter = self.adapters[job.placement.act]
        for tag in range(self.first_segment - 1 - sched.lag, self.first_segment):
            self.published[tag] = self.policy
        for i in range(job.actors):
            self.shares.append(build_actor(act_adapter, i, job.config, job.spec, self.policy, self.seeds.actor(i),
                                           sched, sched.steps_before(self.first_segment, i), job.placement.act_way))
            self.pending.append(deque())

    def stop(self) -> None:
        for share in self.shares:
            share.actor.close()
        self.shares = []

    def _collect(self, k: int, insert: Callable[[TransitionBatch], None], wait: Callable[[], None]) -> None:
        with self.adapters[self.job.placement.act].acting():  # act's bits as in an actor process
            self._step_shares(k)
        for share, pending in zip(self.shares, self.pending):
            n = self.schedule.share(k, share.id)
            if n:
                self.sent.add(TRANSITIONS, nbytes=_take(pending, n, insert))
        self.dropped = sum(s.dropped for s in self.shares)

    def _step_shares(self, k: int) -> None:
        """Every actor's share of segment k, in turn, each with the weights the schedule gives it."""
        sched = self.schedule
        for share, pending in zip(self.shares, self.pending):
            while share.collected < sched.steps_before(k + 1, share.id):
                tag = share.to_load()
                if tag is not None:
                    share.load(tag, WeightSnapshot(tag, self.published[tag]))
                    self.sent.add(WEIGHTS, nbytes=_params_nbytes(self.published[tag]), loads=1)
                pending.append(share.step())

    def _publish(self, tag: int) -> None:
        self.published[tag] = self.learner.snapshot().params
        self.sent.add(WEIGHTS, messages=0, publishes=1)
        for old in [t for t in self.published if t < tag - self.schedule.lag]:
            del self.published[old]

    def _episodes(self) -> list[Episode]:
        return [e for share in self.shares for e in share.actor.drain_episodes()]

    def _clocks(self) -> tuple[dict[str, float], dict[str, int]]:
        return merge_clocks((*(s.actor.clock for s in self.shares), self.replay.clock, self.learner.clock))


def _take(pending: deque[TransitionBatch], n: int, insert: Callable[[TransitionBatch], None]) -> int:
    """Hand the first n pending transitions to insert, splitting a batch that holds more; their bytes."""
    nbytes = 0
    while n > 0:
        batch = pending.popleft()
        if len(batch) > n:
            pending.appendleft(batch.tail(n))
            batch = batch.head(n)
        insert(batch)
        n -= len(batch)
        nbytes += batch.nbytes
    return nbytes


def _params_nbytes(params: Params) -> int:
    return sum(int(v.nbytes) for v in params.values())
