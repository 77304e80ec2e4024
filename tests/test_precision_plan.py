"""Precision as a placement choice, from the profile to the run: the profiler times learn at bf16-mixed where
the device does it in hardware and records why not elsewhere; the cost model reads learn at one precision; the
planner plans fp32, bf16-mixed or the better of the two (ties keeping fp32) and says what the other would give;
plan files and run records carry the choice; bad requests are one error line; and a seed gives the same bits at
bf16-mixed on every launcher.

This machine may lack bf16 units (then the profiler times no bf16 learn), so the planner's side is tested on a
profile measured here whose bf16 learn rows are the fp32 ones scaled by a stated factor: the planner is a pure
function of those numbers. The profiler's own bf16 timing is tested with the hardware verdict set to "fast
enough", since the verdict is what the machine decides, not the profiler."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from cli_support import run_cli
from learn_support import assert_same_params

from pearl.algos import DQNConfig
from pearl.costmodel import CostModel
from pearl.device import HOST, HOST_DEVICE
from pearl.envs import env_spec
from pearl.errors import ConfigError
from pearl.kernels import Precision
from pearl.planner.make import make_plan
from pearl.planner.plan import load_plan, save_plan
from pearl.profile.format import PrecisionProblem, load_profile, save_profile
from pearl.profiler.options import ProfileOptions
from pearl.runtime.job import Job, Placement
from pearl.runtime.local import LocalLauncher
from pearl.runtime.sequential import SequentialLauncher

BF16 = Precision.BF16_MIXED
#: DQN CartPole's preset shapes, on `cpu` alone
WORKLOAD = dict(algos=("dqn",), env="CartPole-v1", hidden=(256, 256), batch_size=64, devices=("cpu",))


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Path:
    """A quick profile of `cpu` for WORKLOAD, as this machine measures it (bf16 timed or not, as it can)."""
    from pearl.profiler.profiler import run_profile

    path = tmp_path_factory.mktemp("profile") / "profile.json"
    save_profile(run_profile(ProfileOptions(quick=True, **WORKLOAD)), path)
    return path


def _with_bf16(source: Path, out: Path, factor: float) -> Path:
    """The profile with learn at bf16-mixed on cpu timed at `factor` × its fp32 learn (any bf16 rows measured
    here replaced), and no recorded bf16 problem."""
    profile = load_profile(source)
    fp32 = [k for k in profile.kernels if k.precision == "fp32"]
    profile.kernels = fp32 + [dataclasses.replace(k, precision=BF16.value, median_s=k.median_s * factor,
                                                  p10_s=k.p10_s * factor, p90_s=k.p90_s * factor,
                                                  one_thread_s=None if k.one_thread_s is None else
                                                  k.one_thread_s * factor)
                              for k in fp32 if k.kernel == "learn" and k.threads == 1 and k.beside == 0]
    profile.precision_problems = []
    save_profile(profile, out)
    return out


def _without_bf16(source: Path, out: Path, reason: str = "") -> Path:
    profile = load_profile(source)
    profile.kernels = [k for k in profile.kernels if k.precision == "fp32"]
    profile.precision_problems = [PrecisionProblem(HOST, BF16.value, reason)] if reason else []
    save_profile(profile, out)
    return out


#: two updates an env step: learn bounds the plan, so its speed at each precision decides the plan's
LEARN_BOUND = DQNConfig(hidden=(256, 256), batch_size=64, train_freq=1, gradient_steps=2)


def _plan(path: Path, precision: str, objective: str = "throughput"):
    return make_plan(path, "dqn", "CartPole-v1", objective, config=LEARN_BOUND, precision=precision)


# ------------------------------------------------------------------------------------------ profile and model
def test_the_profile_says_for_each_device_whether_learn_was_timed_at_bf16_and_why_not(measured) -> None:
    profile = load_profile(measured)
    timed = profile.precisions(HOST, profile.workloads[0].key)
    reason = profile.precision_problem(HOST, BF16.value)
    assert "fp32" in timed
    assert (BF16.value in timed) != bool(reason)  # either timed, or the reason it was not
    if reason:
        assert "bf16 products run at" in reason


def test_where_the_device_does_bf16_in_hardware_the_profiler_times_learn_at_both_precisions(monkeypatch) -> None:
    from pearl.profiler import profiler

    monkeypatch.setattr(profiler, "precision_problem", lambda device, precision: "")  # the machine's verdict
    options = ProfileOptions(quick=True, algos=("dqn",), env="CartPole-v1", hidden=(16, 16), batch_size=16,
                             devices=("cpu",))
    calls: list[str] = []
    profile = profiler.run_profile(options, progress=calls.append)
    learn = {(k.precision, k.batch): k for k in profile.kernels if k.kernel == "learn" and k.threads == 1}
    batches = {b for p, b in learn if p == "fp32"}
    assert batches and {b for p, b in learn if p == BF16.value} == batches
    assert all(k.median_s > 0 and k.source == "measured" for k in learn.values())
    assert profile.precision_problems == [] and len(calls) == profiler.count_measurements(options)
    # at the host's lanes as threads too, each precision beside its own one-thread figure: bf16's products
    # scale otherwise than float32's, so the planner's T-thread bf16 learn is measured, not float32's ratio
    lanes = next(d.lanes for d in profile.devices if d.id == HOST)
    threaded = {(k.precision, k.beside > 0) for k in profile.kernels if k.kernel == "learn" and k.threads > 1
                and k.one_thread_s}
    assert threaded == ({("fp32", False), (BF16.value, False), ("fp32", True), (BF16.value, True)} if lanes > 1
                        else set())
    assert CostModel(profile, BF16).thread_counts("learn", HOST, profile.workloads[0].key) == \
        ([1, lanes] if lanes > 1 else [1])


def test_precision_survives_the_profile_file_and_an_older_profile_reads_as_fp32(measured, tmp_path) -> None:
    path = _with_bf16(measured, tmp_path / "p.json", 0.5)
    assert {k.precision for k in load_profile(path).kernels} == {"fp32", BF16.value}
    data = json.loads(_without_bf16(measured, tmp_path / "fp32.json").read_text())
    for k in data["kernels"]:
        k.pop("precision")  # as an older pearl wrote it: no precision, every timing float32
    data.pop("precision_problems")
    older = tmp_path / "older.json"
    older.write_text(json.dumps(data))
    profile = load_profile(older)
    assert {k.precision for k in profile.kernels} == {"fp32"} and profile.precision_problems == []


def test_the_cost_model_reads_learn_at_its_precision_and_every_other_kernel_in_float32(measured, tmp_path) -> None:
    profile = load_profile(_with_bf16(measured, tmp_path / "p.json", 0.5))
    key, batch = profile.workloads[0].key, 64
    fp32, bf16 = CostModel(profile), CostModel(profile, BF16)
    learn32, learn16 = (m.kernel_time("learn", HOST, key, batch).seconds for m in (fp32, bf16))
    assert learn16 == pytest.approx(0.5 * learn32)
    for kernel in ("act", "replay_sample", "replay_insert"):
        assert fp32.kernel_time(kernel, HOST, key, batch).seconds == bf16.kernel_time(kernel, HOST, key, batch).seconds
    assert bf16.in_situ_factor(HOST, key) == fp32.in_situ_factor(HOST, key)  # the iteration ran float32


# ------------------------------------------------------------------------------------------------ the planner
def test_auto_takes_bf16_where_its_learn_is_faster_and_says_what_fp32_gives(measured, tmp_path) -> None:
    path = _with_bf16(measured, tmp_path / "fast.json", 0.4)
    auto, fp32 = _plan(path, "auto"), _plan(path, "fp32")
    assert auto.precision == BF16.value and fp32.precision == "fp32"
    assert auto.predicted["env_steps_per_s"] > fp32.predicted["env_steps_per_s"]
    assert auto.precision_why.startswith("bf16-mixed (auto): fp32 would give ")
    # fp32 as asked still says, in one line, what bf16-mixed would have given
    assert fp32.precision_why.startswith("fp32 (as asked): bf16-mixed would give ")
    saved = load_plan(save_plan(auto, tmp_path / "plan.json"))
    assert (saved.precision, saved.precision_why) == (auto.precision, auto.precision_why)


def test_auto_keeps_fp32_where_bf16_learn_is_slower_and_on_a_tie(measured, tmp_path) -> None:
    slow = _plan(_with_bf16(measured, tmp_path / "slow.json", 2.5), "auto")
    assert slow.precision == "fp32" and slow.precision_why.startswith("fp32 (auto): bf16-mixed would give ")
    tie = _plan(_with_bf16(measured, tmp_path / "tie.json", 1.0), "auto")
    assert tie.precision == "fp32"
    assert _plan(_with_bf16(measured, tmp_path / "slow2.json", 2.5), "fp32").precision_why == "fp32 (as asked)"


def test_a_profile_without_bf16_figures_plans_fp32_under_auto_and_says_why(measured, tmp_path) -> None:
    reason = "bf16 products run at 0.05× float32 on this CPU (no bf16 units)"
    plan = _plan(_without_bf16(measured, tmp_path / "none.json", reason), "auto")
    assert plan.precision == "fp32"
    assert plan.precision_why == f"fp32 (auto): bf16-mixed not planned: the profile times learn at bf16-mixed on " \
                                 f"no device (cpu: {reason})"
    with pytest.raises(ConfigError, match=r"--precision bf16-mixed: the profile times learn at bf16-mixed on no "
                                          r"device \(cpu: bf16 products run at"):
        _plan(tmp_path / "none.json", "bf16-mixed")
    with pytest.raises(ConfigError, match="unknown precision 'fp16'"):
        _plan(tmp_path / "none.json", "fp16")


def test_plan_precision_on_the_command_line(capsys, measured, tmp_path) -> None:
    none = _without_bf16(measured, tmp_path / "none.json", "no bf16 units here")
    args = ("plan", "--profile", str(none), "--algo", "dqn", "--env", "CartPole-v1", "--set", "hidden=256,256",
            "--set", "batch_size=64", "--out", str(tmp_path / "plan.json"))
    code, out, _ = run_cli(capsys, *args, "--precision", "auto")
    assert code in (0, None) and "  precision: fp32 (auto): bf16-mixed not planned: " in out
    code, _, err = run_cli(capsys, *args, "--precision", "bf16-mixed")
    assert code == 2 and err.startswith("error: --precision bf16-mixed: the profile times learn at bf16-mixed on "
                                        "no device (cpu: no bf16 units here); plan with --precision fp32 or auto")


# ------------------------------------------------------------------------------------------------ training
def test_train_refuses_a_precision_its_plan_contradicts(capsys, measured, tmp_path) -> None:
    plan = save_plan(_plan(_without_bf16(measured, tmp_path / "none.json"), "fp32"), tmp_path / "plan.json")
    code, _, err = run_cli(capsys, "train", "--plan", str(plan), "--precision", "bf16-mixed", "--steps", "300",
                           "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and err.splitlines() == [
        f"error: --precision bf16-mixed: {plan} was planned for learn at fp32; drop --precision, or plan again with "
        "--precision bf16-mixed"]


def test_train_refuses_bf16_on_a_device_that_computes_float32_only(capsys, tmp_path) -> None:
    from opencl_support import first_opencl_device

    device = first_opencl_device()
    if device is None:
        pytest.skip("no usable OpenCL device")
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--device", device,
                           "--precision", "bf16-mixed", "--steps", "300", "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and err.splitlines() == [
        f"error: --precision bf16-mixed: learn on {device} cannot run it (the opencl adapter computes learn in "
        "fp32 only); use --precision fp32"]


def _train_auto(capsys, monkeypatch, tmp_path: Path, profile: Path | None, verdict: str = "") -> tuple[str, str]:
    """`pearl train --precision auto` without a plan, `profile` (or none) at hand in its runs folder, the
    machine's bf16 verdict set to `verdict` ('': it has the units): the precision its record keeps, and stderr."""
    import shutil

    from pearl.training import configure

    monkeypatch.setattr(configure, "precision_problem", lambda device, precision: verdict)
    runs = tmp_path / "runs"
    if profile is not None:
        configure.runs_profile_path(str(runs)).parent.mkdir(parents=True)
        shutil.copy(profile, configure.runs_profile_path(str(runs)))
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--precision", "auto",
                             "--steps", "300", "--set", "learning_starts=100", "--eval-episodes", "0",
                             "--runs-dir", str(runs), "--json")
    assert code in (0, None), err
    summary = json.loads(out)
    config = json.loads((Path(summary["run_dir"]) / "config.json").read_text())
    assert summary["precision"] == config["precision"]  # the result says what auto resolved to, as the record does
    return config["precision"], err


def test_train_auto_without_a_plan_takes_the_precision_the_profile_at_hand_times_faster(capsys, monkeypatch,
                                                                                        measured, tmp_path) -> None:
    fast = _with_bf16(measured, tmp_path / "fast.json", 0.4)
    precision, err = _train_auto(capsys, monkeypatch, tmp_path / "a", fast)
    assert precision == BF16.value
    assert "pearl: learn in bf16-mixed (--precision auto): this machine's profile times learn on cpu at " in err
    slow = _with_bf16(measured, tmp_path / "slow.json", 2.5)
    precision, err = _train_auto(capsys, monkeypatch, tmp_path / "b", slow)
    assert precision == "fp32" and "pearl: learn in fp32 (--precision auto): this machine's profile times " in err
    assert "against bf16-mixed's " in err


def test_train_auto_keeps_fp32_without_units_figures_or_a_profile_and_says_why(capsys, monkeypatch, measured,
                                                                               tmp_path) -> None:
    fast = _with_bf16(measured, tmp_path / "fast.json", 0.4)
    precision, err = _train_auto(capsys, monkeypatch, tmp_path / "a", fast, verdict="no bf16 units here")
    assert precision == "fp32"
    assert "pearl: learn in fp32 (--precision auto): learn on cpu cannot compute bf16-mixed (no bf16 units here)" in err
    precision, err = _train_auto(capsys, monkeypatch, tmp_path / "b", _without_bf16(measured, tmp_path / "n.json"))
    assert precision == "fp32" and "the profile at hand times no learn at bf16-mixed on cpu" in err
    precision, err = _train_auto(capsys, monkeypatch, tmp_path / "c", None)
    assert precision == "fp32" and "no profile of this machine at hand to compare the two" in err


def test_train_auto_with_a_plan_takes_the_plans_precision(capsys, measured, tmp_path) -> None:
    plan = save_plan(_plan(_without_bf16(measured, tmp_path / "none.json"), "fp32"), tmp_path / "plan.json")
    code, out, err = run_cli(capsys, "train", "--plan", str(plan), "--precision", "auto", "--steps", "300",
                             "--eval-episodes", "0", "--runs-dir", str(tmp_path / "runs"), "--json")
    assert code in (0, None), err
    config = json.loads((Path(json.loads(out)["run_dir"]) / "config.json").read_text())
    assert config["precision"] == "fp32" and "--precision auto" not in err


def test_the_run_record_keeps_the_precision(tmp_path) -> None:
    from pearl.training import train

    result = train("dqn", "CartPole-v1", steps=300, runs_dir=str(tmp_path / "runs"), eval_episodes=1, eval_every=0,
                   precision="fp32", config=DQNConfig(hidden=(16, 16), batch_size=16, learning_starts=100))
    config = json.loads((Path(result.run_dir) / "config.json").read_text())
    summary = json.loads((Path(result.run_dir) / "summary.json").read_text())
    assert config["precision"] == summary["precision"] == result.precision == "fp32"


def test_a_seed_gives_the_same_bits_at_bf16_on_both_launchers_and_other_bits_than_fp32() -> None:
    cfg = DQNConfig(total_steps=1500, learning_starts=300, train_freq=64, gradient_steps=8, n_envs=2,
                    target_update_interval=64, hidden=(32, 32), batch_size=16, learning_rate=1e-3)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=5, actors=2, policy_lag=1,
                 threads=1, precision=BF16.value)
    assert job.precision is BF16
    a, b = SequentialLauncher(job).run(), LocalLauncher(job).run()
    assert a.updates == b.updates > 0
    assert_same_params(a.final_params, b.final_params)
    fp32 = SequentialLauncher(job.replace(precision="fp32")).run()
    assert any((fp32.final_params[k] != a.final_params[k]).any() for k in a.final_params)
