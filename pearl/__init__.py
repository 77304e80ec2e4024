"""pearl: place deep-RL kernels on the devices of a heterogeneous machine by measured cost, and train.

Public API:
    pearl.train(algo, env_id, device=..., steps=..., seed=...)  -> TrainResult (any RunOptions field by name)
    pearl.train(options=pearl.RunOptions(...))                    the same, from one options dataclass
    pearl.DQNConfig, pearl.DDPGConfig, pearl.TD3Config, pearl.SACConfig, pearl.preset(algo, env_id)
    pearl.algorithm(name), pearl.algorithm_names()                the algorithm registry (pearl/algos/registry.py)
    pearl.KERNELS                                                 the kernel catalogue
Importing pearl does not import torch; the adapters import it when a device is opened.
"""

__version__ = "0.1.0"

from pearl.algos import DDPGConfig, DQNConfig, SACConfig, TD3Config, algorithm, algorithm_names, preset  # noqa: E402
from pearl.errors import PearlError  # noqa: E402
from pearl.kernels import KERNELS  # noqa: E402
from pearl.training import RunOptions, TrainResult, train  # noqa: E402

__all__ = ["DDPGConfig", "DQNConfig", "KERNELS", "PearlError", "RunOptions", "SACConfig", "TD3Config", "TrainResult",
           "__version__", "algorithm", "algorithm_names", "preset", "train"]
