"""A run writes TensorBoard event files beside metrics.jsonl, with the same keys and steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing import event_accumulator  # TensorBoard's own reader (the dev extra)

from pearl.algos import DQNConfig
from pearl.training import train


def test_tensorboard_shows_what_the_json_lines_hold(tmp_path) -> None:
    config = DQNConfig(total_steps=1_000, learning_starts=200, train_freq=50, gradient_steps=10, batch_size=32,
                       hidden=(32, 32))
    result = train("dqn", "CartPole-v1", config=config, runs_dir=str(tmp_path), eval_episodes=0,
                   launcher="sequential")
    run = Path(result.run_dir)
    assert list(run.glob("events.out.tfevents.*")), "no event file in the run folder"
    events = event_accumulator.EventAccumulator(str(run), size_guidance={event_accumulator.SCALARS: 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"charts/SPS", "charts/episodic_return", "losses/td_loss"} <= tags

    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    numeric = {k for line in lines for k, v in line.items() if isinstance(v, (int, float)) and k != "global_step"}
    assert tags == numeric  # the same keys, no more and no fewer
    for key in ("charts/SPS", "charts/episodic_return", "losses/td_loss"):
        logged = [(line["global_step"], line[key]) for line in lines if key in line]
        read = [(e.step, e.value) for e in events.Scalars(key)]
        assert [s for s, _ in read] == [s for s, _ in logged]  # step = the line's global_step
        assert [v for _, v in read] == pytest.approx([v for _, v in logged], rel=1e-6)  # float32 in the file
    assert max(e.step for e in events.Scalars("charts/SPS")) == 1_000
