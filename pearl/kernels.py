"""The kernel catalogue: the units of deep-RL work that pearl can place on a device.

Profiles, cost models, plans and run records all refer to kernels by these names, so this module is plain
data and imports nothing heavier than the standard library (and pearl.errors, for a bad precision's or
implementation's message).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum

from pearl.errors import ConfigError


class Role(str, Enum):
    ACTOR = "actor"
    REPLAY = "replay"
    LEARNER = "learner"
    TRANSFER = "transfer"


class Precision(str, Enum):
    """The arithmetic a learn placement computes in.

    FP32: every product, gradient and optimiser step in float32 (or float64 for kernels built from float64
    parameters). BF16_MIXED: the networks' matrix products and their gradients in bfloat16 with float32
    accumulation; the master weights, Adam's moments, the loss, the targets and the TD errors stay float32."""

    FP32 = "fp32"
    BF16_MIXED = "bf16-mixed"

    @classmethod
    def parse(cls, text: str) -> "Precision":
        """The precision named by text (a Precision passes through); ConfigError listing the choices else."""
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(p.value for p in cls)
            raise ConfigError(f"unknown precision {text!r}; the precisions are {choices}") from None


#: what a plan may be asked for: a precision, or auto (the planner chooses from the profile's figures)
PRECISION_CHOICES = (*(p.value for p in Precision), "auto")


#: set to 0 to run every kernel eagerly (to compare, or to rule CUDA graphs out)
GRAPHS_SWITCH = "PEARL_CUDA_GRAPHS"


class Implementation(str, Enum):
    """How a device runs a kernel's work. EAGER: each operation launched from the host as the code reaches it
    (every adapter's). CAPTURED: the whole call recorded once as a CUDA graph and replayed over fixed buffers,
    one launch where eager pays one per operation (torch on `cuda:N`, learn and act). The profiler times both
    where a device has both; the plan records which each placed kernel runs."""

    EAGER = "eager"
    CAPTURED = "captured"

    @classmethod
    def captures_allowed(cls) -> bool:
        """Whether kernels that can be captured are ($PEARL_CUDA_GRAPHS=0 runs every kernel eagerly)."""
        return os.environ.get(GRAPHS_SWITCH, "1") != "0"

    @classmethod
    def own(cls, ways: tuple[str, ...]) -> "Implementation":
        """The way a device whose kind lists `ways` (`Backend.implementations`) runs act and learn when not told:
        captured where it can and the switch allows it, else eager."""
        return cls.CAPTURED if cls.CAPTURED.value in ways and cls.captures_allowed() else cls.EAGER

    @classmethod
    def parse(cls, text: "str | Implementation") -> "Implementation":
        """The implementation named by text (an Implementation passes through); ConfigError listing them else."""
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(i.value for i in cls)
            raise ConfigError(f"unknown kernel implementation {text!r}; the implementations are {choices}") from None


@dataclass(frozen=True)
class Kernel:
    name: str
    role: Role
    work: str
    #: Runs only on the host CPU (environments are Python code); otherwise any adapter implementing it.
    cpu_only: bool = False
    #: A transfer rather than a computation: it has a source and destination device, not one device.
    is_transfer: bool = False


ENV_STEP = Kernel("env_step", Role.ACTOR, "step N gymnasium environments", cpu_only=True)
ACT = Kernel("act", Role.ACTOR, "policy forward + exploration on N observations")
REPLAY_INSERT = Kernel("replay_insert", Role.REPLAY, "write M transitions with the current max priority")
REPLAY_SAMPLE = Kernel("replay_sample", Role.REPLAY, "draw B indices, gather the batch, importance weights")
LEARN = Kernel("learn", Role.LEARNER, "one gradient update with target update; returns TD errors")
PRIORITY_UPDATE = Kernel("priority_update", Role.REPLAY, "priorities of the B sampled indices <- (|d|+eps)^a")
WEIGHT_SYNC = Kernel("weight_sync", Role.TRANSFER, "copy policy parameters learner -> act devices", is_transfer=True)

#: The whole catalogue, in pipeline order.
KERNELS: tuple[Kernel, ...] = (ENV_STEP, ACT, REPLAY_INSERT, REPLAY_SAMPLE, LEARN, PRIORITY_UPDATE, WEIGHT_SYNC)
KERNEL_NAMES: tuple[str, ...] = tuple(k.name for k in KERNELS)
BY_NAME: dict[str, Kernel] = {k.name: k for k in KERNELS}

#: Kernels a device adapter implements (env_step runs in the actor process on the host CPU; weight_sync is
#: a transfer between adapters).
DEVICE_KERNELS: tuple[str, ...] = ("act", "replay_insert", "replay_sample", "learn", "priority_update")

#: replay_sample timed on a prioritized replay (the sum tree's descent and the importance weights): a profile
#: holds it beside replay_sample, which is timed on a uniform replay, and a plan of a prioritized config charges
#: it for replay_sample (on this machine's cpu it is 2-3 times the uniform draw at CartPole's batch of 64).
PRIORITIZED_SAMPLE = "replay_sample_prioritized"
#: The names a profile's kernel timings may carry.
TIMING_NAMES: tuple[str, ...] = (*KERNEL_NAMES, PRIORITIZED_SAMPLE)
#: learner 0's seconds in a learner group's collectives (the other learners' waits included), a part of learn's:
#: a run's clocks time it and a plan with a group predicts it, so the two are compared as a kernel's are
GROUP_COMM = "group_comm"


def sample_timing(prioritized: bool) -> str:
    """The timing that prices replay_sample for a replay with or without priorities."""
    return PRIORITIZED_SAMPLE if prioritized else REPLAY_SAMPLE.name


@dataclass(frozen=True)
class Edge:
    """Data that flows between two kernels; it costs a transfer when the ends sit on different devices."""

    src: str
    dst: str
    carries: str
    every_step: bool


EDGES: tuple[Edge, ...] = (
    Edge("env_step", "act", "observations (and actions back)", every_step=True),
    Edge("env_step", "replay_insert", "transitions", every_step=True),
    Edge("replay_sample", "learn", "the sampled batch", every_step=False),
    Edge("learn", "priority_update", "TD errors", every_step=False),
    Edge("learn", "act", "policy weights, every K updates", every_step=False),
)


def kernel(name: str) -> Kernel:
    """Look a kernel up by name; a KeyError names the valid ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown kernel {name!r}; kernels are {', '.join(KERNEL_NAMES)}") from None
