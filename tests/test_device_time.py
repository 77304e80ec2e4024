"""A GPU's load by its own clock: the profiler times each kernel by the device's clock where the adapter has
one (CUDA events), the cost model gives each figure the share of its wall time the device is busy, and the
planner's load row of a device counts that share while the roles' rows count the wall time (the ILP against a
brute-force oracle with those shares: tests/test_planner_ilp.py).

This machine has no GPU; the profiler's side is tested with a clock that reads a known time, and the planner's
on a profile measured here whose learn rows carry a stated device time. On a GPU, tests/test_cuda.py checks
that the events read a captured update's time below its wall time."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_costmodel import DQN, _timing, make_profile

from pearl.adapters.base import DeviceClock
from pearl.algos import DQNConfig
from pearl.costmodel import CostModel
from pearl.planner.make import make_plan
from pearl.profile.format import ProfileError, load_profile, parse_profile, save_profile
from pearl.profiler.options import ProfileOptions
from pearl.profiler.timing import Point, measure_interleaved

LEARN_BOUND = DQNConfig(hidden=(256, 256), batch_size=64, train_freq=1, gradient_steps=2)


class Ticks(DeviceClock):
    """A device clock that reads a set time for every call (the device's side of the call, as a GPU's events
    would report it); it counts its marks, so a test sees it framed each timed call."""

    def __init__(self, seconds: float) -> None:
        self.each, self.marks = seconds, 0

    def start(self) -> None:
        self.marks += 1

    def stop(self) -> None:
        self.marks += 1

    def seconds(self) -> float:
        return self.each


def test_a_point_timed_by_its_devices_clock_reports_that_median_beside_its_wall_time() -> None:
    clock = Ticks(2e-6)
    stats = measure_interleaved([Point(lambda: sum(range(200)), lambda: None, clock=clock),
                                 Point(lambda: sum(range(200)), lambda: None)], rounds=2, min_time=0.01,
                                min_samples=6)
    timed, plain = stats
    assert timed.device_s == 2e-6 and plain.device_s is None
    assert timed.median_s > 0 and clock.marks >= 2 * timed.samples  # every timed call (and the warm-ups) framed


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Path:
    from pearl.profiler.profiler import run_profile

    path = tmp_path_factory.mktemp("profile") / "profile.json"
    save_profile(run_profile(ProfileOptions(quick=True, algos=("dqn",), env="CartPole-v1", hidden=(256, 256),
                                            batch_size=64, devices=("cpu",))), path)
    return path


def _with_device_time(source: Path, out: Path, share: float) -> Path:
    profile = load_profile(source)
    profile.kernels = [dataclasses.replace(k, device_s=k.median_s * share) if k.kernel == "learn" else k
                       for k in profile.kernels]
    save_profile(profile, out)
    return out


def test_the_host_is_timed_by_wall_time_only_and_device_time_survives_the_profile_file(measured, tmp_path) -> None:
    assert all(k.device_s is None for k in load_profile(measured).kernels)  # the host has no clock of its own
    path = _with_device_time(measured, tmp_path / "shared.json", 0.25)
    learn = [k for k in load_profile(path).kernels if k.kernel == "learn"]
    assert learn and all(k.device_s == pytest.approx(k.median_s * 0.25) for k in learn)
    data = json.loads(path.read_text())
    data["kernels"][0]["device_s"] = -1.0
    with pytest.raises(ProfileError, match="device_s"):
        parse_profile(data, "<bad>")


def test_the_cost_model_gives_each_figure_its_device_busy_share_from_the_nearest_timed_batch() -> None:
    timings = [{**_timing(DQN, "learn", "cuda:0", 32, 1e-3), "device_s": 2e-4},
               {**_timing(DQN, "learn", "cuda:0", 128, 2e-3), "device_s": 1e-3},
               {**_timing(DQN, "learn", "cuda:0", 512, 4e-3), "device_s": 8e-3},  # a clock over the wall: 1
               _timing(DQN, "act", "cuda:0", 1, 1e-4)]
    model = CostModel(make_profile(timings))
    assert model.kernel_time("learn", "cuda:0", DQN, 32).device_share == pytest.approx(0.2)
    assert model.kernel_time("learn", "cuda:0", DQN, 100).device_share == pytest.approx(0.5)  # nearer 128
    assert model.kernel_time("learn", "cuda:0", DQN, 600).device_share == 1.0
    assert model.kernel_time("act", "cuda:0", DQN, 8).device_share is None


def test_a_device_busy_for_part_of_its_wall_time_lightens_its_load_row_and_not_its_role(measured,
                                                                                       tmp_path) -> None:
    from pearl.envs import env_spec
    from pearl.planner.build import build_problem
    from pearl.planner.ilp import evaluate

    whole = load_profile(measured)
    part = load_profile(_with_device_time(measured, tmp_path / "shared.json", 0.25))
    spec = env_spec("CartPole-v1")
    problems = [build_problem(p, CostModel(p), "dqn", spec, config=LEARN_BOUND)[0] for p in (whole, part)]
    assert problems[0].device_share == {} and problems[1].device_share[("learn", "cpu")] == pytest.approx(0.25)
    option = problems[0].actor_options()[0]
    placement = dict.fromkeys(("replay_insert", "replay_sample", "priority_update", "learn", "act"), "cpu")
    (p0, e0, _), (p1, e1, _) = (evaluate(p, placement, option) for p in problems)
    assert e1 < e0 and p1 <= p0  # less busy on the resource; the learner's role still takes learn's wall time
    plan = make_plan(tmp_path / "shared.json", "dqn", "CartPole-v1", "throughput", config=LEARN_BOUND)
    assert plan.predicted["period_s"] >= plan.kernels["learn"]  # learn's whole wall time bounds its role
