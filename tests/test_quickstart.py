"""pearl quickstart: reuse of a fresh profile of this machine, and the whole main job (slow)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cli_support import assert_kernel_reported_as_timed
from pearl.algos import preset
from pearl.cli import main
from pearl.profile.format import load_profile, save_profile
from pearl.profiler.options import ProfileOptions
from pearl.profiler.profiler import run_profile
from pearl.quickstart import profile_path, reusable


@pytest.fixture()
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def quick_profile():
    return run_profile(ProfileOptions(quick=True, algos=("dqn",), devices=("cpu",)))


def test_quick_profile_is_kept_in_the_runs_folder_not_the_tracked_profiles_folder(tmp_path) -> None:
    import platform

    assert profile_path() == Path("runs", "profiles", f"{platform.node() or 'host'}-quick.json")
    assert profile_path(tmp_path / "elsewhere").parent == tmp_path / "elsewhere" / "profiles"
    # git ignores the runs folder, so a quickstart in a clone leaves the checkout clean
    assert "runs/" in (Path(__file__).resolve().parent.parent / ".gitignore").read_text().splitlines()


def test_fresh_profile_of_this_machine_is_reused(in_tmp, quick_profile) -> None:
    path = save_profile(quick_profile, in_tmp / profile_path())
    assert reusable(path)


def test_another_algorithm_gets_a_profile_of_its_own(in_tmp, quick_profile) -> None:
    """`pearl quickstart --algo sac` keeps its own quick profile: DQN's is not one of SAC's preset."""
    assert profile_path(algo="sac").name.endswith("-quick-sac.json") and profile_path(algo="dqn") == profile_path()
    path = save_profile(quick_profile, in_tmp / profile_path(algo="sac"))
    assert reusable(path, "dqn") and not reusable(path, "sac")


@pytest.mark.parametrize("change", [
    lambda p: setattr(p, "created", (datetime.now(timezone.utc) - timedelta(days=8)).isoformat()),
    lambda p: p.host.update(cpu="Another CPU"),
    lambda p: p.host.update(cores=999),
    lambda p: setattr(p, "workloads", []) or setattr(p, "kernels", []),
    lambda p: setattr(p, "in_situ", []),  # made before profiles timed the learner's iteration in situ
    lambda p: setattr(p, "weight_sync", []),  # made before profiles timed the weight sync
])
def test_stale_or_foreign_profiles_are_not_reused(in_tmp, quick_profile, change) -> None:
    import copy

    profile = copy.deepcopy(quick_profile)
    change(profile)
    path = save_profile(profile, in_tmp / profile_path())
    assert not reusable(path)


def test_unreadable_profile_is_measured_again(in_tmp) -> None:
    path = in_tmp / profile_path()
    path.parent.mkdir(parents=True)
    path.write_text("{ truncated")
    assert not reusable(path)


@pytest.mark.slow
def test_quickstart_is_the_main_job(in_tmp, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["quickstart", "--json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    report = json.loads(out)
    assert load_profile(in_tmp / report["profile"]).mode == "quick"
    assert Path(report["profile"]).parts[:2] == ("runs", "profiles") and not (in_tmp / "profiles").exists()
    assert_kernel_reported_as_timed(report["run"], "learn", preset("dqn", "CartPole-v1").replay_ratio)
    assert report["run"]["placement"]["learn"] == report["plan"]["mapping"]["learn"]
    # the default launcher, concurrent as the plan assumes; its result for a seed does not depend on timing
    assert report["run"]["launcher"] == "local" and len(report["run"]["eval_returns"]) == 20
    assert report["run"]["eval_return_mean"] >= 475
