"""Eager and captured (CUDA graphs) as two implementations of a kernel: the profile times each way a device runs
act and learn, the cost model reads the faster at each batch and names it, the plan records the way of each
placed kernel, training runs it that way, and a plan whose way the device cannot run is one error line.

This machine's devices run every kernel one way (eager: captures are for `cuda:N`), so the planner's side is
tested on a profile measured here with captured rows added at a stated factor of the eager ones: the planner is
a pure function of those numbers. On a GPU, tests/test_cuda.py checks that the profiler times both ways there."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from cli_support import run_cli

from pearl.adapters.base import DeviceInfo
from pearl.algos import DQNConfig
from pearl.costmodel import CostModel
from pearl.device import HOST, DeviceKind
from pearl.errors import ConfigError, DeviceError
from pearl.kernels import GRAPHS_SWITCH, Implementation
from pearl.planner.make import make_plan
from pearl.planner.plan import PlanFileError, load_plan, save_plan
from pearl.profile.format import ProfileError, load_profile, save_profile
from pearl.profiler.options import ProfileOptions

CAPTURED, EAGER = Implementation.CAPTURED, Implementation.EAGER
WORKLOAD = dict(algos=("dqn",), env="CartPole-v1", hidden=(256, 256), batch_size=64, devices=("cpu",))
#: two updates an env step: learn bounds the plan, so learn's way decides the plan's speed
LEARN_BOUND = DQNConfig(hidden=(256, 256), batch_size=64, train_freq=1, gradient_steps=2)


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Path:
    from pearl.profiler.profiler import run_profile

    path = tmp_path_factory.mktemp("profile") / "profile.json"
    save_profile(run_profile(ProfileOptions(quick=True, **WORKLOAD)), path)
    return path


def _with_captured(source: Path, out: Path, factor: float, kernels: tuple[str, ...] = ("learn",)) -> Path:
    """The profile with `kernels` on cpu also timed captured, at `factor` × their eager figures."""
    profile = load_profile(source)
    profile.kernels += [dataclasses.replace(k, implementation=CAPTURED.value, median_s=k.median_s * factor,
                                            p10_s=k.p10_s * factor, p90_s=k.p90_s * factor)
                        for k in profile.kernels
                        if k.kernel in kernels and k.threads == 1 and k.beside == 0 and k.precision == "fp32"]
    save_profile(profile, out)
    return out


def _plan(path: Path, objective: str = "throughput"):
    return make_plan(path, "dqn", "CartPole-v1", objective, config=LEARN_BOUND)


# ------------------------------------------------------------------------------------------ the profile
def test_a_device_that_runs_one_way_is_timed_one_way_and_a_gpu_is_timed_both_ways(measured, monkeypatch) -> None:
    from pearl.profiler.profiler import captures

    assert {k.implementation for k in load_profile(measured).kernels} == {EAGER.value}
    gpu = DeviceInfo("cuda:0", DeviceKind.GPU, "torch", "a GPU", 1, 1 << 30)
    assert captures(gpu) and not captures(DeviceInfo(HOST, DeviceKind.CPU, "torch", "a CPU", 2, 1 << 30))
    monkeypatch.setenv(GRAPHS_SWITCH, "0")  # the switch that runs every kernel eagerly times them one way
    assert not captures(gpu)


def test_the_way_survives_the_profile_file_an_older_profile_reads_eager_and_a_bad_way_is_refused(
        measured, tmp_path) -> None:
    path = _with_captured(measured, tmp_path / "both.json", 0.5)
    assert {k.implementation for k in load_profile(path).kernels if k.kernel == "learn"} == {"eager", "captured"}
    data = json.loads(measured.read_text())
    for k in data["kernels"]:
        k.pop("implementation")  # as an older pearl wrote it: every timing eager
    older = tmp_path / "older.json"
    older.write_text(json.dumps(data))
    assert {k.implementation for k in load_profile(older).kernels} == {"eager"}
    bad = json.loads(path.read_text())
    bad["kernels"][0]["implementation"] = "compiled"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ProfileError, match=r"kernels\[0\]\.implementation.*'captured'.*'eager'|implementation"):
        load_profile(tmp_path / "bad.json")


def test_two_timings_of_one_way_are_ambiguous_but_one_of_each_way_is_not(measured, tmp_path) -> None:
    both = load_profile(_with_captured(measured, tmp_path / "both.json", 0.5))
    CostModel(both)  # the same batch timed eager and captured: two implementations, no ambiguity
    learn = next(k for k in both.kernels if k.kernel == "learn" and k.implementation == "captured")
    both.kernels.append(learn)
    with pytest.raises(ValueError, match=r"more than once at batch size\(s\) \[\d+\] \(captured\)"):
        CostModel(both)


# ------------------------------------------------------------------------------------------ the cost model
@pytest.mark.parametrize("factor, way", [(0.5, CAPTURED), (2.0, EAGER), (1.0, EAGER)])
def test_the_cost_model_reads_the_faster_way_and_names_it_a_tie_keeping_eager(measured, tmp_path, factor,
                                                                             way) -> None:
    profile = load_profile(measured)
    key = profile.workloads[0].key
    eager = CostModel(profile).kernel_time("learn", HOST, key, 64)
    assert eager.implementation is None  # one way timed: nothing to name
    both = CostModel(load_profile(_with_captured(measured, tmp_path / "both.json", factor)))
    got = both.kernel_time("learn", HOST, key, 64)
    assert got.implementation == way.value
    assert got.seconds == pytest.approx(eager.seconds * min(factor, 1.0))
    assert both.kernel_time("act", HOST, key, 1).implementation is None  # act was timed one way


# ------------------------------------------------------------------------------------------ the plan
def test_the_plan_places_the_faster_way_and_records_it(measured, tmp_path) -> None:
    eager_only = _plan(measured)
    assert eager_only.implementations == {}
    faster = _plan(_with_captured(measured, tmp_path / "fast.json", 0.25, ("learn", "act")))
    assert faster.implementations == {"act": "captured", "learn": "captured"}
    assert faster.kernels["learn"] < eager_only.kernels["learn"]
    assert faster.predicted["env_steps_per_s"] > eager_only.predicted["env_steps_per_s"]
    slower = _plan(_with_captured(measured, tmp_path / "slow.json", 4.0))
    assert slower.implementations == {"learn": "eager"}
    assert slower.kernels["learn"] == pytest.approx(eager_only.kernels["learn"])
    again = load_plan(save_plan(faster, tmp_path / "plan.json"))
    assert again.implementations == faster.implementations and again.implementation("learn") is CAPTURED
    assert again.implementation("replay_sample") is None


def test_a_plan_file_with_a_bad_implementations_field_is_refused(measured, tmp_path) -> None:
    data = _plan(measured).to_dict()
    for bad in ({"learn": "compiled"}, {"evaluate": "eager"}, ["learn"]):
        (tmp_path / "bad.json").write_text(json.dumps({**data, "implementations": bad}))
        with pytest.raises(PlanFileError, match="field 'implementations'"):
            load_plan(tmp_path / "bad.json")


def test_pearl_plan_says_which_way_each_kernel_runs(capsys, measured, tmp_path) -> None:
    both = _with_captured(measured, tmp_path / "both.json", 0.25)
    code, out, _ = run_cli(capsys, "plan", "--profile", str(both), "--algo", "dqn", "--env", "CartPole-v1",
                           "--set", "hidden=256,256", "--set", "batch_size=64", "--set", "gradient_steps=2",
                           "--out", str(tmp_path / "plan.json"))
    assert code in (0, None)
    assert "  implementations: learn captured on cpu (the faster of eager and captured as CUDA graphs" in out


# ------------------------------------------------------------------------------------------ adapters and runs
def test_an_adapter_makes_a_kernel_the_way_it_is_asked_and_refuses_a_way_it_cannot_run() -> None:
    from pearl.adapters import open_adapter
    from pearl.algos import preset
    from pearl.algos.params import init_params
    from pearl.envs import env_spec

    adapter, config, spec = open_adapter(HOST, 1), preset("dqn", "CartPole-v1"), env_spec("CartPole-v1")
    params = init_params(config, spec, seed=0)
    for make in (lambda way: adapter.make_learn(config, spec, params, implementation=way),
                 lambda way: adapter.make_act(config, spec, params, seed=0, implementation=way)):
        assert make(None).implementation is EAGER and make(EAGER).implementation is EAGER
        assert make("eager").implementation is EAGER
        with pytest.raises(DeviceError, match=r"^cpu: dqn's (learn|act) cannot run captured here \(it runs eager"):
            make(CAPTURED)
        with pytest.raises(ConfigError, match="unknown kernel implementation 'compiled'"):
            make("compiled")


def test_train_refuses_a_plan_whose_way_the_device_cannot_run(capsys, measured, tmp_path) -> None:
    plan = _plan(_with_captured(measured, tmp_path / "both.json", 0.25))
    assert plan.implementations == {"learn": "captured"}  # as if made where cpu captured: it does not here
    path = save_plan(plan, tmp_path / "plan.json")
    code, _, err = run_cli(capsys, "train", "--plan", str(path), "--steps", "300", "--runs-dir",
                           str(tmp_path / "runs"))
    assert code == 2 and err.splitlines() == [
        "error: the plan runs learn captured on cpu, which runs it eager only; plan again for this machine"]


def test_a_plan_that_runs_its_kernels_eagerly_trains_and_its_record_says_so(measured, tmp_path) -> None:
    import pearl

    plan = _plan(_with_captured(measured, tmp_path / "slow.json", 4.0))
    path = save_plan(plan, tmp_path / "plan.json")
    result = pearl.train(plan=str(path), steps=600, runs_dir=str(tmp_path / "runs"),
                         settings={"learning_starts": "400"})
    assert result.updates > 0
    summary = json.loads((Path(result.run_dir) / "summary.json").read_text())
    assert summary["plan_check"]["implementations"] == {"learn": "eager"}
    assert summary["implementations"] == {"act": "eager", "learn": "eager"}  # what ran: cpu's own way is eager


def test_calibration_folds_a_run_into_the_rows_of_the_way_it_ran(measured, tmp_path) -> None:
    """A run's act, learn and in-situ figures replace the profile's rows of the way the run ran them; the rows
    of the other way stay as measured."""
    import pearl
    from pearl.profile.calibrate import calibrate, read_run

    both = load_profile(_with_captured(measured, tmp_path / "both.json", 0.5, ("learn", "act")))
    result = pearl.train(algo="dqn", env="CartPole-v1", steps=600, runs_dir=str(tmp_path / "runs"),
                         settings={"learning_starts": "400", "hidden": "256,256", "batch_size": "64"})
    key = both.workloads[0].key

    def rows(profile, way: str) -> dict:
        return {(k.kernel, k.batch): (k.median_s, k.source) for k in profile.kernels
                if k.workload == key and k.kernel in ("act", "learn") and k.implementation == way and k.threads == 1
                and k.beside == 0 and k.precision == "fp32"}

    eager_run = calibrate(both, read_run(result.run_dir))
    assert rows(eager_run, "captured") == rows(both, "captured")
    assert rows(eager_run, "eager")[("learn", 64)][1] == "in-situ"
    assert next(t for t in eager_run.in_situ if t.workload == key).implementation == "eager"
    summary_path = Path(result.run_dir) / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary_path.write_text(json.dumps({**summary, "implementations": {"act": "captured", "learn": "captured"}}))
    captured_run = calibrate(both, read_run(result.run_dir))  # as the record of a run on a GPU that captured
    assert rows(captured_run, "eager") == rows(both, "eager")
    assert rows(captured_run, "captured")[("learn", 64)][1] == "in-situ"
    assert next(t for t in captured_run.in_situ if t.workload == key).implementation == "captured"
