"""The replay-ratio limiter: concurrent actors and learner keep updates per env step at the algorithm's ρ.

With ρ = gradient_steps / train_freq and L = learning_starts, after S env steps have reached replay the
learner may have made

    U_max(S) = floor(ρ · (S − L))        updates (0 while S ≤ L),

and after U updates the actors may have produced

    S_max(U) = L + U / ρ + slack          env steps.

The learner waits when U = U_max(S); the actors wait when one more step of their n envs would pass
S_max(U). So the measured ratio U / (S − L) stays within ρ · (1 − (slack + 1/ρ) / (S − L)) and ρ, and
reaches ρ exactly when the learner finishes its last updates after the final step. The slack lets actors
run up to one round of the sequential schedule (train_freq steps) ahead, plus one step of every actor,
so neither side can wait on the other forever.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pearl.algos.base import OffPolicyConfig


@dataclass(frozen=True)
class RateLimiter:
    ratio: float  # ρ, updates per env step
    learning_starts: int
    slack: int  # env steps the actors may run ahead of what the learner has consumed

    @classmethod
    def for_config(cls, config: OffPolicyConfig, actors: int) -> "RateLimiter":
        one_step = config.n_envs * actors
        slack = max(config.train_freq, 2 * one_step) + math.ceil(1.0 / config.replay_ratio)
        return cls(config.replay_ratio, config.learning_starts, slack)

    def updates_allowed(self, steps: int) -> int:
        """U_max: updates the learner may have made once `steps` env steps are in replay."""
        if steps <= self.learning_starts:
            return 0
        return math.floor(self.ratio * (steps - self.learning_starts) + 1e-9)

    def steps_allowed(self, updates: int) -> int:
        """S_max: env steps the actors may have produced once the learner has made `updates`."""
        return self.learning_starts + math.floor(updates / self.ratio + 1e-9) + self.slack

    def actor_may_step(self, produced: int, updates: int, n: int) -> bool:
        """Whether n more env steps keep the actors within S_max (steps before learning_starts are free)."""
        return produced + n <= max(self.steps_allowed(updates), self.learning_starts + n)

    def learner_may_update(self, steps: int, updates: int) -> bool:
        return updates < self.updates_allowed(steps)
