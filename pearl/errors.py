"""Exceptions a user can cause.

Every error that bad input can trigger is a `PearlError`. The CLI prints it as one `error:` line and
exits with status 2; API callers catch the typed subclass they care about. Anything else that escapes is a
bug in pearl and keeps its traceback.
"""

from __future__ import annotations


class PearlError(Exception):
    """Base class: a problem with the user's input or machine, with a message saying what to do."""


class ConfigError(PearlError):
    """A bad hyperparameter, step count, seed or option."""


class UnknownAlgorithm(ConfigError):
    """An algorithm name the registry of this process does not have (`algo`: the name); pearl/algos/registry.py
    says why (unknown, or a plugin that did not load). The Ray launcher tells it apart when a role on another
    node raises it: the driver has the algorithm, the node's Python environment does not."""

    def __init__(self, message: str, algo: str = "") -> None:
        super().__init__(message)  # the message alone in args: Ray pickles a role's error back to the driver
        self.algo = algo


class EnvError(PearlError):
    """An unknown gymnasium environment, or one whose spaces the chosen algorithm cannot handle."""


class DeviceError(PearlError):
    """An unknown device id, or a device that is not present on this machine."""


class BackendMissing(DeviceError):
    """A backend (CUDA, OpenCL) that this machine lacks; the message says why it is unavailable."""


class RunDirError(PearlError):
    """The runs folder cannot be created or written."""


class RunRecordError(PearlError):
    """A run folder that is missing, unfinished or damaged, of another schema, or from another machine."""


class CheckpointError(PearlError):
    """A checkpoint that is missing, truncated, corrupted or from another run."""


class PlanError(PearlError):
    """A plan that cannot be made: missing measurements, a solver that stopped without a plan, a bad problem."""


class PlanInfeasible(PlanError):
    """No plan meets the constraints; the message names the constraint family that cannot be met."""
