"""Every fast learn path against its algorithm's autograd reference (pearl/adapters/torch/reference.py: DQN, DDPG,
TD3 and SAC): the same initial parameters, the same batches, and the parameters compared after 100 updates
(max over tensors of ‖fast − reference‖₂ / ‖reference‖₂ ≤ 1e-5).

In float64 (kernels built from float64 parameters: `pearl.algos.params.float_type`), every path holds that on
every case, the 400-300 networks included. Measured on the 2-core AMD EPYC VM after 100 updates: torch's hand
paths 1.3e-16 to 8.4e-15 (DDPG 400-300 the largest); OpenCL on PoCL 2.9e-16 to 1.3e-14 for DQN and DDPG, and
2.6e-11 (64-64) and 1.0e-10 (400-300) for TD3, whose smoothing noise the device draws in float32 with its own
log and cos, a few ulp from numpy's. A wrong derivative would show at 1e-3 or more.

In float32, the runs' type, the torch hand paths hold 1e-5 after 100 updates on the smaller cases (measured:
DQN 256-256 1.6e-7 Huber and clipping, 1.7e-7 squared; DDPG 64-64 1.5e-7; SAC 64-64 1.0e-7 α tuned, 6.6e-8 α
fixed; SAC 256-256 at batch 256 2.6e-7). A path whose sums run in another order does not stay there over 100
updates: the first updates agree to 1e-7-1e-5 (float32 rounding), then a few elements whose gradient nearly
cancels, or a unit whose pre-activation crosses 0 on one row, take Adam steps of another size (Adam divides a
gradient by its own scale, so a rounding-sized gradient takes a learning-rate-sized step), and training on
these batches (random data, rewards up to 40× apart) amplifies that. Measured against the reference after 10 and
100 updates: OpenCL DQN (Huber, clipping) 1.9e-6, 2.4e-3; OpenCL DQN (squared) 3.0e-6, 6.1e-6; OpenCL DDPG
400-300 6.8e-6, 1.8e-3; OpenCL TD3 400-300 1.8e-5, 6.5e-3; torch's hand-derived DDPG at 400-300 (whose products
torch splits in other blocks than autograd's) 1.0e-7 and 4.0e-4. Those paths are held in float32 to 1e-4
(OpenCL) and 1e-5 (torch) after 10 updates; float64 holds their arithmetic after 100. tests/test_opencl_parity.py
holds the OpenCL kernels to the torch ones, and tests/test_learn_split.py every path's gradients to autograd's at
1e-4, from the first update.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import make_batches, to_sample_batch
from opencl_support import first_opencl_device

from pearl.adapters.torch import TorchAdapter
from pearl.adapters.torch.reference import REFERENCES
from pearl.algos import DDPGConfig, SACConfig, TD3Config, preset
from pearl.algos.params import float_type, init_params, network_sizes
from pearl.envs import env_spec

CASES = {
    "dqn-huber-clip": (preset("dqn", "CartPole-v1").replace(max_grad_norm=1.0, target_update_interval=30),
                       "CartPole-v1"),
    "dqn-squared": (preset("dqn", "CartPole-v1").replace(huber=False, max_grad_norm=0.0, target_update_interval=40),
                    "CartPole-v1"),
    "ddpg-64": (DDPGConfig(hidden=(64, 64), batch_size=64), "Pendulum-v1"),
    "ddpg-400-300": (preset("ddpg", "Pendulum-v1"), "Pendulum-v1"),
    "td3-64": (TD3Config(hidden=(64, 64), batch_size=64, policy_delay=3), "Pendulum-v1"),
    "td3-400-300": (preset("td3", "Pendulum-v1"), "Pendulum-v1"),
    "sac-64": (SACConfig(hidden=(64, 64), batch_size=64), "Pendulum-v1"),
    "sac-64-fixed-alpha": (SACConfig(hidden=(64, 64), batch_size=64, initial_alpha=0.2, tune_alpha=False),
                           "Pendulum-v1"),
    "sac-256": (preset("sac", "Pendulum-v1"), "Pendulum-v1"),
}


def _relative(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    assert got.keys() == want.keys()
    return max(float(np.linalg.norm(got[k] - want[k]) / max(np.linalg.norm(want[k]), 1e-30)) for k in want)


def _floats(arrays: dict[str, np.ndarray], dtype) -> dict[str, np.ndarray]:
    """arrays with every floating one cast to dtype."""
    return {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in arrays.items()}


def _reference(case: str, seed: int = 0, dtype=np.float32):
    config, env_id = CASES[case]
    spec = env_spec(env_id)
    params = _floats(init_params(config, spec, seed=11), dtype)
    cpu = TorchAdapter("cpu")
    kernel = REFERENCES[config.algo](torch.device("cpu"), config, network_sizes(config, spec), params, seed)
    return kernel, cpu, config, spec, params


def _upload(adapter, b: dict[str, np.ndarray]):
    """The batch on the adapter's device, in its own types (from_host's float32 is the runs' type; a float64
    batch goes up as it is, for kernels built from float64 parameters)."""
    if isinstance(adapter, TorchAdapter) or b["reward"].dtype == np.float32:
        return to_sample_batch(adapter, b)
    return to_sample_batch(adapter, b, lambda v: adapter.rt.to_device(v.astype(np.int32) if v.dtype.kind in "iu"
                                                                       else v))


def _train_both(case: str, adapter, updates: int, dtype=np.float32) -> float:
    torch.set_num_threads(1)
    ref, cpu, config, spec, params = _reference(case, dtype=dtype)
    fast = adapter.make_learn(config, spec, params, seed=0)
    for b in make_batches(spec, config.batch_size, seed=4, steps=updates):
        b = _floats(b, dtype)
        ref.learn(to_sample_batch(cpu, b))
        fast.learn(_upload(adapter, b))
    assert fast.updates == ref.updates == updates
    got, want = fast.get_params(), ref.get_params()
    assert {v.dtype for v in [*got.values(), *want.values()]} == {np.dtype(dtype)}  # computed in that type
    return _relative(got, want)


def test_kernels_compute_in_the_floating_type_of_their_parameters() -> None:
    config, env_id = CASES["ddpg-64"]
    params = init_params(config, env_spec(env_id), seed=0)
    assert float_type(params) is np.float32  # init_params, as every run
    assert float_type(_floats(params, np.float64)) is np.float64
    mixed = {**_floats(params, np.float64), "actor.0.bias": params["actor.0.bias"]}
    assert float_type(mixed) is np.float32 and float_type({"adam.step.q": np.int64(3)}) is np.float32
    fast = TorchAdapter("cpu").make_learn(config, env_spec(env_id), _floats(params, np.float64))
    assert {v.dtype for v in fast.state_dict().values() if v.dtype.kind == "f"} == {np.dtype(np.float64)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_torch_hand_path_stays_with_autograd_over_100_updates_in_float64(case) -> None:
    assert _train_both(case, TorchAdapter("cpu"), 100, np.float64) <= 1e-5


NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


@pytest.mark.cuda
@NEEDS_CUDA
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_torch_path_on_cuda_stays_with_autograd_over_100_updates_in_float64(case) -> None:
    assert _train_both(case, TorchAdapter("cuda:0"), 100, np.float64) <= 1e-5


@pytest.mark.cuda
@NEEDS_CUDA
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_torch_path_on_cuda_agrees_with_autograd_over_10_updates(case) -> None:
    """float32 on the GPU: cuBLAS sums in its own order, so the bound is OpenCL's (1e-4 after 10 updates)."""
    assert _train_both(case, TorchAdapter("cuda:0"), 10) <= 1e-4


@pytest.mark.parametrize("case", ["dqn-huber-clip", "dqn-squared", "ddpg-400-300", "td3-64"])
def test_every_opencl_path_stays_with_autograd_over_100_updates_in_float64(case) -> None:
    """TD3 at 64-64: its kernels beyond DDPG's (td3.cl) are the same at any width, and 400-300 on PoCL takes 17 s
    (measured 1.0e-10 there)."""
    from pearl.adapters.opencl import OpenCLAdapter

    assert _train_both(case, OpenCLAdapter(first_opencl_device()), 100, np.float64) <= 1e-5


@pytest.mark.parametrize("case", ["dqn-huber-clip", "dqn-squared", "ddpg-64", "td3-64", "sac-64",
                                  "sac-64-fixed-alpha"])
def test_the_hand_derived_torch_path_stays_with_autograd_over_100_updates(case) -> None:
    assert _train_both(case, TorchAdapter("cpu"), 100) <= 1e-5


@pytest.mark.parametrize("case", ["ddpg-400-300", "td3-400-300", "sac-256"])
def test_the_hand_derived_path_at_400_300_agrees_with_autograd_over_10_updates(case) -> None:
    assert _train_both(case, TorchAdapter("cpu"), 10) <= 1e-5


@pytest.mark.parametrize("case", ["dqn-huber-clip", "dqn-squared", "ddpg-400-300", "td3-400-300"])
def test_the_opencl_path_agrees_with_autograd_over_10_updates(case) -> None:
    from pearl.adapters.opencl import OpenCLAdapter

    assert _train_both(case, OpenCLAdapter(first_opencl_device()), 10) <= 1e-4


def test_the_references_train_and_checkpoint_like_the_fast_kernels() -> None:
    """A reference's state has the fast kernel's names and shapes, so each loads the other's checkpoint; and
    the reference moves every trained network (a loss that reached no parameter would leave one still)."""
    for case in ("dqn-huber-clip", "ddpg-64", "td3-64", "sac-64"):
        ref, cpu, config, spec, params = _reference(case)
        fast = cpu.make_learn(config, spec, params)
        for b in make_batches(spec, config.batch_size, seed=1, steps=3):
            ref.learn(to_sample_batch(cpu, b))
        state = ref.state_dict()
        assert {k: np.shape(v) for k, v in state.items()} == {k: np.shape(v) for k, v in fast.state_dict().items()}
        fast.load_state_dict(state)
        moved = {k.split(".")[0] for k in params if not np.array_equal(state[k], params[k])}
        nets = {"dqn": {"q"}, "ddpg": {"actor", "critic", "actor_target", "critic_target"},
                "td3": {"actor", "qf1", "qf2", "actor_target", "qf1_target", "qf2_target"},
                "sac": {"actor", "qf1", "qf2", "qf1_target", "qf2_target"}}[config.algo]
        assert moved >= nets


@pytest.mark.parametrize("case", ["sac-64", "sac-64-fixed-alpha"])
def test_sacs_hand_path_and_reference_resume_from_each_others_checkpoints(case) -> None:
    """Each side's state (log α and its Adam among it) loads into the other, and the two then take the same next
    update from it: the names, shapes and meanings agree both ways."""
    torch.set_num_threads(1)
    ref, cpu, config, spec, params = _reference(case)
    fast = cpu.make_learn(config, spec, params, seed=0)
    first, second, last = make_batches(spec, config.batch_size, seed=2, steps=3)
    for kernel, b in ((ref, first), (fast, second)):
        kernel.learn(to_sample_batch(cpu, b))
    ref_state, fast_state = ref.state_dict(), fast.state_dict()
    assert {k: np.shape(v) for k, v in ref_state.items()} == {k: np.shape(v) for k, v in fast_state.items()}
    assert ref_state["log_alpha"].shape == () and int(fast_state["adam.step.log_alpha"]) == config.tune_alpha
    ref.load_state_dict(fast_state)
    fast.load_state_dict(ref_state)
    for kernel, state in ((ref, fast_state), (fast, ref_state)):  # each now holds exactly the other's state
        got = kernel.state_dict()
        assert all(np.array_equal(got[k], state[k]) for k in state)
    fast.load_state_dict(ref.state_dict())  # both at the hand path's state, by way of the reference
    moved = {}
    for name, kernel in (("fast", fast), ("ref", ref)):
        kernel.learn(to_sample_batch(cpu, last))
        moved[name] = kernel.state_dict()
    assert moved["fast"]["updates"] == moved["ref"]["updates"] == 2
    assert _relative({k: v for k, v in moved["fast"].items() if k != "updates"},
                     {k: v for k, v in moved["ref"].items() if k != "updates"}) <= 1e-5
