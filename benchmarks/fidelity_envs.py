"""Two environments of the plan-fidelity benchmark's own, as a user would define them in a module of theirs.

`pearl train --env fidelity_envs:Corridor-v0` imports this module (gymnasium's `module:Env-v0` ids), which
registers them; `benchmarks/` must be on PYTHONPATH for the actor processes too (plan_fidelity.py sets it).

- Corridor-v0: discrete. Walk a corridor of 40 cells to its far end (+1), each step −0.01; observations are the
  position, its square and a bias, noised; 200 steps at most.
- Drift-v0: continuous. Steer a point in the plane towards the origin against a constant drift; reward is
  minus the distance; 200 steps at most.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Corridor(gym.Env):
    LENGTH = 40

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.pos, self.t = 0, 0

    def _obs(self) -> np.ndarray:
        x = self.pos / self.LENGTH
        return (np.array([x, x * x, 1.0]) + self.np_random.normal(0, 0.01, 3)).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos, self.t = 0, 0
        return self._obs(), {}

    def step(self, action):
        self.pos = max(0, self.pos + (1 if int(action) == 1 else -1))
        self.t += 1
        done = self.pos >= self.LENGTH
        return self._obs(), (1.0 if done else -0.01), done, self.t >= 200, {}


class Drift(gym.Env):
    def __init__(self) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.p, self.t = np.zeros(2), 0

    def _obs(self) -> np.ndarray:
        return np.array([*self.p, np.linalg.norm(self.p), 1.0], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.p, self.t = self.np_random.uniform(-2, 2, 2), 0
        return self._obs(), {}

    def step(self, action):
        self.p = self.p + 0.1 * np.clip(np.asarray(action, dtype=np.float64), -1, 1) + np.array([0.02, -0.01])
        self.t += 1
        return self._obs(), -float(np.linalg.norm(self.p)), False, self.t >= 200, {}


gym.register("Corridor-v0", entry_point=Corridor)
gym.register("Drift-v0", entry_point=Drift)
