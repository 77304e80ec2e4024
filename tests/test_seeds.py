"""`Seeds`: every seed of a run, the same integers the launchers have always derived (bit-for-bit runs depend on it)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pearl.runtime.seeds import ActorSeeds, Seeds

ACTORS, RESTARTS, ENVS, EPISODES = 32, 16, 16, 1000


def _training_seeds(seeds: Seeds) -> list[ActorSeeds]:
    return [seeds.actor(i, r) for i, r in itertools.product(range(ACTORS), range(RESTARTS))]


@pytest.mark.parametrize("run", [0, 11, 12345])
def test_a_fresh_run_derives_the_seeds_the_launchers_always_used(run: int) -> None:
    seeds = Seeds(run)
    assert seeds.learner == run and seeds.replay == run + 2
    assert (seeds.evaluation, seeds.selection, seeds.confirmation) == (run + 100_000, run + 200_000, run + 300_000)
    for actor, restarts in itertools.product(range(5), range(4)):
        env = run + 7919 * actor + 104_729 * restarts
        assert seeds.actor(actor, restarts) == ActorSeeds(env=env, act=env + 1)


def test_a_resumed_run_draws_its_actors_seeds_from_the_run_seed_actor_and_steps() -> None:
    seeds = Seeds(7, start_steps=40_000)
    for actor in range(4):
        base = int(np.random.SeedSequence([7, actor, 40_000]).generate_state(1)[0] & 0x3FFFFFFF)
        assert seeds.actor(actor) == ActorSeeds(base, base + 1)
        assert seeds.actor(actor, 2) == ActorSeeds(base + 2 * 104_729, base + 2 * 104_729 + 1)
    assert seeds.actor(0) != Seeds(7, start_steps=40_001).actor(0)  # each resume explores anew
    assert (seeds.replay, seeds.evaluation) == (Seeds(7).replay, Seeds(7).evaluation)


@pytest.mark.parametrize("run, start_steps", [(0, 0), (11, 0), (3, 50_000)])
def test_no_two_streams_share_a_seed(run: int, start_steps: int) -> None:
    seeds = Seeds(run, start_steps)
    actors = _training_seeds(seeds)
    streams = [s.env for s in actors] + [s.act for s in actors]
    streams += [seeds.replay, seeds.evaluation, seeds.selection, seeds.confirmation]
    assert len(set(streams)) == len(streams)
    # each actor steps ENVS envs seeded env, env + 1, ...: no env of one actor (or restart) is another's
    env_seeds = [s.env + j for s in actors for j in range(ENVS)]
    assert len(set(env_seeds)) == len(env_seeds)
    # nor is any evaluation episode a training env
    episodes = {first + e for first in (seeds.evaluation, seeds.selection, seeds.confirmation) for e in range(EPISODES)}
    assert not episodes & set(env_seeds)


def test_seeds_are_a_frozen_value() -> None:
    seeds = Seeds(5)
    with pytest.raises(AttributeError):
        seeds.run = 6  # type: ignore[misc]
    assert seeds == Seeds(5, 0) and hash(seeds) == hash(Seeds(5))
