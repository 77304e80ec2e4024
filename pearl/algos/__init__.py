"""Algorithms as hyperparameter dataclasses plus their maths (stated in each module's docstring), and the
registry (pearl/algos/registry.py) that every stage asks about an algorithm."""

from pearl.algos.base import Algorithm, LearnState, LearnWork, OffPolicyConfig, config_from_dict
from pearl.algos.ddpg import DDPGConfig
from pearl.algos.dqn import DQNConfig
from pearl.algos.sac import SACConfig
from pearl.algos.td3 import TD3Config
from pearl.algos.presets import PRESETS, algo_config_class, has_preset, preset
from pearl.algos.registry import algorithm, algorithm_names, algorithms, register, unregister

__all__ = ["PRESETS", "Algorithm", "DDPGConfig", "DQNConfig", "LearnState", "LearnWork", "OffPolicyConfig",
           "SACConfig", "TD3Config", "algo_config_class", "algorithm", "algorithm_names", "algorithms",
           "config_from_dict", "has_preset", "preset", "register", "unregister"]
