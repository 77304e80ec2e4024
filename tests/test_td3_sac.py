"""TD3 and SAC (pearl/algos/td3.py, sac.py; torch kernels in pearl/adapters/torch/td3.py, sac.py): the learn kernels
against a CleanRL-style restatement with torch.nn modules and torch.optim, the state a checkpoint holds against
the registry entry's declaration, bit-for-bit repeats keyed by (seed, update), launcher parity, and the refusals
(a discrete env, an OpenCL device) as one error line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from cli_support import run_cli
from learn_support import assert_same_params, final_learn_state, make_batches, to_sample_batch
from opencl_support import first_opencl_device

from pearl.adapters.torch import TorchAdapter
from pearl.algos import SACConfig, TD3Config, algorithm
from pearl.algos.params import init_params
from pearl.roofline import kernel_work
from pearl.envs import env_spec
from pearl.profile.format import Workload, workload_key
from pearl.rng import learn_key, normal, philox2x32
from pearl.device import HOST_DEVICE, DeviceId
from pearl.runtime.job import Job, Placement
from pearl.runtime.local import LocalLauncher
from pearl.runtime.sequential import SequentialLauncher
from pearl.types import EnvSpec

SPEC = EnvSpec("test", obs_dim=3, action_kind="continuous", action_dim=2)
SMALL = dict(hidden=(16, 12), batch_size=32, learning_rate=3e-3)
RTOL = 1e-5  # the kernels and the restatement do the same float32 maths, in a different op order at most


# ------------------------------------------------------------------------------- a CleanRL-style restatement
def _mlp(params: dict, net: str, sizes: list[int]) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        linear = torch.nn.Linear(a, b)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(params[f"{net}.{i}.weight"]))
            linear.bias.copy_(torch.from_numpy(params[f"{net}.{i}.bias"]))
        layers += [linear, torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def _dump(module: torch.nn.Sequential, net: str) -> dict[str, np.ndarray]:
    linears = [m for m in module if isinstance(m, torch.nn.Linear)]
    out = {}
    for i, linear in enumerate(linears):
        out[f"{net}.{i}.weight"] = linear.weight.detach().numpy().copy()
        out[f"{net}.{i}.bias"] = linear.bias.detach().numpy().copy()
    return out


def _polyak(target: torch.nn.Module, online: torch.nn.Module, tau: float) -> None:
    with torch.no_grad():
        for t, o in zip(target.parameters(), online.parameters()):
            t.lerp_(o, tau)


def _normals(seed: int, update: int, n: int) -> torch.Tensor:
    """The draws of update `update`, straight from Philox (not through the kernel's cached blocks)."""
    r0, r1 = philox2x32(learn_key(seed), np.arange(n, dtype=np.uint32), np.uint32(update))
    return torch.from_numpy(normal(r0, r1))


class TD3Reference:
    def __init__(self, cfg: TD3Config, params: dict, seed: int) -> None:
        nets = algorithm("td3").network_sizes(SPEC.obs_dim, SPEC.action_dim, cfg.hidden)
        self.cfg, self.seed, self.k = cfg, seed, 0
        self.actor = _mlp(params, "actor", nets["actor"])
        self.actor_t = _mlp(params, "actor_target", nets["actor"])
        self.qf = [_mlp(params, q, nets[q]) for q in ("qf1", "qf2")]
        self.qf_t = [_mlp(params, f"{q}_target", nets[q]) for q in ("qf1", "qf2")]
        self.q_opt = torch.optim.Adam([*self.qf[0].parameters(), *self.qf[1].parameters()], lr=cfg.learning_rate)
        self.a_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.learning_rate)

    def learn(self, b: dict) -> None:
        cfg, t = self.cfg, {k: torch.from_numpy(v) for k, v in b.items()}
        z = _normals(self.seed, self.k, t["action"].numel()).view_as(t["action"])
        with torch.no_grad():
            noise = (z * cfg.target_policy_noise).clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
            a2 = (torch.tanh(self.actor_t(t["next_obs"])) + noise).clamp(-1, 1)
            x2 = torch.cat([t["next_obs"], a2], 1)
            y = t["reward"] + cfg.gamma * (1 - t["terminated"]) * torch.min(self.qf_t[0](x2), self.qf_t[1](x2)).view(-1)
        x = torch.cat([t["obs"], t["action"]], 1)
        loss = sum((t["weights"] * (y - q(x).view(-1)) ** 2).mean() for q in self.qf)
        self.q_opt.zero_grad()
        loss.backward()
        self.q_opt.step()
        if (self.k + 1) % cfg.policy_delay == 0:
            actor_loss = -self.qf[0](torch.cat([t["obs"], torch.tanh(self.actor(t["obs"]))], 1)).mean()
            self.a_opt.zero_grad()
            actor_loss.backward()
            self.a_opt.step()
            for target, online in ((self.actor_t, self.actor), *zip(self.qf_t, self.qf)):
                _polyak(target, online, cfg.tau)
        self.k += 1

    def params(self) -> dict:
        out = {**_dump(self.actor, "actor"), **_dump(self.actor_t, "actor_target")}
        for i, q in enumerate(("qf1", "qf2")):
            out.update({**_dump(self.qf[i], q), **_dump(self.qf_t[i], f"{q}_target")})
        return out


class SACReference:
    def __init__(self, cfg: SACConfig, params: dict, seed: int) -> None:
        nets = algorithm("sac").network_sizes(SPEC.obs_dim, SPEC.action_dim, cfg.hidden)
        self.cfg, self.seed, self.k = cfg, seed, 0
        self.actor = _mlp(params, "actor", nets["actor"])
        self.qf = [_mlp(params, q, nets[q]) for q in ("qf1", "qf2")]
        self.qf_t = [_mlp(params, f"{q}_target", nets[q]) for q in ("qf1", "qf2")]
        self.q_opt = torch.optim.Adam([*self.qf[0].parameters(), *self.qf[1].parameters()], lr=cfg.learning_rate)
        self.a_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.learning_rate)
        self.log_alpha = torch.tensor(float(np.log(cfg.initial_alpha)), requires_grad=cfg.tune_alpha)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.learning_rate)

    def sample(self, obs: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.actor(obs).chunk(2, dim=1)
        std = log_std.clamp(-20, 2).exp()
        normal_dist = torch.distributions.Normal(mean, std)
        x = mean + std * z
        a = torch.tanh(x)
        return a, (normal_dist.log_prob(x) - torch.log(1 - a.pow(2) + 1e-6)).sum(1)

    def learn(self, b: dict) -> None:
        cfg, t = self.cfg, {k: torch.from_numpy(v) for k, v in b.items()}
        n, d = t["action"].shape
        z = _normals(self.seed, self.k, 2 * n * d).view(2, n, d)
        a_pi, log_pi = self.sample(t["obs"], z[0])
        alpha = self.log_alpha.detach().exp()
        if cfg.tune_alpha:  # else α stays at initial_alpha: SB3's ent_coef given as a number
            alpha_loss = -(self.log_alpha * (log_pi + (-d)).detach()).mean()
            self.alpha_opt.zero_grad()
            alpha_loss.backward()
            self.alpha_opt.step()
        with torch.no_grad():
            a2, log_pi2 = self.sample(t["next_obs"], z[1])
            x2 = torch.cat([t["next_obs"], a2], 1)
            q2 = torch.min(self.qf_t[0](x2), self.qf_t[1](x2)).view(-1) - alpha * log_pi2
            y = t["reward"] + cfg.gamma * (1 - t["terminated"]) * q2
        x = torch.cat([t["obs"], t["action"]], 1)
        loss = sum((t["weights"] * (y - q(x).view(-1)) ** 2).mean() for q in self.qf)
        self.q_opt.zero_grad()
        loss.backward()
        self.q_opt.step()
        x_pi = torch.cat([t["obs"], a_pi], 1)
        actor_loss = (alpha * log_pi - torch.min(self.qf[0](x_pi), self.qf[1](x_pi)).view(-1)).mean()
        self.a_opt.zero_grad()
        actor_loss.backward()
        self.a_opt.step()
        for target, online in zip(self.qf_t, self.qf):
            _polyak(target, online, cfg.tau)
        self.k += 1

    def params(self) -> dict:
        out = _dump(self.actor, "actor")
        for i, q in enumerate(("qf1", "qf2")):
            out.update({**_dump(self.qf[i], q), **_dump(self.qf_t[i], f"{q}_target")})
        return out


CASES = [(TD3Config(**SMALL, gamma=0.95, tau=0.05, policy_delay=2), TD3Reference),
         (SACConfig(**SMALL, gamma=0.95, tau=0.05), SACReference)]


def _learn_beside_the_restatement(config, reference):
    """(the kernel, its result) after 100 updates, each checked against the restatement's parameters."""
    torch.set_num_threads(1)
    params, seed = init_params(config, SPEC, seed=4), 11
    adapter = TorchAdapter("cpu")
    kernel, ref = adapter.make_learn(config, SPEC, params, seed=seed), reference(config, params, seed)
    for b in make_batches(SPEC, config.batch_size, seed=2, steps=100):
        result = kernel.learn(to_sample_batch(adapter, b))
        ref.learn(b)
    got, want = kernel.get_params(), ref.params()
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=RTOL, atol=1e-6, err_msg=name)
    moved = init_params(config, SPEC, seed=4)
    assert not np.allclose(got["actor.0.weight"], moved["actor.0.weight"])  # it trained
    return kernel, result


@pytest.mark.parametrize("config,reference", CASES, ids=["td3", "sac"])
def test_learn_matches_a_cleanrl_style_restatement_over_100_updates(config, reference) -> None:
    _learn_beside_the_restatement(config, reference)


def test_a_fixed_alpha_never_moves_and_is_the_alpha_the_losses_use() -> None:
    """tune_alpha false (SB3's numeric ent_coef, the zoo's MountainCarContinuous 0.1): the restatement with α held
    at 0.1 in its target and actor loss matches, log α and its Adam stay as they started, and the metrics say 0.1."""
    config = SACConfig(**SMALL, gamma=0.95, tau=0.05, initial_alpha=0.1, tune_alpha=False)
    kernel, result = _learn_beside_the_restatement(config, SACReference)
    state = kernel.state_dict()
    assert state["log_alpha"] == np.float32(np.log(0.1))
    assert int(state["adam.step.log_alpha"]) == 0 and not state["adam.exp_avg.log_alpha"].any()
    assert float(result.metrics["losses/alpha"]) == pytest.approx(0.1, rel=1e-6)
    tuned = TorchAdapter("cpu").make_learn(config.replace(tune_alpha=True), SPEC, init_params(config, SPEC, 4), 11)
    tuned.learn(to_sample_batch(TorchAdapter("cpu"), make_batches(SPEC, config.batch_size, seed=2, steps=1)[0]))
    assert tuned.state_dict()["log_alpha"] != state["log_alpha"]  # the same start, tuned, moves at once


# ------------------------------------------------------------------------------------ state and repeats
@pytest.mark.parametrize("algo", ["dqn", "ddpg", "td3", "sac"])
def test_the_learn_state_is_what_the_registry_entry_declares(algo) -> None:
    """The checkpoint writes the learn kernel's state_dict: every name and shape the entry declares, no more."""
    entry = algorithm(algo)
    spec = env_spec(entry.profile_env)
    config = entry.config_class(hidden=(8, 6), batch_size=4)
    state = TorchAdapter("cpu").make_learn(config, spec, init_params(config, spec, 0)).state_dict()
    assert {k: tuple(np.shape(v)) for k, v in state.items()} == entry.state_shapes(spec.obs_dim, spec.action_dim,
                                                                                    config.hidden)
    if algo == "sac":
        assert "log_alpha" in state and "adam.exp_avg.log_alpha" in state and "actor_target.0.weight" not in state
    if algo == "td3":
        assert {"actor_target.0.weight", "qf1_target.0.weight", "qf2_target.0.weight"} <= set(state)


@pytest.mark.parametrize("config", [c for c, _ in CASES], ids=["td3", "sac"])
def test_a_restored_state_trains_on_bit_for_bit(config) -> None:
    """A fresh kernel (other weights) loaded with a state after 5 updates goes on exactly as the original: the
    draws of update k depend on (seed, k) alone, and the optimisers' moments and steps come back."""
    adapter = TorchAdapter("cpu")
    batches = [to_sample_batch(adapter, b) for b in make_batches(SPEC, config.batch_size, seed=3, steps=10)]
    original = adapter.make_learn(config, SPEC, init_params(config, SPEC, 0), seed=7)
    for b in batches[:5]:
        original.learn(b)
    fresh = adapter.make_learn(config, SPEC, init_params(config, SPEC, 1), seed=7)
    fresh.load_state_dict(original.state_dict())
    for b in batches[5:]:
        original.learn(b)
        fresh.learn(b)
    assert_same_params(original.state_dict(), fresh.state_dict())


@pytest.mark.parametrize("config", [c for c, _ in CASES], ids=["td3", "sac"])
def test_the_learn_draws_follow_the_seed(config) -> None:
    adapter = TorchAdapter("cpu")
    batches = [to_sample_batch(adapter, b) for b in make_batches(SPEC, config.batch_size, seed=3, steps=4)]
    params = init_params(config, SPEC, 0)
    runs = {}
    for name, seed in (("a", 5), ("b", 5), ("other", 6)):
        kernel = adapter.make_learn(config, SPEC, params, seed=seed)
        for b in batches:
            kernel.learn(b)
        runs[name] = kernel.get_params()
    assert_same_params(runs["a"], runs["b"])
    assert not np.array_equal(runs["a"]["qf1.0.weight"], runs["other"]["qf1.0.weight"])


@pytest.mark.parametrize("config", [c for c, _ in CASES], ids=["td3", "sac"])
def test_draws_staged_for_a_captured_update_are_the_updates_own(config) -> None:
    """A CUDA graph of an update reads its draws from a buffer staged before each replay (pearl.adapters.torch.
    graphs): staged, the kernel trains bit for bit as it does drawing afresh, and its host branches (graph_key)
    are the ones its updates take: TD3's actor every second update, the Adams' flushes every 16th step."""
    from pearl.adapters.torch.nets import DENORMAL_FLUSH_INTERVAL

    adapter = TorchAdapter("cpu")
    batches = [to_sample_batch(adapter, b) for b in make_batches(SPEC, config.batch_size, seed=3, steps=34)]
    params = init_params(config, SPEC, 0)
    staged, fresh = (adapter.make_learn(config, SPEC, params, seed=5) for _ in range(2))
    keys = []
    for b in batches:
        keys.append(staged.graph_key())
        staged.stage(config.batch_size)
        staged.learn(b)
        staged.unstage()
        fresh.learn(b)
    assert_same_params(staged.state_dict(), fresh.state_dict())
    flushes = [k for k, key in enumerate(keys, 1) if key[1]]
    assert flushes == [DENORMAL_FLUSH_INTERVAL, 2 * DENORMAL_FLUSH_INTERVAL]  # the critics step every update
    if isinstance(config, TD3Config):
        assert [key[0] for key in keys] == [config.steps_actor(k) for k in range(len(batches))]
        assert [k for k, key in enumerate(keys) if key[3]] == [31]  # the actor's 16th step: update 32, k = 31


def test_staged_draws_keep_their_buffer_and_refuse_another_count() -> None:
    from pearl.adapters.torch.autograd import LearnDraws

    draws = LearnDraws(5, torch.device("cpu"))
    want = [draws.normals(k, 12) for k in (7, 8)]
    draws.stage(7, 12)
    first = draws.normals(7, 12)
    assert torch.equal(first, want[0])
    draws.stage(8, 12)  # the same buffer, refilled: the address a graph reads
    assert draws.normals(8, 12).data_ptr() == first.data_ptr() and torch.equal(first, want[1])
    with pytest.raises(RuntimeError, match="24 draws asked while 12 are staged"):
        draws.normals(8, 24)
    draws.unstage()
    assert draws.normals(8, 12).data_ptr() != first.data_ptr()


def test_td3s_delayed_actor_is_half_an_update_of_work() -> None:
    """LearnWork counts may be fractional: TD3's actor step every second update is half its passes, Adam and
    Polyak steps."""
    from pearl.roofline import _adam, _forward, _param_count, _polyak

    wl = Workload(workload_key("td3", "Tiny-v0", 2, 1, (4,)), "td3", "Tiny-v0", 2, 1, (4,), 8, 100)
    nets = algorithm("td3").network_sizes(2, 1, (4,))
    size = {net: _param_count(sizes) for net, sizes in nets.items()}
    want = (_forward(nets["actor"], 8) * 2.0 + _forward(nets["qf1"], 8) * 5.5 + _forward(nets["qf2"], 8) * 4.0
            + _adam(size["actor"]) * 0.5 + _adam(size["qf1"]) + _adam(size["qf2"])
            + _polyak(size["actor"]) * 0.5 + _polyak(size["qf1"]) * 0.5 + _polyak(size["qf2"]) * 0.5)
    assert kernel_work("learn", wl, 8) == want


@pytest.mark.parametrize("delay", [1, 3, 4])
def test_td3s_learn_work_follows_policy_delay(delay: int) -> None:
    """The actor's step, its Adam and the three Polyak steps count 1/policy_delay of an update; the workload
    of a config off the default delay carries it in its settings and its key, so a profile timed at the default
    is scaled to it rather than reused as if the work were the same."""
    from pearl.profile.format import config_workload
    from pearl.roofline import _adam, _forward, _param_count, _polyak

    spec = env_spec("Pendulum-v1")
    cfg = TD3Config(hidden=(4,), batch_size=8, policy_delay=delay)
    wl = config_workload(cfg, spec)
    assert wl.settings == (("policy_delay", delay),) and wl.key.endswith(f"-h4-policy_delay{delay}")
    nets = algorithm("td3").network_sizes(spec.obs_dim, spec.action_dim, (4,))
    size = {net: _param_count(sizes) for net, sizes in nets.items()}
    r = 1.0 / delay
    want = (_forward(nets["actor"], 8) * (1 + 2 * r) + _forward(nets["qf1"], 8) * (4 + 3 * r)
            + _forward(nets["qf2"], 8) * 4.0 + _adam(size["actor"]) * r + _adam(size["qf1"]) + _adam(size["qf2"])
            + _polyak(size["actor"]) * r + _polyak(size["qf1"]) * r + _polyak(size["qf2"]) * r)
    assert kernel_work("learn", wl, 8) == want
    default = config_workload(TD3Config(hidden=(4,), batch_size=8), spec)
    assert default.settings == () and not default.key.endswith("policy_delay2")
    fewer_actor_steps = kernel_work("learn", wl, 8).flops < kernel_work("learn", default, 8).flops
    assert fewer_actor_steps == (delay > 2)


def test_a_learn_setting_the_algorithm_lacks_is_refused() -> None:
    from pearl.errors import ConfigError

    with pytest.raises(ConfigError, match="no setting tau.*policy_delay"):
        algorithm("td3").work_of((("tau", 0.1),))
    with pytest.raises(ConfigError, match="policy_delay"):
        algorithm("td3").work_of((("policy_delay", 0),))


# ------------------------------------------------------------------------------------------ launchers
@pytest.mark.parametrize("config_class", [TD3Config, SACConfig], ids=["td3", "sac"])
def test_sequential_and_local_launchers_give_bit_identical_parameters(config_class, monkeypatch) -> None:
    cfg = config_class(total_steps=1000, learning_starts=200, n_envs=2, buffer_size=5_000, hidden=(16, 16),
                       batch_size=16, learning_rate=1e-3)
    job = Job.of(cfg, env_spec("Pendulum-v1"), Placement.single(HOST_DEVICE), seed=3, actors=2, policy_lag=1, threads=1)
    a, b = SequentialLauncher(job).run(), LocalLauncher(job).run()
    assert a.updates == b.updates == 800
    assert_same_params(a.final_params, b.final_params)
    assert sorted(e.ret for e in a.episodes) == sorted(e.ret for e in b.episodes)


def test_td3_on_opencl_gives_the_same_bits_on_the_sequential_and_local_launchers(monkeypatch) -> None:
    """TD3's OpenCL kernels (pearl/adapters/opencl/td3.py) under both launchers: the smoothing noise is keyed
    by (seed, update), so the learner's process gives what the sequential loop does."""
    cfg = TD3Config(total_steps=600, learning_starts=200, n_envs=2, buffer_size=2_000, hidden=(16, 16),
                    batch_size=16, policy_delay=3)
    job = Job.of(cfg, env_spec("Pendulum-v1"), Placement.single(DeviceId.parse(first_opencl_device())), seed=5, actors=1,
              policy_lag=1, threads=1)
    a, b = SequentialLauncher(job).run(), LocalLauncher(job).run()
    assert a.updates == b.updates == 400
    assert_same_params(a.final_params, b.final_params)


def test_a_seed_repeats_bit_for_bit_through_pearl_train(tmp_path) -> None:
    """Two runs of a seed on the default launcher end with the same learn state in their last checkpoint:
    networks, targets, every Adam's moments and step, and SAC's log α with its Adam."""
    import pearl

    config = SACConfig(learning_starts=100, n_envs=2, buffer_size=2_000, hidden=(16, 16), batch_size=16)
    states = []
    for name in ("first", "second"):
        result = pearl.train("sac", "Pendulum-v1", steps=500, seed=2, config=config, eval_episodes=1,
                             eval_every=0, actors=2, runs_dir=str(tmp_path / name), checkpoint_every=0)
        states.append(final_learn_state(result.run_dir))
    assert "log_alpha" in states[0] and float(states[0]["log_alpha"]) != 0.0  # α was tuned
    assert_same_params(states[0], states[1])


# ------------------------------------------------------------------------------------------- refusals
def test_sac_on_a_discrete_env_is_one_error_line(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "train", "--algo", "sac", "--env", "CartPole-v1")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: SAC needs a continuous action space") and "use --algo dqn" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_torch_only_algorithm_on_opencl_is_one_error_line(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "train", "--algo", "sac", "--env", "Pendulum-v1", "--device", "opencl:0:0")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: SAC has no opencl kernels") and "--device cpu or cuda:N" in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_profiler_times_nothing_of_sac_on_opencl_and_the_planner_keeps_it_off() -> None:
    from pearl.costmodel import CostModel
    from pearl.planner.build import build_problem
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.profiler import count_measurements, run_profile
    from pearl.profiler.whatif import add_what_if
    from pearl.descriptors import load_descriptor, resolve_descriptor

    ocl = first_opencl_device()
    options, labels = ProfileOptions(quick=True, algos=("sac",), devices=("cpu", ocl)), []
    profile = run_profile(options, labels.append)
    assert len(labels) == count_measurements(options)  # the progress bar's total leaves out what is skipped
    timed = {(k.device, k.kernel) for k in profile.kernels}
    assert ("cpu", "learn") in timed and not any(device == ocl for device, _ in timed)
    add_what_if(profile, load_descriptor(resolve_descriptor("intel-agilex-7-fpga")))  # an OpenCL board
    assert {k.device for k in profile.kernels} == {"cpu"}
    problem, _ = build_problem(profile, CostModel(profile), "sac", env_spec("Pendulum-v1"))
    assert [d.id for d in problem.devices] == ["cpu"]


def test_the_profiler_times_td3_on_opencl_and_the_planner_may_place_it_there() -> None:
    from pearl.costmodel import CostModel
    from pearl.planner.build import build_problem
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.profiler import run_profile
    from pearl.profiler.whatif import add_what_if
    from pearl.descriptors import load_descriptor, resolve_descriptor

    ocl = first_opencl_device()
    profile = run_profile(ProfileOptions(quick=True, algos=("td3",), devices=("cpu", ocl), env="Pendulum-v1",
                                         hidden=(32, 32), batch_size=32))
    timed = {(k.device, k.kernel) for k in profile.kernels}
    assert {(ocl, "learn"), (ocl, "act"), ("cpu", "learn")} <= timed
    add_what_if(profile, load_descriptor(resolve_descriptor("intel-agilex-7-fpga")))  # an OpenCL board: scaled
    boards = {k.device for k in profile.kernels} - {"cpu", ocl}
    assert boards
    config = TD3Config(hidden=(32, 32), batch_size=32)
    problem, _ = build_problem(profile, CostModel(profile), "td3", env_spec("Pendulum-v1"), config=config)
    assert {d.id for d in problem.devices} == {"cpu", ocl, *boards}
