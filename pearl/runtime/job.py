"""What a launcher runs and what it can do: the `Job` (one algorithm's roles on their devices, and the schedule
they follow), its `Placement` (the device of each role's kernels), a cluster plan's `RoleNodes` (the plan node
of each role, found on Ray by `NODE_RESOURCE`), and the `LauncherCapabilities` each launcher class declares.
Plain values: the training layer builds them, every launcher reads them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pearl.algos.base import OffPolicyConfig
from pearl.device import HOST, DeviceId
from pearl.kernels import Implementation, Precision
from pearl.run_options import RunOptions
from pearl.runtime.checkpoint import Checkpoint, learning_resumes_at
from pearl.schedule import Schedule
from pearl.types import EnvSpec


@dataclass(frozen=True)
class Placement:
    """Device of each role's kernels. The replay kernels share one device: their storage lives there."""

    act: DeviceId
    replay: DeviceId
    learn: DeviceId
    #: how act and learn run on their devices (a plan's `implementations`); None: each adapter's own way
    act_way: Implementation | None = None
    learn_way: Implementation | None = None

    @classmethod
    def single(cls, device: DeviceId) -> "Placement":
        return cls(device, device, device)

    def devices(self) -> list[DeviceId]:
        return sorted({self.act, self.replay, self.learn}, key=str)

    def ways(self) -> dict[str, str]:
        """How act and learn run, each given way or its device's own (captured where the device's kind captures
        and $PEARL_CUDA_GRAPHS allows it, else eager): what the run record keeps."""
        return {"act": (self.act_way or Implementation.own(self.act.backend.implementations)).value,
                "learn": (self.learn_way or Implementation.own(self.learn.backend.implementations)).value}

    def act_way_on(self, device: DeviceId) -> Implementation | None:
        """How act runs on `device`: the placement's way on its act device, the adapter's own elsewhere (a
        cluster plan's actors on other nodes' devices)."""
        return self.act_way if device == self.act else None

    def to_dict(self) -> dict[str, str]:
        """The placement as config.json and the run record write it: device ids as text."""
        return {"act": str(self.act), "replay_insert": str(self.replay), "replay_sample": str(self.replay),
                "priority_update": str(self.replay), "learn": str(self.learn), "env_step": HOST}


#: a Ray node is plan node NAME when it carries this custom resource (``ray start --resources
#: '{"pearl_node_NAME": 1}'``): the name the plan gives the node, set by whoever starts the node
NODE_RESOURCE = "pearl_node_{}"


@dataclass(frozen=True)
class RoleNodes:
    """The plan node of each role of a cluster plan. `workers`: each actor worker's (plan node, act device on
    that node), in worker order, where the plan spreads the actors over nodes; empty: every worker on `actors`,
    acting on the job's act device. `shards`: the plan node of each replay shard of a sharded replay server."""

    actors: str
    replay: str
    learner: str
    workers: tuple[tuple[str, DeviceId], ...] = ()
    #: the plan node of each replay shard, in shard order, where the plan shards the replay server; empty: one
    #: replay server, on `replay`
    shards: tuple[str, ...] = ()
    #: the plan node of learners 1 … N − 1 of a learner group spread over the nodes (one learner on every
    #: node); empty: every learner of a group on `learner`
    learners: tuple[str, ...] = ()

    def names(self) -> list[str]:
        return sorted({self.actors, self.replay, self.learner, *(node for node, _ in self.workers), *self.shards,
                       *self.learners})

    def member(self, rank: int) -> str:
        """Learner `rank` (≥ 1) of a group's plan node (the learner's beyond the plan's group)."""
        return self.learners[rank - 1] if rank <= len(self.learners) else self.learner

    def worker(self, i: int, act: DeviceId) -> tuple[str, DeviceId]:
        """Worker i's plan node and act device (`act`: the job's, for a plan that does not spread them)."""
        return self.workers[i] if self.workers else (self.actors, act)

    @staticmethod
    def resource(name: str) -> str:
        return NODE_RESOURCE.format(name)


@dataclass(frozen=True)
class Job:
    """What a launcher runs: one algorithm's roles on their devices, and the schedule they follow. The run's
    options travel as they were given (`RunOptions`, declared once in pearl/run_options.py); `actors` and
    `eval_every` are what the run resolved them to (a plan's actors, pearl's own evaluation interval)."""

    config: OffPolicyConfig
    spec: EnvSpec
    placement: Placement
    options: RunOptions = field(default_factory=RunOptions)
    actors: int = 1
    eval_every: int = 0  # env steps between in-training evaluations (0: none)

    @classmethod
    def of(cls, config: OffPolicyConfig, spec: EnvSpec, placement: Placement, actors: int = 1, eval_every: int = 0,
           **options: Any) -> Job:
        """A job whose run options are given by flat name (`RunOptions.of`: seed=3, threads=1, learn=False)."""
        return cls(config, spec, placement, RunOptions.of(**options), actors, eval_every)

    def replace(self, **changes: Any) -> Job:
        """A copy with fields (config, actors, eval_every, ...) or run options by flat name changed."""
        own = {k: v for k, v in changes.items() if k in _JOB_FIELDS}
        options = self.options.replace(**{k: v for k, v in changes.items() if k not in _JOB_FIELDS})
        return dataclasses.replace(self, options=options, **own)

    @property
    def seed(self) -> int:
        return self.options.algorithm.seed

    @property
    def threads(self) -> int | None:
        """CPU threads one kernel may use (None: the backend's own)."""
        return self.options.placement.threads

    @property
    def descriptor(self) -> str | None:
        """The descriptor whose precompiled kernel binary a device of a kind that loads binaries uses."""
        return self.options.placement.descriptor

    @property
    def learn(self) -> bool:
        """False: collect only (no updates)."""
        return self.options.launcher.learn

    @property
    def policy_lag(self) -> int:
        return self.options.launcher.policy_lag

    @property
    def segment_steps(self) -> int | None:
        """Env steps a segment (None: the schedule's own choice)."""
        return self.options.launcher.segment_steps

    @property
    def eval_every_episodes(self) -> int:
        """Episodes of each in-training evaluation."""
        return self.options.evaluation.eval_every_episodes

    @property
    def precision(self) -> Precision:
        """Learn's arithmetic (`pearl.kernels.Precision`): fp32 unless the run or its plan says otherwise."""
        return Precision.parse(self.options.placement.precision or Precision.FP32.value)

    @property
    def learners(self) -> int:
        """Learners training together, each on its rows of every batch (`pearl.runtime.learner_group`)."""
        return self.options.placement.learners or 1

    def schedule(self, resume: Checkpoint | None = None) -> Schedule:
        return Schedule.for_config(self.config, self.actors, self.policy_lag, self.segment_steps,
                                   learning_resumes_at(self.config.learning_starts, resume))

    def descriptor_for(self, device: DeviceId) -> str | None:
        return self.descriptor if device.backend.binaries else None


_JOB_FIELDS = frozenset(f.name for f in dataclasses.fields(Job))


@dataclass(frozen=True)
class LauncherCapabilities:
    """What a launcher can do, declared by its class (`SegmentLauncher.capabilities`): the options pearl accepts
    for it, and what it says of a run, follow from these, never from the launcher's name."""

    concurrent_roles: bool = False
    """The actors run beside the learner, in processes of their own, while it trains (as a plan assumes);
    False: every role runs in turn in the learner's process (act included)."""
    replay_shards: bool = False
    """Replay can be a replay server of shard actors (`--replay-shards`), and a plan's replay server on a node
    of its own."""
    cluster_plans: bool = False
    """Roles can run on the nodes of a cluster: it joins a cluster at an address and runs cluster plans."""
    actor_restarts: bool = False
    """An actor that dies is started again, up to `max_restarts` times (`RestartPolicy`)."""
    learner_group: bool = False
    """Several learners train one policy together (`--learners N`, `pearl.runtime.learner_group`)."""
    on_this_host: bool = True
    """Every role runs on this host, so the host's energy counters read what the run draws
    (`pearl.runtime.energy`); False: roles may run on other nodes, and the run's energy stays modelled."""
    traffic: str = field(default="sequential", compare=False)
    """The name of its traffic statement in `pearl.traffic.STATEMENTS`: what it sends on each edge a segment,
    which the planner prices and its run counts (`LoopStats.traffic`). Not an ability: two launchers that can
    do the same things compare equal whatever they send."""
