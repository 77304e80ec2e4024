"""pearl compare: runs every candidate mapping briefly, writes the table, report and plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory) -> Path:
    from pearl.profile.format import save_profile
    from pearl.profiling.options import ProfileOptions
    from pearl.profiling.profiler import run_profile

    path = tmp_path_factory.mktemp("cmp") / "profile.json"
    return save_profile(run_profile(ProfileOptions(quick=True, algos=("dqn",), devices=("cpu",))), path)


def test_compare_writes_table_report_and_plot(capsys, profile_file, tmp_path) -> None:
    code, out, err = run_cli(capsys, "compare", "--profile", str(profile_file), "--algo", "dqn", "--env",
                             "CartPole-v1", "--seconds", "2", "--runs-dir", str(tmp_path), "--json")
    assert code == 0, err
    report = json.loads(out)
    folder = Path(report["dir"])
    rows = report["rows"]
    # one device: the two objectives, the front's end and "all on cpu" are one mapping, merged
    assert len(rows) == 1 and "throughput plan" in rows[0]["label"] and "all on cpu" in rows[0]["label"]
    # the row reports the run's own learning-phase speed against the plan's prediction, not a figure of its own
    summary = json.loads((Path(rows[0]["run_dir"]) / "summary.json").read_text())
    measured, predicted = rows[0]["measured_env_steps_per_s"], rows[0]["predicted_env_steps_per_s"]
    assert summary["steps"] > 0 and measured == (summary["learning_env_steps_per_s"] or summary["env_steps_per_s"])
    assert predicted == summary["plan_check"]["predicted"]["env_steps_per_s"]
    assert rows[0]["error"] == pytest.approx((predicted - measured) / measured)
    assert json.loads((folder / "compare.json").read_text())["rows"][0]["label"] == rows[0]["label"]
    table = (folder / "report.md").read_text()
    assert "| mapping |" in table and "all on cpu" in table
    assert (folder / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert Path(rows[0]["run_dir"]).is_dir()


def test_compare_rejects_bad_seconds(capsys, profile_file, tmp_path) -> None:
    code, _, err = run_cli(capsys, "compare", "--profile", str(profile_file), "--algo", "dqn", "--env",
                           "CartPole-v1", "--seconds", "0", "--runs-dir", str(tmp_path))
    assert code == 2 and err.startswith("error: ") and "--seconds" in err
    assert not any(tmp_path.iterdir())
