"""Test environments whose transitions identify themselves, for checking what reaches replay.

`CounterEnv` observes [tag, episode, t]: tag is the seed of its first reset (unique per env of every actor,
since actors seed their envs apart), episode counts its resets and t its steps within the episode. A
transition is then checkable on its own (next_obs = obs + [0, 0, 1], reward = t, terminated exactly at the
episode's length), and the set of (tag, episode, t) in replay says whether any row was lost or repeated.
`FailingEnv` raises on its `fail_at`-th step, as a broken simulator would.

Actor processes import this module by name through gymnasium's "module:EnvId" syntax, so the tests put
this folder on PYTHONPATH.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class CounterEnv(gym.Env):
    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.tag, self.episode, self.t, self.length = -1.0, -1, 0, 1

    def _obs(self) -> np.ndarray:
        return np.array([self.tag, self.episode, self.t], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.tag = float(seed)
        self.episode += 1
        self.t = 0
        self.length = episode_length(self.tag, self.episode)
        return self._obs(), {}

    def step(self, action):
        reward = float(self.t)
        self.t += 1
        return self._obs(), reward, self.t >= self.length, False, {}


def episode_length(tag: float, episode: int) -> int:
    return 3 + (int(tag) * 7 + episode * 5) % 11


class FailingEnv(CounterEnv):
    fail_at = 300

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps >= self.fail_at:
            raise RuntimeError("the simulator crashed")
        return super().step(action)


gym.register(id="PearlCounter-v0", entry_point=CounterEnv, max_episode_steps=1000)
gym.register(id="PearlFailing-v0", entry_point=FailingEnv, max_episode_steps=1000)
