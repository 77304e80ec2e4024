"""The Ray launcher on a local multi-node Ray cluster: the same learning as the sequential launcher, roles on the
planned nodes, every transition once, a killed worker restarted, placement errors, nothing left running.

One `ray.cluster_utils.Cluster` for the whole module (starting one costs seconds): a head with one CPU that
carries the learner's resource (the driver is connected to it), a node for the actors ({"actors": 2}) and a
spare node that only node affinity reaches. The actors' node is also plan node "a" and the spare node plan node
"b" (their pearl_node_a / pearl_node_b resources), for the cluster plans. Ray is imported only after
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 is set (pearl's loopback setting), and tests check for it with
`find_spec`, which does not import it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from counter_env import episode_length
from learn_support import assert_same_params

from pearl.algos import DDPGConfig, DQNConfig, SACConfig, TD3Config
from pearl.envs import env_spec
from pearl.errors import ConfigError
from pearl.device import HOST_DEVICE, DeviceId
from pearl.runtime.job import Job, Placement
from pearl.runtime.local import LocalLauncher
from pearl.runtime.sequential import SequentialLauncher

TESTS = Path(__file__).parent
COUNTER = "counter_env:PearlCounter-v0"
SMALL = dict(hidden=(16, 16), batch_size=16, learning_rate=1e-3)
CUDA0 = DeviceId.parse("cuda:0")
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason='Ray is not installed (pip install "pearl[ray]")')


def test_without_ray_the_ray_launcher_is_one_error_line(capsys, monkeypatch, tmp_path) -> None:
    from cli_support import run_cli

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now fails and find_spec finds nothing, as without it
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "100",
                           "--launcher", "ray", "--runs-dir", str(tmp_path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and 'pip install "pearl[ray]"' in lines[0]


@pytest.mark.parametrize("args,fragment", [(["--ray-address", "10.0.0.5:6379"], "needs --launcher ray"),
                                           (["--replay-shards", "2"], "needs --launcher ray"),
                                           (["--replay-shards", "-1", "--launcher", "ray"], "--replay-shards")])
def test_ray_options_need_the_ray_launcher(capsys, tmp_path, args, fragment) -> None:
    from cli_support import run_cli

    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "100",
                           "--runs-dir", str(tmp_path), *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]


# ------------------------------------------------------------------------------------------- cluster
def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        children.setdefault(int(text[text.rindex(")") + 2:].split()[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                out.add(pid)
        except OSError:
            continue
    return out


@pytest.fixture(scope="module")
def cluster():
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray is first imported: loopback only
    old_path = os.environ.get("PYTHONPATH")
    # the nodes (and the workers they start) import counter_env by name
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), old_path]))
    from ray.cluster_utils import Cluster

    from pearl.runtime.ray.session import require_ray

    store = 80 * 2**20
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"learner": 1},
                                                      "object_store_memory": store, "include_dashboard": False})
    actors = c.add_node(num_cpus=2, resources={"actors": 2, "pearl_node_a": 1}, object_store_memory=store)
    spare = c.add_node(num_cpus=2, resources={"pearl_node_b": 1}, object_store_memory=store)
    c.wait_for_nodes()
    ray = require_ray()
    ray.init(address=c.address, log_to_driver=False, configure_logging=False)
    started = descendants(os.getpid())
    try:
        yield SimpleNamespace(head=c.head_node.node_id, actors=actors.node_id, spare=spare.node_id, ray=ray, c=c)
    finally:
        ray.shutdown()
        c.shutdown()
        if old_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_path
    deadline = time.monotonic() + 20
    while alive(started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(started), f"Ray processes left after the tests: {sorted(alive(started))}"


def on_actors_node(cpus: float = 1.0):
    from pearl.runtime.ray.placement import ShardPlacement

    return ShardPlacement(num_cpus=cpus, resources={"actors": 1})


def on_head():
    """The learner's placement by resource: the head carries the only "learner"."""
    from pearl.runtime.ray.placement import ShardPlacement

    return ShardPlacement(num_cpus=1, resources={"learner": 1})


@needs_ray
def test_ray_gives_the_sequential_and_local_launchers_parameters_bit_for_bit(cluster) -> None:
    """The Ray launcher changes speed, not the learning: same seed and lag, same final bits."""
    from pearl.runtime.ray.launcher import RayLauncher

    cfg = DQNConfig(total_steps=3000, learning_starts=400, train_freq=64, gradient_steps=32, n_envs=3,
                    target_update_interval=64, prioritized=True, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=5, actors=2, policy_lag=1, threads=1)
    a, local = SequentialLauncher(job).run(), LocalLauncher(job).run()
    ray_launcher = RayLauncher(job, actor_placement=on_actors_node(), learner_placement=on_head())
    b = ray_launcher.run()
    sched = job.schedule()
    assert a.updates == b.updates == local.updates == sched.updates_through(sched.segments - 1) > 0
    assert_same_params(a.final_params, b.final_params)
    assert_same_params(local.final_params, b.final_params)
    assert sorted(e.ret for e in a.episodes) == sorted(e.ret for e in b.episodes)
    assert b.kernel_calls["act"] == a.kernel_calls["act"] and b.restarts == 0
    # the roles ran where the placement put them (asked from inside each): the workers on the actors' node,
    # the learner on the head, the one node with its resource
    assert ray_launcher.nodes == [cluster.actors] * 2 and ray_launcher.learner_node == cluster.head
    assert b.roles["learner"].startswith(f"node {cluster.head[:8]}")  # what `pearl train` prints
    assert b.roles["actor worker 1"].startswith(f"node {cluster.actors[:8]}")
    assert ray_launcher.workers == [] and ray_launcher.role is None  # stopped


@needs_ray
def test_ray_gives_the_sequential_launchers_bits_with_ornstein_uhlenbeck_noise(cluster) -> None:
    """DDPG's OU processes live in each worker's act kernel and restart with its envs' episodes (Pendulum's end
    at 200 steps; 300 per env here): the same bits as the sequential launcher."""
    from pearl.runtime.ray.launcher import RayLauncher

    cfg = DDPGConfig(total_steps=1200, learning_starts=200, n_envs=2, buffer_size=5_000, action_noise=0.5,
                     noise_type="ornstein-uhlenbeck", **SMALL)
    job = Job.of(cfg, env_spec("Pendulum-v1"), Placement.single(HOST_DEVICE), seed=3, actors=2, policy_lag=1, threads=1)
    a = SequentialLauncher(job).run()
    b = RayLauncher(job, actor_placement=on_actors_node(), learner_placement=on_head()).run()
    assert a.updates == b.updates > 0 and len(b.episodes) == 4
    assert_same_params(a.final_params, b.final_params)
    assert sorted(e.ret for e in a.episodes) == sorted(e.ret for e in b.episodes)


@needs_ray
@pytest.mark.parametrize("config_class", [TD3Config, SACConfig], ids=["td3", "sac"])
def test_ray_gives_the_sequential_launchers_bits_for_stochastic_targets(cluster, config_class) -> None:
    """TD3's smoothing noise and SAC's sampled actions are drawn at (seed, update index) in the learner, and SAC's
    exploration in each worker's act kernel: the same bits as the sequential launcher."""
    from pearl.runtime.ray.launcher import RayLauncher

    cfg = config_class(total_steps=1000, learning_starts=200, n_envs=2, buffer_size=5_000, **SMALL)
    job = Job.of(cfg, env_spec("Pendulum-v1"), Placement.single(HOST_DEVICE), seed=3, actors=2, policy_lag=1, threads=1)
    a = SequentialLauncher(job).run()
    b = RayLauncher(job, actor_placement=on_actors_node(), learner_placement=on_head()).run()
    assert a.updates == b.updates == 800
    assert_same_params(a.final_params, b.final_params)
    assert sorted(e.ret for e in a.episodes) == sorted(e.ret for e in b.episodes)


@needs_ray
@pytest.mark.parametrize("config_class", [DQNConfig, TD3Config], ids=["dqn", "td3"])
def test_ray_gives_the_sequential_launchers_bits_at_bf16_mixed(cluster, config_class) -> None:
    """Learn in bf16-mixed (DQN's written-out backward pass, TD3's autograd loss): its bfloat16 products are a
    function of the same batches and weights on every launcher, so the same bits too."""
    from pearl.runtime.ray.launcher import RayLauncher

    env = "CartPole-v1" if config_class is DQNConfig else "Pendulum-v1"
    small = {**SMALL, "hidden": (32, 32)}  # a 16-wide layer is thinner than MIXED_MIN_WIDTH: it would stay fp32
    cfg = config_class(total_steps=800, learning_starts=200, n_envs=2, buffer_size=5_000, **small)
    job = Job.of(cfg, env_spec(env), Placement.single(HOST_DEVICE), seed=3, actors=2, policy_lag=1, threads=1,
                 precision="bf16-mixed")
    a = SequentialLauncher(job).run()
    b = RayLauncher(job, actor_placement=on_actors_node(), learner_placement=on_head()).run()
    assert a.updates == b.updates > 0
    assert_same_params(a.final_params, b.final_params)
    fp32 = SequentialLauncher(job.replace(precision="fp32")).run()
    assert any((fp32.final_params[k] != a.final_params[k]).any() for k in a.final_params)  # bf16 did compute


@needs_ray
def test_every_transition_from_several_workers_arrives_once_in_schedule_order(cluster, tmp_path) -> None:
    """3 workers × 4 counter envs, pinned to the spare node, the learner pinned to the actors' node: every env's
    steps reach the learner's replay once, in order, and replay (read from the run's checkpoint) holds each
    segment's shares in actor order."""
    from pearl.runtime import checkpoint as ckpt
    from pearl.runtime.ray.launcher import RayLauncher
    from pearl.runtime.ray.placement import ShardPlacement

    total = 3000
    cfg = DQNConfig(total_steps=total, buffer_size=4096, n_envs=4, learning_starts=0, **SMALL)
    job = Job.of(cfg, env_spec(COUNTER), Placement.single(HOST_DEVICE), seed=11, actors=3, learn=False, threads=1)
    meta = {"algo": "dqn", "env": COUNTER, "seed": 11, "hyperparameters": cfg.to_dict()}
    launcher = RayLauncher(job, checkpointer=ckpt.Checkpointer(tmp_path, 0, meta),
                           actor_placement=ShardPlacement(num_cpus=0.5, node_id=cluster.spare),
                           learner_placement=ShardPlacement(num_cpus=1, node_id=cluster.actors))
    stats = launcher.run()
    assert launcher.nodes == [cluster.spare] * 3 and launcher.learner_node == cluster.actors
    assert stats.steps == total and launcher.replay_size == total and stats.updates == 0
    store = ckpt.read_checkpoint(stats.checkpoints[-1]).replay
    assert store is not None and int(store["index.size"]) == total
    obs, nxt, reward, term = store["obs"], store["next_obs"], store["reward"], store["terminated"]
    assert np.array_equal(nxt[:, :2], obs[:, :2]) and np.array_equal(nxt[:, 2], obs[:, 2] + 1)
    assert np.array_equal(reward, obs[:, 2])
    lengths = np.array([episode_length(tag, ep) for tag, ep in obs[:, :2]])
    assert np.array_equal(term, (nxt[:, 2] >= lengths).astype(np.float32))
    seen: dict[tuple[float, float], list[int]] = defaultdict(list)
    for tag, ep, t in obs:
        seen[(tag, ep)].append(int(t))
    assert len({tag for tag, _ in seen}) == 12  # every env of every worker delivered
    for key, ts in seen.items():
        assert ts == list(range(len(ts))), f"env {key}: lost, repeated or reordered steps"
    sched = launcher.schedule
    owner = obs[:, 0] // 7919  # worker a's envs are tagged with its seed, 11 + a·7919, plus the env index
    for k in range(sched.segments):
        lo = k * sched.segment_steps
        for a in range(3):
            rows = owner[lo + sched.offset(k, a):lo + sched.offset(k, a) + sched.share(k, a)]
            assert (rows == a).all(), f"segment {k}: worker {a}'s share is not where the schedule puts it"
    assert len(stats.episodes) > 100


@needs_ray
def test_a_worker_killed_with_sigkill_is_restarted_and_the_run_completes(cluster) -> None:
    from pearl.runtime.ray.launcher import RayLauncher

    killed: list[int] = []

    class KillsWorkerOne(RayLauncher):
        """Kills worker 1's process once, right after segment 5's updates (a fixed point of the run)."""

        def _publish(self, tag: int) -> None:
            if tag == 5 and not killed:
                killed.append(self.pids[1])
                os.kill(self.pids[1], signal.SIGKILL)
            super()._publish(tag)

    cfg = DQNConfig(total_steps=4000, learning_starts=500, train_freq=64, gradient_steps=16, n_envs=4, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=3, actors=2, threads=1)
    launcher = KillsWorkerOne(job, actor_placement=on_actors_node())
    stats = launcher.run()
    assert killed and stats.restarts == 1 and launcher.restart_log[0].startswith("actor 1 died")
    assert stats.steps == cfg.total_steps and launcher.replay_size == cfg.total_steps
    assert stats.updates == job.schedule().updates_through(job.schedule().segments - 1)
    assert launcher.pids[1] != killed[0] and launcher.nodes == [cluster.actors] * 2


class Recovering:
    """Mixed into RayLauncher by the recovery tests: keeps the checkpoint each recovery went on from."""

    def _newest_checkpoint(self):
        got = super()._newest_checkpoint()
        self.went_on_from = [*getattr(self, "went_on_from", []), got]
        return got


def recovery_job(seed: int, tmp_path: Path, learners: int = 1, every: int = 32):
    """DQN on CartPole with a checkpoint every `every` updates (two segments' at 16 a segment)."""
    from pearl.runtime import checkpoint as ckpt

    cfg = DQNConfig(total_steps=3072, learning_starts=256, train_freq=256, gradient_steps=16, n_envs=2,
                    prioritized=True, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=seed, actors=1, threads=1,
              learners=learners)
    meta = {"algo": "dqn", "env": "CartPole-v1", "seed": seed, "hyperparameters": cfg.to_dict(), "learners": learners}
    return job, ckpt.Checkpointer(tmp_path, every, meta)


@needs_ray
def test_a_learner_killed_with_sigkill_is_placed_again_from_the_newest_checkpoint_and_the_run_completes(
        cluster, tmp_path) -> None:
    """The learner's state is the run's: its death has every role placed again, the learner restored from the
    newest checkpoint, and the run goes on to its budget with the bits of a resume from that checkpoint."""
    from pearl.runtime.ray.launcher import RayLauncher

    class KillsTheLearner(Recovering, RayLauncher):
        def _publish(self, tag: int) -> None:
            if tag == 6 and not self.recoveries:
                os.kill(self.role._call("pid"), signal.SIGKILL)
            super()._publish(tag)

    job, checkpointer = recovery_job(2, tmp_path)
    launcher = KillsTheLearner(job, checkpointer=checkpointer, actor_placement=on_actors_node(),
                               learner_placement=on_head())
    got = launcher.run()
    [used] = launcher.went_on_from
    assert got.steps == job.config.total_steps and got.restarts == 1 and len(got.recoveries) == 1
    assert got.recoveries[0].startswith("the learner died") and used.path.name in got.recoveries[0]
    assert 0 < used.steps <= 7 * 256 and got.redone_steps >= 7 * 256 - used.steps
    assert launcher.namespace.generation == 1 and got.lost_steps_max == 0
    resumed = RayLauncher(job, used, actor_placement=on_actors_node(), learner_placement=on_head()).run()
    assert resumed.updates == got.updates
    assert_same_params(resumed.final_params, got.final_params)


@needs_ray
def test_a_learner_lost_with_no_restart_left_ends_the_run_with_one_error_and_keeps_the_newest_checkpoint(
        cluster, tmp_path) -> None:
    """--max-restarts 0: the learner's death ends the run with an error that says so and how to resume; no
    checkpoint is taken from the roles left (their state is mid-step), so the newest one written stays."""
    from pearl.runtime.actors import ActorFailed
    from pearl.runtime.ray.launcher import RayLauncher

    class KillsTheLearner(RayLauncher):
        def _publish(self, tag: int) -> None:
            if tag == 6:
                os.kill(self.role._call("pid"), signal.SIGKILL)
            super()._publish(tag)

    job, checkpointer = recovery_job(2, tmp_path)
    launcher = KillsTheLearner(job, checkpointer=checkpointer, max_restarts=0, actor_placement=on_actors_node(),
                               learner_placement=on_head())
    with pytest.raises(ActorFailed, match=r"the learner died.*\(after 0 restart\(s\); the limit is 0\); once the "
                                          r"cluster can hold the run again, `pearl train --resume"):
        launcher.run()
    newest = checkpointer.written[-1]
    assert launcher.workers == [] and launcher.role is None and launcher.checkpoint_now() is None
    assert checkpointer.written[-1] == newest and 0 < newest.stat().st_size


@needs_ray
def test_an_interrupted_ray_run_checkpoints_the_learners_state_and_resumes_as_the_sequential_launcher(
        cluster, tmp_path) -> None:
    """Ctrl-C in the driver: the learner role hands over its state before it stops, checkpoint_now writes it
    (replay included), and resuming from it on Ray gives the sequential launcher's parameters bit for bit."""
    from pearl.runtime import checkpoint as ckpt
    from pearl.runtime.ray.launcher import RayLauncher

    class Interrupted(RayLauncher):
        def _publish(self, tag: int) -> None:
            super()._publish(tag)
            if tag == 4:
                raise KeyboardInterrupt

    cfg = DQNConfig(total_steps=2560, learning_starts=256, train_freq=256, gradient_steps=16, n_envs=2,
                    prioritized=True, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=4, actors=2, threads=1)
    meta = {"algo": "dqn", "env": "CartPole-v1", "seed": 4, "hyperparameters": cfg.to_dict()}
    launcher = Interrupted(job, checkpointer=ckpt.Checkpointer(tmp_path, 0, meta), actor_placement=on_actors_node(),
                           learner_placement=on_head())
    with pytest.raises(KeyboardInterrupt):
        launcher.run()
    saved = ckpt.read_checkpoint(launcher.checkpoint_now())
    assert (saved.steps, saved.updates) == (5 * 256, 4 * 16) and len(saved.replay["reward"]) == 5 * 256
    ray_stats = RayLauncher(job, saved, actor_placement=on_actors_node(), learner_placement=on_head()).run()
    sequential = SequentialLauncher(job, saved).run()
    assert ray_stats.steps == sequential.steps == cfg.total_steps and ray_stats.updates == sequential.updates
    assert_same_params(sequential.final_params, ray_stats.final_params)


@needs_ray
def test_an_env_that_raises_ends_the_run_with_its_message_once_the_restarts_are_spent(cluster) -> None:
    from pearl.runtime.actors import ActorFailed
    from pearl.runtime.ray.launcher import RayLauncher

    cfg = DQNConfig(total_steps=5000, **SMALL)
    job = Job.of(cfg, env_spec("counter_env:PearlFailing-v0"), Placement.single(HOST_DEVICE), seed=0, actors=1, threads=1)
    launcher = RayLauncher(job, max_restarts=1, actor_placement=on_actors_node())
    with pytest.raises(ActorFailed, match=r"actor 0 failed: RuntimeError: the simulator crashed \(after 1 restart"):
        launcher.run()
    assert launcher.restarts == 1 and launcher.workers == []


@needs_ray
def test_a_role_that_cannot_be_placed_is_refused_before_any_work(cluster) -> None:
    from pearl.runtime.ray.launcher import RayLauncher
    from pearl.runtime.ray.placement import ShardPlacement

    cfg = DQNConfig(total_steps=1000, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=0, actors=3, threads=1)
    ray = cluster.ray

    def idle() -> bool:  # every CPU free (a stopped worker gives its share back a moment after it is killed)
        deadline = time.monotonic() + 15
        while ray.available_resources().get("CPU") != ray.cluster_resources()["CPU"] and time.monotonic() < deadline:
            time.sleep(0.1)
        return ray.available_resources().get("CPU") == ray.cluster_resources()["CPU"]

    assert idle()
    for placement, message in ((ShardPlacement(num_cpus=1, resources={"gpu_node": 1}),
                                "actor worker 0 cannot be placed: the cluster has 0 gpu_node"),
                               (on_actors_node(), "actor worker 2 cannot be placed: the cluster has 2 actors"),
                               (ShardPlacement(num_cpus=0.75, node_id=cluster.spare),
                                "actor worker 2 cannot be placed on node .*: it has 2 CPU, the roles pinned")):
        launcher = RayLauncher(job, actor_placement=placement)
        with pytest.raises(ConfigError, match=message):
            launcher.run()
        assert launcher.workers == [] and launcher.pids == [] and launcher.learner_node is None
    gpu_job = Job.of(cfg, env_spec("CartPole-v1"), Placement(CUDA0, HOST_DEVICE, HOST_DEVICE), seed=0, actors=2,
                  threads=1)
    launcher = RayLauncher(gpu_job)  # acting on a GPU: each worker asks for a share of one
    with pytest.raises(ConfigError, match="actor worker 0 cannot be placed: the cluster has 0 GPU"):
        launcher.run()
    learn_on_gpu = Job.of(cfg, env_spec("CartPole-v1"), Placement(HOST_DEVICE, HOST_DEVICE, CUDA0), seed=0, actors=2,
                       threads=1)
    launcher = RayLauncher(learn_on_gpu)  # the learner asks for the GPU its device is on
    with pytest.raises(ConfigError, match="learner cannot be placed: the cluster has 0 GPU"):
        launcher.run()
    assert launcher.learner_node is None and launcher.pids == []
    assert idle()  # no role was started (one refused after others would hold their CPUs)
    # what the roles ask for: the learner a whole GPU of its own, or an equal share of one with the workers
    learner, _, _, (worker, *_) = launcher._placements(ray)
    assert (learner.num_gpus, worker.num_gpus) == (1.0, 0.0)
    shared = RayLauncher(Job.of(cfg, env_spec("CartPole-v1"), Placement.single(CUDA0), seed=0, actors=2, threads=1))
    learner, _, _, workers = shared._placements(ray)
    assert learner.num_gpus == workers[0].num_gpus == workers[1].num_gpus == pytest.approx(1 / 3)
    assert learner.node_id == ray.get_runtime_context().get_node_id() and learner.soft  # near the driver
    # a plan that spreads the actors: each worker on its node, sharing the GPU only with the roles on that GPU
    from pearl.runtime.job import RoleNodes

    nodes = RoleNodes("a", "a", "a", workers=(("a", CUDA0), ("a", CUDA0), ("b", CUDA0)))
    spread = RayLauncher(Job.of(cfg, env_spec("CartPole-v1"), Placement.single(CUDA0), seed=0, actors=3, threads=1),
                         role_nodes=nodes)
    learner, _, _, workers = spread._plan_placements(ray, nodes)
    assert [w.node_id for w in workers] == [cluster.actors, cluster.actors, cluster.spare]
    assert [w.num_gpus for w in workers] == pytest.approx([1 / 3, 1 / 3, 1.0])
    assert learner.num_gpus == pytest.approx(1 / 3)
    assert [w.num_cpus for w in workers] == pytest.approx([2 / 3, 2 / 3, 1.0])
    # a plan's learner group, one learner on every node: learner 1 pinned to its node, with a GPU of its own there
    group = RoleNodes("a", "a", "a", learners=("b",))
    two = RayLauncher(Job.of(cfg, env_spec("CartPole-v1"), Placement.single(CUDA0), seed=0, actors=1, threads=1,
                          learners=2), role_nodes=group)
    learner, members, _, _ = two._plan_placements(ray, group)
    assert [m.node_id for m in members] == [cluster.spare] and not members[0].soft
    assert members[0].num_gpus == 1.0 and learner.num_gpus == pytest.approx(1 / 2)


@needs_ray
def test_pearl_train_on_the_ray_launcher_records_it_and_resumes_on_it(capsys, cluster, tmp_path) -> None:
    """`launcher="ray"` joins the Ray this process already runs; config.json records the launcher and the
    address (none: a local instance), and `pearl train --resume` goes on with the run on Ray."""
    from cli_support import run_cli

    from pearl.training import train

    cfg = DQNConfig(total_steps=2048, learning_starts=256, train_freq=256, gradient_steps=32, n_envs=2, **SMALL)
    first = train("dqn", "CartPole-v1", config=cfg, launcher="ray", actors=2, eval_episodes=0, eval_every=0,
                  runs_dir=str(tmp_path), max_seconds=1e-9)  # stops after its first segment
    assert first.launcher == "ray" and first.steps == 256
    config = json.loads((Path(first.run_dir) / "config.json").read_text())
    assert config["launcher"] == "ray" and config["ray_address"] is None
    code, out, err = run_cli(capsys, "train", "--resume", first.run_dir, "--eval-episodes", "2", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["launcher"] == "ray" and result["steps"] == 2048 and result["start_steps"] == 256
    assert result["actor_restarts"] == 0 and set(result["roles"]) == {"learner", "actor worker 0", "actor worker 1"}
    # the learner's idle time is its wall time less its role's work, which holds its kernels; the driver's own wait
    # for the workers' segments is kept apart (the learner works on earlier segments meanwhile)
    waits, kernels = result["waits"], result["kernel_seconds"]
    busy = result["train_wall_s"] - waits["learner_wait_s"] - result["learning_paused_s"]
    assert sum(kernels[k] for k in ("replay_insert", "replay_sample", "learn", "priority_update")) <= busy
    assert 0 <= waits["learner_wait_s"] <= result["train_wall_s"] and waits["driver_wait_s"] >= 0


@needs_ray
def test_replay_shards_hold_the_run_and_its_checkpoints(cluster, tmp_path) -> None:
    """--replay-shards 2: replay lives in two replay-server actors; the run's checkpoint holds their contents,
    and a resume loads them back into new shards and finishes the run."""
    from pearl.runtime import checkpoint as ckpt
    from pearl.training import resume, train

    cfg = DQNConfig(total_steps=2048, learning_starts=256, train_freq=256, gradient_steps=32, n_envs=2,
                    prioritized=True, **SMALL)
    first = train("dqn", "CartPole-v1", config=cfg, launcher="ray", actors=2, replay_shards=2, eval_episodes=0,
                  eval_every=0, runs_dir=str(tmp_path), max_seconds=1e-9)  # stops after its first segment
    run = Path(first.run_dir)
    assert json.loads((run / "config.json").read_text())["replay_shards"] == 2
    saved = ckpt.read_checkpoint(ckpt.candidates(run / "checkpoints")[0])
    assert saved.replay is not None and len(saved.replay["shard0.reward"]) + len(saved.replay["shard1.reward"]) == 256
    result = resume(str(run), eval_episodes=2)
    assert result.steps == 2048 and result.start_steps == 256 and result.updates == 7 * 32
    assert np.isfinite(result.eval_return_mean)


@needs_ray
def test_sigterm_stops_the_local_ray_instance_pearl_started_and_leaves_no_process(tmp_path) -> None:
    """`pearl train --launcher ray` without an address starts its own Ray instance; SIGTERM ends the run like
    the local launcher's (status 143, the record kept, a checkpoint to resume from) and no Ray process stays."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen([sys.executable, "-m", "pearl", "train", "--algo", "dqn", "--env", "CartPole-v1",
                             "--steps", "1000000", "--launcher", "ray", "--runs-dir", str(tmp_path), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until a metrics line was written: Ray and the worker run
        metrics = list(tmp_path.glob("*/metrics.jsonl"))
        if metrics and metrics[0].read_text().count("\n") >= 2:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("training did not start within 120 s")
    ray_processes = descendants(proc.pid)
    assert ray_processes, "the run started no Ray process"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, (out[-2000:], err)
    assert "Traceback" not in err
    deadline = time.monotonic() + 20
    while alive(ray_processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(ray_processes), f"Ray processes left after SIGTERM: {sorted(alive(ray_processes))}"
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert summary["status"] == "interrupted" and summary["resume"].startswith("pearl train --resume")


@needs_ray
@pytest.mark.parametrize("address,fragment", [("127.0.0.1:1", "nothing answers there"),
                                              ("nonsense", "must be host:port")])
def test_a_ray_address_where_no_cluster_answers_is_one_error_line(capsys, monkeypatch, tmp_path, address,
                                                                  fragment) -> None:
    from cli_support import run_cli

    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # in case this test imports Ray first
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "100",
                           "--launcher", "ray", "--ray-address", address, "--runs-dir", str(tmp_path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]
    assert not list(tmp_path.iterdir())  # refused before the run folder was made


# ------------------------------------------------------------------------------------------- cluster plans
def cluster_plan(capsys, tmp_path: Path, nodes: tuple[str, str], act: str, replay: str, learn: str,
                 spread: dict[str, int] | None = None, shards: dict[str, int] | None = None) -> Path:
    """A DQN CartPole plan of a two-node cluster profile (the reference profile for both nodes), its roles then
    moved to the given nodes and two actor processes on `act`'s cpu (or as `spread` deals them out over the
    nodes' act devices), one replay server on `replay` (or sharded as `shards` says), so that the test decides
    where each role goes."""
    from cli_support import run_cli

    reference = TESTS.parent / "profiles" / "reference.json"
    merged, plan_path = tmp_path / "cluster.json", tmp_path / "plan.json"
    code, _, err = run_cli(capsys, "profile", "merge", *(f"{n}={reference}" for n in nodes), "--network", "40gbe",
                           "--out", str(merged))
    assert code == 0, err
    code, _, err = run_cli(capsys, "plan", "--profile", str(merged), "--algo", "dqn", "--env", "CartPole-v1",
                           "--out", str(plan_path))
    assert code == 0, err
    plan = json.loads(plan_path.read_text())
    node_of = {"env_step": act, "act": act, "replay_insert": replay, "replay_sample": replay,
               "priority_update": replay, "learn": learn}
    plan["mapping"] = {k: f"{node_of[k]}/cpu" for k in plan["mapping"]}
    plan["actor_devices"] = spread or {f"{act}/cpu": 2}
    plan["replay_shards"] = shards or {}
    plan["actors"], plan["envs_per_actor"] = sum(plan["actor_devices"].values()), 2
    plan_path.write_text(json.dumps(plan))
    return plan_path


@needs_ray
def test_a_cluster_plan_puts_each_role_on_the_ray_node_of_its_plan_node(cluster) -> None:
    """Plan node NAME is the Ray node carrying pearl_node_NAME: the workers and the replay server's shard on
    "a" (the actors' node), the learner on "b" (the spare node), each asked from inside the role."""
    from pearl.runtime.job import RoleNodes
    from pearl.runtime.ray.launcher import RayLauncher

    cfg = DQNConfig(total_steps=1536, learning_starts=256, train_freq=256, gradient_steps=8, n_envs=2, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=1, actors=2, threads=1)
    launcher = RayLauncher(job, replay_shards=1, role_nodes=RoleNodes(actors="a", replay="a", learner="b"))
    stats = launcher.run()
    assert stats.steps == cfg.total_steps and stats.updates == job.schedule().updates_through(
        job.schedule().segments - 1)
    assert launcher.node_ids == {"a": cluster.actors, "b": cluster.spare}
    assert launcher.nodes == [cluster.actors] * 2 and launcher.shard_nodes == [cluster.actors]
    assert launcher.learner_node == cluster.spare
    assert stats.roles["learner"].startswith(f"node {cluster.spare[:8]}") and "plan node b" in stats.roles["learner"]
    assert "plan node a" in stats.roles["replay shard 0"] and "plan node a" in stats.roles["actor worker 1"]


@needs_ray
def test_pearl_train_runs_a_cluster_plan_on_its_nodes_and_records_predicted_and_measured(
        capsys, cluster, tmp_path) -> None:
    """`pearl train --plan` of a cluster plan on Ray: the actors and the learner on "b", the replay server on "a"
    (a shard actor there, since it is away from the learner); the record holds the plan and predicted vs
    measured over the learning phase."""
    from cli_support import run_cli

    plan_path = cluster_plan(capsys, tmp_path, ("a", "b"), act="b", replay="a", learn="b")
    code, out, err = run_cli(capsys, "train", "--plan", str(plan_path), "--launcher", "ray", "--steps", "1536",
                             "--set", "learning_starts=256", "--eval-episodes", "0", "--runs-dir",
                             str(tmp_path / "runs"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["steps"] == 1536 and result["actors"] == 2 and result["placement"]["learn"] == "cpu"
    roles = result["roles"]
    assert roles["learner"].startswith(f"node {cluster.spare[:8]}") and "plan node b" in roles["learner"]
    assert roles["actor worker 0"].startswith(f"node {cluster.spare[:8]}")
    assert roles["replay shard 0"].startswith(f"node {cluster.actors[:8]}") and "plan node a" in roles["replay shard 0"]
    check = result["plan_check"]
    assert check["measured"]["phase"] == "learning" and check["measured"]["env_steps_per_s"] > 0
    assert check["predicted"]["env_steps_per_s"] == json.loads(plan_path.read_text())["predicted"]["env_steps_per_s"]
    assert "ray launcher runs" in check["note"]
    run = Path(result["run_dir"])
    assert json.loads((run / "plan.json").read_text())["mapping"]["learn"] == "b/cpu"
    assert json.loads((run / "summary.json").read_text())["plan_check"]["measured"] == check["measured"]


@needs_ray
def test_a_learner_group_on_ray_learns_the_local_launchers_bits_with_a_learner_on_another_node(cluster) -> None:
    """--learners 2 on Ray: learner 1 is an actor the driver placed (here on the spare node), learner 0's node
    address the group's rendezvous; the parameters are the local launcher's group's bit for bit."""
    from pearl.runtime.ray.launcher import RayLauncher
    from pearl.runtime.ray.placement import ShardPlacement

    cfg = DQNConfig(total_steps=1600, learning_starts=400, train_freq=64, gradient_steps=16, n_envs=2,
                    target_update_interval=64, prioritized=True, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=3, actors=1, policy_lag=1, threads=1,
              learners=2)
    local = LocalLauncher(job).run()
    launcher = RayLauncher(job, actor_placement=on_actors_node(), learner_placement=on_head(),
                           member_placement=ShardPlacement(num_cpus=1, node_id=cluster.spare))
    got = launcher.run()
    assert got.updates == local.updates == job.schedule().updates_through(job.schedule().segments - 1) > 0
    assert_same_params(local.final_params, got.final_params)
    assert launcher.member_nodes == [cluster.spare] and launcher.learner_node == cluster.head
    assert got.roles["learner 1"].startswith(f"node {cluster.spare[:8]}")
    assert got.roles["learner 0"].startswith(f"node {cluster.head[:8]}")
    single = LocalLauncher(job.replace(learners=1)).run()  # one learner on the same batches
    for name in single.final_params:
        np.testing.assert_allclose(got.final_params[name], single.final_params[name], rtol=1e-3, atol=1e-5)


@needs_ray
def test_a_learner_of_the_group_killed_with_sigkill_has_the_group_placed_again_and_the_run_completes(
        cluster, tmp_path) -> None:
    """Learner 1's process killed mid-run: learner 0's next collective fails, naming it; the group is placed
    again from the newest checkpoint and the run completes with the bits of a resume from it on 2 learners."""
    from pearl.runtime.ray.launcher import RayLauncher

    class KillsLearnerOne(Recovering, RayLauncher):
        def _publish(self, tag: int) -> None:
            if tag == 5 and not self.recoveries:
                os.kill(self.member_pids[0], signal.SIGKILL)
            super()._publish(tag)

    job, checkpointer = recovery_job(2, tmp_path, learners=2)
    launcher = KillsLearnerOne(job, checkpointer=checkpointer, actor_placement=on_actors_node())
    got = launcher.run()
    [used] = launcher.went_on_from
    assert got.steps == job.config.total_steps and len(got.recoveries) == 1 and "learner 1 died" in got.recoveries[0]
    assert used is not None and used.meta["learners"] == 2 and len(launcher.member_nodes) == 1
    resumed = RayLauncher(job, used, actor_placement=on_actors_node()).run()
    assert_same_params(resumed.final_params, got.final_params)


@needs_ray
def test_a_learner_of_the_group_lost_with_no_restart_left_ends_the_run_naming_it(cluster, tmp_path) -> None:
    from pearl.runtime.learner_group import LearnerGroupFailed
    from pearl.runtime.actors import ActorFailed
    from pearl.runtime.ray.launcher import RayLauncher

    class KillsLearnerOne(RayLauncher):
        def _publish(self, tag: int) -> None:
            if tag == 5:
                os.kill(self.member_pids[0], signal.SIGKILL)
            super()._publish(tag)

    job, checkpointer = recovery_job(2, tmp_path, learners=2)
    launcher = KillsLearnerOne(job, checkpointer=checkpointer, max_restarts=0, actor_placement=on_actors_node())
    with pytest.raises(ActorFailed, match="learner 1 died") as failed:
        launcher.run()
    assert not isinstance(failed.value, LearnerGroupFailed)  # the limit's error, not the loss recovered from
    assert launcher.workers == [] and launcher.role is None and launcher.checkpoint_now() is None


@needs_ray
def test_a_replay_shard_lost_is_rebuilt_from_the_newest_checkpoint_and_the_run_completes(cluster, tmp_path) -> None:
    """A replay shard's actor killed mid-run: its table is gone, so the roles are placed again and the shards
    refilled from the newest checkpoint (contents, sum trees, the client's sampler); the run completes with
    the bits of a resume from that checkpoint."""
    from pearl.runtime.ray.launcher import RayLauncher

    class KillsShardOne(Recovering, RayLauncher):
        def _publish(self, tag: int) -> None:
            if tag == 5 and not self.recoveries:
                cluster.ray.kill(self.shard_handles[1], no_restart=True)
            super()._publish(tag)

    job, checkpointer = recovery_job(6, tmp_path)
    launcher = KillsShardOne(job, checkpointer=checkpointer, replay_shards=2, actor_placement=on_actors_node())
    got = launcher.run()
    [used] = launcher.went_on_from
    assert got.steps == job.config.total_steps and len(got.recoveries) == 1
    assert got.recoveries[0].startswith("a replay shard died") and used.replay is not None
    resumed = RayLauncher(job, used, replay_shards=2, actor_placement=on_actors_node()).run()
    assert_same_params(resumed.final_params, got.final_params)


@needs_ray
def test_a_node_lost_mid_run_takes_its_workers_and_shard_and_the_run_completes_on_the_nodes_left(
        cluster, tmp_path) -> None:
    """A node added for this test holds both actor workers and both replay shards (a soft affinity, which Ray
    keeps only for actors that ask for some CPU); its raylet is killed mid-run. Ray restarts the workers on the
    nodes left, the shards are rebuilt from the newest checkpoint, and the run completes, naming the node lost."""
    from pearl.runtime.ray.launcher import RayLauncher
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from pearl.runtime.ray.placement import ShardPlacement

    doomed = cluster.c.add_node(num_cpus=2, object_store_memory=80 * 2**20)
    cluster.c.wait_for_nodes()
    ready = cluster.ray.remote(num_cpus=0)(lambda: None).options(  # the node takes work: a soft affinity holds
        scheduling_strategy=NodeAffinitySchedulingStrategy(doomed.node_id, soft=False)).remote()
    cluster.ray.get(ready, timeout=60)
    near_doomed = ShardPlacement(num_cpus=0.5, node_id=doomed.node_id, soft=True)

    removed: list[bool] = []

    class LosesANode(Recovering, RayLauncher):
        def _publish(self, tag: int) -> None:
            if tag == 5 and not removed:
                cluster.c.remove_node(doomed, allow_graceful=False)
                removed.append(True)
            super()._publish(tag)

    job, checkpointer = recovery_job(4, tmp_path)
    job = job.replace(actors=2)
    launcher = LosesANode(job, checkpointer=checkpointer, replay_shards=2, actor_placement=near_doomed,
                          replay_placement=dataclasses.replace(near_doomed, num_cpus=0.1),
                          learner_placement=dataclasses.replace(on_head(), num_cpus=0.5))  # room for a shard
    try:
        got = launcher.run()
    finally:
        if not removed:  # the later tests' cluster is the module's
            cluster.c.remove_node(doomed, allow_graceful=False)
    lost = f"node {doomed.node_id[:8]}"
    assert got.steps == job.config.total_steps and got.recoveries and f"{lost} (" in " ".join(got.recoveries)
    assert doomed.node_id not in {*launcher.nodes, *launcher.shard_nodes, launcher.learner_node}
    assert not any(role.startswith(lost) for role in got.roles.values())


@needs_ray
def test_a_learner_of_the_group_that_cannot_be_placed_is_named_before_any_role_starts(cluster) -> None:
    """The other learners copy learner 0's placement by default: the head's one "learner" resource is
    learner 0's, so learner 1 cannot be placed, and no role was started."""
    from pearl.runtime.ray.launcher import RayLauncher

    job = Job.of(DQNConfig(total_steps=1000, **SMALL), env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=0,
              actors=1, threads=1, learners=2)
    launcher = RayLauncher(job, learner_placement=on_head())
    with pytest.raises(ConfigError, match="learner 1 cannot be placed: the cluster has 1 learner, the roles up to "
                                          "it ask for 2"):
        launcher.run()
    assert launcher.workers == [] and launcher.learner_node is None


@needs_ray
def test_a_plan_that_spreads_the_actors_puts_each_worker_on_its_node_and_learns_the_same_bits(cluster) -> None:
    """Worker 0 on plan node "a", worker 1 on "b" beside the learner: each asked from inside where it runs, and
    the parameters are the sequential launcher's bit for bit (the schedule decides the learning, not where the
    workers run)."""
    from pearl.runtime.job import RoleNodes
    from pearl.runtime.ray.launcher import RayLauncher

    cfg = DQNConfig(total_steps=2048, learning_starts=256, train_freq=128, gradient_steps=16, n_envs=2,
                    target_update_interval=64, prioritized=True, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=11, actors=2, policy_lag=1, threads=1)
    a = SequentialLauncher(job).run()
    spread = RoleNodes(actors="a", replay="b", learner="b", workers=(("a", HOST_DEVICE), ("b", HOST_DEVICE)))
    launcher = RayLauncher(job, role_nodes=spread)
    b = launcher.run()
    assert launcher.nodes == [cluster.actors, cluster.spare] and launcher.learner_node == cluster.spare
    assert "plan node a" in b.roles["actor worker 0"] and "plan node b" in b.roles["actor worker 1"]
    assert a.updates == b.updates > 0
    assert_same_params(a.final_params, b.final_params)
    assert sorted(e.ret for e in a.episodes) == sorted(e.ret for e in b.episodes)


@needs_ray
def test_a_sharded_replay_server_puts_each_shard_on_its_node_and_learns_as_unpinned_shards(cluster) -> None:
    """A plan that shards the replay server over "a" and "b": shard 0 on a, shard 1 on b, each asked from
    inside, and the parameters are those of two replay shards placed anywhere, bit for bit (the client's
    draws decide the learning, not where the shards run; `--replay-shards` runs repeat with themselves)."""
    from pearl.runtime.job import RoleNodes
    from pearl.runtime.ray.launcher import RayLauncher

    cfg = DQNConfig(total_steps=1536, learning_starts=256, train_freq=128, gradient_steps=16, n_envs=2,
                    target_update_interval=64, prioritized=True, **SMALL)
    job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=5, actors=2, threads=1)
    free = RayLauncher(job, replay_shards=2).run()
    nodes = RoleNodes(actors="a", replay="a", learner="b", shards=("a", "b"))
    launcher = RayLauncher(job, replay_shards=2, role_nodes=nodes)
    pinned = launcher.run()
    assert launcher.shard_nodes == [cluster.actors, cluster.spare] and launcher.learner_node == cluster.spare
    assert "plan node a" in pinned.roles["replay shard 0"] and "plan node b" in pinned.roles["replay shard 1"]
    assert free.updates == pinned.updates > 0
    assert_same_params(free.final_params, pinned.final_params)
    with pytest.raises(ConfigError, match="shards the replay server over 2 nodes"):
        RayLauncher(job, replay_shards=3, role_nodes=nodes).run()


@needs_ray
def test_pearl_train_runs_a_sharded_plan_with_a_shard_on_each_node(capsys, cluster, tmp_path) -> None:
    """`pearl train --plan` of a plan whose replay server is sharded over "a" and "b": two shards, each on its
    plan node's Ray node; a --replay-shards that disagrees with the plan is one error line."""
    from cli_support import run_cli

    plan_path = cluster_plan(capsys, tmp_path, ("a", "b"), act="a", replay="a", learn="b",
                             shards={"a/cpu": 1, "b/cpu": 1})
    args = ["train", "--plan", str(plan_path), "--launcher", "ray", "--steps", "1024", "--set", "learning_starts=256",
            "--eval-episodes", "0", "--runs-dir", str(tmp_path / "runs"), "--json"]
    code, _, err = run_cli(capsys, *args, "--replay-shards", "3")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "shards the replay server over 2 nodes" in err
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    result = json.loads(out)
    assert result["steps"] == 1024
    roles = result["roles"]
    assert roles["replay shard 0"].startswith(f"node {cluster.actors[:8]}") and "plan node a" in roles["replay shard 0"]
    assert roles["replay shard 1"].startswith(f"node {cluster.spare[:8]}") and "plan node b" in roles["replay shard 1"]
    assert "replay shard 2" not in roles


@needs_ray
def test_pearl_train_resumes_a_cluster_plan_that_spreads_the_actors_from_its_checkpoint(
        capsys, cluster, tmp_path) -> None:
    """A plan with one actor process on each node: `pearl train --plan` on Ray stops after its first segment,
    and `pearl train --resume` goes on from that checkpoint to the budget, each worker again on its node."""
    from cli_support import run_cli

    from pearl.training import train

    plan_path = cluster_plan(capsys, tmp_path, ("a", "b"), act="a", replay="b", learn="b",
                             spread={"a/cpu": 1, "b/cpu": 1})
    first = train(plan=str(plan_path), launcher="ray", steps=1536, settings={"learning_starts": "256"},
                  eval_episodes=0, eval_every=0, runs_dir=str(tmp_path / "runs"), max_seconds=1e-9)
    assert first.launcher == "ray" and first.steps == 256 and first.actors == 2
    code, out, err = run_cli(capsys, "train", "--resume", first.run_dir, "--eval-episodes", "2", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["steps"] == 1536 and result["start_steps"] == 256 and result["updates"] == 5 * 128
    roles = result["roles"]
    assert roles["actor worker 0"].startswith(f"node {cluster.actors[:8]}") and "plan node a" in roles["actor worker 0"]
    assert roles["actor worker 1"].startswith(f"node {cluster.spare[:8]}") and "plan node b" in roles["actor worker 1"]
    assert roles["learner"].startswith(f"node {cluster.spare[:8]}")


@needs_ray
def test_a_cluster_plan_whose_node_the_cluster_lacks_is_one_error_line_before_any_role(
        capsys, cluster, tmp_path) -> None:
    from cli_support import run_cli

    plan_path = cluster_plan(capsys, tmp_path, ("a", "zz"), act="a", replay="a", learn="zz")
    code, _, err = run_cli(capsys, "train", "--plan", str(plan_path), "--launcher", "ray", "--steps", "1000",
                           "--runs-dir", str(tmp_path / "runs"))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ")
    assert "no node for plan node 'zz'" in lines[0] and "pearl_node_zz" in lines[0]
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    assert summary["status"] == "interrupted" and "zz" in summary["reason"]


# ------------------------------------------------------------------------------- pearl profile --ray-address
@needs_ray
def test_each_node_runs_its_own_measurement_and_every_pair_of_nodes_gets_a_link(cluster) -> None:
    """What `pearl profile --ray-address` builds on: a function run by a task pinned to each node (asked from
    inside it which node it ran on), named by its pearl_node_ resource or its id; links for every pair."""
    from pearl.profiler.cluster_nodes import measure_links, run_on_each_node

    head = f"node-{cluster.head[:8]}"  # the head carries no pearl_node_ resource
    where = run_on_each_node(lambda: __import__("ray").get_runtime_context().get_node_id())
    assert where == {"a": cluster.actors, "b": cluster.spare, head: cluster.head}
    links = measure_links(sizes=(1_000, 1_000_000), reps=2)
    assert {frozenset((a, b)) for a, b, _, _ in links} == {frozenset(p) for p in (("a", "b"), (head, "a"), (head, "b"))}
    assert len(links) == 3
    assert all(latency > 0 and bandwidth > 0 for _, _, latency, bandwidth in links)


@needs_ray
def test_profiling_a_cluster_where_none_answers_is_one_error_line(capsys, monkeypatch, tmp_path) -> None:
    from cli_support import run_cli

    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # in case this test imports Ray first
    out = tmp_path / "cluster.json"
    code, _, err = run_cli(capsys, "profile", "--quick", "--ray-address", "127.0.0.1:1", "--out", str(out))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "nothing answers there" in lines[0]
    assert not out.exists()


@needs_ray
def test_a_role_starts_with_its_gpu_slices_environment(cluster) -> None:
    """A role on a GPU slice gets the slice's environment when Ray starts its process (CUDA reads it once, at
    start): the MPS share here, asked from inside the role (no GPU needed to see the environment)."""
    from pearl.adapters.slices import slice_env
    from pearl.runtime.ray.placement import ShardPlacement

    env = slice_env(DeviceId.parse("cuda:0/mps:25"), {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/pearl-test-mps-pipe"})
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"

    class Probe:
        def environment(self, names: list[str]) -> dict[str, str | None]:
            return {n: os.environ.get(n) for n in names}

    probe = cluster.ray.remote(Probe).options(**ShardPlacement(num_cpus=0.1, env=env).options()).remote()
    try:
        assert cluster.ray.get(probe.environment.remote(sorted(env)), timeout=120) == env
    finally:
        cluster.ray.kill(probe)
    plain = cluster.ray.remote(Probe).options(**ShardPlacement(num_cpus=0.1).options()).remote()
    try:  # a whole device: no slice variables
        assert cluster.ray.get(plain.environment.remote(sorted(env)), timeout=120)[
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] is None
    finally:
        cluster.ray.kill(plain)
