"""Full preset trainings reach the published returns. Slow: about a minute each on 2 cores.

The DQN trainings use the sequential launcher: a seed then gives the same run every time, so these tests
cannot flake. Under the parallel launcher the interleaving of actors and learner varies from run to run,
and DQN CartPole reached >= 475 on 3 of 6 seeds with 1 env per actor and 5 of 6 with 8 (2-core EPYC), too
few for a test that must never fail by chance; DDPG Pendulum runs on the parallel launcher.
"""

from __future__ import annotations

import pytest

import pearl

pytestmark = pytest.mark.slow


def test_dqn_cartpole_reaches_475_on_two_of_three_seeds(tmp_path) -> None:
    results = []
    for seed in (0, 1, 2):
        r = pearl.train("dqn", "CartPole-v1", steps=50_000, seed=seed, eval_episodes=20, runs_dir=str(tmp_path),
                        launcher="sequential")
        results.append(r.eval_return_mean)
        if sum(x >= 475 for x in results) >= 2:
            break
    assert sum(x >= 475 for x in results) >= 2, f"eval returns by seed: {results}"


def test_ddpg_pendulum_reaches_minus_250(tmp_path) -> None:
    r = pearl.train("ddpg", "Pendulum-v1", steps=20_000, seed=0, eval_episodes=10, runs_dir=str(tmp_path),
                    threads=2)
    assert r.launcher == "parallel" and r.replay_ratio == 1.0
    assert r.eval_return_mean >= -250, r.eval_returns


def test_dqn_cartpole_on_opencl_reaches_475(tmp_path) -> None:
    """The same preset with every kernel on an OpenCL device (PoCL in CI): about 5 minutes on 2 cores."""
    from opencl_support import first_opencl_device

    device = first_opencl_device()
    r = pearl.train("dqn", "CartPole-v1", device=device, steps=50_000, seed=0, eval_episodes=20,
                    runs_dir=str(tmp_path), launcher="sequential")
    assert r.eval_return_mean >= 475, r.eval_returns
