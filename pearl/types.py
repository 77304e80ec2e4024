"""Shared types: the messages the roles exchange and the description of an environment.

One home for them, so adapters, runtime and tests agree on field names. Arrays in a message are either
numpy arrays (at the host boundary) or the native arrays of the adapter named in ``device`` (for instance
torch tensors on ``cuda:0``), so a batch sampled on the learner's device never makes a host round trip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

#: Environments one actor may step: each is an env object in the actor's process, so a typo must not make millions.
MAX_ENVS = 4096

Params = dict[str, np.ndarray]
"""Network parameters by name, as host numpy arrays: how weights move between adapters."""


@dataclass(frozen=True)
class EnvSpec:
    """What an algorithm needs to know about an environment's spaces."""

    env_id: str
    obs_dim: int
    #: "discrete" or "continuous"
    action_kind: str
    #: number of discrete actions (discrete) or action dimensions (continuous)
    action_dim: int
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()

    @property
    def discrete(self) -> bool:
        return self.action_kind == "discrete"

    @property
    def action_shape(self) -> tuple[int, ...]:
        return () if self.discrete else (self.action_dim,)

    @property
    def action_dtype(self) -> np.dtype:
        return np.dtype(np.int64) if self.discrete else np.dtype(np.float32)


@dataclass
class TransitionBatch:
    """M transitions from one actor, in the order they were collected (host numpy arrays)."""

    obs: np.ndarray  # (M, obs_dim) float32
    action: np.ndarray  # (M,) int64 or (M, act_dim) float32
    reward: np.ndarray  # (M,) float32
    next_obs: np.ndarray  # (M, obs_dim) float32, the true next observation even at episode ends
    terminated: np.ndarray  # (M,) float32, 1.0 where the episode ended by termination (not truncation)
    actor_id: int = 0
    policy_version: int = 0

    def __len__(self) -> int:
        return int(self.reward.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of its arrays: what handing the batch on moves."""
        return sum(int(a.nbytes) for a in (self.obs, self.action, self.reward, self.next_obs, self.terminated))

    def head(self, n: int) -> "TransitionBatch":
        """The first n transitions."""
        return TransitionBatch(self.obs[:n], self.action[:n], self.reward[:n], self.next_obs[:n],
                               self.terminated[:n], self.actor_id, self.policy_version)

    def tail(self, n: int) -> "TransitionBatch":
        """The transitions after the first n."""
        return TransitionBatch(self.obs[n:], self.action[n:], self.reward[n:], self.next_obs[n:],
                               self.terminated[n:], self.actor_id, self.policy_version)


@dataclass
class SampleBatch:
    """B transitions drawn by the replay manager, with their slots and importance-sampling weights."""

    indices: Any  # (B,) replay slots: a host int64 array (torch adapters) or a device int32 array (OpenCL)
    obs: Any
    action: Any
    reward: Any
    next_obs: Any
    terminated: Any
    weights: Any  # (B,) float32 importance-sampling weights; all ones for uniform replay
    device: str = "host"
    #: the arrays are a replay's fixed buffers, which its next draw of this size overwrites: a consumer may read
    #: them where they are (a CUDA graph does) but must copy what it keeps beyond that draw
    fixed: bool = False

    def __len__(self) -> int:
        return int(self.indices.shape[0])


@dataclass
class PriorityUpdate:
    """New TD errors for the slots of one sampled batch."""

    indices: Any  # (B,) the sampled batch's `indices`, as the replay adapter gave them (host or device)
    td_errors: Any  # (B,) float32 on the learner's device, signed or absolute: priorities use |td|


@dataclass
class WeightSnapshot:
    """A versioned copy of the policy parameters published by the learner."""

    version: int
    params: Params


@dataclass
class LearnResult:
    """What one `learn` call reports besides the updated parameters."""

    td_errors: Any  # (B,) on the learner's device
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class Gradients:
    """What a learn kernel's `grads` computed on one batch and its `apply` consumes: every gradient the update's
    optimiser steps need, before any parameter moves.

    arrays: gradient by parameter name, named as the parameters are (``critic.0.weight``, ``log_alpha``), each
    an array native to the learner's device (a torch tensor, a pyopencl array) shaped like its parameter. Only
    the parameters this update steps are present (TD3's actor every `policy_delay` updates). Between the two
    halves the arrays may be replaced or changed in place (an all-reduce averaging them across learners);
    `apply` reads them as they are then. td_errors and metrics are those `learn` would return for the batch."""

    arrays: dict[str, Any]
    td_errors: Any  # (B,) on the learner's device
    metrics: dict[str, Any] = field(default_factory=dict)

    def result(self) -> LearnResult:
        """The `LearnResult` of the update these gradients belong to."""
        return LearnResult(self.td_errors, self.metrics)


@dataclass(frozen=True)
class GroupShare:
    """One learner's part of an update in a learner group (`pearl.runtime.learner_group`).

    The batch it is given is rows [start, start + rows) of the update's `total` rows. `average` takes arrays by
    name and returns the group's mean of each: every learner's array weighted by its rows / total and summed in
    learner order, so every learner gets the same bits. Each loss is a mean over rows, so the mean of the
    learners' gradients so weighted is the gradient of the whole batch. A kernel calls `average` on a gradient
    before anything that depends on it (an actor-critic's critic gradient before the scratch step the actor's
    gradient is taken through), the same calls in the same order in every learner."""

    start: int
    rows: int
    total: int
    average: Callable[[dict[str, Any]], dict[str, Any]]

    def mine(self, whole: Any) -> Any:
        """This learner's rows of an array that has one row per row of the whole batch (the learn draws)."""
        return whole[self.start:self.start + self.rows]
