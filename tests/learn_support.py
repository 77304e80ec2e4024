"""Batches for the learn parity tests: the same seeded batches for every adapter."""

from __future__ import annotations

import numpy as np

from pearl.types import EnvSpec, SampleBatch

STEPS = 10


def make_batches(spec: EnvSpec, batch: int, seed: int, steps: int = STEPS) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    # Reward scales that differ from step to step make the gradient norm vary, which is when clipping changes
    # an Adam update (Adam is nearly blind to a scale that stays constant).
    for scale in np.resize([1.0, 40.0, 3.0, 0.2, 15.0], steps):
        if spec.discrete:
            action = rng.integers(0, spec.action_dim, batch)
        else:
            action = rng.uniform(-1, 1, (batch, spec.action_dim)).astype(np.float32)
        out.append({"obs": rng.normal(size=(batch, spec.obs_dim)).astype(np.float32), "action": action,
                    "reward": (scale * rng.normal(size=batch)).astype(np.float32),
                    "next_obs": rng.normal(size=(batch, spec.obs_dim)).astype(np.float32),
                    "terminated": (rng.random(batch) < 0.2).astype(np.float32),
                    "weights": rng.uniform(0.2, 1.0, batch).astype(np.float32)})
    return out


def to_sample_batch(adapter, b: dict[str, np.ndarray], upload=None) -> SampleBatch:
    """The batch on the adapter's device, each array through `upload` (default: the adapter's `from_host`)."""
    t = {k: (upload or adapter.from_host)(v) for k, v in b.items()}
    return SampleBatch(np.arange(len(b["reward"])), t["obs"], t["action"], t["reward"], t["next_obs"],
                       t["terminated"], t["weights"], adapter.device_id)


def assert_same_params(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    """Two runs' parameters are the same, name for name and bit for bit (the launchers' parity tests)."""
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def final_learn_state(run_dir: str) -> dict[str, np.ndarray]:
    """The learn kernel's state (parameters, targets, optimiser) in a finished run's newest checkpoint."""
    from pathlib import Path

    from pearl.runtime import checkpoint as ckpt

    return ckpt.read_checkpoint(ckpt.candidates(Path(run_dir) / "checkpoints")[0]).learn
