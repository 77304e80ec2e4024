"""CUDA: the same kernels on cuda:0 as on cpu. Skipped cleanly on machines without an NVIDIA GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pearl
from pearl.adapters.torch import TorchAdapter
from pearl.algos import DDPGConfig, DQNConfig, SACConfig, TD3Config
from pearl.algos.params import init_params
from pearl.types import EnvSpec, SampleBatch, TransitionBatch

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")]


def batch_for(adapter: TorchAdapter, spec: EnvSpec, size: int, rng: np.random.Generator) -> SampleBatch:
    action = (rng.integers(0, spec.action_dim, size) if spec.discrete
              else rng.uniform(-1, 1, (size, spec.action_dim)).astype(np.float32))
    arrays = [rng.normal(size=(size, spec.obs_dim)).astype(np.float32), action,
              rng.normal(size=size).astype(np.float32), rng.normal(size=(size, spec.obs_dim)).astype(np.float32),
              (rng.random(size) < 0.1).astype(np.float32), np.ones(size, dtype=np.float32)]
    return SampleBatch(np.arange(size), *[adapter.from_host(a) for a in arrays], adapter.device_id)


CONTINUOUS = {"ddpg": DDPGConfig, "td3": TD3Config, "sac": SACConfig}


@pytest.mark.parametrize("algo", ["dqn", "ddpg", "td3", "sac"])
def test_learn_on_cuda_matches_cpu(algo: str) -> None:
    if algo == "dqn":
        spec, config = EnvSpec("t", 4, "discrete", 2), DQNConfig(hidden=(64, 64), batch_size=64)
    else:
        spec = EnvSpec("t", 3, "continuous", 1, (-2.0,), (2.0,))
        config = CONTINUOUS[algo](hidden=(64, 64), batch_size=64)
    params = init_params(config, spec, seed=0)
    results = []
    for device in ("cpu", "cuda:0"):
        adapter = TorchAdapter(device)
        learner = adapter.make_learn(config, spec, params)
        rng = np.random.default_rng(1)
        for _ in range(5):
            learner.learn(batch_for(adapter, spec, config.batch_size, rng))
        results.append(learner.get_params())
    for name in results[0]:
        np.testing.assert_allclose(results[1][name], results[0][name], rtol=1e-3, atol=1e-4, err_msg=name)


def test_ornstein_uhlenbeck_noise_on_cuda_is_the_cpus_bit_for_bit() -> None:
    """The process runs on the host from the same Philox draws whatever the torch device: the same state bits
    on cuda:0 as on cpu (the actions differ only by μ(s), to float32 rounding)."""
    spec = EnvSpec("t", 3, "continuous", 2, (-2.0, -2.0), (2.0, 2.0))
    config = DDPGConfig(hidden=(64, 64), noise_type="ornstein-uhlenbeck")
    params = init_params(config, spec, seed=0)
    acts = [TorchAdapter(device).make_act(config, spec, params, seed=4) for device in ("cpu", "cuda:0")]
    obs = np.random.default_rng(2).normal(size=(8, 3)).astype(np.float32)
    for t in range(50):
        got = [act.act(obs, 0.5) for act in acts]
        np.testing.assert_allclose(got[1], got[0], atol=1e-5)
        np.testing.assert_array_equal(acts[1].noise_state(), acts[0].noise_state())
        if t == 25:
            for act in acts:
                act.new_episodes(np.arange(8) % 2 == 0)


def test_replay_on_cuda_stays_on_the_device() -> None:
    spec = EnvSpec("t", 4, "discrete", 2)
    replay = TorchAdapter("cuda:0").make_replay(DQNConfig(buffer_size=100, batch_size=32), spec, seed=0)
    n = np.arange(64, dtype=np.float32)
    replay.insert(TransitionBatch(np.repeat(n[:, None], 4, 1), n.astype(np.int64) % 2, n, np.repeat(n[:, None], 4, 1),
                                  np.zeros(64, dtype=np.float32)))
    batch = replay.sample(32, 0.4)
    assert batch.obs.is_cuda and batch.device == "cuda:0"
    np.testing.assert_array_equal(batch.obs[:, 0].cpu().numpy(), batch.reward.cpu().numpy())


def test_short_training_on_cuda(tmp_path) -> None:
    config = pearl.preset("dqn", "CartPole-v1").replace(learning_starts=200, train_freq=50, gradient_steps=10)
    result = pearl.train("dqn", "CartPole-v1", device="cuda:0", steps=600, seed=0, eval_episodes=1, config=config,
                         runs_dir=str(tmp_path))
    assert result.device == "cuda:0" and result.updates == 80


def test_the_power_window_loads_the_gpu_it_measures() -> None:
    """The busy window runs large products back to back, not a host-bound small update: the board draws more
    than idle (an H200 idles near 75 W and draws hundreds under such a load)."""
    from pearl.device import DeviceId
    from pearl.profiler.power import nvml

    adapter = TorchAdapter("cuda:0")
    load = adapter.saturating_load()
    assert load is not None and TorchAdapter("cpu").saturating_load() is None
    load()
    reading = nvml(DeviceId.parse("cuda:0").index[0], load, 2.0)
    if reading is None:
        pytest.skip("NVML cannot read this GPU's power")
    assert reading.busy_w > reading.idle_w * 1.2, reading


def test_a_gpu_run_reads_its_boards_energy_counter(tmp_path) -> None:
    from pearl.adapters.energy import NvmlCounter, counter_for
    from pearl.device import DeviceId

    counter = counter_for(DeviceId.parse("cuda:0"))
    if not isinstance(counter, NvmlCounter):
        pytest.skip(f"no NVML energy counter here: {counter}")
    result = pearl.train("dqn", "CartPole-v1", steps=3_000, device="cuda:0", seed=0, eval_episodes=0,
                         runs_dir=str(tmp_path), settings={"learning_starts": 1_000})
    energy = result.energy
    assert energy["source"] in ("measured", "partly measured") and "nvml" in energy["method"]
    assert energy["joules_by_resource"]["cuda:0"] > 0 and energy["power_w"] > 0


def _captured_pair(algo: str, precision: str):
    """The same learn kernel twice on cuda:0 from the same parameters: as the adapter builds it (captured as CUDA
    graphs) and eager (the kernel class itself)."""
    from pearl.adapters.torch.ddpg import DDPGLearn
    from pearl.adapters.torch.dqn import DQNLearn
    from pearl.adapters.torch.graphs import CapturedLearn
    from pearl.adapters.torch.sac import SACLearn
    from pearl.adapters.torch.td3 import TD3Learn
    from pearl.algos.params import network_sizes
    from pearl.kernels import Precision

    if algo == "dqn":
        spec = EnvSpec("t", 4, "discrete", 2)
        config = DQNConfig(hidden=(64, 64), batch_size=64, target_update_interval=5)
    else:
        spec = EnvSpec("t", 3, "continuous", 1, (-2.0,), (2.0,))
        config = CONTINUOUS[algo](hidden=(64, 64), batch_size=64)
    params = init_params(config, spec, seed=0)
    adapter, device = TorchAdapter("cuda:0"), torch.device("cuda:0")
    graphed = adapter.make_learn(config, spec, params, seed=5, precision=precision)
    assert isinstance(graphed, CapturedLearn)
    sizes, mode = network_sizes(config, spec), Precision.parse(precision)
    eager = {"dqn": lambda: DQNLearn(config, sizes["q"], params, device, mode),
             "ddpg": lambda: DDPGLearn(config, sizes["actor"], sizes["critic"], params, device, mode),
             "td3": lambda: TD3Learn(config, sizes, params, device, 5, mode),
             "sac": lambda: SACLearn(config, sizes, params, device, 5, mode)}[algo]()
    return adapter, spec, graphed, eager


@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
@pytest.mark.parametrize("algo", ["dqn", "ddpg", "td3", "sac"])
def test_a_captured_update_is_the_eager_update(algo: str, precision: str) -> None:
    """40 updates through CUDA graphs (DQN's target copies every 5, TD3's actor every second update and the Adams'
    flushes every 16 steps are graphs of their own: DQN has 3 keys in these updates, DDPG 2) against the eager
    kernel on the same batches and draws: the same kernels in the same order, so the same parameters, optimiser
    state, counters and TD errors."""
    adapter, spec, graphed, eager = _captured_pair(algo, precision)
    rng = np.random.default_rng(3)
    for _ in range(40):
        batch = batch_for(adapter, spec, 64, rng)
        a, b = graphed.learn(batch), eager.learn(batch)
    assert graphed.captured and len(graphed.graphs) >= 2
    if algo in ("dqn", "ddpg"):
        assert len(graphed.graphs) == {"dqn": 3, "ddpg": 2}[algo]
    torch.testing.assert_close(a.td_errors, b.td_errors, rtol=0, atol=1e-6)
    ours, theirs = graphed.state_dict(), eager.state_dict()
    assert set(ours) == set(theirs) and int(ours["updates"]) == 40
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=0, atol=1e-6, err_msg=name)


def _filled_replays(monkeypatch, spec: EnvSpec, prioritized: bool) -> tuple:
    """Two replays on cuda:0 from one seed holding the same 300 transitions: its gather captured, and eager."""
    config = DQNConfig(buffer_size=500, batch_size=64, prioritized=prioritized)
    captured = TorchAdapter("cuda:0").make_replay(config, spec, seed=7)
    monkeypatch.setenv("PEARL_CUDA_GRAPHS", "0")
    eager = TorchAdapter("cuda:0").make_replay(config, spec, seed=7)
    monkeypatch.delenv("PEARL_CUDA_GRAPHS")
    assert captured.captured is not None and eager.captured is None
    rng, n = np.random.default_rng(0), 300
    action = (rng.integers(0, spec.action_dim, n) if spec.discrete
              else rng.uniform(-1, 1, (n, spec.action_dim)).astype(np.float32))
    transitions = TransitionBatch(rng.normal(size=(n, spec.obs_dim)).astype(np.float32), action,
                                  rng.normal(size=n).astype(np.float32),
                                  rng.normal(size=(n, spec.obs_dim)).astype(np.float32),
                                  (rng.random(n) < 0.1).astype(np.float32))
    for replay in (captured, eager):
        replay.insert(transitions)
    return captured, eager


@pytest.mark.parametrize("prioritized", [False, True])
def test_a_captured_gather_draws_the_eager_gathers_batches(monkeypatch, prioritized: bool) -> None:
    """Replay's gather as CUDA graphs (one per batch size): the same slots, rows and weights as the eager gather
    from the same seed, through priority updates; once a size is captured its batches are fixed buffers, the same
    tensors draw after draw."""
    from pearl.adapters.torch.graphs import WARMUP
    from pearl.types import PriorityUpdate

    captured, eager = _filled_replays(monkeypatch, EnvSpec("t", 4, "discrete", 2), prioritized)
    rng, seen = np.random.default_rng(1), {}
    for draw in range(4 * (WARMUP + 2)):
        rows = 32 if draw % 2 else 64
        a, b = captured.sample(rows, 0.4), eager.sample(rows, 0.4)
        np.testing.assert_array_equal(a.indices, b.indices)
        for name in ("obs", "action", "reward", "next_obs", "terminated", "weights"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name
        assert a.fixed == (draw // 2 >= WARMUP) and not b.fixed
        if a.fixed:
            assert seen.setdefault(rows, a.obs) is a.obs
        td = torch.as_tensor(rng.normal(size=rows).astype(np.float32), device="cuda:0")
        for replay, batch in ((captured, a), (eager, b)):
            replay.update_priorities(PriorityUpdate(batch.indices, td))
    assert set(captured.captured.sizes) == {32, 64} and not captured.captured.failed


@pytest.mark.parametrize("algo", ["dqn", "td3"])
def test_a_captured_update_reads_a_captured_replays_batches_where_they_are(monkeypatch, algo: str) -> None:
    """A captured learn fed by a captured replay adopts the replay's fixed buffers as its static batch (no copy)
    and stays the eager update on the eager replay's batches; a batch from elsewhere afterwards turns it to
    buffers of its own, for good, and it is still the eager update."""
    adapter, spec, graphed, eager = _captured_pair(algo, "fp32")
    replay, eager_replay = _filled_replays(monkeypatch, spec, prioritized=False)
    for _ in range(20):
        fixed = replay.sample(64, 0.4)
        a, b = graphed.learn(fixed), eager.learn(eager_replay.sample(64, 0.4))
    assert fixed.fixed and graphed.static[64] is fixed and graphed.captured
    rng = np.random.default_rng(3)
    for _ in range(6):
        batch = batch_for(adapter, spec, 64, rng)
        a, b = graphed.learn(batch), eager.learn(batch)
    assert 64 in graphed.own and not graphed.static[64].fixed and graphed.captured
    fixed = replay.sample(64, 0.4)
    a, b = graphed.learn(fixed), eager.learn(eager_replay.sample(64, 0.4))
    assert graphed.static[64].obs is not fixed.obs
    torch.testing.assert_close(a.td_errors, b.td_errors, rtol=0, atol=1e-6)
    ours, theirs = graphed.state_dict(), eager.state_dict()
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=0, atol=1e-6, err_msg=name)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second GPU")
def test_graphs_on_a_second_gpu_run_there_whatever_device_is_current(monkeypatch) -> None:
    """On cuda:1 while cuda:0 is the current device: the captured gather and update are the eager ones there."""
    spec, config = EnvSpec("t", 4, "discrete", 2), DQNConfig(hidden=(64, 64), batch_size=64, buffer_size=500)
    params = init_params(config, spec, seed=0)
    torch.cuda.set_device(0)
    sides = []
    for graphs in ("1", "0"):
        monkeypatch.setenv("PEARL_CUDA_GRAPHS", graphs)
        adapter = TorchAdapter("cuda:1")
        sides.append((adapter.make_replay(config, spec, seed=3), adapter.make_learn(config, spec, params)))
    monkeypatch.delenv("PEARL_CUDA_GRAPHS")
    rng, n = np.random.default_rng(0), 300
    transitions = TransitionBatch(rng.normal(size=(n, 4)).astype(np.float32), rng.integers(0, 2, n),
                                  rng.normal(size=n).astype(np.float32), rng.normal(size=(n, 4)).astype(np.float32),
                                  np.zeros(n, dtype=np.float32))
    for replay, _ in sides:
        replay.insert(transitions)
    for _ in range(12):
        results = [learn.learn(replay.sample(64, 0.4)) for replay, learn in sides]
    assert sides[0][0].captured.sizes and sides[0][1].captured and results[0].td_errors.device.index == 1
    torch.testing.assert_close(results[0].td_errors, results[1].td_errors, rtol=0, atol=1e-6)


def test_an_update_that_cannot_be_captured_runs_eagerly_and_says_so() -> None:
    from pearl.adapters.torch.dqn import DQNLearn
    from pearl.adapters.torch.graphs import WARMUP, CapturedLearn
    from pearl.algos.params import network_sizes

    class Waiting(DQNLearn):
        """DQN whose update reads a figure back to the host, which a graph cannot hold."""

        def learn(self, batch):
            result = super().learn(batch)
            float(result.td_errors.sum())
            return result

    spec, config = EnvSpec("t", 4, "discrete", 2), DQNConfig(hidden=(64, 64), batch_size=64)
    params, device = init_params(config, spec, seed=0), torch.device("cuda:0")
    lines: list[str] = []
    kernel = CapturedLearn(Waiting(config, network_sizes(config, spec)["q"], params, device), device, lines.append)
    adapter, rng = TorchAdapter("cuda:0"), np.random.default_rng(0)
    for _ in range(WARMUP + 3):
        kernel.learn(batch_for(adapter, spec, 64, rng))
    assert kernel.failed and not kernel.captured and kernel.updates == WARMUP + 3
    assert len(lines) == 1 and lines[0].startswith("cuda:0: the Waiting update could not be captured as a CUDA graph")


@pytest.mark.parametrize("algo", ["dqn", "ddpg", "sac"])
def test_a_captured_act_is_the_eager_act_and_follows_the_weights(algo: str) -> None:
    """Act's forward pass as CUDA graphs (one per batch size): the same actions as the forward run eagerly, at
    two batch sizes, before and after a weight sync that overwrites the network in place."""
    spec = EnvSpec("t", 4, "discrete", 2) if algo == "dqn" else EnvSpec("t", 3, "continuous", 1, (-2.0,), (2.0,))
    config = {"dqn": DQNConfig, **CONTINUOUS}[algo](hidden=(64, 64), batch_size=64)
    adapter = TorchAdapter("cuda:0")
    graphed, eager = (adapter.make_act(config, spec, init_params(config, spec, seed=0), seed=1) for _ in range(2))
    eager.graphs = None
    assert graphed.graphs is not None
    rng = np.random.default_rng(0)
    for step in range(12):
        if step == 8:
            for kernel in (graphed, eager):
                kernel.set_params(init_params(config, spec, seed=2))
        obs = rng.normal(size=(8 if step % 2 else 16, spec.obs_dim)).astype(np.float32)
        np.testing.assert_allclose(graphed.act(obs, 0.0), eager.act(obs, 0.0), rtol=0, atol=1e-6)
    assert set(graphed.graphs.graphs) == {8, 16} and not graphed.graphs.failed


def test_the_switch_runs_everything_eagerly(monkeypatch) -> None:
    from pearl.adapters.torch.graphs import CapturedLearn

    monkeypatch.setenv("PEARL_CUDA_GRAPHS", "0")
    spec, config = EnvSpec("t", 4, "discrete", 2), DQNConfig(hidden=(64, 64), batch_size=64)
    adapter, params = TorchAdapter("cuda:0"), init_params(config, spec, seed=0)
    assert not isinstance(adapter.make_learn(config, spec, params), CapturedLearn)
    assert adapter.make_act(config, spec, params, seed=0).graphs is None


def test_a_cuda_kernel_runs_captured_unless_asked_to_run_eagerly() -> None:
    from pearl.adapters.torch.graphs import CapturedLearn
    from pearl.kernels import Implementation

    spec, config = EnvSpec("t", 4, "discrete", 2), DQNConfig(hidden=(64, 64), batch_size=64)
    adapter, params = TorchAdapter("cuda:0"), init_params(config, spec, seed=0)
    learn, act = adapter.make_learn(config, spec, params), adapter.make_act(config, spec, params, seed=0)
    assert isinstance(learn, CapturedLearn) and learn.implementation is Implementation.CAPTURED
    assert act.graphs is not None and act.implementation is Implementation.CAPTURED
    learn = adapter.make_learn(config, spec, params, implementation=Implementation.EAGER)
    act = adapter.make_act(config, spec, params, seed=0, implementation="eager")
    assert not isinstance(learn, CapturedLearn) and learn.implementation is Implementation.EAGER
    assert act.graphs is None and act.implementation is Implementation.EAGER


def test_the_profiler_times_act_and_learn_both_ways_on_a_gpu_and_the_plan_records_its_choice(tmp_path) -> None:
    """On cuda:0, act and learn are timed captured and eager at every grid point, the in-situ iteration says it
    ran learn captured (the device's own way), the progress count holds the extra points, and a plan that
    places act or learn on the GPU records the faster way of each."""
    from pearl.planner.make import make_plan
    from pearl.profile.format import save_profile
    from pearl.profiler import profiler
    from pearl.profiler.options import ProfileOptions

    options = ProfileOptions(quick=True, algos=("dqn",), env="CartPole-v1", hidden=(64, 64), batch_size=64,
                             devices=("cpu", "cuda:0"))
    calls: list[str] = []
    profile = profiler.run_profile(options, progress=calls.append)
    assert len(calls) == profiler.count_measurements(options)
    for kernel in ("act", "learn"):
        ways: dict[str, set[int]] = {}
        for k in profile.kernels:
            if (k.kernel, k.device, k.threads, k.precision) == (kernel, "cuda:0", 1, "fp32"):
                ways.setdefault(k.implementation, set()).add(k.batch)
        assert set(ways) == {"eager", "captured"} and ways["eager"] == ways["captured"], kernel
        assert {k.implementation for k in profile.kernels if k.kernel == kernel and k.device == "cpu"} == {"eager"}
    assert next(t for t in profile.in_situ if t.device == "cuda:0").implementation == "captured"
    path = save_profile(profile, tmp_path / "profile.json")
    plan = make_plan(path, "dqn", "CartPole-v1", "throughput",
                     config=DQNConfig(hidden=(64, 64), batch_size=64))
    on_gpu = {k for k in ("act", "learn") if plan.mapping[k] == "cuda:0"}
    assert set(plan.implementations) == on_gpu
    assert all(w in ("eager", "captured") for w in plan.implementations.values())


def test_the_profiler_times_a_gpu_kernel_by_the_devices_clock_too() -> None:
    """CUDA events frame each timed call: a captured update's device time is there, and within its wall time."""
    from pearl.profiler.timing import Point, measure_interleaved

    spec, config = EnvSpec("t", 4, "discrete", 2), DQNConfig(hidden=(256, 256), batch_size=64)
    adapter = TorchAdapter("cuda:0")
    learn = adapter.make_learn(config, spec, init_params(config, spec, seed=0))
    batch = batch_for(adapter, spec, 64, np.random.default_rng(0))
    [stats] = measure_interleaved([Point(lambda: learn.learn(batch), adapter.synchronize,
                                         clock=adapter.device_clock())], rounds=2, min_time=0.2)
    assert stats.device_s is not None and 0 < stats.device_s <= stats.median_s * 1.05
    assert TorchAdapter("cpu").device_clock() is None
