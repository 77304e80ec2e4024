"""The training schedule: which data each update sees and which weights each env step acts with.

Every launcher (sequential, local processes, Ray) runs this schedule, so a seed gives the same learning
whichever launcher runs it and however fast the machine happens to be. Nothing in it depends on time.

Segments
--------
Training proceeds in segments of G env steps (the last one may be shorter: total_steps need not be a
multiple of G). Segment k (0-based) covers the env steps [k·G, min((k+1)·G, T)).

- **Shares.** With A actors, actor a collects a fixed share of every segment: G // A steps, plus one for the
  first G % A actors. Within a segment the shares are laid out in actor order, so the transition that actor
  a collects as its j-th of segment k has the global step index k·G + offset(k, a) + j. Exploration (ε or σ)
  and "random actions before learning_starts" are functions of that index, never of a shared counter.
- **Insertion.** The learner inserts segment k's transitions into replay in actor order (actor 0's share,
  then actor 1's, ...), and only once its updates for segment k − 1 are done.
- **Updates.** After inserting segment k, the learner runs U = G·ρ updates when the segment is whole and
  ends past learning_starts ((k+1)·G > L), else none. Those updates sample only from segments ≤ k (nothing
  newer is in replay yet), and target copies and Polyak steps fall at fixed update counts.
- **Weights.** After segment k's updates the learner publishes W(k). Segment k is collected with
  W(k − 1 − lag); W(j) for j < 0 is the initial policy (or, on resume, the checkpoint's). lag = 0 is the
  published presets' sequential schedule (collect, then update, strictly in turn); lag = 1 lets the actors
  collect segment k while the learner trains on segment k − 1, which is what makes a parallel run fast.
  W(j) is W(j − 1) when segment j makes no updates, so an actor loads (and waits for) W(k − 1 − lag) only
  when it differs from the weights it holds (`Schedule.same_weights`): before learning starts every W(j) is
  the starting policy, and the actors step through the warm-up without waiting for the learner.
- **Randomness.** Exploration draws are per actor, counted by its own act calls; the replay sampler draws
  in update order; both are keyed by the seed. With the rules above their sequences no longer depend on
  timing, so two runs of a seed give the same parameters bit for bit.

An actor step yields up to n_envs transitions (a vector env's reset steps yield none for that env), so a
step may straddle two segments: its transitions count towards the segments their indices fall in, and it
acts with the weights of the segment its first transition falls in.

Segment length
--------------
G is `train_freq` (DQN CartPole: 256 steps and 128 updates) unless weights must be published less often than
every round (G = train_freq · ⌈weight_sync_interval / gradient_steps⌉), and it grows to a multiple of
train_freq that gives every actor at least one whole step of its envs (A · n_envs ≤ G): DDPG's one-step
rounds with 2 actors make segments of 2 steps and 2 updates. An explicit segment length must satisfy
the same rules. The policy lag must leave the actors' rows unread for at most (lag + 1) segments, which
must fit in replay: (lag + 1) · G ≤ buffer_size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from pearl.algos.base import OffPolicyConfig
from pearl.errors import ConfigError
from pearl.types import TransitionBatch, WeightSnapshot

DEFAULT_LAG = 1


@dataclass(frozen=True)
class Schedule:
    """The segment arithmetic of one run (see the module docstring for the rules)."""

    total_steps: int
    segment_steps: int  # G
    updates_per_segment: int  # U = G·ρ
    learning_starts: int  # segments ending at or before this many env steps make no updates
    actors: int
    lag: int

    @classmethod
    def for_config(cls, config: OffPolicyConfig, actors: int, lag: int = DEFAULT_LAG,
                   segment_steps: int | None = None, learning_starts: int | None = None) -> "Schedule":
        """The schedule of a config run by `actors` actors; ConfigError for a layout that cannot work.
        learning_starts overrides the config's (a resume without replay waits for new transitions)."""
        if isinstance(lag, bool) or not isinstance(lag, int) or lag < 0:
            raise ConfigError(f"--policy-lag must be an integer >= 0, got {lag!r}")
        one_step = actors * config.n_envs  # every actor must fit at least one whole step in a segment
        if segment_steps is None:
            rounds = max(1, math.ceil(config.weight_sync_interval / config.gradient_steps))
            segment_steps = config.train_freq * max(rounds, math.ceil(one_step / config.train_freq))
        elif isinstance(segment_steps, bool) or not isinstance(segment_steps, int) or segment_steps < 1:
            raise ConfigError(f"--segment-steps must be a positive integer, got {segment_steps!r}")
        if segment_steps % config.train_freq:
            raise ConfigError(f"a segment of {segment_steps} env steps is not a whole number of train_freq "
                              f"({config.train_freq}) rounds; use a multiple of {config.train_freq}")
        if segment_steps < one_step:
            raise ConfigError(f"a segment of {segment_steps} env steps does not divide among {actors} actor(s) "
                              f"× {config.n_envs} env(s) (each actor needs at least one whole step of its envs); "
                              f"use --segment-steps {config.train_freq * math.ceil(one_step / config.train_freq)} "
                              "or more, or fewer actors or envs")
        if (lag + 1) * segment_steps > config.buffer_size:
            raise ConfigError(f"a policy lag of {lag} keeps {(lag + 1) * segment_steps:,} env steps in flight, "
                              f"more than replay holds (buffer_size {config.buffer_size:,}); lower --policy-lag")
        updates = segment_steps * config.gradient_steps // config.train_freq
        start = config.learning_starts if learning_starts is None else learning_starts
        return cls(config.total_steps, segment_steps, updates, start, actors, lag)

    # ------------------------------------------------------------------------------------- segments
    @property
    def segments(self) -> int:
        return -(-self.total_steps // self.segment_steps)

    def size(self, k: int) -> int:
        """Env steps in segment k (the last one may be short)."""
        return max(0, min(self.segment_steps, self.total_steps - k * self.segment_steps))

    def share(self, k: int, actor: int) -> int:
        """Env steps actor a collects in segment k."""
        size = self.size(k)
        return size // self.actors + (1 if actor < size % self.actors else 0)

    def offset(self, k: int, actor: int) -> int:
        """Where actor a's share starts within segment k (the shares are laid out in actor order)."""
        size = self.size(k)
        return actor * (size // self.actors) + min(actor, size % self.actors)

    def steps_before(self, k: int, actor: int) -> int:
        """Env steps actor a has collected before segment k (k ≤ segments)."""
        whole = min(k, self.total_steps // self.segment_steps)  # segments of full length
        return whole * self.share(0, actor) + sum(self.share(j, actor) for j in range(whole, k))

    def actor_total(self, actor: int) -> int:
        return self.steps_before(self.segments, actor)

    def locate(self, actor: int, collected: int) -> tuple[int, int]:
        """(segment, index within the actor's share of it) of actor a's transition number `collected`."""
        per = self.share(0, actor)
        k = collected // per if per else 0
        if k < self.total_steps // self.segment_steps:  # a whole segment: steps_before(k) is k·per (every step)
            return k, collected - k * per
        k = min(k, self.segments - 1)
        while k > 0 and self.steps_before(k, actor) > collected:  # only the short last segment differs
            k -= 1
        return k, collected - self.steps_before(k, actor)

    def global_step(self, actor: int, collected: int) -> int:
        """The schedule's index of actor a's transition number `collected`: what exploration depends on."""
        k, j = self.locate(actor, collected)
        return k * self.segment_steps + self.offset(k, actor) + j

    # -------------------------------------------------------------------------------------- updates
    def updates_after(self, k: int) -> int:
        """Updates the learner runs after inserting segment k."""
        end = (k + 1) * self.segment_steps
        return self.updates_per_segment if end <= self.total_steps and end > self.learning_starts else 0

    def updates_through(self, k: int, first: int = 0) -> int:
        """Updates made after segments first .. k."""
        return sum(self.updates_after(j) for j in range(first, k + 1))

    def weights_for(self, k: int) -> int:
        """The segment whose published weights segment k is collected with (negative: the starting policy)."""
        return k - 1 - self.lag

    def same_weights(self, a: int, b: int) -> bool:
        """Whether the weights published after segments a and b are the same ones (negative tags: the starting
        policy): no segment after the earlier one, up to the later one, makes updates. Before learning starts
        every tag carries the starting policy, so an actor that holds one need not load another."""
        lo, hi = min(a, b), max(a, b)
        return self.updates_through(hi, max(lo + 1, 0)) == 0

    def steps_through(self, k: int) -> int:
        """Env steps in replay once segment k is inserted."""
        return min(self.total_steps, (k + 1) * self.segment_steps)

    def segment_at(self, steps: int) -> int:
        """The first segment a run resumed at `steps` env steps collects. Checkpoints are taken at segment
        boundaries; one taken inside a segment (an interruption while its rows arrived) goes on with the
        next segment, and the rest of the interrupted one is not collected."""
        return -(-steps // self.segment_steps)

    def to_dict(self) -> dict[str, int]:
        return {"segment_steps": self.segment_steps, "updates_per_segment": self.updates_per_segment,
                "policy_lag": self.lag, "actors": self.actors, "segments": self.segments}


class ScheduledActor(Protocol):
    """What ActorShare drives: an actor stepping its envs (pearl.runtime.protocol.VectorActor). A protocol, so
    that the schedule sits below the planner and the runtime, and imports neither."""

    actor_id: int

    def load_weights(self, snapshot: WeightSnapshot) -> None: ...

    def step(self, explore: float, random: bool = False) -> TransitionBatch: ...


class ActorShare:
    """One actor's side of the schedule: which weights its next step needs, and its steps cut to its shares.

    Both the sequential launcher and an actor process drive their actor through this, so the same seed gives
    the same transitions whichever of them runs it."""

    def __init__(self, actor: ScheduledActor, schedule: Schedule, config: OffPolicyConfig, collected: int = 0) -> None:
        self.actor, self.schedule, self.config = actor, schedule, config
        self.id = actor.actor_id
        self.collected = collected  # transitions this actor has handed on so far
        self.total = schedule.actor_total(self.id)
        self.weights: int | None = None  # the segment tag of the weights loaded
        self.dropped = 0

    @property
    def done(self) -> bool:
        return self.collected >= self.total

    def segment(self) -> int:
        return self.schedule.locate(self.id, self.collected)[0]

    def needs(self) -> int:
        """The segment tag of the weights the next step must act with."""
        return self.schedule.weights_for(self.segment())

    def to_load(self) -> int | None:
        """The segment tag of the weights to load before the next step; None when the loaded ones serve: the
        tag it needs, or one the schedule says carries the same weights (`Schedule.same_weights`), which the
        share then holds under the needed tag without a load (no copy, no wait for the learner's publish)."""
        need = self.needs()
        if self.weights is not None and self.schedule.same_weights(self.weights, need):
            self.weights = need
            return None
        return need

    def load(self, tag: int, snapshot: WeightSnapshot) -> None:
        self.actor.load_weights(snapshot)
        self.weights = tag

    def step(self) -> TransitionBatch:
        """One step of the actor's envs, acting with the exploration of its first transition's index; rows
        past the actor's last share are dropped."""
        g = self.schedule.global_step(self.id, self.collected)
        batch = self.actor.step(self.config.exploration(g), random=g < self.config.learning_starts)
        keep = min(len(batch), self.total - self.collected)
        if keep < len(batch):
            self.dropped += len(batch) - keep
            batch = batch.head(keep)
        self.collected += keep
        return batch
