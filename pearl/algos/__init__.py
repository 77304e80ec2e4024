"""Algorithms as hyperparameter dataclasses plus their maths (stated in each module's docstring)."""

from pearl.algos.base import OffPolicyConfig, config_from_dict
from pearl.algos.ddpg import DDPGConfig
from pearl.algos.dqn import DQNConfig
from pearl.algos.presets import ALGOS, PRESETS, algo_config_class, has_preset, preset

__all__ = ["ALGOS", "PRESETS", "DDPGConfig", "DQNConfig", "OffPolicyConfig", "algo_config_class",
           "config_from_dict", "has_preset", "preset"]
