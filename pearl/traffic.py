"""The traffic statement: what each launcher sends between its roles in a segment of the schedule.

Each launcher owns one statement (its `LauncherCapabilities.traffic` names it): for segment k of a schedule,
the messages, bytes, weight publishes and loads on each edge, written to match what the launcher really sends.
The planner prices the statement of the launcher a plan is for (the local launcher's for a host profile, the
Ray launcher's for a cluster); a launcher counts what it sends in a `Tally`, which a run reports
(`LoopStats.traffic`), and tests/test_traffic.py checks the two agree, segment for segment, over a real run.

The edges (every launcher, per segment k with G_k rows, U_k updates, A actors):
    transitions  actor → replay   an actor's share of the segment handed on as one batch: one message for
                                  each actor with rows in the segment (Ray: each worker's collect returns one
                                  batch object, also an empty one); the rows' bytes
    samples      replay → learn   one sampled batch an update (its 6 arrays: obs, action, reward, next_obs,
                                  terminated, importance weights)
    priorities   learn → replay   one batch of TD errors an update (prioritized replay only)
    weights      learn → act      publishes: one a segment (the Ray launcher publishes only the policies a
                                  segment still to be collected acts with: none in its last lag + 1);
                                  loads: each actor loads the weights of a segment once, before its first step
                                  in it (one load, one message, the policy's bytes, each), in the run's first
                                  segment and where they differ from the segment before's
                                  (`Schedule.same_weights`: not before learning starts)
and for the Ray launcher, whose roles are Ray actors:
    inserts      learner → replay each non-empty batch inserted into replay (a call to a replay shard when
                                  replay is the replay server)
    calls        driver → roles   the segment's remote calls: A collects, one insert (of the A batches' refs),
                                  one train when the segment has updates, one policy ref when it publishes
What a launcher sends before its first segment (the starting policy, the workers' set-up) is start-up, in no
segment. This module is pure arithmetic over the schedule: the planner imports it, and no launcher.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pearl.algos.base import OffPolicyConfig
from pearl.algos.params import param_count, policy_net
from pearl.schedule import Schedule
from pearl.types import EnvSpec

FLOAT = 4
#: arrays of a sampled batch: obs, action, reward, next_obs, terminated and the importance weights
BATCH_ARRAYS = 6

TRANSITIONS, SAMPLES, PRIORITIES, WEIGHTS, INSERTS, CALLS = \
    "transitions", "samples", "priorities", "weights", "inserts", "calls"


def transition_bytes(spec: EnvSpec) -> int:
    """Bytes of one transition's arrays: obs, action, reward, next_obs, terminated."""
    action = 8 if spec.discrete else FLOAT * spec.action_dim  # an int64 index, or float32 components
    return FLOAT * (2 * spec.obs_dim + 2) + action


def sample_bytes(config: OffPolicyConfig, spec: EnvSpec) -> int:
    """Bytes of one sampled batch (its transitions and their importance weights)."""
    return config.batch_size * (transition_bytes(spec) + FLOAT)


def policy_bytes(config: OffPolicyConfig, spec: EnvSpec) -> int:
    return param_count(config, spec, policy_net(config.algo)) * FLOAT


@dataclass(frozen=True)
class EdgeTraffic:
    """What one edge carries: messages, bytes, and for the weights the publishes and the loads (whole numbers
    for a segment or a run; the planner's figures per iteration are a segment's ÷ its updates)."""

    messages: float = 0
    nbytes: float = 0
    publishes: float = 0
    loads: float = 0

    def __add__(self, other: "EdgeTraffic") -> "EdgeTraffic":
        return EdgeTraffic(self.messages + other.messages, self.nbytes + other.nbytes,
                           self.publishes + other.publishes, self.loads + other.loads)

    def to_dict(self) -> dict[str, float]:
        return {"messages": self.messages, "nbytes": self.nbytes, "publishes": self.publishes, "loads": self.loads}


Traffic = dict[str, EdgeTraffic]


@dataclass(frozen=True)
class SegmentShape:
    """What a segment's traffic depends on: its rows, each actor's share, its updates, whether it publishes."""

    rows: int
    shares: tuple[int, ...]
    updates: int
    publishes_for_later: bool  # a segment still to be collected acts with this segment's policy
    new_weights: bool = True  # its actors load weights: the run's first segment, or other weights than the last's

    @property
    def handing(self) -> int:
        """Actors with rows in the segment: each hands on one batch."""
        return sum(1 for s in self.shares if s > 0)

    @property
    def loads(self) -> int:
        """Weight loads: each actor with rows in the segment, once, when its weights are new."""
        return self.handing if self.new_weights else 0


def segment_shape(schedule: Schedule, k: int | None = None, learn: bool = True, first: int = 0) -> SegmentShape:
    """Segment k of a run of the schedule from segment `first`; None: a segment of the steady state (whole, with
    its updates, publishing for a later one, acting with new weights), the one the planner prices."""
    if k is None:
        return SegmentShape(schedule.segment_steps, tuple(schedule.share(0, a) for a in range(schedule.actors)),
                            schedule.updates_per_segment if learn else 0, True)
    new = k == first or not schedule.same_weights(schedule.weights_for(k - 1), schedule.weights_for(k))
    return SegmentShape(schedule.size(k), tuple(schedule.share(k, a) for a in range(schedule.actors)),
                        schedule.updates_after(k) if learn else 0, k + 1 + schedule.lag < schedule.segments, new)


@dataclass(frozen=True)
class InsertShape:
    """How replay is filled in the steady state, on every launcher: an actor's share of a segment is one batch
    handed on (the transitions edge) and one insert call, so `per_update` calls an update of `rows` rows each."""

    per_update: float
    rows: int


def insert_shape(schedule: Schedule) -> InsertShape:
    """The inserts of a steady-state segment of `schedule` spread over its updates (what the planner prices and
    the profiler's learner loop runs)."""
    seg = segment_shape(schedule)
    calls = max(1, seg.handing)
    return InsertShape(calls / max(1, seg.updates), max(1, round(seg.rows / calls)))


def launcher_inserts(config: OffPolicyConfig) -> InsertShape:
    """`insert_shape` of the schedule one actor runs for `config`: what the planner prices inserts at (more actors
    split a segment into more, smaller calls) and the profiler times."""
    return insert_shape(Schedule.for_config(config, 1))


def _common(seg: SegmentShape, config: OffPolicyConfig, spec: EnvSpec, handed: int, publishes: int) -> Traffic:
    """The edges every launcher has: a segment's batches, its samples and priorities, its weights."""
    td = seg.updates if config.prioritized else 0
    loads = seg.loads
    return {TRANSITIONS: EdgeTraffic(handed, seg.rows * transition_bytes(spec)),
            SAMPLES: EdgeTraffic(seg.updates, seg.updates * sample_bytes(config, spec)),
            PRIORITIES: EdgeTraffic(td, td * config.batch_size * FLOAT),
            WEIGHTS: EdgeTraffic(loads, loads * policy_bytes(config, spec), publishes, loads)}


def sequential(schedule: Schedule, config: OffPolicyConfig, spec: EnvSpec, k: int | None = None,
               learn: bool = True, first: int = 0) -> Traffic:
    """Every role in one process: each actor's share goes to replay as one batch, the learner publishes every
    segment (a copy of its policy), each actor loads it for the segment that acts with it."""
    seg = segment_shape(schedule, k, learn, first)
    return _common(seg, config, spec, seg.handing, 1)


def local(schedule: Schedule, config: OffPolicyConfig, spec: EnvSpec, k: int | None = None,
          learn: bool = True, first: int = 0) -> Traffic:
    """Actor processes: each actor's share leaves its shared-memory ring as one batch; the learner writes every
    segment's policy on a weight board, and each actor copies the board of the segment it steps in."""
    seg = segment_shape(schedule, k, learn, first)
    return _common(seg, config, spec, seg.handing, 1)


def ray(schedule: Schedule, config: OffPolicyConfig, spec: EnvSpec, k: int | None = None,
        learn: bool = True, replay_server: bool = False, first: int = 0) -> Traffic:
    """Ray actors: each worker's collect returns one batch object (an empty one too) which the learner gets by
    ref and inserts; the driver asks the learner for a policy ref only for a segment still to be collected; a
    worker fetches the ref once a segment. Plus the driver's calls.

    `replay_server`: replay is the replay server (one shard, `pearl.runtime.ray.replay_client`), not in the
    learner's role: each read of it is two round trips (4 messages), one a segment for uniform replay (its
    updates' batches at once) and one an update for prioritized replay, and each update's TD errors are a
    message to it. (Not counted by a run: its metrics lines read the server's size at times of their own.)"""
    seg = segment_shape(schedule, k, learn, first)
    publishes = 1 if seg.publishes_for_later else 0
    traffic = _common(seg, config, spec, schedule.actors, publishes)
    traffic[INSERTS] = EdgeTraffic(seg.handing, seg.rows * transition_bytes(spec))
    traffic[CALLS] = EdgeTraffic(schedule.actors + 1 + (1 if seg.updates else 0) + publishes)
    if replay_server:
        reads = seg.updates if config.prioritized else min(1, seg.updates)
        traffic[SAMPLES] = EdgeTraffic(4 * reads, traffic[SAMPLES].nbytes)
    return traffic


Statement = Callable[..., Traffic]
#: each launcher's statement, by the name its `LauncherCapabilities.traffic` gives
STATEMENTS: dict[str, Statement] = {"sequential": sequential, "local": local, "ray": ray}


def statement(name: str) -> Statement:
    return STATEMENTS[name]


def over_run(name: str, schedule: Schedule, config: OffPolicyConfig, spec: EnvSpec, first: int = 0,
             learn: bool = True) -> Traffic:
    """The statement summed over segments first .. last of the schedule: what a whole run sends."""
    total: Traffic = {}
    for k in range(first, schedule.segments):
        for edge, t in STATEMENTS[name](schedule, config, spec, k, learn, first=first).items():
            total[edge] = total.get(edge, EdgeTraffic()) + t
    return total


@dataclass
class Tally:
    """What a launcher counted it sent, edge by edge (cheap integer sums, added where a message goes)."""

    edges: dict[str, EdgeTraffic] = field(default_factory=dict)

    def add(self, edge: str, messages: float = 1, nbytes: float = 0, publishes: float = 0, loads: float = 0) -> None:
        self.edges[edge] = self.edges.get(edge, EdgeTraffic()) + EdgeTraffic(messages, nbytes, publishes, loads)

    def merge(self, counted: dict[str, dict[str, float]]) -> None:
        """Add another role's counts (`to_dict`'s form)."""
        for edge, c in counted.items():
            self.add(edge, c["messages"], c["nbytes"], c["publishes"], c["loads"])

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {edge: t.to_dict() for edge, t in sorted(self.edges.items())}
