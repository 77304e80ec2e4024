"""The learner contract's two halves (pearl/adapters/base.py `LearnKernel`): `grads` then `apply` gives the bits of
the fused `learn`, for every algorithm and backend; `grads` alone moves nothing; `apply` steps with the gradients it
is handed; and the gradients are those torch.autograd gives for the loss written out plainly."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from learn_support import make_batches, to_sample_batch
from opencl_support import first_opencl_device

from pearl.adapters.base import host_array
from pearl.adapters.torch import TorchAdapter
from pearl.algos import DDPGConfig, DQNConfig, SACConfig, TD3Config
from pearl.algos.params import init_params
from pearl.rng import learn_key, normal, philox2x32
from pearl.types import EnvSpec, Gradients

DISCRETE = EnvSpec("test", obs_dim=4, action_kind="discrete", action_dim=3)
CONTINUOUS = EnvSpec("test", obs_dim=3, action_kind="continuous", action_dim=2)
SMALL = dict(hidden=(16, 12), batch_size=32, learning_rate=3e-3, gamma=0.95)
CONFIGS = {
    "dqn": (DQNConfig(**SMALL, max_grad_norm=1.0, target_update_interval=3), DISCRETE),
    "dqn-squared": (DQNConfig(**SMALL, huber=False, max_grad_norm=0.0, target_update_interval=2), DISCRETE),
    "ddpg": (DDPGConfig(**SMALL, tau=0.05), CONTINUOUS),
    "td3": (TD3Config(**SMALL, tau=0.05, policy_delay=2), CONTINUOUS),
    "sac": (SACConfig(**SMALL, tau=0.05), CONTINUOUS),
    "sac-fixed-alpha": (SACConfig(**SMALL, tau=0.05, initial_alpha=0.1, tune_alpha=False), CONTINUOUS),
}
OPENCL = ("dqn", "dqn-squared", "ddpg", "td3")  # the algorithms with OpenCL learn kernels
UPDATES = 6  # enough for DQN's target copies and TD3's delayed actor to happen more than once
SEED = 11


def _kernels(adapter, name: str):
    config, spec = CONFIGS[name]
    params = init_params(config, spec, seed=4)
    return [adapter.make_learn(config, spec, params, seed=SEED) for _ in range(2)]


def _batches(adapter, name: str, steps: int = UPDATES):
    config, spec = CONFIGS[name]
    return [to_sample_batch(adapter, b) for b in make_batches(spec, config.batch_size, seed=2, steps=steps)]


def _assert_same_state(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def _torch() -> TorchAdapter:
    torch.set_num_threads(1)
    return TorchAdapter("cpu")


def _opencl():
    device = first_opencl_device()
    from pearl.adapters.opencl import OpenCLAdapter

    return OpenCLAdapter(device)


ADAPTERS = [pytest.param(_torch, name, id=f"torch-{name}") for name in CONFIGS] + \
           [pytest.param(_opencl, name, id=f"opencl-{name}") for name in OPENCL]


# ------------------------------------------------------------------------------------------ the two halves
@pytest.mark.parametrize("make_adapter,name", ADAPTERS)
def test_grads_then_apply_gives_the_fused_learns_bits(make_adapter, name) -> None:
    adapter = make_adapter()
    fused, split = _kernels(adapter, name)
    for batch in _batches(adapter, name):
        want = fused.learn(batch)
        got = split.apply(split.grads(batch))
        assert np.array_equal(host_array(got.td_errors), host_array(want.td_errors))
        assert got.metrics.keys() == want.metrics.keys()
        for key in want.metrics:
            assert float(got.metrics[key]) == float(want.metrics[key]), key
    # parameters, targets, every optimiser's moments and step, the update count (and SAC's log α)
    _assert_same_state(split.state_dict(), fused.state_dict())
    assert split.updates == fused.updates == UPDATES


@pytest.mark.parametrize("make_adapter,name", ADAPTERS)
def test_grads_alone_changes_nothing(make_adapter, name) -> None:
    adapter = make_adapter()
    kernel, _ = _kernels(adapter, name)
    batches = _batches(adapter, name, steps=4)
    for batch in batches[:3]:  # trained a little, so the optimisers' moments are not zero
        kernel.learn(batch)
    before = kernel.state_dict()
    gradients = kernel.grads(batches[3])
    assert gradients.arrays
    _assert_same_state(kernel.state_dict(), before)
    again = kernel.grads(batches[3])  # and so a second call computes the same gradients
    for key, value in gradients.arrays.items():
        assert np.array_equal(host_array(again.arrays[key]), host_array(value)), key


@pytest.mark.parametrize("make_adapter,name", ADAPTERS)
def test_apply_steps_with_the_gradients_it_is_handed(make_adapter, name) -> None:
    """A `grads` of another batch in between (which overwrites the kernel's own gradient buffers) changes nothing:
    `apply` reads the arrays of the Gradients it gets, as an all-reduce between the halves needs."""
    adapter = make_adapter()
    fused, split = _kernels(adapter, name)
    batches = _batches(adapter, name, steps=4)
    for i in range(3):
        fused.learn(batches[i])
        first = split.grads(batches[i])
        split.grads(batches[3])
        split.apply(first)
    _assert_same_state(split.state_dict(), fused.state_dict())


@pytest.mark.parametrize("make_adapter,name", ADAPTERS)
def test_apply_refuses_gradients_that_do_not_fit(make_adapter, name) -> None:
    adapter = make_adapter()
    kernel, _ = _kernels(adapter, name)
    gradients = kernel.grads(_batches(adapter, name, steps=1)[0])
    first = next(iter(gradients.arrays))
    before = kernel.state_dict()
    missing = Gradients({k: v for k, v in gradients.arrays.items() if k != first}, gradients.td_errors)
    with pytest.raises(ValueError, match=first):
        kernel.apply(missing)
    reshaped = Gradients({**gradients.arrays, first: gradients.arrays[first].reshape(-1)[:1]}, gradients.td_errors)
    with pytest.raises(ValueError, match=first):
        kernel.apply(reshaped)
    _assert_same_state(kernel.state_dict(), before)


def test_td3s_gradients_hold_the_actor_on_its_delayed_updates_only() -> None:
    adapter = _torch()
    kernel, _ = _kernels(adapter, "td3")
    for k, batch in enumerate(_batches(adapter, "td3", steps=4)):
        gradients = kernel.grads(batch)
        assert ("actor.0.weight" in gradients.arrays) == ((k + 1) % 2 == 0)
        assert "qf1.0.weight" in gradients.arrays and "qf2.0.weight" in gradients.arrays
        kernel.apply(gradients)


# ------------------------------------------------------------------------------ against torch.autograd
def _mlp(p: dict[str, torch.Tensor], net: str, x: torch.Tensor, tanh_out: bool = False) -> torch.Tensor:
    layers = sum(1 for name in p if name.startswith(f"{net}.") and name.endswith(".weight"))
    for i in range(layers):
        x = F.linear(x, p[f"{net}.{i}.weight"], p[f"{net}.{i}.bias"])
        if i < layers - 1:
            x = torch.relu(x)
    return torch.tanh(x) if tanh_out else x


def _tensors(params: dict[str, np.ndarray], net: str) -> dict[str, torch.Tensor]:
    """net's parameters (``net.<i>.weight/bias``) as leaf tensors that require grad."""
    return {k: torch.tensor(v, requires_grad=True) for k, v in params.items() if k.startswith(f"{net}.")}


def _plain(params: dict[str, np.ndarray], net: str, as_net: str | None = None) -> dict[str, torch.Tensor]:
    """net's parameters as constants, renamed to as_net (a target network read as its online one)."""
    as_net = as_net or net
    return {k.replace(f"{net}.", f"{as_net}.", 1): torch.from_numpy(v) for k, v in params.items()
            if k.startswith(f"{net}.")}


def _grads(loss: torch.Tensor, leaves: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    got = torch.autograd.grad(loss, list(leaves.values()))
    return {name: g.numpy() for name, g in zip(leaves, got)}


def _normals(update: int, n: int) -> torch.Tensor:
    r0, r1 = philox2x32(learn_key(SEED), np.arange(n, dtype=np.uint32), np.uint32(update))
    return torch.from_numpy(normal(r0, r1))


def _dqn_reference(cfg, before, _after, t, _k) -> dict[str, np.ndarray]:
    q_net = _tensors(before, "q")
    next_q = _mlp(_plain(before, "q_target", "q"), "q", t["next_obs"]).amax(1)
    y = t["reward"] + cfg.gamma * (1 - t["terminated"]) * next_q
    q = _mlp(q_net, "q", t["obs"]).gather(1, t["action"].view(-1, 1)).squeeze(1)
    per_item = F.smooth_l1_loss(q, y, reduction="none") if cfg.huber else (y - q) ** 2
    return _grads((t["weights"] * per_item).mean(), q_net)


def _ddpg_reference(cfg, before, after, t, _k) -> dict[str, np.ndarray]:
    critic = _tensors(before, "critic")
    next_a = _mlp(_plain(before, "actor_target", "actor"), "actor", t["next_obs"], tanh_out=True)
    next_q = _mlp(_plain(before, "critic_target", "critic"), "critic", torch.cat([t["next_obs"], next_a], 1))
    y = t["reward"] + cfg.gamma * (1 - t["terminated"]) * next_q.squeeze(1)
    q = _mlp(critic, "critic", torch.cat([t["obs"], t["action"]], 1)).squeeze(1)
    out = _grads((t["weights"] * (y - q) ** 2).mean(), critic)
    # the actor through the critic as this update's Adam step left it
    actor = _tensors(before, "actor")
    a = _mlp(actor, "actor", t["obs"], tanh_out=True)
    return {**out, **_grads(-_mlp(_plain(after, "critic"), "critic", torch.cat([t["obs"], a], 1)).mean(), actor)}


def _twin_critic_grads(before, t, y) -> dict[str, np.ndarray]:
    critics = {**_tensors(before, "qf1"), **_tensors(before, "qf2")}
    x = torch.cat([t["obs"], t["action"]], 1)
    loss = sum((t["weights"] * (y - _mlp(critics, q, x).squeeze(1)) ** 2).mean() for q in ("qf1", "qf2"))
    return _grads(loss, critics)


def _td3_reference(cfg, before, after, t, k) -> dict[str, np.ndarray]:
    n, d = t["action"].shape
    z = _normals(k, n * d).view(n, d)
    noise = (z * cfg.target_policy_noise).clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
    a2 = (_mlp(_plain(before, "actor_target", "actor"), "actor", t["next_obs"], tanh_out=True) + noise).clamp(-1, 1)
    x2 = torch.cat([t["next_obs"], a2], 1)
    q2 = torch.minimum(*(_mlp(_plain(before, f"{q}_target", q), q, x2) for q in ("qf1", "qf2"))).squeeze(1)
    out = _twin_critic_grads(before, t, t["reward"] + cfg.gamma * (1 - t["terminated"]) * q2)
    if (k + 1) % cfg.policy_delay == 0:
        actor = _tensors(before, "actor")
        a = _mlp(actor, "actor", t["obs"], tanh_out=True)
        out.update(_grads(-_mlp(_plain(after, "qf1"), "qf1", torch.cat([t["obs"], a], 1)).mean(), actor))
    return out


def _sac_sample(p, obs, z) -> tuple[torch.Tensor, torch.Tensor]:
    mean, log_std = _mlp(p, "actor", obs).chunk(2, dim=1)
    std = log_std.clamp(-20, 2).exp()
    x = mean + std * z
    a = torch.tanh(x)
    return a, (torch.distributions.Normal(mean, std).log_prob(x) - torch.log(1 - a.pow(2) + 1e-6)).sum(1)


def _sac_reference(cfg, before, after, t, k) -> dict[str, np.ndarray]:
    n, d = t["action"].shape
    z = _normals(k, 2 * n * d).view(2, n, d)
    actor = _tensors(before, "actor")
    log_alpha = torch.tensor(before["log_alpha"], requires_grad=True)
    a_pi, log_pi = _sac_sample(actor, t["obs"], z[0])
    alpha = log_alpha.detach().exp()
    target_entropy = cfg.target_entropy or -float(d)
    alpha_loss = -(log_alpha * (log_pi.detach() + target_entropy)).mean()
    out = {"log_alpha": _grads(alpha_loss, {"log_alpha": log_alpha})["log_alpha"]} if cfg.tune_alpha else {}
    with torch.no_grad():
        a2, log_pi2 = _sac_sample(_plain(before, "actor"), t["next_obs"], z[1])
        x2 = torch.cat([t["next_obs"], a2], 1)
        q2 = torch.minimum(*(_mlp(_plain(before, f"{q}_target", q), q, x2) for q in ("qf1", "qf2"))).squeeze(1)
        y = t["reward"] + cfg.gamma * (1 - t["terminated"]) * (q2 - alpha * log_pi2)
    out.update(_twin_critic_grads(before, t, y))
    x_pi = torch.cat([t["obs"], a_pi], 1)
    q_pi = torch.minimum(*(_mlp(_plain(after, q), q, x_pi) for q in ("qf1", "qf2"))).squeeze(1)
    out.update(_grads((alpha * log_pi - q_pi).mean(), actor))
    return out


REFERENCES = {"dqn": _dqn_reference, "dqn-squared": _dqn_reference, "ddpg": _ddpg_reference,
              "td3": _td3_reference, "sac": _sac_reference, "sac-fixed-alpha": _sac_reference}


@pytest.mark.parametrize("make_adapter,name", ADAPTERS)
def test_the_gradients_are_autograds_of_the_plain_loss(make_adapter, name) -> None:
    adapter = make_adapter()
    kernel, _ = _kernels(adapter, name)
    config, spec = CONFIGS[name]
    for k, b in enumerate(make_batches(spec, config.batch_size, seed=2, steps=4)):
        before = kernel.state_dict()
        gradients = kernel.grads(to_sample_batch(adapter, b))
        got = {name: host_array(g) for name, g in gradients.arrays.items()}
        kernel.apply(gradients)
        t = {key: torch.from_numpy(np.asarray(v)) for key, v in b.items()}
        want = REFERENCES[name](config, before, kernel.state_dict(), t, k)
        assert got.keys() == want.keys()
        for key in want:
            scale = float(np.abs(want[key]).max())
            np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5 * max(scale, 1e-3), err_msg=key)
            assert math.isfinite(scale) and scale > 0, key
