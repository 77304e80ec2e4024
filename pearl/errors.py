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
