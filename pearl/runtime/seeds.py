"""Every seed one training run uses, derived from its one seed: the same integers on every launcher.

A run repeats bit for bit from its seed, whichever launcher runs it, because every launcher takes each role's
seed from `Seeds` rather than deriving its own: the weights' initialisation, replay's sampler, each actor's
envs and exploration (and its act kernel), a restarted actor's, and the evaluation episodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ACTOR_STRIDE = 7919  # actor i's envs start at seed + 7919·i (above MAX_ENVS: no two actors' envs share a seed)
ACT_OFFSET = 1  # an actor's act kernel (its exploration noise): its env seed + 1
REPLAY_OFFSET = 2  # replay's sampler
RESTART_STRIDE = 104_729  # a restarted actor's seed moves by this per restart of the run (a prime)
EVALUATION_OFFSET = 100_000  # final evaluation episodes never share seeds with training envs
SELECTION_OFFSET = 200_000  # nor with the in-training evaluations that pick the best policy
CONFIRMATION_OFFSET = 300_000  # nor with the episodes that confirm the kept best against the final policy


@dataclass(frozen=True)
class ActorSeeds:
    """One actor's two seeds: its envs' (and its exploration before learning starts) and its act kernel's."""

    env: int
    act: int


@dataclass(frozen=True)
class Seeds:
    """The seeds of a run of seed `run` that (re)starts at env step `start_steps` (0: a fresh run).

    The derivation is kept arithmetic (not numpy's SeedSequence spawning) so that existing seeds reproduce the
    runs, tests and published figures recorded with them."""

    run: int
    start_steps: int = 0

    @property
    def learner(self) -> int:
        """The weights' initialisation and the learner's own act kernels (in-training and final evaluation)."""
        return self.run

    @property
    def replay(self) -> int:
        return self.run + REPLAY_OFFSET

    def actor(self, actor: int, restarts: int = 0) -> ActorSeeds:
        """Actor `actor`'s seeds, after the run has restarted actors `restarts` times (its envs and exploration
        reseeded, so a run with a restart is not bit for bit the run without one). A fresh run's actor i starts
        at run + 7919·i; a resumed run's draws from (run, actor, start_steps), so each resume explores anew but
        repeatably."""
        env = self._actor_base(actor) + RESTART_STRIDE * restarts
        return ActorSeeds(env, env + ACT_OFFSET)

    def _actor_base(self, actor: int) -> int:
        if self.start_steps == 0:
            return self.run + ACTOR_STRIDE * actor
        return int(np.random.SeedSequence([self.run, actor, self.start_steps]).generate_state(1)[0] & 0x3FFFFFFF)

    @property
    def evaluation(self) -> int:
        """The first of the final evaluation's episodes (episode i resets with this + i)."""
        return self.run + EVALUATION_OFFSET

    @property
    def selection(self) -> int:
        """The first of each in-training evaluation's episodes."""
        return self.run + SELECTION_OFFSET

    @property
    def confirmation(self) -> int:
        """The first of the episodes that confirm the kept best policy against the final one."""
        return self.run + CONFIRMATION_OFFSET
