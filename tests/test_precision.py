"""A learn placement's precision (pearl.kernels.Precision): fp32, the default, computes as it always has, bit for
bit; bf16-mixed runs the torch learn kernels' matrix products in bfloat16 and keeps the master weights, Adam's
moments, the loss, the targets and the TD errors in float32; OpenCL refuses it. Whether bf16 is fast here
(`precision_problem`) is timed, so no test depends on which way the timing goes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from learn_support import make_batches, to_sample_batch
from opencl_support import first_opencl_device

from pearl.adapters.base import AlgoKernels
from pearl.adapters.registry import precision_problem
from pearl.adapters.torch import TorchAdapter
from pearl.adapters.torch import adapter as adapter_module
from pearl.adapters.torch.adapter import bf16_problem, precision_verdict
from pearl.adapters.torch.nets import MLP, FlatAdam, build
from pearl.algos import DDPGConfig, SACConfig, TD3Config, preset
from pearl.algos.params import init_mlp, init_params
from pearl.envs import env_spec
from pearl.device import DeviceId
from pearl.errors import ConfigError, DeviceError
from pearl.kernels import Precision

BF16 = Precision.BF16_MIXED
#: bfloat16's unit roundoff: 8 significant bits, so one rounding changes a value by at most 2⁻⁸ of itself
BF16_U = 2.0 ** -8
UPDATES = 100
#: updates of the cast-counting test: DQN's target copy (every 30) falls inside, TD3's actor steps every third
CAST_UPDATES = 45

CASES = {
    "dqn-huber-clip": (preset("dqn", "CartPole-v1").replace(max_grad_norm=1.0, target_update_interval=30),
                       "CartPole-v1"),
    "dqn-squared": (preset("dqn", "CartPole-v1").replace(huber=False, max_grad_norm=0.0, target_update_interval=40),
                    "CartPole-v1"),
    "ddpg-64": (DDPGConfig(hidden=(64, 64), batch_size=64), "Pendulum-v1"),
    "td3-64": (TD3Config(hidden=(64, 64), batch_size=64, policy_delay=3), "Pendulum-v1"),
    "sac-64": (SACConfig(hidden=(64, 64), batch_size=64), "Pendulum-v1"),
}


def _kernels(case: str, updates: int, precisions, split: bool = False) -> tuple[list, dict, list]:
    """Learn kernels of case, one per entry of precisions (None: make_learn's default), from the same seeded
    parameters, trained on the same batches; with split, every other update is `apply(grads(batch))`. Returns the
    kernels, the initial parameters and each kernel's TD errors per update."""
    torch.set_num_threads(1)
    config, env_id = CASES[case]
    spec, cpu = env_spec(env_id), TorchAdapter("cpu")
    params = init_params(config, spec, seed=11)
    kernels = [cpu.make_learn(config, spec, params, seed=0) if p is None else
               cpu.make_learn(config, spec, params, seed=0, precision=p) for p in precisions]
    tds: list[list[np.ndarray]] = [[] for _ in kernels]
    for i, b in enumerate(make_batches(spec, config.batch_size, seed=4, steps=updates)):
        batch = to_sample_batch(cpu, b)
        for kernel, td in zip(kernels, tds):
            result = kernel.apply(kernel.grads(batch)) if split and i % 2 else kernel.learn(batch)
            td.append(result.td_errors.numpy().copy())
    return kernels, params, tds


def _share_of_movement(got: dict, want: dict, start: dict) -> float:
    """max over tensors of ‖got − want‖ / ‖want − start‖: how much of training's movement the two runs differ by."""
    return max(float(np.linalg.norm(got[k] - want[k]) / max(np.linalg.norm(want[k] - start[k]), 1e-30))
               for k in want)


# ------------------------------------------------------------------------------------------ the value
def test_precision_parses_its_names_and_refuses_others_listing_them() -> None:
    assert Precision.parse("fp32") is Precision.FP32 and Precision.parse("bf16-mixed") is BF16
    assert Precision.parse(BF16) is BF16
    for bad in ("bf16", "FP32", "", "fp16"):
        with pytest.raises(ConfigError) as caught:
            Precision.parse(bad)
        message = str(caught.value)
        assert "\n" not in message and repr(bad) in message and "fp32, bf16-mixed" in message


def test_make_learn_refuses_an_unknown_precision() -> None:
    config, env_id = CASES["ddpg-64"]
    spec = env_spec(env_id)
    with pytest.raises(ConfigError, match="unknown precision 'tf32'"):
        TorchAdapter("cpu").make_learn(config, spec, init_params(config, spec, seed=0), precision="tf32")


# ------------------------------------------------------------------------------------------ fp32 unchanged
@pytest.mark.parametrize("case", sorted(CASES))
def test_fp32_is_the_default_and_gives_the_same_bits(case: str) -> None:
    """make_learn(..., precision=FP32) and make_learn(...) give the same TD errors and state, bit for bit, through
    `learn` and through `grads` then `apply`."""
    (default, fp32), _, (td_default, td_fp32) = _kernels(case, 10, [None, Precision.FP32], split=True)
    for a, b in zip(td_default, td_fp32):
        assert a.tobytes() == b.tobytes()
    want, got = default.state_dict(), fp32.state_dict()
    assert want.keys() == got.keys()
    for name in want:
        assert want[name].tobytes() == got[name].tobytes(), name


def test_a_factory_without_the_precision_keyword_still_builds_fp32_and_refuses_bf16() -> None:
    """An algorithm plugin's five-argument learn factory (AlgoKernels.precisions left at fp32) keeps working."""
    made = []
    kernels = AlgoKernels(act=lambda *args: None, learn=lambda handle, config, nets, params, seed: made.append(seed))
    config = CASES["ddpg-64"][0]
    kernels.build_learn(None, config, {}, {}, 7, Precision.FP32, "cpu")
    assert made == [7]
    with pytest.raises(DeviceError, match="cpu: ddpg's learn has no bf16-mixed kernels here .*fp32"):
        kernels.build_learn(None, config, {}, {}, 7, BF16, "cpu")


# ------------------------------------------------------------------------------------------ bf16-mixed
@pytest.mark.parametrize("tanh_out", [False, True])
def test_a_mixed_mlp_gives_autograds_gradients_of_a_bfloat16_network(tanh_out: bool) -> None:
    """The written-out mixed pass is what autograd computes for the same network with its wide layer in bfloat16
    and its thin first and last layers in float32 (F.linear on each layer's weights and input in that layer's
    type, the output cast to float32 before anything reads it): the same products, so the gradients agree to far
    less than one bfloat16 rounding (2⁻⁸), while both are several roundings from float32. Bias gradients are
    summed in float32 here, so they are held to a rounding too."""
    sizes, rows = [3, 40, 33, 2], 32
    params = init_mlp(np.random.default_rng(0), "net", sizes)
    net = build(sizes, params, "net", torch.device("cpu"), tanh_out=tanh_out, compute=torch.bfloat16)
    net.trainable()
    types = [torch.float32, torch.bfloat16, torch.float32]  # 3 → 40 and 33 → 2 are thinner than MIXED_MIN_WIDTH
    assert net.layer_types == types
    gen = torch.Generator().manual_seed(0)
    x, grad_out = torch.randn(rows, 3, generator=gen), torch.randn(rows, 2, generator=gen)

    leaves = [torch.from_numpy(params[f"net.{i}.{kind}"]).to(types[i]).requires_grad_(True)
              for i in range(len(sizes) - 1) for kind in ("weight", "bias")]
    leaf_x = x.clone().requires_grad_(True)
    h = leaf_x
    for i in range(len(sizes) - 1):
        h = torch.nn.functional.linear(h.to(types[i]), leaves[2 * i], leaves[2 * i + 1])
        h = torch.relu(h) if i < len(sizes) - 2 else h
    out = torch.tanh(h.float()) if tanh_out else h.float()
    out.backward(grad_out)

    outs = net.forward(x)
    assert [o.dtype for o in outs] == [*types, torch.float32]  # each input in the type of the layer reading it
    torch.testing.assert_close(outs[-1], out.detach(), rtol=0, atol=0)
    d_input = net.backward(outs, grad_out, input_grad=slice(1, None))
    assert d_input.dtype == torch.float32 and net.grad.dtype == torch.float32
    pairs = [(d_input, leaf_x.grad[:, 1:])]
    for i in range(len(sizes) - 1):
        pairs += [(net.weight_grads[i], leaves[2 * i].grad.float()),
                  (net.bias_grads[i], leaves[2 * i + 1].grad.float())]
    for mine, autograd in pairs:
        assert float((mine - autograd).norm() / autograd.norm()) <= BF16_U
    full = build(sizes, params, "net", torch.device("cpu"), tanh_out=tanh_out)  # the same network in float32
    full.trainable()
    full.backward(full.forward(x), grad_out)
    assert float((net.grad - full.grad).norm() / full.grad.norm()) > BF16_U / 16  # the wide layer is bfloat16


@pytest.mark.parametrize("case", sorted(CASES))
def test_bf16_mixed_follows_fp32_over_100_updates(case: str) -> None:
    """bf16-mixed learn from the same seeded start on the same batches as fp32: after 100 updates, every tensor
    (networks and targets) differs from the fp32 run's by at most half of how far the fp32 run moved it from the
    start (max over tensors of ‖bf16 − fp32‖ / ‖fp32 − start‖ ≤ 0.5).

    Why that bound. bfloat16 keeps 8 significant bits: each product is rounded by up to 2⁻⁸ of itself, its
    inputs (weights, activations, backpropagated gradients) each by as much. A weight gradient is a sum over the
    batch's B rows of terms of either sign, so its relative error is about √B · 2⁻⁸, 3% at B = 64, before the
    layers compound it: measured on DDPG 64-64 from one state, up to 12% per tensor at the first update and 15%
    at the 51st, the same as autograd's on a bfloat16 network (the test above). Adam divides each element by its own running scale, so elements whose gradient
    nearly cancels take learning-rate-sized steps that the rounding can turn round, and each run trains on its own
    parameters, so the differences feed back: measured after 100 updates, 0.29-0.40 for DQN (CartPole, 256-256),
    0.24-0.26 for DDPG, 0.22-0.24 for TD3 and 0.13-0.15 for SAC (64-64), over two initial seeds on the 2-core EPYC
    VM. 0.5 holds them with room (the test above and the cast test below hold the arithmetic itself). The run
    must also differ from fp32 (it cannot pass by running fp32), and its master
    weights, gradients and Adam moments must be float32."""
    (fp32, bf16), start, (td_fp32, td_bf16) = _kernels(case, UPDATES, [Precision.FP32, BF16])
    want, got = fp32.get_params(), bf16.get_params()
    assert _share_of_movement(got, want, start) <= 0.5
    assert any(not np.array_equal(got[k], want[k]) for k in want)
    assert all(a.dtype == np.float32 for a in td_bf16) and not np.array_equal(td_bf16[-1], td_fp32[-1])
    for name, net in bf16._nets().items():
        assert net.compute is torch.bfloat16 and net.low.dtype == torch.bfloat16, name
        assert net.flat.dtype == torch.float32 and net.casts > 0, name
    for name, optimizer in bf16._optimizers().items():
        assert isinstance(optimizer, FlatAdam)
        assert {t.dtype for t in (optimizer.net.grad, *optimizer._exp_avgs, *optimizer._exp_avg_sqs)} \
            == {torch.float32}, name
    assert {v.dtype for v in bf16.state_dict().values() if v.dtype.kind == "f"} == {np.dtype(np.float32)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bf16_mixed_repeats_bit_for_bit(case: str) -> None:
    (a, b), _, (td_a, td_b) = _kernels(case, 20, [BF16, BF16], split=True)
    for x, y in zip(td_a, td_b):
        assert x.tobytes() == y.tobytes()
    for name, value in a.state_dict().items():
        assert value.tobytes() == b.state_dict()[name].tobytes(), name


@pytest.mark.parametrize("case", ["dqn-huber-clip", "ddpg-64", "td3-64", "sac-64"])
def test_weights_are_cast_once_per_version_and_never_read_stale(case: str, monkeypatch) -> None:
    """Every product reads the bf16 copy of the weights as they are then (a spy checks each read against a fresh
    cast), and a network is cast once per version of its weights, not once per product: a network stepped once
    an update is cast once an update; the critic DDPG's and TD3's actor gradient goes through after its step is
    cast once more; a target changed every k updates is cast every k."""
    reads = []
    original = MLP._low_layers

    def checked(self: MLP):
        layers = original(self)
        reads.append(torch.equal(self.low, self.flat.to(self.compute)))
        return layers

    monkeypatch.setattr(MLP, "_low_layers", checked)
    (kernel,), _, _ = _kernels(case, CAST_UPDATES, [BF16])
    assert reads and all(reads)
    casts = {name: net.casts for name, net in kernel._nets().items()}
    u, actor_steps = CAST_UPDATES, CAST_UPDATES // 3  # TD3's policy_delay 3: updates 3, 6, ..., 45 step the actor
    # A network read every update and changed after its reads is cast once an update (its first version among
    # them); a critic the actor's gradient reads after the critic's step is cast once more (u + 1 versions read);
    # DQN's target is cast at the start and after its copy at update 30; TD3's actor and targets change on actor
    # steps only.
    expected = {
        "dqn-huber-clip": {"q": u, "q_target": 2},
        "ddpg-64": {"actor": u, "actor_target": u, "critic": u + 1, "critic_target": u},
        "td3-64": {"actor": actor_steps, "actor_target": actor_steps, "qf1": u + 1, "qf2": u,
                   "qf1_target": actor_steps, "qf2_target": actor_steps},
        "sac-64": {"actor": u, "qf1": u + 1, "qf2": u + 1, "qf1_target": u, "qf2_target": u},
    }[case]
    assert casts == expected
    assert len(reads) > sum(casts.values())  # more products than casts


# ------------------------------------------------------------------------------------------ hardware check
def test_precision_verdict_says_how_fast_bf16_runs_and_why() -> None:
    assert precision_verdict(1.0, 1.0, "this CPU") == "" and precision_verdict(2.0, 1.0, "this CPU") == ""
    assert precision_verdict(1.0, 2.5, "this CPU", "no bf16 units: /proc/cpuinfo lists no avx512_bf16 or "
                             "amx_bf16") == ("bf16 products run at 0.4× float32 on this CPU (no bf16 units: "
                                             "/proc/cpuinfo lists no avx512_bf16 or amx_bf16)")
    assert precision_verdict(3.0, 4.0, "cuda:0 (A GPU, compute capability 9.0)") == \
        "bf16 products run at 0.75× float32 on cuda:0 (A GPU, compute capability 9.0)"


def test_precision_problem_is_empty_for_fp32_and_a_cached_reason_or_nothing_for_bf16() -> None:
    """Which way the timing goes depends on the machine (this CPU has no bf16 units); only the form is tested."""
    cpu = DeviceId.parse("cpu")
    assert precision_problem(cpu, Precision.FP32) == "" and precision_problem(cpu, "fp32") == ""
    verdict = precision_problem(cpu, BF16)
    assert isinstance(verdict, str) and "\n" not in verdict
    assert verdict == "" or verdict.startswith("bf16 products run at ")
    assert bf16_problem.cache_info().currsize >= 1 and precision_problem(cpu, BF16) is verdict
    with pytest.raises(ConfigError):
        precision_problem(cpu, "fp8")


def test_the_check_times_the_types_in_turn_and_keeps_each_ones_fastest_repeat(monkeypatch) -> None:
    """A busy spell on the machine falls on both types' repeats, not on all of one type's (timed one type after the
    other, a load that began between them read bf16 as 0.23× float32 on a CPU with bf16 units); and each type's
    figure is its fastest repeat, since other work only lengthens one."""
    calls, real_mm = [], torch.mm

    def recording(a, b, out=None):
        calls.append(a.dtype)
        return real_mm(a, b, out=out)

    monkeypatch.setattr(torch, "mm", recording)
    times = adapter_module.time_products("cpu", (torch.float32, torch.bfloat16), shape=(8, 8, 8), repeats=3)
    n = adapter_module.PRECISION_PRODUCTS
    turn = [torch.float32] * n + [torch.bfloat16] * n
    assert calls == [torch.float32, torch.bfloat16] + turn * 3  # a warm-up each, then the types in turn
    assert set(times) == {torch.float32, torch.bfloat16} and all(0 < t < float("inf") for t in times.values())


# ------------------------------------------------------------------------------------------ OpenCL
def test_opencl_refuses_bf16_mixed_naming_the_device_and_what_it_runs() -> None:
    device = first_opencl_device()
    from pearl.adapters.opencl import OpenCLAdapter

    adapter = OpenCLAdapter(device)
    config, env_id = CASES["ddpg-64"]
    spec = env_spec(env_id)
    with pytest.raises(DeviceError) as caught:
        adapter.make_learn(config, spec, init_params(config, spec, seed=0), precision=BF16)
    message = str(caught.value)
    assert message.startswith(f"{device}:") and "fp32 only" in message and "bf16-mixed" in message
    assert "cpu or cuda:N" in message
    opencl = DeviceId.parse(device)
    assert precision_problem(opencl, Precision.FP32) == ""
    assert precision_problem(opencl, BF16) == "the opencl adapter computes learn in fp32 only"
    assert adapter.make_learn(config, spec, init_params(config, spec, seed=0)).updates == 0
