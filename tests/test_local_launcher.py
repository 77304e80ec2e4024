"""The local launcher: actor processes, shared-memory rings, weight boards, the schedule, shutdown."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from counter_env import episode_length
from learn_support import assert_same_params

from pearl.algos import DDPGConfig, DQNConfig
from pearl.algos.params import ParamLayout
from pearl.envs import env_spec
from pearl.errors import PearlError
from pearl.runtime import shm
from pearl.device import HOST_DEVICE
from pearl.runtime.job import Job, Placement
from pearl.runtime.local import LocalLauncher
from pearl.runtime.sequential import SequentialLauncher
from pearl.training import train

TESTS = Path(__file__).parent
COUNTER = "counter_env:PearlCounter-v0"
SMALL = dict(hidden=(16, 16), batch_size=16, learning_rate=1e-3)


@pytest.fixture(autouse=True)
def actors_find_test_envs(monkeypatch):
    """Actor processes import counter_env by name, so they need this folder on their path."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))


def pearl_segments(pid: int | None = None) -> set[str]:
    """The shared-memory segments a process created (this one by default): other runs may be going on."""
    return {p.name for p in shm.SHM_DIR.glob(f"{shm.SEGMENT_PREFIX}{pid or os.getpid()}-*")}


# ------------------------------------------------------------------------------------ shared memory
def test_ring_keeps_order_across_wraparound_and_refuses_when_full() -> None:
    layout = shm.Layout.of([("r.x", (5,), "i8"), ("r.ctl", (2,), "i8")])
    seg = shm.Segment(layout)
    try:
        ring = shm.Ring(seg, "r", ("x",))
        got: list[int] = []
        sent = 0
        for n in (3, 2, 4, 1, 5, 3):
            assert ring.push({"x": np.arange(sent, sent + n)})
            sent += n
            ring.pop(lambda rows: got.extend(rows["x"].tolist()))
        assert got == list(range(sent))
        assert ring.push({"x": np.arange(4)})
        waits = []
        assert not ring.push({"x": np.arange(2)}, wait=lambda: waits.append(1) or len(waits) < 3)
        assert len(waits) == 3 and ring.pending() == 4  # the refused rows were not written
        with pytest.raises(ValueError, match="do not fit"):
            ring.push({"x": np.arange(6)})
    finally:
        seg.close()
        seg.unlink()
    assert seg.name not in pearl_segments()


def test_weight_board_serves_only_the_complete_snapshot_of_the_asked_segment() -> None:
    params = {"q.0.weight": np.zeros((3, 2), np.float32), "q.0.bias": np.zeros(3, np.float32)}
    layout = ParamLayout.of(params)
    seg = shm.Segment(shm.Layout.of(shm.WeightBoard.specs(layout)))
    try:
        writer = shm.WeightBoard(seg, layout)
        reader = shm.WeightBoard(shm.Segment(seg.layout, seg.name), layout)
        assert reader.read_tag(0) is None  # nothing published yet (a zeroed board is not segment 0's)
        writer.publish({"q.0.weight": np.full((3, 2), 7, np.float32), "q.0.bias": np.arange(3, dtype=np.float32)}, -2)
        got = reader.read_tag(-2)  # the starting policy's tags are negative
        assert got["q.0.weight"].tolist() == [[7, 7]] * 3 and got["q.0.bias"].tolist() == [0, 1, 2]
        assert reader.read_tag(-1) is None and reader.read_tag(5) is None  # another segment's weights
        writer.ctl[shm.SEQ] += 1  # a write in progress
        assert reader.read_tag(-2) is None
    finally:
        seg.close()
        seg.unlink()


# ------------------------------------------------------------------------------------- launcher
def test_transitions_reach_replay_complete_uncorrupted_and_in_schedule_order() -> None:
    """3 actors × 4 envs through small rings (wrapping, full much of the time): every transition of every
    env arrives once, in a consistent state, nothing beyond total_steps, and replay holds each segment's
    shares in actor order."""
    total = 3000
    cfg = DQNConfig(total_steps=total, buffer_size=4096, n_envs=4, learning_starts=0, **SMALL)
    before = pearl_segments()
    job = Job.of(cfg, env_spec(COUNTER), Placement.single(HOST_DEVICE), seed=11, actors=3, learn=False, threads=1)
    launcher = LocalLauncher(job, ring_capacity=48)
    stats = launcher.run()
    assert stats.steps == total and launcher.replay.size == total and stats.updates == 0
    store = launcher.replay.kernels.store
    obs, nxt = store["obs"][:total].numpy(), store["next_obs"][:total].numpy()
    reward, term = store["reward"][:total].numpy(), store["terminated"][:total].numpy()
    assert np.array_equal(nxt[:, :2], obs[:, :2]) and np.array_equal(nxt[:, 2], obs[:, 2] + 1)
    assert np.array_equal(reward, obs[:, 2])
    lengths = np.array([episode_length(tag, ep) for tag, ep in obs[:, :2]])
    assert np.array_equal(term, (nxt[:, 2] >= lengths).astype(np.float32))
    seen: dict[tuple[float, float], list[int]] = defaultdict(list)
    for tag, ep, t in obs:
        seen[(tag, ep)].append(int(t))
    assert len({tag for tag, _ in seen}) == 12  # every env of every actor delivered
    for key, ts in seen.items():
        assert sorted(ts) == list(range(len(ts))), f"env {key}: lost or repeated steps"
        assert ts == sorted(ts), f"env {key}: steps out of order"
    sched = launcher.schedule
    owner = obs[:, 0] // 7919  # actor a's envs are tagged with its seed, 11 + a·7919, plus the env index
    for k in range(sched.segments):
        lo = k * sched.segment_steps
        for a in range(3):
            rows = owner[lo + sched.offset(k, a):lo + sched.offset(k, a) + sched.share(k, a)]
            assert (rows == a).all(), f"segment {k}: actor {a}'s share is not where the schedule puts it"
    assert len(stats.episodes) > 100
    assert pearl_segments() == before  # the run's segment is gone


@pytest.mark.parametrize("prioritized", [False, True])
def test_sequential_and_local_launchers_give_bit_identical_parameters(prioritized: bool) -> None:
    """The schedule, not timing, decides what each update sees: both launchers end with the same bits."""
    cfg = DQNConfig(total_steps=3000, learning_starts=400, train_freq=64, gradient_steps=32, n_envs=3,
                    target_update_interval=64, prioritized=prioritized, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=5, actors=2, policy_lag=1, threads=1)
    a, b = SequentialLauncher(job).run(), LocalLauncher(job).run()
    sched = job.schedule()
    assert a.updates == b.updates == sched.updates_through(sched.segments - 1) > 0
    assert_same_params(a.final_params, b.final_params)
    assert sorted(e.ret for e in a.episodes) == sorted(e.ret for e in b.episodes)


def test_ddpg_with_ornstein_uhlenbeck_noise_gives_the_same_bits_on_both_launchers() -> None:
    """OU noise carries state from step to step and restarts with each episode (Pendulum's end at 200 steps):
    the schedule still decides everything, so both launchers give the same bits, and not those of Gaussian
    noise of the same σ."""
    cfg = DDPGConfig(total_steps=1200, learning_starts=200, n_envs=2, buffer_size=5_000, action_noise=0.5,
                     noise_type="ornstein-uhlenbeck", **SMALL)
    job = Job.of(cfg, env_spec("Pendulum-v1"), Placement.single(HOST_DEVICE), seed=3, actors=2, policy_lag=1, threads=1)
    a, b = SequentialLauncher(job).run(), LocalLauncher(job).run()
    # 300 steps per env: every env ends an episode and runs 99 steps of its next one with a restarted process
    assert a.updates == b.updates > 0 and len(a.episodes) == len(b.episodes) == 4
    assert_same_params(a.final_params, b.final_params)
    assert sorted(e.ret for e in a.episodes) == sorted(e.ret for e in b.episodes)
    gauss = SequentialLauncher(job.replace(config=cfg.replace(noise_type="gaussian"))).run()
    assert sorted(e.ret for e in gauss.episodes) != sorted(e.ret for e in a.episodes)


def _train_params(tmp_path: Path, name: str, **options) -> tuple[float, dict[str, np.ndarray]]:
    cfg = DQNConfig(total_steps=3000, learning_starts=400, train_freq=64, gradient_steps=32, n_envs=2,
                    target_update_interval=64, **SMALL)
    result = train("dqn", "CartPole-v1", config=cfg, runs_dir=str(tmp_path / name), eval_episodes=3,
                   eval_every=0, checkpoint_every=0, **options)
    from pearl.runtime import checkpoint as ckpt
    learn = ckpt.read_checkpoint(ckpt.candidates(Path(result.run_dir) / "checkpoints")[0]).learn
    return result.eval_return_mean, learn


def test_a_seed_repeats_bit_for_bit_also_beside_a_cpu_hog(tmp_path) -> None:
    """Two default runs of a seed, one of them while another process keeps both cores busy: the same eval
    return and the same final parameters (networks, targets, Adam moments)."""
    ret1, learn1 = _train_params(tmp_path, "quiet", actors=2)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        time.sleep(0.5)
        ret2, learn2 = _train_params(tmp_path, "busy", actors=2)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert ret1 == ret2
    assert learn1.keys() == learn2.keys()
    for name in learn1:
        assert np.array_equal(learn1[name], learn2[name]), name


def test_collection_only_makes_no_updates(tmp_path) -> None:
    cfg = DQNConfig(total_steps=2000, n_envs=8, **SMALL)
    result = train("dqn", "CartPole-v1", config=cfg, runs_dir=str(tmp_path), eval_episodes=0, learn=False)
    assert result.updates == 0 and result.steps == 2000 and not result.learn
    assert result.kernel_seconds["act"] > 0 and result.kernel_seconds["replay_insert"] > 0


def test_an_env_that_raises_ends_the_run_with_its_message(tmp_path) -> None:
    before = pearl_segments()
    cfg = DQNConfig(total_steps=5000, **SMALL)
    with pytest.raises(PearlError, match=r"actor 0 failed: RuntimeError: the simulator crashed \(after 1 restart"):
        train("dqn", "counter_env:PearlFailing-v0", config=cfg, runs_dir=str(tmp_path), eval_episodes=0,
              max_restarts=1)
    assert pearl_segments() == before
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert summary["status"] == "interrupted" and "simulator crashed" in summary["reason"]


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def test_sigterm_leaves_no_process_and_no_shared_memory(tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "pearl", "train", "--algo", "dqn", "--env", "CartPole-v1",
                             "--steps", "1000000", "--actors", "2", "--launcher", "local", "--runs-dir", str(tmp_path),
                             "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    actors: list[int] = []
    while time.monotonic() < deadline:  # wait until both actors run and a metrics line was written
        actors = _children(proc.pid)
        metrics = list(tmp_path.glob("*/metrics.jsonl"))
        if len(actors) >= 2 and metrics and metrics[0].read_text().count("\n") >= 2:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("training did not start within 120 s")
    assert pearl_segments(proc.pid)  # the run's segment exists while it trains
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    for pid in actors:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert not pearl_segments(proc.pid)
    run = next(tmp_path.glob("*/config.json")).parent  # runs_dir may also keep profiles/
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert (run / "metrics.jsonl").read_text().count("\n") >= 2  # what was written is kept
    # where it stopped is saved, so --resume loses nothing
    from pearl.runtime import checkpoint as ckpt
    assert summary["resume"] == f"pearl train --resume {run}"
    assert ckpt.read_checkpoint(ckpt.candidates(run / "checkpoints")[0]).steps > 0


@pytest.mark.parametrize("args,fragment", [(["--actors", "0"], "--actors"), (["--actors", "100000"], "at most"),
                                           (["--envs-per-actor", "1000000"], "at most"),
                                           (["--envs-per-actor", "-3"], "--envs-per-actor"),
                                           (["--plan", "p.json", "--actors", "2"], "--plan"),
                                           (["--policy-lag", "-1"], "--policy-lag"),
                                           (["--policy-lag", "500"], "more than replay holds"),
                                           (["--launcher", "loca"], "did you mean local"),
                                           (["--launcher", "local", "--sequential"], "disagree"),
                                           (["--segment-steps", "100"], "multiple of 256"),
                                           (["--segment-steps", "256", "--actors", "2", "--envs-per-actor", "200"],
                                            "does not divide among 2 actor(s)"),
                                           (["--eval-every", "-5"], "--eval-every")])
def test_bad_runtime_options_get_one_error_line(capsys, tmp_path, args, fragment) -> None:
    from cli_support import run_cli

    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "100",
                             "--runs-dir", str(tmp_path), *args)
    assert code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]


def test_cli_collection_only_reports_the_layout(capsys, tmp_path) -> None:
    from cli_support import run_cli

    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "3000",
                             "--no-learn", "--actors", "2", "--envs-per-actor", "16", "--eval-episodes", "0",
                             "--runs-dir", str(tmp_path), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert (result["actors"], result["envs_per_actor"], result["learn"], result["updates"]) == (2, 16, False, 0)
    assert result["steps"] == 3000 and result["env_steps_per_s"] > 0


def test_a_killed_actor_is_restarted_and_the_run_finishes(tmp_path) -> None:
    cfg = DQNConfig(total_steps=30_000, learning_starts=500, train_freq=64, gradient_steps=16, n_envs=4, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=3, actors=2, threads=1)
    launcher = LocalLauncher(job)
    killed: list[int] = []

    def kill_once(steps: int) -> None:
        if not killed and steps >= 2_000:
            killed.append(launcher.actors[1].pid)
            os.kill(killed[0], signal.SIGKILL)

    before = pearl_segments()
    stats = launcher.run(progress=kill_once)
    assert killed and stats.restarts == 1 and "actor 1 exited with code -9" in launcher.restart_log[0]
    assert stats.steps == cfg.total_steps and stats.lost_steps_max == cfg.n_envs
    assert launcher.replay.size == cfg.total_steps  # its share went on from the rows it had pushed
    assert stats.updates == job.schedule().updates_through(job.schedule().segments - 1)
    assert launcher.actors[1].pid != killed[0]
    assert pearl_segments() == before


def test_segments_of_dead_learners_are_swept(tmp_path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"{shm.SEGMENT_PREFIX}{dead.stdout.strip()}-0badf00d"
    live = tmp_path / f"{shm.SEGMENT_PREFIX}{os.getpid()}-0badf00d"
    other = tmp_path / "pearl-notapid-x"
    for path in (stale, live, other):
        path.write_bytes(b"\0" * 64)
    assert shm.sweep_stale(tmp_path) == [stale.name]
    assert not stale.exists() and live.exists() and other.exists()
