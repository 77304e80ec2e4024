"""The traffic statement each launcher owns (pearl.traffic) against what a short real run of it counts, and the
planner pricing that statement. The Ray launcher's run is in tests/test_ray_traffic.py."""

from __future__ import annotations

import pytest
from traffic_support import CASES, counted, stated

from pearl import traffic
from pearl.algos import preset
from pearl.envs import env_spec
from pearl.planner.build import CLUSTER_LAUNCHER, HOST_LAUNCHER, weight_syncs
from pearl.planner.cluster_problem import crossings
from pearl.device import HOST_DEVICE
from pearl.runtime.job import Job, Placement
from pearl.runtime.local import LocalLauncher
from pearl.schedule import Schedule
from pearl.runtime.sequential import SequentialLauncher
from pearl.training.launchers import launcher_capabilities


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("launcher_class", [SequentialLauncher, LocalLauncher], ids=["sequential", "local"])
def test_a_runs_counted_traffic_is_its_launchers_statement(launcher_class, case) -> None:
    """Messages, bytes, publishes and loads on every edge, counted where the launcher sends them, equal its
    statement summed over the run's segments (a short last one, segments before learning starts included)."""
    cfg, env = CASES[case]
    job = Job.of(cfg, env_spec(env), Placement.single(HOST_DEVICE), seed=3, actors=2, policy_lag=1, threads=1)
    launcher = launcher_class(job)
    stats = launcher.run()
    got, want = counted(stats), stated(launcher)
    assert got == want
    # the actors loaded weights in the first segment and once learning changed them, not in the warm-up between
    assert job.actors < got[traffic.WEIGHTS].loads < job.actors * launcher.schedule.segments
    assert (traffic.PRIORITIES in got) == cfg.prioritized


def test_collection_only_states_no_samples_and_counts_none() -> None:
    cfg, env = CASES["dqn-uniform"]
    job = Job.of(cfg, env_spec(env), Placement.single(HOST_DEVICE), seed=3, actors=2, learn=False, threads=1)
    launcher = SequentialLauncher(job)
    got = counted(launcher.run())
    assert got == stated(launcher) and traffic.SAMPLES not in got


def test_each_launcher_names_a_statement_and_the_planner_prices_the_local_and_ray_ones() -> None:
    assert {launcher_capabilities(n).traffic for n in ("sequential", "local", "ray")} <= set(traffic.STATEMENTS)
    assert launcher_capabilities("local").traffic == HOST_LAUNCHER
    assert launcher_capabilities("ray").traffic == CLUSTER_LAUNCHER


@pytest.mark.parametrize("actors", [1, 3])
def test_the_planner_prices_the_statement_of_a_steady_segment_over_its_updates(actors) -> None:
    """A host plan's weight syncs and a cluster plan's crossings are the statement's figures ÷ U."""
    cfg, spec = preset("dqn", "CartPole-v1").replace(prioritized=True), env_spec("CartPole-v1")
    sched = Schedule.for_config(cfg, actors)
    U = sched.updates_per_segment
    local = traffic.local(sched, cfg, spec)[traffic.WEIGHTS]
    assert weight_syncs(cfg, spec, actors) == pytest.approx((local.publishes / U, local.loads / actors / U))
    ray = traffic.ray(sched, cfg, spec, replay_server=True)
    cross = crossings(cfg, spec, actors)
    for name, edge in [("transitions", traffic.TRANSITIONS), ("inserts", traffic.INSERTS),
                       ("weights", traffic.WEIGHTS), ("batch", traffic.SAMPLES), ("td_errors", traffic.PRIORITIES)]:
        assert (cross[name].messages, cross[name].nbytes) == \
            pytest.approx((ray[edge].messages / U, ray[edge].nbytes / U)), name


@pytest.mark.parametrize("algo,env,actors", [("dqn", "CartPole-v1", 1), ("dqn", "CartPole-v1", 3),
                                             ("ddpg", "Pendulum-v1", 1), ("ddpg", "Pendulum-v1", 2)])
def test_replay_is_filled_one_call_an_actors_share_of_a_segment(algo, env, actors) -> None:
    """The inserts the planner prices and the profiler's learner loop makes: the transitions edge's batches of a
    steady segment, one insert call each, spread over the segment's updates."""
    cfg, spec = preset(algo, env), env_spec(env)
    sched = Schedule.for_config(cfg, actors)
    shape = traffic.insert_shape(sched)
    handed = traffic.local(sched, cfg, spec)[traffic.TRANSITIONS].messages
    assert shape.per_update == pytest.approx(handed / sched.updates_per_segment)
    assert shape.rows == round(sched.segment_steps / handed)
    if (algo, actors) == ("dqn", 1):  # train_freq 256, gradient_steps 128: the segment in one call of 256 rows
        assert (shape.per_update, shape.rows) == (1 / 128, 256)


def test_a_steady_segment_is_a_whole_learning_segment_that_publishes() -> None:
    cfg, spec = preset("dqn", "CartPole-v1"), env_spec("CartPole-v1")
    sched = Schedule.for_config(cfg, 2)
    last = sched.segments - 1
    steady = traffic.ray(sched, cfg, spec)
    assert steady[traffic.SAMPLES].messages == sched.updates_per_segment
    assert steady[traffic.WEIGHTS].publishes == 1 and steady[traffic.WEIGHTS].loads == 2
    assert traffic.ray(sched, cfg, spec, last)[traffic.WEIGHTS].publishes == 0  # no segment acts with it
    assert traffic.local(sched, cfg, spec, last)[traffic.WEIGHTS].publishes == 1  # the local board is written
    assert traffic.local(sched, cfg, spec, 0)[traffic.SAMPLES].messages == 0  # before learning starts


def test_a_trained_runs_summary_reports_its_counted_traffic(tmp_path) -> None:
    """`pearl.train` writes what the run counted in summary.json (`traffic`), the statement's figures."""
    import json
    from pathlib import Path

    from pearl.training import train

    cfg, env = CASES["dqn-uniform"]
    result = train("dqn", env, config=cfg, runs_dir=str(tmp_path), eval_episodes=0, eval_every=0,
                   checkpoint_every=0, launcher="sequential", actors=2)
    summary = json.loads((Path(result.run_dir) / "summary.json").read_text())
    sched = Schedule.for_config(cfg, 2)
    want = traffic.over_run("sequential", sched, cfg, env_spec(env))
    assert summary["traffic"] == {edge: t.to_dict() for edge, t in want.items() if any(t.to_dict().values())}
