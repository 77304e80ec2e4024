"""The learner as a role: replay and the learn kernel on their devices, driven one segment at a time.

A plain class, no Ray: the sequential and local launchers hold one in their own process, and
`pearl.runtime.ray.launcher` places one as a Ray actor on the node and device the plan gives, so the driver
only orchestrates (the segment loop, checkpoints, evaluations, logging). Its calls are coarse, one or two
a segment, never one an update: `insert` takes a segment's shares in actor order, `train` runs the segment's
updates, `policy` hands out the weights to publish, and `evaluate`, `status`, `state` and `clocks` answer
the driver. The in-training evaluations run here, on the learner's device, as they always have, so a seed
gives the same evaluations whichever launcher runs it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from pearl.adapters import open_adapter
from pearl.adapters.base import Adapter, ReplayKernels
from pearl.algos.params import init_params
from pearl.device import DeviceId
from pearl.runtime.checkpoint import Checkpoint, restore
from pearl.runtime.evaluate import BestPolicy, Evaluation
from pearl.runtime.protocol import KernelClock, Learner, ReplayManager
from pearl.runtime.seeds import Seeds
from pearl.traffic import PRIORITIES, SAMPLES, Tally
from pearl.types import Params, TransitionBatch

_BATCH_FIELDS = ("obs", "action", "reward", "next_obs", "terminated")


@dataclasses.dataclass
class LearnerStatus:
    """What a metrics line needs from the learner: its update count, replay's size, the last losses."""

    updates: int
    replay_size: int
    metrics: dict[str, float]
    traffic: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)  # what it moved (`pearl.traffic`)


class LearnerRole:
    """Replay, the learner and the in-training evaluations of one job (see the module docstring)."""

    def __init__(self, job: Any, devices: list[DeviceId], resume: Checkpoint | None = None,
                 replay_kernels: ReplayKernels | None = None) -> None:
        """`devices`: the adapters to open (the sequential launcher's actors use this process's too);
        `replay_kernels`: replay kept elsewhere (the replay server's shards), else built on the replay device."""
        self.job, self.config, self.spec = job, job.config, job.spec
        self.adapters: dict[DeviceId, Adapter] = {d: open_adapter(d, job.threads, job.descriptor_for(d))
                                                  for d in devices}
        seeds = Seeds(job.seed)
        params = init_params(job.config, job.spec, seeds.learner)
        replay_adapter, learn_adapter = self.adapters[job.placement.replay], self.adapters[job.placement.learn]
        kernels = replay_kernels or replay_adapter.make_replay(job.config, job.spec, seeds.replay)
        self.replay = ReplayManager(kernels, job.config.batch_size)
        self.sent = Tally()  # the samples and priorities it moved (`pearl.traffic`)
        self.learner = Learner(learn_adapter.make_learn(job.config, job.spec, params, job.seed, job.precision,
                                                        job.placement.learn_way),
                               learn_adapter, job.config)
        if resume is not None:
            self.restore(resume)
        self.best = (BestPolicy(learn_adapter.make_act(job.config, job.spec, self.learner.kernel.policy_params(),
                                                       seeds.learner), job.spec, job.eval_every, job.eval_every_episodes,
                                job.seed)
                     if job.learn and job.eval_every > 0 and job.eval_every_episodes > 0 else None)

    def restore(self, resume: Checkpoint) -> None:
        """Load a checkpoint into the freshly built learn kernel and replay."""
        restore(resume, self.learner.kernel, self.replay.kernels)

    @property
    def updates(self) -> int:
        return self.learner.updates

    # ----------------------------------------------------------------------------------- per segment
    def insert(self, *batches: TransitionBatch) -> int:
        """Insert the batches in order; the rows inserted. Arrays that came through Ray's object store are
        read-only views of it, so replay gets copies (in process the batches are already the caller's own)."""
        rows = 0
        for batch in batches:
            if len(batch):
                if not batch.obs.flags.writeable:
                    batch = TransitionBatch(*(np.array(getattr(batch, f)) for f in _BATCH_FIELDS), batch.actor_id,
                                            batch.policy_version)
                self.replay.insert(batch)
                rows += len(batch)
        return rows

    def train(self, updates: int, beta: float) -> int:
        """Run `updates` updates (sample, learn, priority update each); the update count after them."""
        prioritized = self.config.prioritized
        for batch in self.replay.samples(updates, beta):
            self.sent.add(SAMPLES, nbytes=_nbytes(batch.obs, batch.action, batch.reward, batch.next_obs,
                                                  batch.terminated, batch.weights))
            update = self.learner.update(batch)
            if prioritized:
                self.replay.update_priorities(update)
                self.sent.add(PRIORITIES, nbytes=_nbytes(update.td_errors))
        return self.learner.updates

    def policy(self) -> Params:
        """The weights to publish (a copy: the caller may keep them while the learner goes on)."""
        return self.learner.snapshot().params

    def evaluate(self, steps: int) -> Evaluation | None:
        """Evaluate the current policy when an in-training evaluation is due at `steps` env steps."""
        if self.best is None or self.learner.updates == 0 or not self.best.due(steps):
            return None
        return self.best.run(self.learner.kernel.policy_params(), steps, self.learner.updates)

    # --------------------------------------------------------------------------------- for the driver
    def status(self) -> LearnerStatus:
        metrics = self.learner.read_metrics() if self.learner.last_metrics else {}
        return LearnerStatus(self.learner.updates, self.replay.size, metrics, self.sent.to_dict())

    def state(self, include_replay: bool) -> tuple[Params, Params | None]:
        """The learn kernel's state dict and, when asked, replay's: what a checkpoint holds."""
        replay = self.replay.kernels.state_dict() if include_replay else None
        return self.learner.kernel.state_dict(), replay

    def best_policy(self) -> BestPolicy | None:
        """The in-training evaluations and the best policy they found, without the act kernel (so it can travel)."""
        return None if self.best is None else dataclasses.replace(self.best, act=None)

    def clocks(self) -> list[KernelClock]:
        return [self.replay.clock, self.learner.clock]


def _nbytes(*arrays: Any) -> int:
    """Bytes of host or device arrays (numpy, torch and OpenCL arrays all tell their `nbytes`)."""
    return sum(int(a.nbytes) for a in arrays)


class LearnerProbe(LearnerRole):
    """The learner role's per-update path (`insert` and `train`: the replay manager's and learner's clocks, the
    sample generator, the traffic tally, the priority update) around kernels the profiler built, for its in-situ
    iteration (pearl.profiler.learner `LearnerRun`): the profiler's loop then costs what a run's does beyond the
    kernels. Built from those kernels alone: no job, no evaluations, no checkpoint."""

    def __init__(self, adapter: Adapter, config: Any, replay: ReplayKernels, learn: Any) -> None:  # noqa: D107
        self.config = config
        self.replay = ReplayManager(replay, config.batch_size)
        self.learner = Learner(learn, adapter, config)
        self.sent = Tally()
        self.best = None
