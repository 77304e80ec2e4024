"""Short trainings through the public API: seeding, replay ratio, the roles wired together."""

from __future__ import annotations

import numpy as np
import pytest

import pearl
from learn_support import assert_same_params, final_learn_state
from pearl.algos import preset
from pearl.errors import ConfigError


def test_same_seed_same_run(tmp_path) -> None:
    """A seed repeats a run bit for bit (every launcher: tests/test_local_launcher.py checks the local one)."""
    config = preset("dqn", "CartPole-v1").replace(learning_starts=200, train_freq=50, gradient_steps=10)
    runs = [pearl.train("dqn", "CartPole-v1", steps=800, seed=5, eval_episodes=2, config=config,
                        runs_dir=str(tmp_path), launcher="sequential") for _ in range(2)]
    assert runs[0].eval_returns == runs[1].eval_returns
    assert runs[0].updates == runs[1].updates == (800 - 200) // 50 * 10
    assert_same_params(final_learn_state(runs[0].run_dir), final_learn_state(runs[1].run_dir))
    other = pearl.train("dqn", "CartPole-v1", steps=800, seed=6, eval_episodes=2, config=config,
                        runs_dir=str(tmp_path), launcher="sequential")
    theirs, ours = final_learn_state(other.run_dir), final_learn_state(runs[0].run_dir)
    assert theirs.keys() == ours.keys()
    assert not all(np.array_equal(theirs[k], ours[k]) for k in ours)  # the seed reaches what is learnt


def test_ddpg_replay_ratio_and_rates(tmp_path) -> None:
    config = preset("ddpg", "Pendulum-v1").replace(learning_starts=100, hidden=(32, 32), batch_size=32)
    result = pearl.train("ddpg", "Pendulum-v1", steps=400, seed=0, eval_episodes=1, config=config,
                         runs_dir=str(tmp_path))
    assert result.updates == 300  # one update per step after the first 100
    assert result.replay_ratio == pytest.approx(1.0)
    assert result.env_steps_per_s > 0 and result.updates_per_s > 0
    assert -2000 < result.eval_return_mean <= 0  # Pendulum's returns are negative, bounded by ~16.3 per step
    assert set(result.kernel_seconds) >= {"env_step", "act", "replay_insert", "replay_sample", "learn",
                                          "priority_update", "weight_sync"}


def test_prioritized_replay_trains(tmp_path) -> None:
    config = preset("dqn", "CartPole-v1").replace(learning_starts=200, train_freq=50, gradient_steps=10,
                                                  prioritized=True)
    result = pearl.train("dqn", "CartPole-v1", steps=600, seed=1, eval_episodes=1, config=config,
                         runs_dir=str(tmp_path))
    assert result.updates == 80 and np.isfinite(result.eval_return_mean)


def test_config_for_other_algo_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigError):
        pearl.train("dqn", "CartPole-v1", steps=10, config=preset("ddpg", "Pendulum-v1"), runs_dir=str(tmp_path))


def test_bad_hyperparameters_are_named() -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        preset("dqn", "CartPole-v1").replace(batch_size=0).validate()
    with pytest.raises(ConfigError, match="unknown dqn hyperparameter"):
        preset("dqn", "CartPole-v1").replace(tau=0.1)


def test_presets_are_the_published_settings() -> None:
    dqn = preset("dqn", "CartPole-v1")
    assert (dqn.total_steps, dqn.learning_rate, dqn.batch_size, dqn.buffer_size, dqn.learning_starts) == \
        (50_000, 2.3e-3, 64, 100_000, 1_000)
    assert (dqn.gamma, dqn.target_update_interval, dqn.train_freq, dqn.gradient_steps, dqn.hidden) == \
        (0.99, 128, 256, 128, (256, 256))
    assert dqn.replay_ratio == 0.5 and dqn.epsilon(0) == 1.0 and dqn.epsilon(8_000) == pytest.approx(0.04)
    ddpg = preset("ddpg", "Pendulum-v1")
    assert (ddpg.total_steps, ddpg.learning_rate, ddpg.batch_size, ddpg.buffer_size, ddpg.learning_starts) == \
        (20_000, 1e-3, 256, 200_000, 10_000)
    assert (ddpg.gamma, ddpg.tau, ddpg.action_noise, ddpg.hidden, ddpg.replay_ratio) == \
        (0.98, 0.005, 0.1, (400, 300), 1.0)
    acrobot = preset("dqn", "Acrobot-v1")  # rl-baselines3-zoo dqn.yml
    assert (acrobot.total_steps, acrobot.learning_rate, acrobot.batch_size, acrobot.buffer_size,
            acrobot.target_update_interval, acrobot.replay_ratio, acrobot.hidden) == \
        (100_000, 6.3e-4, 128, 50_000, 250, 1.0, (256, 256))
    car = preset("dqn", "MountainCar-v0")  # dqn.yml: target_update_interval 600 env steps at 8 updates per 16
    assert (car.total_steps, car.learning_rate, car.batch_size, car.buffer_size, car.target_update_interval,
            car.replay_ratio, car.gamma, car.exploration_final_eps) == (120_000, 4e-3, 128, 10_000, 300, 0.5, 0.98,
                                                                       0.07)
    assert preset("dqn", "CartPole-v0").total_steps == pearl.DQNConfig().total_steps  # defaults elsewhere


def test_progress_is_called_as_the_loop_starts_and_as_it_ends(tmp_path) -> None:
    """So a progress bar's rate spans what the summary's env_steps_per_s does (pearl/progress.py)."""
    calls: list[int] = []
    config = preset("dqn", "CartPole-v1").replace(learning_starts=100, train_freq=50, gradient_steps=5)
    result = pearl.train("dqn", "CartPole-v1", steps=300, eval_episodes=0, config=config, runs_dir=str(tmp_path),
                         launcher="sequential", progress=calls.append)
    assert calls[0] == 0 and calls[-1] == result.steps == 300 and calls == sorted(calls)


def test_fastest_threads_rule_for_roles_in_turn():
    from pearl.planner.accounting import fastest_threads

    assert fastest_threads(2, {1: 1.0, 2: 0.9}) == 2  # alone on the host: any gain counts
    assert fastest_threads(2, {1: 1.0, 2: 1.0}) == 1  # a tie keeps fewer threads
    assert fastest_threads(4, {1: 1.0}) == 1  # no multi-thread figure: 1
    assert fastest_threads(1, {1: 1.0, 2: 0.1}) == 1  # never more threads than lanes


def _profile_here(runs_dir, factor: float, beside: float | None = None) -> None:
    """The reference profile as if measured on this machine, DDPG's learn on cpu at this host's lanes timed at
    `factor` × its 1-thread figure (and with `beside`, at that × it beside a stand-in actor busy 1 % of each
    update), where `pearl quickstart` keeps this machine's profile."""
    import platform
    from dataclasses import replace
    from pathlib import Path

    from pearl.hostinfo import cpu_lanes, cpu_name
    from pearl.profile.format import load_profile, save_profile

    profile = load_profile(Path(__file__).resolve().parent.parent / "profiles" / "reference.json")
    profile.host = {**profile.host, "cpu": cpu_name(), "cores": cpu_lanes()}
    workload = next(w for w in profile.workloads if w.algo == "ddpg")
    one = next(k for k in profile.kernels if (k.workload, k.kernel, k.device, k.batch) ==
               (workload.key, "learn", "cpu", workload.batch_size))
    for f, busy in ((factor, 0.0), (beside, 0.01)):
        if f is not None:
            profile.kernels.append(replace(one, median_s=one.median_s * f, p10_s=one.p10_s * f,
                                           p90_s=one.p90_s * f, threads=cpu_lanes(), beside=busy))
    save_profile(profile, Path(runs_dir) / "profiles" / f"{platform.node() or 'host'}-quick.json")


def test_default_threads_are_what_a_plan_would_choose_from_this_machines_profile(tmp_path):
    """No --threads, no plan: 1 without a profile of this machine at hand; with one, the count the planner's
    prediction of the layout favours (layout_threads: contention beside the actors priced), or with the
    sequential launcher the fastest learn; 1 when the learner is not on cpu."""
    from pearl.envs import env_spec
    from pearl.hostinfo import cpu_lanes
    from pearl.device import HOST_DEVICE
    from pearl.runtime.job import Placement
    from pearl.training.configure import default_threads

    config, spec = preset("ddpg", "Pendulum-v1"), env_spec("Pendulum-v1")
    cpu = Placement.single(HOST_DEVICE)
    short = config.replace(total_steps=config.learning_starts + 1_000)  # too short to profile for
    assert default_threads(short, spec, cpu, 1, "local", str(tmp_path / "none")) == 1
    assert not (tmp_path / "none" / "profiles").exists()
    lanes = cpu_lanes()
    if lanes < 2:
        return
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    _profile_here(fast, 0.3 * 2 / lanes)
    _profile_here(slow, 1.0)
    assert default_threads(config, spec, cpu, 1, "local", str(fast)) == lanes
    assert default_threads(config, spec, cpu, 1, "sequential", str(fast)) == lanes
    assert default_threads(config, spec, cpu, 1, "local", str(slow)) == 1
    assert default_threads(config, spec, Placement.single("opencl:0:0"), 1, "local", str(fast)) == 1
    dqn = preset("dqn", "CartPole-v1")  # the profile times DQN's learn at 1 thread only
    assert default_threads(dqn, env_spec("CartPole-v1"), cpu, 1, "local", str(fast)) == 1
    result = pearl.train("ddpg", "Pendulum-v1", steps=300, eval_episodes=0, eval_every=0, runs_dir=str(fast),
                         launcher="sequential")
    assert result.threads == lanes
    again = pearl.train("ddpg", "Pendulum-v1", steps=300, eval_episodes=0, eval_every=0, runs_dir=str(fast),
                        launcher="sequential", threads=1)
    assert again.threads == 1


def test_a_run_naming_no_launcher_takes_the_one_the_profile_predicts_faster(tmp_path, capsys):
    """No --launcher, no plan, every kernel on cpu: with a profile at hand whose learn at the host's lanes is fast
    alone but slow beside an actor, the run takes the sequential launcher at that many threads (one stderr line
    says so and why) and gives the bits the local launcher gives at those threads; a named launcher keeps its own,
    and a short run with no profile at hand takes the local launcher."""
    from pearl.hostinfo import cpu_lanes

    lanes = cpu_lanes()
    runs = tmp_path / "crowded"
    _profile_here(runs, 0.3 * 2 / lanes, beside=1.2)
    short = {"steps": 300, "eval_episodes": 0, "eval_every": 0, "checkpoint_every": 300}
    config = preset("ddpg", "Pendulum-v1").replace(learning_starts=200)  # the profile's workload: 100 updates
    chosen = pearl.train("ddpg", "Pendulum-v1", runs_dir=str(runs), config=config, **short)
    err = capsys.readouterr().err
    if lanes < 2:
        assert chosen.launcher == "local"
        return
    assert (chosen.launcher, chosen.threads) == ("sequential", lanes)
    assert "the sequential launcher (the roles in turn, one process)" in err and "local" in err
    named = pearl.train("ddpg", "Pendulum-v1", runs_dir=str(runs), config=config, launcher="local", threads=lanes,
                        **short)
    assert named.launcher == "local" and "sequential launcher" not in capsys.readouterr().err
    assert_same_params(final_learn_state(chosen.run_dir), final_learn_state(named.run_dir))
    bare = pearl.train("ddpg", "Pendulum-v1", runs_dir=str(tmp_path / "none"), config=config, **short)
    assert bare.launcher == "local"  # no profile at hand and too short to take one


def test_a_long_run_without_a_profile_profiles_its_workload_once(tmp_path, capsys):
    """No --threads, no plan, no profile of this machine at hand, and a run of 5,000 updates or more: a quick
    profile of its workload on cpu is taken and kept where `profile_at_hand` finds it, and the threads come from
    it; the next run finds it and profiles nothing."""
    from pearl.envs import env_spec
    from pearl.hostinfo import cpu_lanes
    from pearl.device import HOST_DEVICE
    from pearl.runtime.job import Placement
    from pearl.training.configure import default_threads, long_run, profile_at_hand, times_threads

    config, spec = preset("ddpg", "Pendulum-v1"), env_spec("Pendulum-v1")
    if cpu_lanes() < 2:
        return
    assert long_run(config)
    runs = str(tmp_path / "runs")
    threads = default_threads(config, spec, Placement.single(HOST_DEVICE), 1, "local", runs)
    assert "profiling ddpg on Pendulum-v1 quickly, once" in capsys.readouterr().err
    kept = profile_at_hand(runs)
    assert kept is not None and times_threads(kept, config, spec) and 1 <= threads <= cpu_lanes()
    assert default_threads(config, spec, Placement.single(HOST_DEVICE), 1, "local", runs) == threads
    assert capsys.readouterr().err == ""  # found: nothing profiled again
