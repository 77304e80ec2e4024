"""Adam's moments lose their denormals every DENORMAL_FLUSH_INTERVAL steps (adapters/torch/nets.py
`flush_denormals_`): the first moment of a dead ReLU's weight would otherwise sit in the denormal range for good,
where x86 arithmetic is slow. Done on the values, not by the CPU's flush-to-zero mode, so the process's floats
are left alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pearl.adapters import open_adapter
from pearl.adapters.torch.autograd import Adam
from pearl.adapters.torch.nets import DENORMAL_FLUSH_INTERVAL, flush_denormals_
from pearl.algos import DQNConfig
from pearl.algos.params import init_params
from pearl.envs import env_spec
from pearl.profiler.grids import prefill

TINY = np.finfo(np.float32).tiny  # the smallest normal float32, 2⁻¹²⁶
UNIT = np.float32(2.0**-149)      # the smallest denormal


def denormal_count(arrays) -> int:
    return sum(int(((a != 0) & (np.abs(a) < TINY)).sum()) for a in arrays)


def test_flush_sets_exactly_the_denormals_to_zero() -> None:
    values = np.array([UNIT, -4 * UNIT, TINY / 2, -TINY / 3, TINY, -TINY, 1e-30, 0.5, -0.0, 0.0], np.float32)
    tensor = torch.from_numpy(values.copy())
    flush_denormals_(tensor)
    want = np.where(np.abs(values) < TINY, np.float32(0), values)
    np.testing.assert_array_equal(tensor.numpy(), want)
    assert denormal_count([values]) == 4 and denormal_count([tensor.numpy()]) == 0


UPDATES = 94 * DENORMAL_FLUSH_INTERVAL


@pytest.fixture(scope="module")
def trained_state() -> dict[str, np.ndarray]:
    """A DQN 64-64 learner's state after UPDATES updates on random transitions."""
    spec = env_spec("CartPole-v1")
    config = DQNConfig(hidden=(64, 64), batch_size=64)
    adapter = open_adapter("cpu", threads=1)
    replay = adapter.make_replay(config, spec, seed=0)
    prefill(replay, spec, 2000, np.random.default_rng(0))
    learn = adapter.make_learn(config, spec, init_params(config, spec, seed=0))
    for _ in range(UPDATES):
        learn.learn(replay.sample(config.batch_size, 0.4))
    return learn.state_dict()


def test_the_dqn_learners_moments_hold_no_denormal_after_many_updates(trained_state) -> None:
    """Some units die, and their weights' first moments decay towards 0. Left alone, they stop at a few units of
    2⁻¹⁴⁹ (22 of them after 1,504 updates, on the Xeon VM)."""
    state = trained_state
    moments = [v for name, v in state.items() if name.startswith(("adam.exp_avg.", "adam.exp_avg_sq."))]
    assert moments and int(next(v for k, v in state.items() if k.startswith("adam.step."))) == UPDATES
    assert denormal_count(moments) == 0


@pytest.mark.parametrize("steps, flushed", [(DENORMAL_FLUSH_INTERVAL - 1, False), (DENORMAL_FLUSH_INTERVAL, True)])
def test_the_autograd_references_adam_flushes_on_the_same_steps(steps: int, flushed: bool) -> None:
    """A first moment put in the denormal range with a zero gradient: 0.9 × 4·2⁻¹⁴⁹ rounds back to 4·2⁻¹⁴⁹, so only
    the flush clears it, on the interval's steps as FlatAdam does."""
    param = torch.zeros(3, requires_grad=True)
    adam = Adam(param, 1e-3, lambda t: {"p": t})
    adam.step(torch.ones(3))  # creates the state
    state = adam.optimizer.state[param]
    state["exp_avg"].fill_(float(4 * UNIT))
    for _ in range(steps - 1):
        adam.step(torch.zeros(3))
    m = state["exp_avg"].numpy()
    assert (m == 0).all() if flushed else (m == 4 * UNIT).all()


def test_opening_and_training_leaves_the_processs_floats_alone(trained_state) -> None:
    """numpy (and torch) still compute with denormals after the adapter opens and a learner trains."""
    assert np.float32(TINY) * np.float32(0.5) != 0
    assert (torch.tensor(float(TINY)) * 0.5).item() != 0
