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

import numpy as np

from pearl.adapters.base import ActKernel, Adapter, LearnKernel, ReplayKernels
from pearl.algos.base import OffPolicyConfig
from pearl.envs import EnvStepper, Episode
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


class _ActorBase:
    """What every actor keeps: its act kernel, the weights it acts with, exploration before learning starts."""

    def __init__(self, actor_id: int, spec: EnvSpec, n_envs: int, act: ActKernel, seed: int) -> None:
        self.actor_id, self.spec, self.act_kernel, self.n = actor_id, spec, act, n_envs
        self.rng = np.random.default_rng(seed)
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


class VectorActor(_ActorBase):
    """env_step + act over a gymnasium vector env: one `act` call and one vectorised step for all n envs (the
    env side, next-step resets included, is pearl.envs.EnvStepper's)."""

    def __init__(self, actor_id: int, env_id: str, spec: EnvSpec, n_envs: int, act: ActKernel, seed: int) -> None:
        super().__init__(actor_id, spec, n_envs, act, seed)
        self.envs = EnvStepper(env_id, spec, n_envs, seed)

    def step(self, explore: float, random: bool = False) -> TransitionBatch:
        t0 = time.perf_counter()
        action = self.random_actions(self.n) if random else self.act_kernel.act(self.envs.obs, explore)
        t1 = time.perf_counter()
        batch, restart = self.envs.step(action, self.actor_id, self.policy_version)
        # An env whose episode ended (SB3 resets its noise then) or whose reset step just ran (its ignored action
        # still advanced the noise) acts next at the first step of a new episode: its exploration starts again.
        if restart.any():
            self.act_kernel.new_episodes(restart)
        self.clock.add("act", t1 - t0)
        self.clock.add("env_step", time.perf_counter() - t1)
        return batch

    def drain_episodes(self) -> list[Episode]:
        done, self.envs.finished = self.envs.finished, []
        return done

    def close(self) -> None:
        self.envs.close()


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
