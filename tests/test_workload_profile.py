"""Profiling and planning a workload of the user's: an algorithm on any env, with its own shapes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cli_support import run_cli

from pearl.errors import PlanError
from pearl.planner.make import make_plan
from pearl.profile.format import ProfileError, load_profile, merge_profiles, parse_profile, save_profile
from pearl.profiler.options import ProfileOptions
from pearl.profiler.profiler import run_profile

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def acrobot(tmp_path_factory):
    """A quick profile of cpu with DQN on Acrobot-v1 at its preset's shapes (256-256), its batch halved."""
    path = tmp_path_factory.mktemp("workload") / "p.json"
    save_profile(run_profile(ProfileOptions(quick=True, algos=("dqn",), env="Acrobot-v1", devices=("cpu",),
                                            batch_size=64)), path)
    return path


def test_a_workload_of_the_users_is_measured_and_planned(acrobot, tmp_path) -> None:
    profile = load_profile(acrobot)
    assert [w.key for w in profile.workloads] == ["dqn-Acrobot-v1-o6-a3-h256x256"]
    assert {k.kernel for k in profile.kernels} >= {"act", "replay_insert", "replay_sample", "learn"}
    assert [e.env for e in profile.env_step] == ["Acrobot-v1"]
    plan = make_plan(acrobot, "dqn", "Acrobot-v1", "throughput")
    assert plan.env == "Acrobot-v1" and plan.predicted["env_steps_per_s"] > 0


def test_another_workload_joins_the_profile_and_both_plan(acrobot, tmp_path) -> None:
    other = run_profile(ProfileOptions(quick=True, algos=("ddpg",), env="MountainCarContinuous-v0",
                                       devices=("cpu",), hidden=(32, 32), batch_size=64))
    merged = merge_profiles(load_profile(acrobot), other, str(acrobot))
    assert {w.key for w in merged.workloads} == {"dqn-Acrobot-v1-o6-a3-h256x256",
                                                 "ddpg-MountainCarContinuous-v0-o2-a1-h32x32"}
    assert next(w for w in merged.workloads if w.algo == "ddpg").batch_size == 64
    path = save_profile(parse_profile(merged.to_dict(), "merged"), tmp_path / "both.json")
    assert make_plan(path, "dqn", "Acrobot-v1", "throughput").env == "Acrobot-v1"
    # DDPG on MountainCarContinuous plans at its preset (400-300), which this profile did not measure: its
    # kernel times are scaled from the 32-32 network's, and the plan says so
    scaled = make_plan(path, "ddpg", "MountainCarContinuous-v0", "throughput").predicted
    assert scaled["source"] == "scaled" and scaled["workload"] == "ddpg-MountainCarContinuous-v0-o2-a1-h400x300"
    assert set(scaled["scaled"].values()) == {"ddpg-MountainCarContinuous-v0-o2-a1-h32x32"}
    # with no workload of the algo at all there is nothing to scale from
    only_dqn = save_profile(load_profile(acrobot), tmp_path / "dqn.json")
    with pytest.raises(PlanError, match="pearl profile --algo ddpg --env MountainCarContinuous-v0"):
        make_plan(only_dqn, "ddpg", "MountainCarContinuous-v0", "throughput")


def test_a_profile_of_another_machine_is_not_added_to(acrobot) -> None:
    kept = load_profile(acrobot)
    other = dataclasses.replace(kept, host={**kept.host, "cores": kept.host["cores"] + 62})
    with pytest.raises(ProfileError, match="another machine"):
        merge_profiles(other, kept, "theirs.json")


@pytest.mark.parametrize("args,fragment", [
    (["--algo", "dqn", "--env", "Pendulum-v1"], "DQN needs a discrete action space"),
    (["--algo", "all", "--env", "Acrobot-v1"], "give --algo dqn or --algo ddpg"),
    (["--algo", "dqn", "--env", "Acrobot-v1", "--hidden", "3,x"], "--hidden takes comma-separated"),
    (["--algo", "dqn", "--env", "Acrobot-v1", "--hidden", "0"], "--hidden takes comma-separated"),
    (["--algo", "dqn", "--hidden", "64"], "give --env too"),
    (["--algo", "dqn", "--env", "NoSuchEnv-v9"], "unknown gymnasium environment"),
    (["--algo", "dqn", "--env", "nosuchmodule:Env-v0"], "nosuchmodule"),
])
def test_bad_workloads_get_one_error_line(capsys, tmp_path, args, fragment) -> None:
    code, _, err = run_cli(capsys, "profile", "--quick", "--device", "cpu", "--out", str(tmp_path / "p.json"), *args)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and fragment in err, err
    assert not (tmp_path / "p.json").exists()


def _needs_box2d(**_kwargs):
    import gymnasium

    raise gymnasium.error.DependencyNotInstalled('Box2D is not installed, run `pip install "gymnasium[box2d]"`')


@pytest.mark.parametrize("command", ["train", "plan"])
@pytest.mark.parametrize("env_id,fragments", [
    ("NoSuchEnv-v9", ["unknown gymnasium environment 'NoSuchEnv-v9'", "gymnasium: Environment `NoSuchEnv`"]),
    ("nosuchmodule:Env-v0", ["No module named 'nosuchmodule'"]),
    ("PearlTestNeedsBox2D-v0", ["needs a package that is not installed", 'pip install "gymnasium[box2d]"']),
])
def test_an_env_gymnasium_cannot_make_is_one_error_line_with_its_message(capsys, tmp_path, command, env_id,
                                                                         fragments) -> None:
    import gymnasium

    if "PearlTestNeedsBox2D-v0" not in gymnasium.registry:
        gymnasium.register("PearlTestNeedsBox2D-v0", entry_point=_needs_box2d)
    args = ["--profile", str(ROOT / "profiles" / "reference.json"), "--out", str(tmp_path / "p.json")] \
        if command == "plan" else ["--runs-dir", str(tmp_path)]
    code, _, err = run_cli(capsys, command, "--algo", "dqn", "--env", env_id, *args)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    assert all(f in err for f in fragments), err
