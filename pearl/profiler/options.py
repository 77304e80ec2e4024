"""What `pearl profile` is asked to measure. Its own module, below both the profiler, which measures it, and
pearl.profiler.slices, which hands it to the child process that measures a GPU slice."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pearl.algos import algorithm_names
from pearl.descriptors import DEVICES_DIR


@dataclass
class ProfileOptions:
    quick: bool = False
    algos: tuple[str, ...] = field(default_factory=algorithm_names)  # default: every registered algorithm
    devices: tuple[str, ...] | None = None  # default: every usable device found
    what_if: tuple[str, ...] = ()
    descriptors_dir: Path = DEVICES_DIR
    env: str | None = None  # a workload of the user's: algos[0] on this env (None: each algo's preset env)
    hidden: tuple[int, ...] | None = None  # the workload's hidden layers (None: its preset's or defaults)
    batch_size: int | None = None  # the workload's batch (None: its preset's or defaults)
    n_envs: int | None = None  # environments per actor (None: its preset's or defaults)
