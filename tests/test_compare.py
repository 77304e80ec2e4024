"""pearl compare: runs every candidate mapping briefly, writes the table, report and plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli

REFERENCE = Path(__file__).resolve().parents[1] / "profiles" / "reference.json"


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory) -> Path:
    from pearl.profile.format import save_profile
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.profiler import run_profile

    path = tmp_path_factory.mktemp("cmp") / "profile.json"
    return save_profile(run_profile(ProfileOptions(quick=True, algos=("dqn",), devices=("cpu",))), path)


def test_compare_writes_table_report_and_plot(capsys, profile_file, tmp_path) -> None:
    code, out, err = run_cli(capsys, "compare", "--profile", str(profile_file), "--algo", "dqn", "--env",
                             "CartPole-v1", "--seconds", "2", "--runs-dir", str(tmp_path), "--json")
    assert code == 0, err
    report = json.loads(out)
    folder = Path(report["dir"])
    rows = report["rows"]
    # one device: the two objectives, the front's end and "all on cpu" are one mapping, merged into one row where
    # they learn at one precision: the plans choose theirs (`auto`; bf16-mixed where the profile times it faster,
    # on a CPU with bf16 units), the front's end and "all on cpu" stay fp32
    assert len({json.dumps(r["mapping"], sort_keys=True) for r in rows}) == 1
    plan_row = next(r for r in rows if "throughput plan" in r["label"])
    cpu_row = next(r for r in rows if "all on cpu" in r["label"])
    assert cpu_row["precision"] == "fp32" and "perf-per-watt plan" in plan_row["label"]
    assert len(rows) == (1 if plan_row["precision"] == "fp32" else 2)
    assert (plan_row is cpu_row) == (plan_row["precision"] == "fp32")
    # the row reports the run's own learning-phase speed against the plan's prediction, not a figure of its own
    summary = json.loads((Path(plan_row["run_dir"]) / "summary.json").read_text())
    measured, predicted = plan_row["measured_env_steps_per_s"], plan_row["predicted_env_steps_per_s"]
    assert summary["steps"] > 0 and measured == summary["learning_env_steps_per_s"] and plan_row["note"] is None
    assert predicted == summary["plan_check"]["predicted"]["env_steps_per_s"]
    assert plan_row["error"] == pytest.approx((predicted - measured) / measured)
    assert json.loads((folder / "compare.json").read_text())["rows"][0]["label"] == rows[0]["label"]
    table = (folder / "report.md").read_text()
    assert "| mapping |" in table and "all on cpu" in table
    assert (folder / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert Path(rows[0]["run_dir"]).is_dir()


def test_a_mapping_that_never_learnt_has_no_measured_figure_and_says_why(tmp_path) -> None:
    """A run that made no update in its time (starting its processes and filling replay to learning_starts took
    it all: 16 actor processes on one GPU, each opening CUDA, did so in 6 s): its collecting speed is not the
    learning-phase speed a plan predicts, so its row has no figure and no error, says why, and has no measured
    point in the plot (its key says so)."""
    from dataclasses import replace

    from pearl.cli.compare import compare_table
    from pearl.report import markdown, plot, row
    from pearl.planner.make import make_plan
    from pearl.training.result import TrainResult

    plan = make_plan(REFERENCE, "dqn", "CartPole-v1")
    learnt = TrainResult("dqn", "CartPole-v1", 4096, 0, "cpu", 1900.0, 950.0, 60800.0, 0.5, 0.0, 0.0, 0, 3.0,
                         str(tmp_path / "a"), updates=1536, learning_env_steps_per_s=2000.0)
    collecting = replace(learnt, steps=700, updates=0, env_steps_per_s=350.0, learning_env_steps_per_s=None,
                         run_dir=str(tmp_path / "b"))
    rows = [row("all on cpu", plan, learnt, tmp_path / "1.plan.json", 2.0),
            row("all on cuda:0", plan, collecting, tmp_path / "2.plan.json", 2.0)]
    predicted = plan.predicted["env_steps_per_s"]
    assert rows[0]["error"] == pytest.approx((predicted - 2000.0) / 2000.0) and rows[0]["note"] is None
    assert rows[1]["measured_env_steps_per_s"] is None and rows[1]["error"] is None
    assert rows[1]["measured_j_per_step"] is None
    assert rows[1]["note"].startswith("no update within 2 s (700 env steps collected, 350/s") and "--seconds" in \
        rows[1]["note"]
    report = {"algo": "dqn", "env": "CartPole-v1", "profile": str(REFERENCE), "seconds": 2.0, "rows": rows,
              "pareto": plan.pareto, "dir": str(tmp_path)}
    text = markdown(report)
    assert "| n/a | n/a |" in text and rows[1]["note"] in text
    table = compare_table(report)
    assert table[2].split()[-4:-2] == ["n/a", "n/a"] and f"{2000:,}" in table[1]
    plot(report, tmp_path / "compare.png")
    assert (tmp_path / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_rejects_bad_seconds(capsys, profile_file, tmp_path) -> None:
    code, _, err = run_cli(capsys, "compare", "--profile", str(profile_file), "--algo", "dqn", "--env",
                           "CartPole-v1", "--seconds", "0", "--runs-dir", str(tmp_path))
    assert code == 2 and err.startswith("error: ") and "--seconds" in err
    assert not any(tmp_path.iterdir())
