"""Deterministic evaluation: the final policy with no exploration, on fresh seeded environments."""

from __future__ import annotations

import numpy as np

from pearl.adapters.base import ActKernel
from pearl.envs import make_env, to_env_action
from pearl.types import EnvSpec


def evaluate(act: ActKernel, spec: EnvSpec, episodes: int, seed: int) -> list[float]:
    """Undiscounted return of each of `episodes` episodes, acting greedily (explore = 0)."""
    env = make_env(spec.env_id)
    returns = []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            total, done = 0.0, False
            while not done:
                action = to_env_action(spec, act.act(np.asarray(obs, dtype=np.float32)[None], 0.0))[0]
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return returns
