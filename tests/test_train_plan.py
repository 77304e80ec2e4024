"""pearl train --plan: runs the plan's placement and actor count, records predicted against measured, and
refuses plans for other work, other machines or absent devices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import assert_kernel_reported_as_timed, run_cli
from pearl.algos import preset
from pearl.planner.plan import load_plan, save_plan


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory) -> Path:
    """A plan made from a quick profile of THIS machine (plans from other machines are refused)."""
    from pearl.planner.make import make_plan
    from pearl.profile.format import save_profile
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.profiler import run_profile

    folder = tmp_path_factory.mktemp("plan")
    profile = save_profile(run_profile(ProfileOptions(quick=True, algos=("dqn",), devices=("cpu",))),
                           folder / "profile.json")
    return save_plan(make_plan(profile, "dqn", "CartPole-v1"), folder / "plan.json")


def edited(plan_file: Path, tmp_path: Path, change) -> Path:
    data = json.loads(plan_file.read_text())
    change(data)
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(data))
    return out


def test_train_follows_the_plan_and_records_the_comparison(capsys, plan_file, tmp_path) -> None:
    plan = load_plan(plan_file)
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--plan", str(plan_file),
                             "--steps", "1500", "--eval-episodes", "1", "--json", "--runs-dir", str(tmp_path))
    assert code == 0, err
    result = json.loads(out)
    assert result["actors"] == plan.actors
    assert result["placement"]["learn"] == plan.mapping["learn"] and result["placement"]["act"] == plan.mapping["act"]
    check = result["plan_check"]
    assert set(check["kernels"]) == set(plan.kernels)
    for k in ("learn", "act", "env_step"):
        assert check["kernels"][k]["predicted_s"] == pytest.approx(plan.kernels[k])
        assert_kernel_reported_as_timed(result, k, preset("dqn", "CartPole-v1").replay_ratio)
    assert check["predicted"]["env_steps_per_s"] == pytest.approx(plan.predicted["env_steps_per_s"])
    # like with like: the plan models actors and learner running together, i.e. the learning phase
    assert check["measured"]["phase"] == "learning"
    assert check["measured"]["env_steps_per_s"] == result["learning_env_steps_per_s"] != result["env_steps_per_s"]
    run_dir = Path(result["run_dir"])
    assert json.loads((run_dir / "plan.json").read_text())["mapping"] == plan.mapping
    assert json.loads((run_dir / "summary.json").read_text())["plan_check"] == check


def test_several_actors_step_in_turn(capsys, plan_file, tmp_path) -> None:
    two = edited(plan_file, tmp_path, lambda d: d.update(actors=2))
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--plan", str(two),
                             "--steps", "600", "--eval-episodes", "1", "--json", "--runs-dir", str(tmp_path / "r"))
    assert code == 0, err
    assert json.loads(out)["actors"] == 2


@pytest.mark.parametrize(("args", "change", "fragment"), [
    (["--algo", "ddpg", "--env", "Pendulum-v1"], None, "is a plan for dqn on CartPole-v1"),
    (["--algo", "dqn", "--env", "CartPole-v1", "--device", "cpu"], None, "drop --device"),
    (["--algo", "dqn", "--env", "CartPole-v1"], lambda d: d["profile"].update(cpu="Some Other CPU"),
     "another machine"),
    (["--algo", "dqn", "--env", "CartPole-v1"], lambda d: d["mapping"].update(learn="whatif:nvidia-a100-sxm4-80gb"),
     "does not have"),
    (["--algo", "dqn", "--env", "CartPole-v1"], lambda d: d["mapping"].update(learn="cuda:7"), "cuda:7"),
    (["--algo", "dqn", "--env", "CartPole-v1"], lambda d: d.update(schema="pearl.plan/7"), "cannot read"),
    # a device id is read once, when the plan loads: text that is no id is refused there, naming the field
    (["--algo", "dqn", "--env", "CartPole-v1"], lambda d: d["mapping"].update(act="gpu7"),
     "field 'mapping' names gpu7, unknown device"),
    (["--algo", "dqn", "--env", "CartPole-v1"], lambda d: d["mapping"].update(replay_insert="a/cpu"),
     "field 'mapping' names a/cpu"),
])
def test_refused_plans(capsys, plan_file, tmp_path, args, change, fragment: str) -> None:
    path = edited(plan_file, tmp_path, change) if change else plan_file
    code, _, err = run_cli(capsys, "train", *args, "--plan", str(path), "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and fragment in err
    assert not (tmp_path / "runs").exists()


def test_truncated_plan(capsys, plan_file, tmp_path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(plan_file.read_text()[:200])
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--plan", str(broken),
                           "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and "not valid JSON" in err


A100 = "whatif:nvidia-a100-sxm4-80gb"


def test_an_absent_device_runs_emulated_on_an_opencl_device(capsys, plan_file, tmp_path) -> None:
    from opencl_support import first_opencl_device
    from pearl.training.recorded import recorded_setup

    device = first_opencl_device()
    planned = edited(plan_file, tmp_path, lambda d: d["mapping"].update(learn=A100))
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--plan", str(planned),
                             "--emulate", f"{A100}={device}", "--steps", "1500", "--eval-episodes", "1", "--json",
                             "--runs-dir", str(tmp_path / "runs"))
    assert code == 0, err
    result = json.loads(out)
    assert result["placement"]["learn"] == device and result["placement"]["act"] == "cpu"
    learn = result["plan_check"]["kernels"]["learn"]
    assert learn["device"] == A100 and learn["emulated_on"] == device
    assert_kernel_reported_as_timed(result, "learn", preset("dqn", "CartPole-v1").replay_ratio)
    assert "emulated_on" not in result["plan_check"]["kernels"]["act"]
    assert f"{A100}'s kernels ran on {device}" in result["plan_check"]["note"]
    assert result["plan_check"]["note"].startswith("the local launcher runs actors, replay and learner concurrently")
    run_dir = Path(result["run_dir"])
    assert json.loads((run_dir / "config.json").read_text())["emulate"] == {A100: device}
    setup = recorded_setup(run_dir)  # what --resume rebuilds: the same emulated placement
    assert setup.options.placement.emulate == {A100: device} and str(setup.placement.learn) == device


@pytest.mark.parametrize(("emulate", "fragment"), [
    (["--emulate", "opencl:0:0"], "takes ABSENT=opencl:P:D"),
    (["--emulate", f"{A100}=cpu"], "cpu is not one"),
    (["--emulate", f"{A100}=opencl:0:0", "--emulate", f"{A100}=opencl:0:1"], "twice"),
    (["--emulate", f"{A100}=opencl:0:0", "--emulate", "whatif:other=opencl:0:0"], "places no kernel on"),
    (["--emulate", "cpu=opencl:0:0"], "one of this machine's own"),
    (["--emulate", f"{A100}=tpu:0"], f"--emulate {A100}=tpu:0: unknown device 'tpu:0'"),
])
def test_refused_emulations(capsys, plan_file, tmp_path, emulate, fragment: str) -> None:
    planned = edited(plan_file, tmp_path, lambda d: d["mapping"].update(learn=A100))
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--plan", str(planned),
                           *emulate, "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and fragment in err, err
    assert not (tmp_path / "runs").exists()


def test_emulation_needs_a_plan_and_the_refusal_says_how(capsys, plan_file, tmp_path) -> None:
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--emulate",
                           f"{A100}=opencl:0:0", "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and "needs --plan" in err
    planned = edited(plan_file, tmp_path, lambda d: d["mapping"].update(learn=A100))
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--plan", str(planned),
                           "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and f"--emulate {A100}=opencl:0:0" in err


def test_a_plan_with_several_envs_per_actor_trains_with_them(capsys, plan_file, tmp_path) -> None:
    from pearl.planner.make import make_plan

    profile = plan_file.parent / "profile.json"
    plan = save_plan(make_plan(profile, "dqn", "CartPole-v1", envs=8), tmp_path / "eight.json")
    assert load_plan(plan).envs_per_actor == 8
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--plan", str(plan),
                             "--steps", "1500", "--eval-episodes", "1", "--json", "--runs-dir", str(tmp_path / "r"))
    assert code == 0, err
    result = json.loads(out)
    assert result["envs_per_actor"] == 8
    assert_kernel_reported_as_timed(result, "act", preset("dqn", "CartPole-v1").replay_ratio)


def test_a_plan_names_its_algo_and_env(capsys, plan_file, tmp_path) -> None:
    code, out, err = run_cli(capsys, "train", "--plan", str(plan_file), "--steps", "1500", "--eval-episodes", "1",
                             "--json", "--runs-dir", str(tmp_path))
    assert code == 0, err
    result = json.loads(out)
    assert (result["algo"], result["env"]) == (load_plan(plan_file).algo, load_plan(plan_file).env)


@pytest.mark.parametrize("args,fragment", [(["--algo", "ddpg"], "but --algo says ddpg"),
                                           (["--env", "Acrobot-v1"], "but --env says Acrobot-v1")])
def test_a_plan_given_a_disagreeing_algo_or_env_is_refused(capsys, plan_file, tmp_path, args, fragment) -> None:
    code, _, err = run_cli(capsys, "train", "--plan", str(plan_file), *args, "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and fragment in err, err
    assert not (tmp_path / "runs").exists()


def test_a_plan_trains_only_the_workload_it_was_made_for(capsys, plan_file, tmp_path) -> None:
    """A plan from scaled figures for a 128-128 network (the profile measured 256-256) trains with the same
    --set; without it, pearl train would check the plan's predictions against another network: refused."""
    from pearl.algos import preset
    from pearl.planner.make import make_plan

    config = preset("dqn", "CartPole-v1").replace(hidden=(128, 128))
    scaled = make_plan(load_plan(plan_file).profile["path"], "dqn", "CartPole-v1", config=config)
    assert scaled.predicted["source"] == "scaled"
    path = save_plan(scaled, tmp_path / "scaled.json")
    code, _, err = run_cli(capsys, "train", "--plan", str(path), "--steps", "600", "--runs-dir", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "planned for workload dqn-CartPole-v1-o4-a2-h128x128" in err, err
    code, out, err = run_cli(capsys, "train", "--plan", str(path), "--set", "hidden=128,128", "--steps", "600",
                             "--eval-episodes", "1", "--runs-dir", str(tmp_path), "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["plan_check"]["predicted"]["env_steps_per_s"] == scaled.predicted["env_steps_per_s"]


def test_the_plan_chooses_the_learner_threads_and_train_uses_them(capsys, plan_file, tmp_path) -> None:
    """The plan records its learner threads (1 ≤ T ≤ this host's lanes); `pearl train --plan` trains with
    them, an explicit --threads wins, and a plan without the field (older) trains with 1."""
    from pearl.hostinfo import cpu_lanes

    plan = load_plan(plan_file)
    assert 1 <= plan.threads <= cpu_lanes()
    common = ("--steps", "600", "--eval-episodes", "0", "--eval-every", "0", "--json", "--runs-dir", str(tmp_path))
    two = edited(plan_file, tmp_path, lambda d: d.update(threads=2))
    code, out, err = run_cli(capsys, "train", "--plan", str(two), *common)
    assert code == 0, err
    assert json.loads(out)["threads"] == 2
    code, out, err = run_cli(capsys, "train", "--plan", str(two), "--threads", "1", *common)
    assert code == 0, err
    assert json.loads(out)["threads"] == 1
    older = edited(plan_file, tmp_path, lambda d: d.pop("threads"))
    assert load_plan(older).threads == 1
    code, out, err = run_cli(capsys, "train", "--plan", str(older), *common)
    assert code == 0, err
    assert json.loads(out)["threads"] == 1
    bad = edited(plan_file, tmp_path, lambda d: d.update(threads=0))
    code, _, err = run_cli(capsys, "train", "--plan", str(bad), *common)
    assert code == 2 and "threads" in err
