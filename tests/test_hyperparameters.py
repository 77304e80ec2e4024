"""Hyperparameters from the command line: --set name=value and --config FILE, checked field by field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import run_cli

SHORT = ["--steps", "600", "--eval-episodes", "1", "--eval-every", "0", "--launcher", "sequential"]


def _config(out: str) -> dict:
    result = json.loads(out)
    return json.loads((Path(result["run_dir"]) / "config.json").read_text())["hyperparameters"]


def test_set_and_config_file_change_the_preset_in_that_order(capsys, tmp_path) -> None:
    toml = tmp_path / "h.toml"
    toml.write_text('learning_rate = 0.0005\nhidden = [32, 32]\nlearning_starts = 100\n')
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", *SHORT, "--config", str(toml),
                             "--set", "learning_rate=1e-3", "--set", "prioritized=true", "--json",
                             "--runs-dir", str(tmp_path / "runs"))
    assert code == 0, err
    h = _config(out)
    assert (h["learning_rate"], h["hidden"], h["learning_starts"], h["prioritized"]) == (1e-3, [32, 32], 100, True)
    assert h["batch_size"] == 64  # the rest is the preset's
    note = json.loads(out)["hyperparameters_note"]
    assert "preset for dqn on CartPole-v1" in note and "--set learning_rate=1e-3" in note


def test_a_run_without_a_preset_says_so_and_how_to_tune(capsys, tmp_path) -> None:
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v0", *SHORT, "--set",
                             "learning_starts=100", "--set", "hidden=16,16", "--runs-dir", str(tmp_path))
    assert code == 0, err
    assert "no preset for dqn on CartPole-v0: the algorithm's defaults" in out and "--set name=value" in out
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v0", *SHORT, "--set",
                             "learning_starts=100", "--set", "hidden=16,16", "--json", "--runs-dir", str(tmp_path))
    result = json.loads(out)
    assert result["preset"] is False and "--config FILE" in result["hyperparameters_note"]


@pytest.mark.parametrize("args,fragment", [
    (["--set", "lerning_rate=1e-3"], "did you mean learning_rate"),
    (["--set", "hidden=a,b"], "hidden must be a list of integers"),
    (["--set", "hidden=0,5"], "hidden must list positive layer widths"),
    (["--set", "gamma=2"], "gamma must be in [0, 1]"),
    (["--set", "prioritized=maybe"], "prioritized must be true or false"),
    (["--set", "learning_rate"], "--set takes name=value"),
    (["--config", "missing.toml"], "missing.toml"),
])
def test_bad_hyperparameters_get_one_error_line(capsys, tmp_path, args, fragment) -> None:
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", *SHORT, *args,
                           "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and fragment in err, err
    assert not (tmp_path / "runs").exists()


def test_a_config_file_with_a_bad_field_is_named(capsys, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"batch_size": "big"}))
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", *SHORT, "--config", str(bad),
                           "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and str(bad) in err and "batch_size must be an integer" in err, err
