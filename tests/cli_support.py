"""Running the CLI in-process for tests: exit status, stdout and stderr of `pearl ARGS`."""

from __future__ import annotations

import pytest

from pearl.cli import main


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def measured_per_iteration(result: dict, kernel: str, replay_ratio: float) -> float:
    """A kernel's seconds per iteration (one update) from the run's own counters, as the plan check must report
    it: actor-side kernels per env step scaled to the env steps of one update, learner-side ones per update."""
    seconds = result["kernel_seconds"][kernel]
    if kernel in ("env_step", "act", "replay_insert"):
        return seconds / result["steps"] / replay_ratio
    return seconds / result["updates"]


def assert_kernel_reported_as_timed(result: dict, kernel: str, replay_ratio: float) -> None:
    """The plan check's figure for `kernel` is what the run timed (a positive time), and its ratio is
    measured ÷ predicted."""
    check = result["plan_check"]["kernels"][kernel]
    assert result["kernel_seconds"][kernel] > 0
    assert check["measured_s"] == pytest.approx(measured_per_iteration(result, kernel, replay_ratio), rel=1e-12)
    assert check["ratio"] == pytest.approx(check["measured_s"] / check["predicted_s"], rel=1e-12)
