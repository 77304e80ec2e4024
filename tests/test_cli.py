"""The command line: help, devices, a short training, and one `error:` line with exit 2 for user errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cli_support import run_cli


def assert_user_error(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


def test_help_lists_commands(capsys) -> None:
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    assert "devices" in out and "train" in out


def test_bare_pearl_prints_help(capsys) -> None:
    code, out, _ = run_cli(capsys)
    assert code == 0 and "Usage" in out


def test_devices_json_lists_cpu_and_explains_missing_backends(capsys) -> None:
    code, out, _ = run_cli(capsys, "devices", "--json")
    assert code == 0
    found = json.loads(out)
    ids = [d["id"] for d in found["devices"]]
    assert "cpu" in ids
    cpu = next(d for d in found["devices"] if d["id"] == "cpu")
    assert cpu["lanes"] >= 1 and cpu["memory_bytes"] > 0
    if not torch.cuda.is_available():
        cuda = [m for m in found["missing"] if m["backend"] == "cuda"]
        assert cuda and cuda[0]["reason"]


def test_devices_table(capsys) -> None:
    code, out, _ = run_cli(capsys, "devices")
    assert code == 0
    assert out.startswith("found:") and "cpu" in out


@pytest.mark.parametrize(("args", "fragments"), [
    (["train", "--algo", "dqn", "--env", "NoSuchEnv-v9"], ["NoSuchEnv-v9"]),
    (["train", "--algo", "dqn", "--env", "CartPol-v1"], ["did you mean", "CartPole-v1"]),
    (["train", "--algo", "dqn", "--env", "Pendulum-v1"], ["continuous", "--algo ddpg"]),
    (["train", "--algo", "ddpg", "--env", "CartPole-v1"], ["discrete", "--algo dqn"]),
    (["train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "0"], ["--steps"]),
    (["train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "-5"], ["--steps"]),
    (["train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "ten"], ["--steps"]),
    (["train", "--algo", "dqn", "--env", "CartPole-v1", "--seed", "-1"], ["--seed"]),
    (["train", "--algo", "dqn", "--env", "CartPole-v1", "--threads", "0"], ["--threads"]),
    (["train", "--algo", "dqn", "--env", "CartPole-v1", "--eval-episodes", "-1"], ["--eval-episodes"]),
    (["train", "--algo", "dqn", "--env", "CartPole-v1", "--device", "tpu:0"], ["tpu:0", "pearl devices"]),
    (["train", "--algo", "dqn", "--env", "CartPole-v1", "--device", "cuda:99"], ["cuda:99"]),
    (["train", "--algo", "ppo", "--env", "CartPole-v1"], ["--algo"]),
    (["train", "--algo", "dqn"], ["--env"]),
    (["train", "--nope"], ["--nope"]),
    (["frobnicate"], ["frobnicate"]),
    # the whole sentence, not cut after "this machine's"
    (["train", "--algo", "dqn", "--env", "CartPole-v1", "--device", "gpu"], ["'gpu'", "lists this machine's devices"]),
    # a Choice names the nearest choice
    (["plan", "--profile", "p.json", "--algo", "dqn", "--env", "CartPole-v1", "--objective", "perf_per_watt"],
     ["did you mean 'perf-per-watt'?"]),
    (["plan", "--profile", "p.json", "--algo", "dqm", "--env", "CartPole-v1"], ["did you mean 'dqn'?"]),
    (["train", "--algo", "ddgp", "--env", "Pendulum-v1"], ["did you mean 'ddpg'?"]),
    # --what-if: a missing name lists the shipped descriptors, with the nearest one
    (["profile", "--quick", "--what-if", "nvidia-a100-sxm4-8gb", "--out", "p.json"],
     ["no such device descriptor", "did you mean nvidia-a100-sxm4-80gb?", "pocl-cpu"]),
    (["profile", "--quick", "--what-if", "no/such/thing.toml", "--out", "p.json"],
     ["no such device descriptor", "nvidia-h100-sxm5-80gb"]),
])
def test_user_errors_are_one_line_exit_2(capsys, tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    takes_runs_dir = args[0] == "train" and "--nope" not in args
    code, out, err = run_cli(capsys, *args, "--runs-dir", str(tmp_path)) if takes_runs_dir else run_cli(capsys, *args)
    assert_user_error(code, out, err, *fragments)
    assert not any(tmp_path.iterdir()), "a failed command must not leave a run record"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_says_why(capsys, tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--device", "cuda:0",
                             "--runs-dir", str(tmp_path))
    assert_user_error(code, out, err, "cuda:0", "--device cpu")


def test_debug_shows_the_traceback(capsys) -> None:
    code, _, err = run_cli(capsys, "--debug", "train", "--algo", "dqn", "--env", "NoSuchEnv-v9")
    assert code == 2
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("error: ")


def test_debug_counts_only_before_the_command(capsys) -> None:
    # after the command it is no option of train: one line, no traceback, even though the env is bad too
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "NoSuchEnv-v9", "--debug")
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1 and "--debug" in err
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "--debug")  # a value, not the flag
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1


def test_unwritable_runs_dir_is_a_user_error(capsys, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "10",
                             "--runs-dir", str(blocker / "runs"))
    assert_user_error(code, out, err, "--runs-dir")


def test_short_training_json_and_run_record(capsys, tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "2000",
                             "--seed", "3", "--eval-episodes", "2", "--json", "--runs-dir", str(tmp_path))
    assert code == 0, err
    result = json.loads(out)  # exactly one JSON object on stdout
    for key in ("algo", "env", "steps", "seed", "device", "env_steps_per_s", "updates_per_s",
                "learner_samples_per_s", "replay_ratio", "eval_return_mean", "eval_return_std", "eval_episodes",
                "wall_s", "run_dir"):
        assert key in result, key
    assert (result["algo"], result["env"], result["steps"], result["seed"]) == ("dqn", "CartPole-v1", 2000, 3)
    # the schedule: 128 updates after each whole 256-step segment that ends past learning_starts (1,000),
    # i.e. after the segments ending at 1,024, 1,280, 1,536 and 1,792 steps (the last 208 steps make none)
    assert result["updates"] == 4 * 128 and result["launcher"] == "local"
    assert result["learner_samples_per_s"] == pytest.approx(result["updates_per_s"] * 64)
    run_dir = Path(result["run_dir"])
    assert run_dir.parent == tmp_path
    config = json.loads((run_dir / "config.json").read_text())
    assert config["schema"] == "pearl.run/1" and config["hyperparameters"]["batch_size"] == 64
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["eval_returns"] == result["eval_returns"] and len(summary["eval_returns"]) == 2
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert lines and lines[-1]["global_step"] == 2000
    assert all("charts/SPS" in line for line in lines)
    assert any("charts/episodic_return" in line for line in lines)
    assert "losses/td_loss" in lines[-1]


def test_human_output(capsys, tmp_path: Path) -> None:
    code, out, _ = run_cli(capsys, "train", "--algo", "ddpg", "--env", "Pendulum-v1", "--steps", "300",
                           "--eval-episodes", "1", "--runs-dir", str(tmp_path))
    assert code == 0
    assert "env steps/s" in out and "run record:" in out and "return" in out


def test_installed_entry_point_exit_code() -> None:
    """The real process: status 2 and a single stderr line, as a shell script would see it."""
    proc = subprocess.run([sys.executable, "-m", "pearl", "train", "--algo", "ddpg", "--env", "CartPole-v1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("error: ")


def test_help_shows_whole_command_descriptions(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    commands = out.split("Commands:", 1)[1].strip().splitlines()
    from pearl.cli.base import cli

    assert len(commands) == len(cli.commands)  # one line each: none wrapped
    for line in commands:
        assert not line.rstrip().endswith("..."), line  # click cuts a description that does not fit
        assert line.rstrip().endswith("."), line


def test_what_if_takes_a_shipped_descriptor_name() -> None:
    from pearl.descriptors import DEVICES_DIR, resolve_descriptor

    for name in ("nvidia-a100-sxm4-80gb", "nvidia-a100-sxm4-80gb.toml"):
        assert resolve_descriptor(name) == DEVICES_DIR / "nvidia-a100-sxm4-80gb.toml"
    path = DEVICES_DIR / "pocl-cpu.toml"
    assert resolve_descriptor(str(path)) == path  # a path still works


def test_compare_table_shows_whole_mapping_names() -> None:
    from pearl.cli.compare import compare_table

    label = "throughput plan = perf-per-watt plan = pareto low-energy end = all on cpu"
    row = {"label": label, "predicted_env_steps_per_s": 2217.0, "measured_env_steps_per_s": 1744.0,
           "error": 0.27, "predicted_j_per_step": 0.0649, "measured_j_per_step": 0.0825, "power_source": "modelled",
           "energy_source": "plan's power (modelled) × time", "energy_why": "host-cpu: no RAPL package counter"}
    short = {**row, "label": "all on opencl:0:0"}
    lines = compare_table({"rows": [row, short], "dir": "runs/compare-x"})
    assert lines[1].startswith(label + " ")
    assert lines[2].startswith("all on opencl:0:0 ")
    assert lines[3] == ("power: modelled; measured J/step from plan's power (modelled) × time "
                        "(host-cpu: no RAPL package counter)")
    assert lines[4] == "report, plot and runs in runs/compare-x"
    # the columns line up: every row's figures start where the header's do
    start = lines[0].index("predicted/s")
    assert all(line[start - 1] == " " and line[len(label)] == " " for line in lines[:3])


def test_progress_when_piped_prints_a_line_now_and_then(capsys) -> None:
    from pearl.progress import Progress as _progress

    with _progress(157, enabled=True, label="profile", unit="timing", every=0.0) as bar:
        bar(40)
        bar(157)
    lines = capsys.readouterr().err.splitlines()  # capsys's stderr is not a terminal, as in a pipe
    assert lines[0].startswith("profile: 40/157 timings (25%), ")
    assert lines[1].startswith("profile: 157/157 timings (100%), ")
    assert lines[2].startswith("profile: 157/157 timings (100%), done in ") and len(lines) == 3
    with _progress(None, enabled=True, label="resume runs/x", every=0.0) as bar:
        bar(1)
    assert capsys.readouterr().err.splitlines()[0].startswith("resume runs/x: 1 step, ")


def test_progress_rate_is_the_average_from_the_first_call_to_the_last(capsys) -> None:
    """The training loop calls once as it starts and once as it ends, so the rate shown last is steps over the
    loop's wall time: the summary's env steps/s (not a smoothed recent rate, nor one diluted by evaluation)."""
    from pearl.progress import Progress

    ticks = iter([0.0, 100.0, 102.0, 104.0, 110.0])  # made; the loop starts, goes on, ends; evaluated, closed
    with Progress(5000, enabled=True, label="train", unit="env step", every=0.0, clock=lambda: next(ticks)) as bar:
        bar(1000)  # a resumed run: the rate counts this run's steps only
        bar(1500)
        bar(3000)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "train: 1,000/5,000 env steps (20%), 100 s"
    assert lines[1] == "train: 1,500/5,000 env steps (30%), 102 s, 250 env steps/s"  # 500 in 2 s
    assert lines[2] == "train: 3,000/5,000 env steps (60%), 104 s, 500 env steps/s"  # 2,000 in 4 s
    assert lines[3] == "train: 3,000/5,000 env steps (60%), done in 110 s, 500 env steps/s" and len(lines) == 4


def test_progress_stays_quiet_for_short_work_and_for_json(capsys) -> None:
    from pearl.progress import Progress as _progress

    with _progress(100, enabled=True, label="train", every=60.0) as bar:
        for done in range(1, 101):
            bar(done)
    with _progress(100, enabled=False, label="train", every=0.0) as bar:
        bar(50)
    assert capsys.readouterr().err == ""
