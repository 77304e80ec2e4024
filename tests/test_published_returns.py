"""Full preset trainings reach the published returns. Slow: about a minute each on 2 cores (OpenCL: ~5).

They run the default launcher (local, or sequential where the profile the run keeps predicts it faster): the
schedule makes a seed give the same result every time on either, whatever the machine's speed, so these tests
cannot flake. The headline figure is the final policy or the best one
kept by the in-training evaluations, whichever did better on 20 confirmation episodes, scored on the 20 final
evaluation episodes (docs/ARCHITECTURE.md, "Final and best policy").
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import pytest

import pearl

pytestmark = pytest.mark.slow


def _default_launcher(algo: str, env_id: str, runs_dir) -> str:
    """The launcher a run naming none takes with the profile it kept in runs_dir (a long run profiles its
    workload first): the faster of local and sequential as that profile predicts, local without one."""
    from pearl.algos import preset
    from pearl.device import HOST_DEVICE
    from pearl.envs import env_spec
    from pearl.runtime.job import Placement
    from pearl.training.configure import default_launch_for

    chosen = default_launch_for(preset(algo, env_id), env_spec(env_id), Placement.single(HOST_DEVICE), 1, None,
                                str(runs_dir))
    return chosen.launcher if chosen is not None else "local"


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.preset)])  # seed 1: -m preset (CI's time)
def test_dqn_cartpole_reaches_475(tmp_path, seed: int) -> None:
    r = pearl.train("dqn", "CartPole-v1", steps=50_000, seed=seed, eval_episodes=20, runs_dir=str(tmp_path))
    assert r.launcher == _default_launcher("dqn", "CartPole-v1", tmp_path)
    assert r.headline == "best" and r.schedule["policy_lag"] == 1
    assert r.eval_return_mean >= 475, (r.best, r.final)
    assert r.best["return_mean"] == r.eval_return_mean and r.final["return_mean"] <= 500


def test_ddpg_pendulum_reaches_minus_250(tmp_path) -> None:
    r = pearl.train("ddpg", "Pendulum-v1", steps=20_000, seed=0, eval_episodes=10, runs_dir=str(tmp_path))
    assert r.launcher == _default_launcher("ddpg", "Pendulum-v1", tmp_path) and r.replay_ratio == 1.0
    assert r.eval_return_mean >= -250, (r.best, r.final)


@pytest.mark.preset  # 276 s in a suite run on 2 cores beside other work: out of CI's 30 minutes, where
#                      tests/test_opencl_parity.py holds every OpenCL kernel to torch's
def test_dqn_cartpole_on_opencl_reaches_475(tmp_path) -> None:
    """The same preset with every kernel on an OpenCL device (PoCL)."""
    from opencl_support import first_opencl_device

    device = first_opencl_device()
    r = pearl.train("dqn", "CartPole-v1", device=device, steps=50_000, seed=0, eval_episodes=20,
                    runs_dir=str(tmp_path))
    assert r.eval_return_mean >= 475, (r.best, r.final)


# The zoo presets below (pearl/algos/presets.py cites each file and figure). Their bar is the zoo's published
# return less one of its standard deviations, the headline policy scored on 20 episodes, seed 0 (DDPG
# LunarLanderContinuous: the mean over five seeds). Each is a preset-length training, too long for CI's 30
# minutes on 2 cores beside the rest: marked `preset` and deselected by default (pyproject's addopts); `pytest -m
# preset` runs them. docs/MEASUREMENTS.md ("Presets") has what each reached on the 2-core EPYC; on the 2-core
# Xeon DQN MountainCar-v0's seed 0 reached −145.9 (best) and −136.9 (final) at 1 thread, below its bar: the two
# machines' float sums differ, and so do the runs.
@pytest.mark.preset
def test_dqn_acrobot_reaches_minus_88(tmp_path) -> None:
    """The zoo: −76.6 ± 11.8 over 100k steps. On the 2-core EPYC, seed 0: best −74.6, final −79.7 (about 3 min)."""
    r = pearl.train("dqn", "Acrobot-v1", seed=0, eval_episodes=20, runs_dir=str(tmp_path))
    assert r.eval_return_mean >= -76.6 - 11.8, (r.best, r.final)


@pytest.mark.preset
def test_dqn_mountaincar_reaches_minus_111(tmp_path) -> None:
    """The zoo: −100.8 ± 9.9 over 120k steps. On the 2-core EPYC, seed 0: best −103.0 (about 5 min)."""
    r = pearl.train("dqn", "MountainCar-v0", seed=0, eval_episodes=20, runs_dir=str(tmp_path))
    assert r.eval_return_mean >= -100.8 - 9.9, (r.best, r.final)


# LunarLander needs pip install "pearl[box2d]".
@pytest.mark.preset
def test_dqn_lunarlander_reaches_75(tmp_path) -> None:
    """The zoo: 154.4 ± 79.2 over 100k steps. Measured here, seed 0: best kept 69.8, final 194.4, and the final
    is the headline (201.4 against the best's 121.6 on the confirmation episodes); 2-7 min."""
    pytest.importorskip("Box2D", reason='LunarLander needs Box2D: pip install "pearl[box2d]"')
    r = pearl.train("dqn", "LunarLander-v3", seed=0, eval_episodes=20, runs_dir=str(tmp_path))
    assert r.eval_return_mean >= 154.4 - 79.2, (r.best, r.final)


@pytest.mark.preset
def test_ddpg_mountaincar_continuous_reaches_93(tmp_path) -> None:
    """The zoo: 93.5 ± 0.05 over 300k steps with Ornstein-Uhlenbeck noise, as the preset has. Measured here, seed
    0: best = final 94.23 (68 min beside other work)."""
    r = pearl.train("ddpg", "MountainCarContinuous-v0", seed=0, eval_episodes=20, runs_dir=str(tmp_path))
    assert r.eval_return_mean >= 93.5 - 0.05, (r.best, r.final)


#: Seeds of the DDPG LunarLanderContinuous test, whose mean is asserted (one seed of this task scatters too
#: widely to tell a working DDPG from a broken one; the test's docstring has the figures).
LLC_SEEDS = (0, 1, 2, 3, 4)


@pytest.mark.preset
def test_ddpg_lunarlander_continuous_mean_over_seeds_reaches_138(tmp_path) -> None:
    """The zoo: 230.2 ± 92.4 over 300k steps (published in 2021 under its episode-burst settings of then; the
    preset has its settings of today, for which it publishes no figure). The bar, 137.8, is asserted on the mean
    headline over seeds 0-4, as many trainings at a time as there are cores (about 50 min each on 2 cores, two at
    a time: about 2.5 hours). Measured here, headline: 55.3, 199.2, 196.2, 208.2, 194.4; mean 170.7 (the final
    policies alone: 55.3, 94.8, 196.2, 143.5, 77.4; mean 113.4). Stable-Baselines3 with the same settings, final
    policy, seeds 0 and 1: 63.3 and 28.7 (benchmarks/vs_sb3.py --what preset)."""
    pytest.importorskip("Box2D", reason='LunarLander needs Box2D: pip install "pearl[box2d]"')
    workers = min(len(LLC_SEEDS), os.cpu_count() or 1)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = [pool.submit(pearl.train, "ddpg", "LunarLanderContinuous-v3", seed=seed, eval_episodes=20,
                            runs_dir=str(tmp_path)) for seed in LLC_SEEDS]
        results = [run.result() for run in runs]
    headlines = [r.eval_return_mean for r in results]
    assert [r.seed for r in results] == list(LLC_SEEDS)
    assert sum(headlines) / len(headlines) >= 230.2 - 92.4, headlines
