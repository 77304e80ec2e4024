"""pearl: place deep-RL kernels on the devices of a heterogeneous machine by measured cost, and train.

Public API:
    pearl.train(algo, env_id, device=..., steps=..., seed=...)  -> TrainResult (any run option by its name)
    pearl.train(options=pearl.RunOptions.of(...))                 the same, from one options dataclass
    pearl.DQNConfig, pearl.DDPGConfig, pearl.TD3Config, pearl.SACConfig, pearl.preset(algo, env_id)
    pearl.algorithm(name), pearl.algorithm_names()                the algorithm registry (pearl/algos/registry.py)
    pearl.KERNELS                                                 the kernel catalogue
    pearl.load(run_or_file, device=..., policy=...) -> Policy     a trained policy: predict, evaluate (pearl/policy.py)
Importing pearl does not import torch; the adapters import it when a device is opened.
The names are loaded on first use (PEP 562), so importing a lower module (`pearl.device`, `pearl.planner`)
loads neither training, the runtime nor gymnasium.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from pearl._version import __version__

if TYPE_CHECKING:
    from pearl.algos import DDPGConfig, DQNConfig, SACConfig, TD3Config, algorithm, algorithm_names, preset
    from pearl.errors import PearlError
    from pearl.kernels import KERNELS
    from pearl.policy import Policy, load
    from pearl.run_options import RunOptions
    from pearl.training import train
    from pearl.training.result import TrainResult

#: each public name → the module that defines it, imported when the name is first read
_LAZY = {
    "DDPGConfig": "pearl.algos", "DQNConfig": "pearl.algos", "SACConfig": "pearl.algos", "TD3Config": "pearl.algos",
    "algorithm": "pearl.algos",
    "algorithm_names": "pearl.algos", "preset": "pearl.algos", "PearlError": "pearl.errors", "KERNELS": "pearl.kernels",
    "RunOptions": "pearl.run_options", "TrainResult": "pearl.training.result", "train": "pearl.training",
    "load": "pearl.policy", "Policy": "pearl.policy",
}

__all__ = ["DDPGConfig", "DQNConfig", "KERNELS", "PearlError", "Policy", "RunOptions", "SACConfig", "TD3Config",
           "TrainResult", "__version__", "algorithm", "algorithm_names", "load", "preset", "train"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'pearl' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value  # the next read is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)  # the API, loaded or not; not this module's helpers
