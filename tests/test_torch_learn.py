"""The torch adapter's `learn` equals the plain numpy re-statement of the maths (tests/reference_maths.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pearl.adapters.torch import TorchAdapter
from pearl.adapters.torch.nets import build
from pearl.algos import DDPGConfig, DQNConfig
from pearl.algos.params import init_mlp, init_params
from pearl.types import EnvSpec
from learn_support import STEPS, make_batches, to_sample_batch
from reference_maths import DDPGReference, DQNReference

# float32 arithmetic against a float64 statement of the same maths, over 10 Adam steps
RTOL, ATOL = 1e-4, 1e-5


def assert_params_close(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("tanh_out", [False, True])
def test_mlp_backward_matches_autograd(tanh_out: bool) -> None:
    """nets.MLP's hand-written backward pass gives autograd's gradients. A 3-input first layer 20 wide takes
    the transposed weight-gradient product, the other layers the plain one."""
    sizes = [3, 20, 17, 2]
    params = init_mlp(np.random.default_rng(0), "net", sizes)
    net = build(sizes, params, "net", torch.device("cpu"), tanh_out=tanh_out)
    net.trainable()
    gen = torch.Generator().manual_seed(0)
    x, grad_out = torch.randn(8, 3, generator=gen), torch.randn(8, 2, generator=gen)

    layers = [torch.nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
    with torch.no_grad():
        for i, layer in enumerate(layers):
            layer.weight.copy_(torch.from_numpy(params[f"net.{i}.weight"]))
            layer.bias.copy_(torch.from_numpy(params[f"net.{i}.bias"]))
    leaf = x.clone().requires_grad_(True)
    h = leaf
    for layer in layers[:-1]:
        h = torch.relu(layer(h))
    out = layers[-1](h)
    out = torch.tanh(out) if tanh_out else out
    out.backward(grad_out)

    outs = net.forward(x)
    torch.testing.assert_close(outs[-1], out.detach())
    d_input = net.backward(outs, grad_out, input_grad=slice(1, None))
    torch.testing.assert_close(d_input, leaf.grad[:, 1:])
    for i, layer in enumerate(layers):
        torch.testing.assert_close(net.weight_grads[i], layer.weight.grad)
        torch.testing.assert_close(net.bias_grads[i], layer.bias.grad)
    # param_grads=False leaves the gradients alone
    before = net.grad.clone()
    net.backward(net.forward(2 * x), grad_out, param_grads=False, input_grad=slice(None))
    torch.testing.assert_close(net.grad, before)
    # outputs kept in a slot's buffers equal fresh ones, and another slot leaves them alone
    kept = net.forward(x, slot="a")
    net.forward(2 * x, slot="b")
    for got, want in zip(kept, outs):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("huber", [True, False])
def test_dqn_learn_matches_plain_maths(huber: bool) -> None:
    spec = EnvSpec("test", obs_dim=5, action_kind="discrete", action_dim=3)
    config = DQNConfig(hidden=(16, 12), batch_size=32, learning_rate=3e-3, gamma=0.95, target_update_interval=3,
                       max_grad_norm=0.01, huber=huber)
    params = init_params(config, spec, seed=7)
    adapter = TorchAdapter("cpu")
    learner = adapter.make_learn(config, spec, params)
    ref = DQNReference(params, config.learning_rate, config.gamma, config.target_update_interval,
                       config.max_grad_norm, huber)
    for b in make_batches(spec, config.batch_size, seed=1):
        td = learner.learn(to_sample_batch(adapter, b)).td_errors.numpy()
        ref_td = ref.learn(**{k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in b.items()})
        np.testing.assert_allclose(td, ref_td, rtol=RTOL, atol=ATOL)
    assert learner.updates == STEPS
    assert_params_close(learner.get_params(), ref.p)
    # the parameters really moved, and the target was copied at update 9 (3 | 9) but not after
    assert not np.allclose(learner.get_params()["q.0.weight"], params["q.0.weight"])
    assert not np.allclose(learner.get_params()["q.0.weight"], learner.get_params()["q_target.0.weight"])


def test_dqn_clipping_is_active_in_the_parity_case() -> None:
    """The parity test above would not notice a missing clip if gradients never exceeded the norm."""
    spec = EnvSpec("test", obs_dim=5, action_kind="discrete", action_dim=3)
    base = DQNConfig(hidden=(16, 12), batch_size=32, learning_rate=3e-3, gamma=0.95, target_update_interval=3)
    params = init_params(base, spec, seed=7)
    adapter = TorchAdapter("cpu")
    results = []
    for norm in (0.01, 0.0):
        learner = adapter.make_learn(base.replace(max_grad_norm=norm), spec, params)
        for b in make_batches(spec, base.batch_size, seed=1):
            learner.learn(to_sample_batch(adapter, b))
        results.append(learner.get_params()["q.0.weight"])
    assert not np.allclose(results[0], results[1], rtol=RTOL, atol=ATOL)


def test_ddpg_learn_matches_plain_maths() -> None:
    spec = EnvSpec("test", obs_dim=3, action_kind="continuous", action_dim=2, action_low=(-2.0, -1.0),
                   action_high=(2.0, 1.0))
    config = DDPGConfig(hidden=(16, 12), batch_size=32, learning_rate=2e-3, gamma=0.97, tau=0.05)
    params = init_params(config, spec, seed=3)
    adapter = TorchAdapter("cpu")
    learner = adapter.make_learn(config, spec, params)
    ref = DDPGReference(params, config.learning_rate, config.gamma, config.tau)
    for b in make_batches(spec, config.batch_size, seed=2):
        td = learner.learn(to_sample_batch(adapter, b)).td_errors.numpy()
        ref_td = ref.learn(**{k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in b.items()})
        np.testing.assert_allclose(td, ref_td, rtol=RTOL, atol=ATOL)
    assert_params_close(learner.get_params(), ref.p)
    assert not np.allclose(learner.get_params()["actor.0.weight"], params["actor.0.weight"])
    assert not np.allclose(learner.get_params()["actor_target.0.weight"], params["actor_target.0.weight"])
