"""Each example in examples/ runs top to bottom: a few hundred env steps, learning included, then its
evaluation line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("script, steps", [("dqn_cartpole.py", 600), ("ddpg_pendulum.py", 300)])
def test_example_runs(script: str, steps: int) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / script), "--steps", str(steps)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "evaluation over" in done.stdout.splitlines()[-1]


def test_every_example_is_run_here() -> None:
    listed = {"dqn_cartpole.py", "ddpg_pendulum.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == listed
