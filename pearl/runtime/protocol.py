"""The roles of off-policy training and the messages between them.

    Actor ──TransitionBatch──► ReplayManager ──SampleBatch──► Learner
      ▲                              ▲                          │
      └──────── WeightSnapshot ──────┼──────────────────────────┤
                                     └────── PriorityUpdate ◄───┘

Each role wraps the kernels an adapter built for it and knows nothing of processes, queues or schedules:
a launcher decides when each role runs and how messages travel (in one process, across processes, or on
Ray). Roles only time their own kernels, so a run record can say where the time went.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from pearl.adapters.base import ActKernel, Adapter, LearnKernel, ReplayKernels
from pearl.algos.base import OffPolicyConfig
from pearl.envs import make_vector_env, to_env_action
from pearl.types import EnvSpec, Params, PriorityUpdate, SampleBatch, TransitionBatch, WeightSnapshot


class KernelClock:
    """Seconds and calls per kernel, as seen from the host (async device work lands on whoever waits)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def add(self, kernel: str, seconds: float) -> None:
        self.seconds[kernel] += seconds
        self.calls[kernel] += 1

    @contextmanager
    def time(self, kernel: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(kernel, time.perf_counter() - t0)


def merge_clocks(clocks: "Iterable[KernelClock]") -> tuple[dict[str, float], dict[str, int]]:
    """Seconds and calls per kernel summed over several roles' clocks (weight_sync is timed at both ends)."""
    seconds: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for clock in clocks:
        for kernel, s in clock.seconds.items():
            seconds[kernel] += s
            calls[kernel] += clock.calls[kernel]
    return dict(seconds), dict(calls)


@dataclass
class Episode:
    ret: float
    length: int


class _ActorBase:
    """What every actor keeps: its act kernel, exploration before learning starts, episode bookkeeping."""

    def __init__(self, actor_id: int, spec: EnvSpec, n_envs: int, act: ActKernel, seed: int) -> None:
        self.actor_id, self.spec, self.act_kernel, self.n = actor_id, spec, act, n_envs
        self.rng = np.random.default_rng(seed)
        self.ep_return = np.zeros(n_envs)
        self.ep_length = np.zeros(n_envs, dtype=np.int64)
        self.finished: list[Episode] = []
        self.policy_version = 0
        self.clock = KernelClock()

    def load_weights(self, snapshot: WeightSnapshot) -> None:
        with self.clock.time("weight_sync"):
            self.act_kernel.set_params(snapshot.params)
        self.policy_version = snapshot.version

    def random_actions(self, n: int) -> np.ndarray:
        """Uniform actions in the policy's action space (used before learning starts)."""
        if self.spec.discrete:
            return self.rng.integers(0, self.spec.action_dim, n)
        return self.rng.uniform(-1.0, 1.0, size=(n, self.spec.action_dim)).astype(np.float32)

    def drain_episodes(self) -> list[Episode]:
        done, self.finished = self.finished, []
        return done


class VectorActor(_ActorBase):
    """env_step + act over a gymnasium vector env: one `act` call and one vectorised step for all n envs.

    The vector env resets in next-step mode: the step after an episode ends only resets that env (its
    action is ignored, its reward is 0) and is not a transition, so its row is dropped. Env steps therefore
    count transitions, the figure every rate in pearl is about.
    """

    def __init__(self, actor_id: int, env_id: str, spec: EnvSpec, n_envs: int, act: ActKernel, seed: int) -> None:
        super().__init__(actor_id, spec, n_envs, act, seed)
        self.venv = make_vector_env(env_id, n_envs)
        self.obs = np.asarray(self.venv.reset(seed=seed)[0], dtype=np.float32)
        self.resetting = np.zeros(n_envs, dtype=bool)  # envs whose next step is a reset, not a transition

    def step(self, explore: float, random: bool = False) -> TransitionBatch:
        t0 = time.perf_counter()
        action = self.random_actions(self.n) if random else self.act_kernel.act(self.obs, explore)
        t1 = time.perf_counter()
        env_action = to_env_action(self.spec, action)
        if not self.spec.discrete:
            env_action = env_action.astype(np.float32)
        next_obs, reward, terminated, truncated, _ = self.venv.step(env_action)
        next_obs = np.asarray(next_obs, dtype=np.float32)
        keep = ~self.resetting
        done = (terminated | truncated) & keep
        self.ep_return[keep] += reward[keep]
        self.ep_length[keep] += 1
        for i in np.flatnonzero(done):
            self.finished.append(Episode(float(self.ep_return[i]), int(self.ep_length[i])))
            self.ep_return[i], self.ep_length[i] = 0.0, 0
        batch = TransitionBatch(self.obs[keep], action[keep], np.asarray(reward, dtype=np.float32)[keep],
                                next_obs[keep], np.asarray(terminated, dtype=np.float32)[keep], self.actor_id,
                                self.policy_version)
        # An env whose episode ended (SB3 resets its noise then) or whose reset step just ran (its ignored action
        # still advanced the noise) acts next at the first step of a new episode: its exploration starts again.
        restart = done | ~keep
        if restart.any():
            self.act_kernel.new_episodes(restart)
        self.resetting = done
        self.obs = next_obs
        self.clock.add("act", t1 - t0)
        self.clock.add("env_step", time.perf_counter() - t1)
        return batch

    def close(self) -> None:
        self.venv.close()


class ReplayManager:
    """Owns replay storage on its device: insert, sample with IS weights, priority update."""

    def __init__(self, kernels: ReplayKernels, batch_size: int) -> None:
        self.kernels, self.batch_size = kernels, batch_size
        self.inserted = 0
        self.clock = KernelClock()

    @property
    def size(self) -> int:
        return self.kernels.size

    def insert(self, batch: TransitionBatch) -> None:
        with self.clock.time("replay_insert"):
            self.kernels.insert(batch)
        self.inserted += len(batch)

    def sample(self, beta: float) -> SampleBatch:
        with self.clock.time("replay_sample"):
            return self.kernels.sample(self.batch_size, beta)

    def samples(self, count: int, beta: float) -> Iterator[SampleBatch]:
        """`count` batches in turn (`ReplayKernels.samples`), each draw timed as replay_sample."""
        draws = self.kernels.samples(count, self.batch_size, beta)
        for _ in range(count):
            with self.clock.time("replay_sample"):
                batch = next(draws)
            yield batch

    def update_priorities(self, update: PriorityUpdate) -> None:
        with self.clock.time("priority_update"):
            self.kernels.update_priorities(update)


class Learner:
    """Runs `learn` on sampled batches and publishes versioned policy weights every K updates."""

    def __init__(self, kernel: LearnKernel, adapter: Adapter, config: OffPolicyConfig) -> None:
        self.kernel, self.adapter, self.config = kernel, adapter, config
        self.published_version = 0
        self.last_metrics: dict = {}
        self.clock = KernelClock()

    @property
    def updates(self) -> int:
        return self.kernel.updates

    def update(self, batch: SampleBatch) -> PriorityUpdate:
        with self.clock.time("learn"):
            batch = self.adapter.adopt(batch)  # moves the batch only when replay sits on another device
            result = self.kernel.learn(batch)
        self.last_metrics = result.metrics
        return PriorityUpdate(batch.indices, result.td_errors)

    def snapshot_due(self) -> bool:
        return self.updates - self.published_version >= self.config.weight_sync_interval

    def snapshot(self) -> WeightSnapshot:
        with self.clock.time("weight_sync"):
            snap = WeightSnapshot(self.updates, self.kernel.policy_params())
        self.published_version = snap.version
        return snap

    def publish(self, sink: Callable[[Callable[[Params], None], int], None]) -> None:
        """Hand the policy weights and their version (the update count) to sink, e.g. a shared board's
        publish: sink gets a function that writes the weights into arrays it names."""
        with self.clock.time("weight_sync"):
            sink(self.kernel.write_policy, self.updates)
        self.published_version = self.updates

    def read_metrics(self) -> dict[str, float]:
        """The last update's losses as floats (this waits for the device, so call it rarely)."""
        return {name: float(value) for name, value in self.last_metrics.items()}
