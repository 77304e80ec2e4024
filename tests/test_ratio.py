"""`pearl ratio`: the CPU-lanes-per-accelerator sweep, its knee and perf-per-watt marks, the table and the plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli
from pearl.planner.ratio import KNEE, sweep, with_lanes
from pearl.profile.format import load_profile

REFERENCE = Path(__file__).resolve().parent.parent / "profiles" / "reference.json"
A100 = "nvidia-a100-sxm4-80gb"


def test_with_lanes_changes_the_host_resource_only() -> None:
    profile = load_profile(REFERENCE)
    wide = with_lanes(profile, 8)
    before = {d.id: d for d in profile.devices}
    for d in wide.devices:
        assert d.lanes == 8 if d.id == "cpu" or d.shares == "host-cpu" else d.lanes == before[d.id].lanes
    old = {p.device: p for p in profile.power}
    for p in wide.power:
        assert p.busy_w == pytest.approx(old[p.device].busy_w * 8 / before[p.device].lanes)
    assert [d.lanes for d in profile.devices] == [d.lanes for d in load_profile(REFERENCE).devices]  # a copy


def test_sweep_marks_the_knee_and_the_perf_per_watt_optimum() -> None:
    result = sweep(REFERENCE, "dqn", "CartPole-v1", A100, (1, 2, 4, 8))
    assert result.accelerator == f"whatif:{A100}" and [p.lanes for p in result.points] == [1, 2, 4, 8]
    speeds = [p.env_steps_per_s for p in result.points]
    # more lanes only add room: the fastest plan at L lanes is a plan at L + 1 lanes too
    assert all(b >= a * (1 - 1e-9) for a, b in zip(speeds, speeds[1:]))
    best = max(speeds)
    assert result.knee == min(p.lanes for p in result.points if p.env_steps_per_s >= (1 - KNEE) * best)
    knee_index = [p.lanes for p in result.points].index(result.knee)
    assert all(s < (1 - KNEE) * best for s in speeds[:knee_index])
    assert result.perf_per_watt == max(result.points, key=lambda p: p.best_steps_per_joule).lanes
    assert any(p.mapping["learn"] == result.accelerator for p in result.points)  # the accelerator is used
    for p in result.points:
        assert p.actors <= p.lanes and p.best_steps_per_joule >= p.steps_per_joule * (1 - 1e-9)


def test_cli_prints_the_table_and_writes_a_png(capsys, tmp_path: Path) -> None:
    out = tmp_path / "ratio.png"
    code, stdout, err = run_cli(capsys, "ratio", "--profile", str(REFERENCE), "--algo", "dqn", "--env",
                                "CartPole-v1", "--accelerator", A100, "--lanes", "1,2,4", "--out", str(out))
    assert code == 0, err
    assert "knee:" in stdout and "perf-per-watt optimum" in stdout and str(out) in stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, stdout, err = run_cli(capsys, "ratio", "--profile", str(REFERENCE), "--algo", "dqn", "--env",
                                "CartPole-v1", "--accelerator", A100, "--lanes", "1,2", "--out", str(out), "--json")
    assert code == 0, err
    data = json.loads(stdout)
    assert [p["lanes"] for p in data["points"]] == [1, 2] and data["knee_lanes"] in (1, 2)


@pytest.mark.parametrize(("args", "fragment"), [
    (["--lanes", "1,x"], "--lanes"),
    (["--lanes", "0,2"], "--lanes"),
    (["--accelerator", "nvidia-a100-sxm4-8gb"], "did you mean nvidia-a100-sxm4-80gb?"),
])
def test_bad_ratio_input_is_one_error_line(capsys, tmp_path: Path, args: list[str], fragment: str) -> None:
    base = {"--profile": str(REFERENCE), "--algo": "dqn", "--env": "CartPole-v1", "--accelerator": A100,
            "--out": str(tmp_path / "r.png")}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    code, _, err = run_cli(capsys, "ratio", *[x for kv in base.items() for x in kv])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]
    assert not (tmp_path / "r.png").exists()


def test_a_cluster_profile_is_refused(capsys, tmp_path: Path) -> None:
    cluster = tmp_path / "c.json"
    assert run_cli(capsys, "profile", "merge", f"a={REFERENCE}", f"b={REFERENCE}", "--network", "40gbe", "--out",
                   str(cluster))[0] == 0
    code, _, err = run_cli(capsys, "ratio", "--profile", str(cluster), "--algo", "dqn", "--env", "CartPole-v1",
                           "--accelerator", A100, "--out", str(tmp_path / "r.png"))
    assert code == 2 and "one host" in err and str(cluster) in err
