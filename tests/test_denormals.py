"""The torch adapter flushes denormal floats to zero (adapters/torch/adapter.py `flush_denormals`): Adam's first
moment of a dead ReLU's weights would otherwise sit in the denormal range for good, where x86 arithmetic is slow."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from pearl.adapters import open_adapter
from pearl.algos import DQNConfig
from pearl.algos.params import init_params
from pearl.profiling.grids import prefill
from pearl.envs import env_spec

TINY = np.finfo(np.float32).tiny  # the smallest normal float32


def denormal_count(state: dict[str, np.ndarray]) -> int:
    return sum(int(((v != 0) & (np.abs(v) < TINY)).sum()) for v in state.values() if v.dtype == np.float32)


def test_adam_moments_hold_no_denormal_after_many_updates() -> None:
    """DQN with a 64-64 network on random transitions: its dead units' first moments decay towards 0 and, left
    alone, stop at a few units of 2⁻¹⁴⁹ (hundreds of them within 1,500 updates on the Xeon VM)."""
    spec = env_spec("CartPole-v1")
    config = DQNConfig(hidden=(64, 64), batch_size=64)
    adapter = open_adapter("cpu", threads=1)
    replay = adapter.make_replay(config, spec, seed=0)
    prefill(replay, spec, 2000, np.random.default_rng(0))
    learn = adapter.make_learn(config, spec, init_params(config, spec, seed=0))
    for _ in range(1500):
        learn.learn(replay.sample(config.batch_size, 0.4))
    state = learn.state_dict()
    assert any(name.startswith("adam.exp_avg.") for name in state)
    assert denormal_count(state) == 0


FLUSH_IN_POOL = """
from pearl.adapters import open_adapter
open_adapter("cpu", threads=2)
import torch
x = torch.full((1 << 20,), 1e-30)   # large enough that torch splits the multiply across its 2 threads
y = x * 1e-10                       # 1e-40: a denormal, unless flushed
print(int((y != 0).sum()))
"""


def test_intra_op_threads_flush_denormals_too() -> None:
    """A fresh process as pearl's launchers start one: the 2 intra-op threads torch starts after the adapter
    opens inherit the mode, so every chunk of a parallel multiply flushes."""
    out = subprocess.run([sys.executable, "-c", FLUSH_IN_POOL], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
