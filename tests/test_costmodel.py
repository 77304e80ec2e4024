"""The cost model on synthetic profiles (no profiler, no hardware) and the roofline on hand-counted networks."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pearl.costmodel import CostModel, Estimate, PowerEstimate
from pearl.roofline import Work, kernel_work, roofline_time, transition_floats, tree_depth
from pearl.errors import ConfigError
from pearl.profile.format import (SCHEMA, DeviceEntry, KernelTiming, Profile, ProfileError, Workload, parse_profile,
                                  workload_key)

ROOT = Path(__file__).resolve().parent.parent
DQN = workload_key("dqn", "CartPole-v1", 4, 2, (64, 64))
DDPG = workload_key("ddpg", "Pendulum-v1", 3, 1, (64, 64))


def _device(id_: str, kind: str, shares: str | None = None, source: str = "measured") -> dict:
    return {"id": id_, "kind": kind, "adapter": "torch", "name": id_, "lanes": 1, "memory_bytes": 1 << 30,
            "shares": shares, "descriptor": None, "descriptor_matched": False, "source": source}


def _timing(workload: str, kernel: str, device: str, batch: int, median: float, source: str = "measured") -> dict:
    return {"workload": workload, "kernel": kernel, "device": device, "batch": batch, "median_s": median,
            "p10_s": median, "p90_s": median, "samples": 5, "source": source}


def make_profile(kernels: list[dict] = (), *, devices: list[dict] | None = None, transfers: list[dict] = (),
                 power: list[dict] = (), env_step: list[dict] = (), in_situ: list[dict] | None = None,
                 weight_sync: list[dict] | None = None, actor_step: list[dict] | None = None) -> Profile:
    """A synthetic profile, through the real parser (so it is a valid pearl.profile/1)."""
    if devices is None:
        devices = [_device("cpu", "cpu", "host-cpu"), _device("opencl:0:0", "opencl", "host-cpu"),
                   _device("cuda:0", "cuda"), _device("cuda:1", "cuda"), _device("cuda:2", "cuda"),
                   _device("fpga:0", "opencl", source="modelled")]
    workloads = [{"key": DQN, "algo": "dqn", "env": "CartPole-v1", "obs_dim": 4, "action_dim": 2,
                  "hidden": [64, 64], "batch_size": 128, "buffer_size": 50_000},
                 {"key": DDPG, "algo": "ddpg", "env": "Pendulum-v1", "obs_dim": 3, "action_dim": 1,
                  "hidden": [64, 64], "batch_size": 256, "buffer_size": 1_000_000}]
    data = {"schema": SCHEMA, "pearl_version": "0.1.0", "created": "2026-01-01T00:00:00+00:00", "mode": "quick",
            "host": {"node": "test"}, "devices": devices, "workloads": workloads, "kernels": list(kernels),
            "env_step": list(env_step), "transfers": list(transfers), "power": list(power)}
    if in_situ is not None:
        data["in_situ"] = in_situ
    if weight_sync is not None:
        data["weight_sync"] = weight_sync
    if actor_step is not None:
        data["actor_step"] = actor_step
    return parse_profile(json.loads(json.dumps(data)), "<synthetic>")


def series(batches: list[int], medians: list[float], *, kernel: str = "learn", device: str = "cpu",
           workload: str = DQN, sources: list[str] | None = None) -> list[dict]:
    sources = sources or ["measured"] * len(batches)
    return [_timing(workload, kernel, device, b, m, s) for b, m, s in zip(batches, medians, sources)]


# ---------------------------------------------------------------------------------------------- kernel_time
def test_exact_at_measured_batches():
    model = CostModel(make_profile(series([32, 64, 128, 256], [1e-3, 1.5e-3, 2.5e-3, 4.5e-3])))
    for b, m in zip([32, 64, 128, 256], [1e-3, 1.5e-3, 2.5e-3, 4.5e-3]):
        assert model.kernel_time("learn", "cpu", DQN, b) == Estimate(m, False, "measured")
    assert model.batches("learn", "cpu", DQN) == [32, 64, 128, 256]
    assert model.batches("learn", "cuda:0", DQN) == []


def test_linear_between_neighbours():
    model = CostModel(make_profile(series([10, 20, 40], [1e-3, 3e-3, 4e-3])))
    assert model.kernel_time("learn", "cpu", DQN, 15).seconds == pytest.approx(2e-3)
    assert model.kernel_time("learn", "cpu", DQN, 12).seconds == pytest.approx(1.4e-3)
    assert model.kernel_time("learn", "cpu", DQN, 30).seconds == pytest.approx(3.5e-3)
    assert not model.kernel_time("learn", "cpu", DQN, 30).extrapolated


def test_noisy_dip_is_lifted():
    # raw medians dip at batch 4 (noise); the running max lifts it to batch 2's time
    model = CostModel(make_profile(series([1, 2, 4, 8], [1.0, 3.0, 2.0, 4.0])))
    t = {b: model.kernel_time("learn", "cpu", DQN, b).seconds for b in range(1, 13)}
    assert t[4] == 3.0 and t[3] == 3.0 and t[2] == 3.0
    assert t[6] == pytest.approx(3.5)
    assert all(t[b] <= t[b + 1] for b in range(1, 12))


def test_extrapolation_above_and_below():
    model = CostModel(make_profile(series([10, 20, 40], [1e-3, 2e-3, 4e-3])))
    above = model.kernel_time("learn", "cpu", DQN, 60)  # slope of the last two: 1e-4 s per item
    assert above.extrapolated and above.seconds == pytest.approx(6e-3)
    below = model.kernel_time("learn", "cpu", DQN, 5)
    assert below == Estimate(1e-3, True, "measured")
    assert model.kernel_time("learn", "cpu", DQN, 1).seconds == 1e-3


def test_extrapolation_slope_never_negative():
    model = CostModel(make_profile(series([1, 2, 4], [1.0, 3.0, 2.0])))  # last two adjust to 3, 3: slope 0
    assert model.kernel_time("learn", "cpu", DQN, 1000) == Estimate(3.0, True, "measured")


def test_single_measured_batch_is_constant():
    model = CostModel(make_profile(series([64], [2e-3])))
    assert model.kernel_time("learn", "cpu", DQN, 64) == Estimate(2e-3, False, "measured")
    assert model.kernel_time("learn", "cpu", DQN, 8) == Estimate(2e-3, True, "measured")
    assert model.kernel_time("learn", "cpu", DQN, 4096) == Estimate(2e-3, True, "measured")


def test_bad_batch():
    model = CostModel(make_profile(series([64], [2e-3])))
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="batch"):
            model.kernel_time("learn", "cpu", DQN, bad)


def test_missing_triple_names_what_is_missing_and_what_exists():
    model = CostModel(make_profile(series([64], [1e-3]) + series([64], [2e-3], device="opencl:0:0", workload=DDPG)))
    with pytest.raises(KeyError) as excinfo:
        model.kernel_time("learn", "cuda:0", DQN, 64)
    message = excinfo.value.args[0]
    assert "'learn'" in message and "'cuda:0'" in message and DQN in message
    assert "cpu: " + DQN in message and "opencl:0:0: " + DDPG in message
    with pytest.raises(KeyError) as excinfo:
        model.kernel_time("act", "cpu", DQN, 64)
    assert "no timing of 'act' at all" in excinfo.value.args[0] and "learn" in excinfo.value.args[0]


def test_duplicate_timings_are_refused():
    with pytest.raises(ProfileError, match="repeats an earlier entry"):
        CostModel(make_profile(series([64, 64], [1e-3, 2e-3])))


def test_source_follows_the_inputs():
    model = CostModel(make_profile(series([1, 2, 4, 8], [1.0, 2.0, 3.0, 4.0],
                                          sources=["measured", "measured", "modelled", "measured"])))

    def kt(b: float) -> Estimate:
        return model.kernel_time("learn", "cpu", DQN, b)

    assert kt(1).source == kt(2).source == kt(8).source == kt(1.0).source == "measured"
    assert kt(4).source == "modelled"
    assert kt(3).source == "modelled" and kt(6).source == "modelled"  # interpolated from the modelled point
    assert kt(1000).source == "modelled"  # the slope of the last two points takes the modelled one at 4
    model2 = CostModel(make_profile(series([1, 2, 4], [1.0, 2.0, 3.0], sources=["modelled", "measured", "measured"])))
    assert model2.kernel_time("learn", "cpu", DQN, 1000).source == "measured"  # from 2 and 4, both measured
    # a measured dip lifted to a modelled point's time is modelled
    model = CostModel(make_profile(series([1, 2, 4], [1.0, 3.0, 2.0], sources=["measured", "modelled", "measured"])))
    assert model.kernel_time("learn", "cpu", DQN, 4).source == "modelled"
    # anything on a modelled (what-if) device is modelled
    model = CostModel(make_profile(series([1, 2], [1.0, 2.0], device="fpga:0")))
    assert model.kernel_time("learn", "fpga:0", DQN, 2).source == "modelled"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=8, unique=True).flatmap(
    lambda bs: st.tuples(st.just(sorted(bs)),
                         st.lists(st.floats(1e-7, 10.0), min_size=len(bs), max_size=len(bs)))))
def test_property_monotone_and_exact(grid_and_medians):
    batches, medians = grid_and_medians
    profile = Profile("0.1.0", "now", "quick", {},
                      [DeviceEntry("cpu", "cpu", "torch", "cpu", 1, 1, "measured")],
                      [Workload(DQN, "dqn", "CartPole-v1", 4, 2, (64, 64), 128, 50_000)],
                      [KernelTiming(DQN, "learn", "cpu", b, m, m, m, 1, "measured") for b, m in zip(batches, medians)])
    model = CostModel(profile)
    adjusted = [max(medians[: i + 1]) for i in range(len(medians))]
    for b, m in zip(batches, adjusted):
        assert model.kernel_time("learn", "cpu", DQN, b).seconds == m
    top = 2 * batches[-1] + 2
    fine = sorted({1, top, *range(1, top, max(1, top // 300)), *batches, *(b + 1 for b in batches),
                   *(b - 1 for b in batches if b > 1)})
    times = [model.kernel_time("learn", "cpu", DQN, b).seconds for b in fine]
    assert all(a <= b for a, b in pairwise(times))


# ---------------------------------------------------------------------------------------------- env, transfers
def test_env_step_time():
    model = CostModel(make_profile(env_step=[{"env": "CartPole-v1", "median_s": 2e-5, "p10_s": 1e-5,
                                              "p90_s": 3e-5, "samples": 9, "source": "measured"}]))
    assert model.env_step_time("CartPole-v1") == Estimate(2e-5, False, "measured")
    with pytest.raises(KeyError, match="Pendulum-v1"):
        model.env_step_time("Pendulum-v1")


TRANSFERS = [
    {"device": "cuda:0", "direction": "h2d", "latency_s": 1e-5, "bandwidth_bytes_per_s": 1e10, "source": "measured"},
    {"device": "cuda:0", "direction": "d2h", "latency_s": 2e-5, "bandwidth_bytes_per_s": 5e9, "source": "measured"},
    {"device": "cuda:1", "direction": "h2d", "latency_s": 3e-5, "bandwidth_bytes_per_s": 2e10, "source": "measured"},
    {"device": "cuda:1", "direction": "d2h", "latency_s": 4e-5, "bandwidth_bytes_per_s": 4e9, "source": "modelled"},
]


def test_transfer_times():
    model = CostModel(make_profile(transfers=TRANSFERS))
    mb = 1_000_000
    assert model.transfer_time("cpu", "cuda:0", mb) == Estimate(pytest.approx(1e-5 + 1e-4), False, "measured")
    assert model.transfer_time("cuda:0", "cpu", mb).seconds == pytest.approx(2e-5 + 2e-4)
    # device -> device goes through the host: d2h of the source, then h2d of the destination
    assert model.transfer_time("cuda:0", "cuda:1", mb).seconds == pytest.approx((2e-5 + 2e-4) + (3e-5 + 5e-5))
    assert model.transfer_time("cuda:0", "cuda:1", mb).source == "measured"
    assert model.transfer_time("cuda:1", "cuda:0", mb).seconds == pytest.approx((4e-5 + 2.5e-4) + (1e-5 + 1e-4))
    assert model.transfer_time("cuda:1", "cuda:0", mb).source == "modelled"  # the modelled d2h of cuda:1
    assert model.transfer_time("cpu", "cuda:0", 0).seconds == pytest.approx(1e-5)  # latency only


POCL_TRANSFERS = [
    {"device": "opencl:0:0", "direction": "h2d", "latency_s": 1e-4, "bandwidth_bytes_per_s": 2e9, "source": "measured"},
    {"device": "opencl:0:0", "direction": "d2h", "latency_s": 5e-5, "bandwidth_bytes_per_s": 5e8, "source": "measured"},
]


def test_only_the_same_device_is_free_and_host_memory_devices_pay_their_copies():
    model = CostModel(make_profile(transfers=TRANSFERS + POCL_TRANSFERS))
    for d in ("cuda:0", "cpu", "opencl:0:0"):
        assert model.transfer_time(d, d, 10**9) == Estimate(0.0, False, "measured")
    # PoCL shares "host-cpu" with cpu, but its buffers are read and written through its runtime
    assert model.transfer_time("opencl:0:0", "cpu", 10**6).seconds == pytest.approx(5e-5 + 2e-3)
    assert model.transfer_time("cpu", "opencl:0:0", 10**6).seconds == pytest.approx(1e-4 + 5e-4)
    # six arrays pay six latencies and the bytes once
    assert model.transfer_time("opencl:0:0", "cpu", 10**6, arrays=6).seconds == pytest.approx(6 * 5e-5 + 2e-3)
    # to a GPU: PoCL's d2h, then the GPU's h2d
    assert model.transfer_time("opencl:0:0", "cuda:0", 10**6).seconds == pytest.approx((5e-5 + 2e-3) + (1e-5 + 1e-4))
    with pytest.raises(ValueError, match="arrays"):
        model.transfer_time("cpu", "cuda:0", 10, arrays=0)
    assert model.resource("opencl:0:0") == model.resource("cpu") == "host-cpu"
    assert model.resource("cuda:0") == "cuda:0"
    assert model.devices() == ["cpu", "opencl:0:0", "cuda:0", "cuda:1", "cuda:2", "fpga:0"]
    assert model.workloads() == [DQN, DDPG]


def test_missing_transfer_names_the_device():
    model = CostModel(make_profile(transfers=TRANSFERS))
    with pytest.raises(KeyError, match="h2d transfer figure of device 'cuda:2'"):
        model.transfer_time("cpu", "cuda:2", 100)
    with pytest.raises(KeyError, match="d2h transfer figure of device 'cuda:2'"):
        model.transfer_time("cuda:2", "cuda:0", 100)
    with pytest.raises(KeyError, match="no device 'tpu:0'"):
        model.transfer_time("cpu", "tpu:0", 100)


# ---------------------------------------------------------------------------------------------- power
def test_power():
    power = [{"device": "cpu", "idle_w": 20.0, "busy_w": 60.0, "source": "measured", "method": "rapl"},
             {"device": "cuda:0", "idle_w": 30.0, "busy_w": 250.0, "source": "modelled", "method": "descriptor"},
             {"device": "fpga:0", "idle_w": 40.0, "busy_w": 70.0, "source": "measured", "method": "nvml"}]
    model = CostModel(make_profile(power=power))
    assert model.power("cpu") == PowerEstimate(20.0, 60.0, "measured", "rapl")
    assert model.power("cuda:0") == PowerEstimate(30.0, 250.0, "modelled", "descriptor")
    assert model.power("fpga:0").source == "modelled"  # a what-if device's figures are never measured
    with pytest.raises(KeyError, match="no power figures of device 'cuda:1'"):
        model.power("cuda:1")


# ---------------------------------------------------------------------------------------------- roofline
def _tiny(algo: str, buffer_size: int = 100) -> Workload:
    return Workload(workload_key(algo, "Tiny-v0", 2, 2, (3,)), algo, "Tiny-v0", 2, 2, (3,), 4, buffer_size)


def test_kernel_work_dqn_by_hand():
    wl = _tiny("dqn")
    # Q-net [2, 3, 2]: weights W = 2*3 + 3*2 = 12, params P = (6 + 3) + (6 + 2) = 17,
    # activations read + written A = (2 + 3) + (3 + 2) = 10, layers L = 2
    # act on 5 observations: 2 flops per multiply-add, 5 items x 12 = 120; bytes 4 * (17 + 5 * 10)
    assert kernel_work("act", wl, 5) == Work(120, 268, 2)
    # learn on 4: target fwd + online fwd + backward (2 fwd) = 4 fwd: 4 * 2*4*12 = 384 flops; Adam 10 * 17 = 170
    # bytes: 4 fwd = 4 * 4 * (17 + 4*10) = 912; Adam 28 * 17 = 476 (reads θ g m v, writes θ m v)
    # launches: 4 fwd x 2 layers + 1 Adam
    assert kernel_work("learn", wl, 4) == Work(554, 1388, 9)
    # a transition: obs 2 + next obs 2 + action index 1 + reward + done = 7 floats
    assert transition_floats(wl) == 7
    assert kernel_work("replay_insert", wl, 3) == Work(0, 4 * 3 * 7, 1)
    # capacity 100: 16 < 100 <= 256 -> depth 2; per item per level: 16 floats read, 15 adds
    # sample: gather 7 floats read + 7 written, descent 2 * 16 read = 46 floats per item
    assert kernel_work("replay_sample", wl, 3) == Work(90, 4 * 3 * 46, 2)
    # priority update: |δ| read + leaf written, then 2 levels of (16 read + 1 written) = 36 floats per item
    assert kernel_work("priority_update", wl, 3) == Work(90, 4 * 3 * 36, 3)


def test_kernel_work_ddpg_by_hand():
    wl = _tiny("ddpg")
    # actor [2, 3, 2]: W 12, P 17, A 10; critic [2+2, 3, 1]: W 4*3 + 3*1 = 15, P (12 + 3) + (3 + 1) = 19,
    # A (4 + 3) + (3 + 1) = 11
    assert kernel_work("act", wl, 1) == Work(24, 4 * (17 + 10), 2)
    # learn on 1: actor fwd 4x (target, online, backward = 2), critic fwd 6x (target, online, backward = 2,
    # online again in the actor update, input-backward = 1): flops 4*24 + 6*30 = 276
    # two Adams 10 * (17 + 19) = 360, Polyak 3 * 36 = 108: total 744
    # bytes: 4 * 4*(17 + 10) = 432, 6 * 4*(19 + 11) = 720, Adam 28 * 36 = 1008, Polyak 12 * 36 = 432: 2592
    # launches: 4*2 + 6*2 + 2 Adam + 2 Polyak = 24
    assert kernel_work("learn", wl, 1) == Work(744, 2592, 24)
    assert transition_floats(wl) == 2 + 2 + 2 + 2  # the action is action_dim floats


def test_kernel_work_edges():
    assert [tree_depth(c) for c in (1, 16, 17, 256, 257, 2**24)] == [1, 1, 2, 2, 3, 6]
    with pytest.raises(ValueError, match="no roofline"):
        kernel_work("env_step", _tiny("dqn"), 1)
    with pytest.raises(KeyError, match="unknown kernel"):
        kernel_work("backprop", _tiny("dqn"), 1)
    with pytest.raises(ConfigError, match="unknown algorithm 'ppo'; pearl knows: dqn, ddpg"):
        kernel_work("act", Workload("x", "ppo", "Tiny-v0", 2, 2, (3,), 4, 100), 1)


def test_roofline_picks_the_binding_term():
    figures = {"launch_latency_s": 1e-5, "fp32_peak_flops": 1e9, "memory_bandwidth_bytes_per_s": 1e9}
    assert roofline_time(Work(2e6, 1e3, 2), figures) == pytest.approx(2e-5 + 2e-3)  # compute-bound
    assert roofline_time(Work(10, 5e6, 1), figures) == pytest.approx(1e-5 + 5e-3)  # memory-bound
    assert roofline_time(Work(0, 0, 3), figures) == pytest.approx(3e-5)  # launch-bound
    with pytest.raises(KeyError, match="fp32_peak_flops"):
        roofline_time(Work(1, 1, 1), {"launch_latency_s": 0.0, "memory_bandwidth_bytes_per_s": 1.0})


# ---------------------------------------------------------------------------------------------- imports, script
def test_import_loads_no_torch_or_pyopencl():
    code = ("import sys, pearl.costmodel, pearl.roofline; "
            "print(sorted(m for m in ('torch', 'pyopencl') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_holdout_script(tmp_path):
    script = ROOT / "benchmarks" / "costmodel_holdout.py"
    missing = subprocess.run([sys.executable, str(script), str(tmp_path / "none.json")], check=False, cwd=ROOT,
                             capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stdout.startswith("error: ")
    assert len(missing.stdout.strip().splitlines()) == 1
    profile = make_profile(series([1, 2, 4, 8], [1.0, 2.0, 3.0, 5.0]) + series([8, 16], [1.0, 2.0], kernel="act"))
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile.to_dict()))
    run = subprocess.run([sys.executable, str(script), str(path)], check=False, cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    # held out: 2 (predicted 2 from 1 and 4: 1 + 2 * 1/3 = 5/3), 4 (from 2 and 8: 2 + 3 * 2/6 = 3)
    assert "learn" in run.stdout and "act " not in run.stdout
    assert "overall median error 8.3% over 2 held-out points" in run.stdout


# ---------------------------------------------------------------------------------------------- in situ
def _in_situ(iteration_s: float, device: str = "cpu", prioritized: bool = False) -> dict:
    return {"workload": DQN, "device": device, "iteration_s": iteration_s, "iterations": 100, "inserts": 2,
            "insert_rows": 1, "batch": 128, "prioritized": prioritized, "source": "measured"}


def _learner_kernels(device: str = "cpu") -> list[dict]:
    return [_timing(DQN, "replay_insert", device, 1, 10e-6), _timing(DQN, "replay_sample", device, 128, 30e-6),
            _timing(DQN, "learn", device, 128, 500e-6), _timing(DQN, "priority_update", device, 128, 40e-6)]


def test_in_situ_factor_is_the_iteration_over_its_kernels() -> None:
    # bare: 2 × 10 + 30 + 500 = 550 µs (uniform replay: no priority update); in situ 660 µs → 1.2
    model = CostModel(make_profile(_learner_kernels(), in_situ=[_in_situ(660e-6)]))
    assert model.in_situ_factor("cpu", DQN) == pytest.approx(1.2)
    prioritized = CostModel(make_profile(_learner_kernels(), in_situ=[_in_situ(590e-6 * 1.5, prioritized=True)]))
    assert prioritized.in_situ_factor("cpu", DQN) == pytest.approx(1.5)  # 550 + 40 µs bare
    assert CostModel(make_profile(_learner_kernels())).in_situ_factor("cpu", DQN) == 1.0  # older profiles
    assert model.in_situ_factor("opencl:0:0", DQN) == 1.0  # no in-situ timing of that device


def test_first_iteration_factor_is_a_segments_first_iteration_over_the_chains() -> None:
    """A segment's first iteration (after a pause) ÷ the in-situ iteration; never below 1 (a faster first
    iteration is the host's noise); 1 without the figure, and the nearest workload's ratio for one not measured."""
    from pearl.profile.format import Workload

    slow = CostModel(make_profile(_learner_kernels(), in_situ=[{**_in_situ(600e-6), "first_iteration_s": 900e-6}]))
    assert slow.first_iteration_factor("cpu", DQN) == pytest.approx(1.5)
    fast = CostModel(make_profile(_learner_kernels(), in_situ=[{**_in_situ(600e-6), "first_iteration_s": 500e-6}]))
    assert fast.first_iteration_factor("cpu", DQN) == 1.0
    assert CostModel(make_profile(_learner_kernels(), in_situ=[_in_situ(600e-6)])).first_iteration_factor(
        "cpu", DQN) == 1.0  # older profiles, and figures folded from a run
    assert slow.first_iteration_factor("opencl:0:0", DQN) == 1.0  # no in-situ timing of that device
    wider = Workload("dqn-CartPole-v1-o4-a2-h512x512", "dqn", "CartPole-v1", 4, 2, (512, 512), 128, 50_000)
    assert slow.first_iteration_factor("cpu", wider) == pytest.approx(1.5)  # a ratio: the nearest's as it is
    with pytest.raises(ProfileError, match=r"in_situ\[0\]\.first_iteration_s"):
        make_profile(_learner_kernels(), in_situ=[{**_in_situ(600e-6), "first_iteration_s": -1.0}])


def test_segment_loop_time_is_the_hosts_figure_wherever_learn_runs() -> None:
    """The learner's loop a segment beyond its kernels is host work: the host's figure for the workload (the nearest
    measured workload's for another), for every learn device; none in older profiles, and none where the learn
    device's iteration was folded from a run (its figure holds the run's loop)."""
    from pearl.profile.format import Workload

    looped = [{**_in_situ(600e-6), "segment_s": 80e-6}, _in_situ(300e-6, device="opencl:0:0")]
    model = CostModel(make_profile(_learner_kernels() + _learner_kernels("opencl:0:0"), in_situ=looped))
    assert model.segment_loop_time("cpu", DQN) == pytest.approx(80e-6)
    assert model.segment_loop_time("opencl:0:0", DQN) == pytest.approx(80e-6)  # the host's loop drives it
    wider = Workload("dqn-CartPole-v1-o4-a2-h512x512", "dqn", "CartPole-v1", 4, 2, (512, 512), 128, 50_000)
    assert model.segment_loop_time("cpu", wider) == pytest.approx(80e-6)
    assert CostModel(make_profile(_learner_kernels(), in_situ=[_in_situ(600e-6)])).segment_loop_time(
        "cpu", DQN) == 0.0
    folded = CostModel(make_profile(_learner_kernels(), in_situ=[{**_in_situ(600e-6), "segment_s": 80e-6,
                                                                   "source": "in-situ"}]))
    assert folded.segment_loop_time("cpu", DQN) == 0.0
    with pytest.raises(ProfileError, match=r"in_situ\[0\]\.segment_s"):
        make_profile(_learner_kernels(), in_situ=[{**_in_situ(600e-6), "segment_s": -1.0}])


def test_in_situ_entries_are_validated() -> None:
    with pytest.raises(ProfileError, match=r"in_situ\[0\]\.prioritized"):
        make_profile(_learner_kernels(), in_situ=[{**_in_situ(1e-3), "prioritized": "yes"}])
    with pytest.raises(ProfileError, match=r"in_situ\[0\]\.device"):
        make_profile(_learner_kernels(), in_situ=[_in_situ(1e-3, device="cuda:9")])
    with pytest.raises(ProfileError, match="repeats"):
        make_profile(_learner_kernels(), in_situ=[_in_situ(1e-3), _in_situ(2e-3)])


# ---------------------------------------------------------------------------------------------- weight sync
def _weight_sync(publish: float, load: float, device: str = "cpu") -> dict:
    return {"workload": DQN, "device": device, "publish_s": publish, "load_s": load, "samples": 50,
            "source": "measured"}


def test_weight_sync_time_gives_both_halves_with_their_source() -> None:
    model = CostModel(make_profile(weight_sync=[_weight_sync(20e-6, 50e-6), _weight_sync(3e-4, 4e-4, "fpga:0")]))
    publish, load = model.weight_sync_time("cpu", DQN)
    assert (publish.seconds, load.seconds, publish.source) == (20e-6, 50e-6, "measured")
    publish, load = model.weight_sync_time("fpga:0", DQN)
    assert (publish.seconds, load.source) == (3e-4, "modelled")  # a modelled device makes its figures modelled
    assert model.weight_sync_time("opencl:0:0", DQN) is None  # no figure of that device
    assert model.weight_sync_time("cpu", DDPG) is None  # nor of that workload
    assert CostModel(make_profile()).weight_sync_time("cpu", DQN) is None  # older profiles


def test_weight_sync_entries_are_validated() -> None:
    with pytest.raises(ProfileError, match=r"weight_sync\[0\]\.load_s"):
        make_profile(weight_sync=[{**_weight_sync(1e-5, 1e-5), "load_s": -1.0}])
    with pytest.raises(ProfileError, match=r"weight_sync\[0\]\.device"):
        make_profile(weight_sync=[_weight_sync(1e-5, 1e-5, device="cuda:9")])
    with pytest.raises(ProfileError, match="repeats"):
        make_profile(weight_sync=[_weight_sync(1e-5, 1e-5), _weight_sync(2e-5, 1e-5)])
    with pytest.raises(ProfileError, match=r"'weight_sync' must be a list"):
        make_profile(weight_sync={"cpu": 1})


# ---------------------------------------------------------------------------------------------- actor step
def _actor_step(envs: int, step_s: float, workload: str = DQN, device: str = "cpu") -> dict:
    return {"workload": workload, "device": device, "envs": envs, "step_s": step_s, "samples": 100,
            "source": "measured"}


def test_actor_env_time_is_the_actor_step_less_act_between_and_beyond_the_measured_counts() -> None:
    """act at 1, 8 and 32 envs: 40, 50 and 60 µs; the actor's step at those counts 100, 170 and 380 µs: its
    env side 60, 120 and 320 µs. Between counts linear in e, above them proportional to e, below them the
    smallest count's; a workload on another env, or an older profile, has none."""
    from pearl.profile.format import Workload

    acts = series([1, 8, 32], [40e-6, 50e-6, 60e-6], kernel="act")
    steps = [_actor_step(1, 100e-6), _actor_step(8, 170e-6), _actor_step(32, 380e-6)]
    model = CostModel(make_profile(acts, actor_step=steps))
    w = next(w for w in model.profile.workloads if w.key == DQN)
    assert model.actor_env_time(w, 1).seconds == pytest.approx(60e-6)
    assert model.actor_env_time(w, 4).seconds == pytest.approx(60e-6 + 60e-6 * 3 / 7)
    assert model.actor_env_time(w, 16).seconds == pytest.approx(120e-6 + 200e-6 * 8 / 24)
    assert model.actor_env_time(w, 64).seconds == pytest.approx(640e-6)
    assert model.actor_env_time(w, 1).source == "measured"
    other = Workload("dqn-CartPole-v1-o4-a2-h128x128", "dqn", "CartPole-v1", 4, 2, (128, 128), 128, 50_000)
    assert model.actor_env_time(other, 8).seconds == pytest.approx(120e-6)  # the same env's actor
    ddpg = next(w for w in model.profile.workloads if w.key == DDPG)
    assert model.actor_env_time(ddpg, 8) is None  # no actor step on Pendulum
    assert CostModel(make_profile(acts)).actor_env_time(w, 8) is None  # older profiles
    with pytest.raises(ValueError, match="envs"):
        model.actor_env_time(w, 0)


def test_actor_env_time_is_at_least_a_tenth_of_the_actor_step() -> None:
    """act timed apart slower than the whole step (noise): the env side is not taken as nothing."""
    model = CostModel(make_profile(series([1], [90e-6], kernel="act"), actor_step=[_actor_step(1, 80e-6)]))
    w = next(w for w in model.profile.workloads if w.key == DQN)
    assert model.actor_env_time(w, 1).seconds == pytest.approx(8e-6)


def test_actor_step_entries_are_validated() -> None:
    with pytest.raises(ProfileError, match=r"actor_step\[0\]\.envs"):
        make_profile(actor_step=[_actor_step(0, 1e-4)])
    with pytest.raises(ProfileError, match=r"actor_step\[0\]\.step_s"):
        make_profile(actor_step=[_actor_step(1, 0.0)])
    with pytest.raises(ProfileError, match=r"actor_step\[0\]\.device"):
        make_profile(actor_step=[_actor_step(1, 1e-4, device="cuda:9")])
    with pytest.raises(ProfileError, match="repeats"):
        make_profile(actor_step=[_actor_step(1, 1e-4), _actor_step(1, 2e-4)])


# ---------------------------------------------------------------------------------------------- threads
def test_kernel_time_at_threads_scales_the_one_thread_figure_by_the_measured_ratio():
    """learn timed at 2 threads at batch 128 (0.6 × its 1-thread figure there): at 2 threads every batch is
    the 1-thread figure × 0.6; a count the profile lacks, and a kernel it times at 1 thread only, answer the
    1-thread figure."""
    two = {**_timing(DQN, "learn", "cpu", 128, 0.006), "threads": 2}
    model = CostModel(make_profile([*series([64, 128, 256], [0.005, 0.010, 0.020]), two,
                                    *series([128], [0.001], kernel="replay_sample")]))
    assert model.thread_counts("learn", "cpu", DQN) == [1, 2]
    assert model.thread_counts("replay_sample", "cpu", DQN) == [1]
    assert model.kernel_time("learn", "cpu", DQN, 128).seconds == pytest.approx(0.010)
    assert model.kernel_time("learn", "cpu", DQN, 128, threads=2).seconds == pytest.approx(0.006)
    assert model.kernel_time("learn", "cpu", DQN, 256, threads=2).seconds == pytest.approx(0.012)
    assert model.kernel_time("learn", "cpu", DQN, 128, threads=3).seconds == pytest.approx(0.010)
    assert model.kernel_time("replay_sample", "cpu", DQN, 128, threads=2).seconds == pytest.approx(0.001)
    assert model.batches("learn", "cpu", DQN) == [64, 128, 256]  # the multi-thread figure is not a grid point


def test_the_thread_factor_is_the_ratio_to_the_one_thread_figure_timed_in_the_same_blocks():
    """A 2-thread figure that carries its one-thread figure from the same blocks (the machine was slower then:
    16 ms at 1 thread against the grid's 10 ms) scales by 0.012 / 0.016 = 0.75, not by 0.012 / 0.010; the one
    beside the stand-in likewise; the field survives the file and a non-positive one is refused."""
    two = {**_timing(DQN, "learn", "cpu", 128, 0.012), "threads": 2, "one_thread_s": 0.016}
    near = {**_timing(DQN, "learn", "cpu", 128, 0.020), "threads": 2, "beside": 0.5, "one_thread_s": 0.016}
    ones = series([64, 128, 256], [0.005, 0.010, 0.020])
    model = CostModel(make_profile([*ones, two, near]))
    assert model.kernel_time("learn", "cpu", DQN, 128, threads=2).seconds == pytest.approx(0.0075)
    assert model.kernel_time("learn", "cpu", DQN, 256, threads=2).seconds == pytest.approx(0.015)
    assert model.kernel_time("learn", "cpu", DQN, 128, threads=2, beside=0.5).seconds == pytest.approx(0.0125)
    assert model.kernel_time("learn", "cpu", DQN, 128, threads=1).seconds == pytest.approx(0.010)
    again = parse_profile(json.loads(json.dumps(make_profile([*ones, two, near]).to_dict())), "<again>")
    assert [k.one_thread_s for k in again.kernels if k.threads == 2] == [0.016, 0.016]
    assert [k.one_thread_s for k in again.kernels if k.threads == 1] == [None] * 3
    with pytest.raises(ProfileError, match="one_thread_s"):
        make_profile([*ones, {**two, "one_thread_s": 0.0}])


def test_learn_beside_the_actors_moves_toward_the_figure_timed_beside_a_stand_in():
    """learn at 2 threads timed alone (0.6 × the 1-thread figure) and beside a stand-in actor busy half of each
    update (1.3 ×): with the actors busy a share u of each update the ratio is 0.6 + 0.7·min(1, u/0.5), at every
    batch; no share, 1 thread, or a profile with no figure beside answer the figure alone."""
    two = {**_timing(DQN, "learn", "cpu", 128, 0.006), "threads": 2}
    near = {**_timing(DQN, "learn", "cpu", 128, 0.013), "threads": 2, "beside": 0.5}
    ones = series([64, 128, 256], [0.005, 0.010, 0.020])
    model = CostModel(make_profile([*ones, two, near]))
    assert model.thread_counts("learn", "cpu", DQN) == [1, 2]
    assert model.kernel_time("learn", "cpu", DQN, 128, threads=2).seconds == pytest.approx(0.006)
    assert model.kernel_time("learn", "cpu", DQN, 128, threads=2, beside=0.5).seconds == pytest.approx(0.013)
    assert model.kernel_time("learn", "cpu", DQN, 128, threads=2, beside=0.9).seconds == pytest.approx(0.013)
    assert model.kernel_time("learn", "cpu", DQN, 128, threads=2, beside=0.25).seconds == pytest.approx(0.0095)
    assert model.kernel_time("learn", "cpu", DQN, 256, threads=2, beside=0.5).seconds == pytest.approx(0.026)
    assert model.kernel_time("learn", "cpu", DQN, 128, threads=1, beside=0.5).seconds == pytest.approx(0.010)
    alone = CostModel(make_profile([*ones, two]))
    assert alone.kernel_time("learn", "cpu", DQN, 128, threads=2, beside=0.5).seconds == pytest.approx(0.006)
    again = parse_profile(json.loads(json.dumps(make_profile([*ones, two, near]).to_dict())), "<again>")
    assert [(k.threads, k.beside) for k in again.kernels if k.threads == 2] == [(2, 0.0), (2, 0.5)]
    with pytest.raises(ProfileError, match="beside"):
        make_profile([*ones, two, {**near, "beside": 1.5}])


def test_threads_field_is_optional_and_written():
    """An older profile's timings (no `threads`) read as 1 thread; a timing's threads round-trips; the same
    (workload, kernel, device, batch) at two thread counts is two entries, not a duplicate."""
    profile = make_profile([*series([128], [0.010]), {**_timing(DQN, "learn", "cpu", 128, 0.006), "threads": 2}])
    assert [k.threads for k in profile.kernels] == [1, 2]
    again = parse_profile(json.loads(json.dumps(profile.to_dict())), "<again>")
    assert [k.threads for k in again.kernels] == [1, 2]
    with pytest.raises(ProfileError, match="threads"):
        make_profile([{**_timing(DQN, "learn", "cpu", 128, 0.006), "threads": 0}])
