"""Placing the Ray launcher's roles node by node: the issue's two-node cluster of one CPU a node, where a run of
two actors waited for ever (its learner and two workers asked for 2/3 CPU each: the 2 CPUs there are, but no node
holds two of them), and the pure packing functions behind the launcher's shares and its check.

The cluster is a `ray.cluster_utils.Cluster` hosted by a process of its own (`ray_cluster_host`), one for the
module, and each driver a process of its own (`pearl train`, or a short script), as tests/test_ray_join.py does.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_cluster_host import HostedCluster, assert_all_cpus_free, base_env, cluster_process

from pearl.algos import DQNConfig
from pearl.device import HOST_DEVICE, DeviceId
from pearl.envs import env_spec
from pearl.runtime.job import Job, Placement
from pearl.runtime.ray.packing import (UNIT, NodeRoom, RoleNeed, equal_share, largest_share, pack, refusal, units,
                                       waiting_line)
from pearl.runtime.ray.placement import GivenPlacements, role_need, role_placements

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason='Ray is not installed (pip install "pearl[ray]")')
HEAD, OTHER = "a" * 56, "b" * 56  # Ray node ids are 56 hex digits
ONE_CPU_EACH = [NodeRoom(HEAD, {"CPU": 1.0}), NodeRoom(OTHER, {"CPU": 1.0})]


@pytest.fixture(scope="module")
def one_cpu_nodes() -> Iterator[HostedCluster]:
    """The issue's cluster: a head of one CPU and one more node of one CPU."""
    with cluster_process(base_env(), node_cpus=1) as hosted:
        yield hosted


def train_args(tmp_path: Path, address: str, actors: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pearl", "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "512",
            "--set", "learning_starts=256", "--eval-episodes", "0", "--actors", str(actors), "--launcher", "ray",
            "--ray-address", address, "--runs-dir", str(tmp_path / "runs"), "--json", *extra]


def train(tmp_path: Path, address: str, actors: int, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(train_args(tmp_path, address, actors, *extra), capture_output=True, text=True,
                          timeout=600, env=base_env(HOME=str(tmp_path)), check=False)


# ------------------------------------------------------------------------------------------ on the cluster
@needs_ray
def test_two_actors_on_two_nodes_of_one_cpu_start_and_finish(one_cpu_nodes, tmp_path) -> None:
    """The issue's run: the learner and the two workers ask for half a CPU each, so both nodes hold them (two on
    one, one on the other), and the run trains to its end; after it no actor holds a CPU."""
    result = train(tmp_path, one_cpu_nodes.address, 2)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert out["steps"] == 512
    assert set(out["roles"]) == {"learner", "actor worker 0", "actor worker 1"}
    assert len(set(out["roles"].values())) == 2  # half a CPU each: no node holds all three
    assert_all_cpus_free(one_cpu_nodes.address)


@needs_ray
def test_a_run_the_nodes_cannot_hold_is_one_error_line_naming_roles_nodes_and_the_fix(one_cpu_nodes,
                                                                                      tmp_path) -> None:
    """Learning and acting on a GPU on nodes without one: one `error:` line, soon (the issue asks within 30 s),
    naming the roles and what they ask for, each node and what it has, and what to change; no role started."""
    t0 = time.monotonic()
    result = train(tmp_path, one_cpu_nodes.address, 2, "--device", "cuda:0")
    elapsed = time.monotonic() - t0
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    line = lines[0]
    assert "cannot be placed: the cluster has 0 GPU" in line
    assert "learner: 0.5 CPU + 0.3333 GPU" in line and "actor worker 0-1: 0.5 CPU + 0.3333 GPU each" in line
    assert line.count(": 1 CPU + 0 GPU") == 2  # each node, by its id
    assert "--device cpu" in line and "--actors" in line and "--plan" in line
    assert elapsed < 30, f"the error took {elapsed:.0f} s"
    assert_all_cpus_free(one_cpu_nodes.address)


PACKED_OUT = """
import json, sys
import ray
from pearl.algos import DQNConfig
from pearl.device import HOST_DEVICE
from pearl.envs import env_spec
from pearl.errors import ConfigError
from pearl.runtime.job import Job, Placement
from pearl.runtime.ray.launcher import RayLauncher
from pearl.runtime.ray.placement import ShardPlacement

ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
job = Job.of(DQNConfig(total_steps=512, learning_starts=256), env_spec("CartPole-v1"), Placement.single(HOST_DEVICE),
          seed=0, actors=2, threads=1)
launcher = RayLauncher(job, learner_placement=ShardPlacement(num_cpus=0.5),
                       actor_placement=ShardPlacement(num_cpus=0.75))
try:
    launcher.run()
    error = None
except ConfigError as exc:
    error = str(exc)
started = bool(launcher.workers or launcher.pids or launcher.learner_node)
print(json.dumps({"error": error, "started": started}))
"""


@needs_ray
def test_roles_that_fit_the_totals_but_no_node_are_refused_before_any_starts(one_cpu_nodes, tmp_path) -> None:
    """Placements given to the launcher: the learner half a CPU, each worker 3/4. They ask for the cluster's
    2 CPUs, but no node holds a worker beside anything else: refused before any role starts, as Ray would have
    waited for the third for ever."""
    result = subprocess.run([sys.executable, "-c", PACKED_OUT, one_cpu_nodes.address], capture_output=True,
                            text=True, timeout=300, env=base_env(HOME=str(tmp_path)), check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert not out["started"]
    assert out["error"].startswith("the roles fit the cluster's totals but cannot be packed onto its nodes")
    assert "learner: 0.5 CPU" in out["error"] and "actor worker 0-1: 0.75 CPU each" in out["error"]
    assert out["error"].count(": 1 CPU") == 2
    assert_all_cpus_free(one_cpu_nodes.address)


HOLD = """
import sys
import ray
ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)

class Hold:
    def ready(self):
        return True

hold = ray.remote(num_cpus=1)(Hold).remote()
ray.get(hold.ready.remote())
print("held", flush=True)
sys.stdin.read()  # until the test closes it: the actor ends with this driver
"""


@needs_ray
def test_a_role_waiting_for_cpus_another_driver_holds_says_so_and_starts_once_they_are_free(one_cpu_nodes,
                                                                                            tmp_path) -> None:
    """Another driver holds one of the two CPUs: the run can be placed (an empty cluster holds it), so it starts,
    and the role Ray cannot start yet says every 10 s on stderr what it waits for; once the CPU is free the run
    trains to its end."""
    hold = subprocess.Popen([sys.executable, "-c", HOLD, one_cpu_nodes.address], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=base_env())
    proc = None
    try:
        assert hold.stdout.readline().strip() == "held", "the other driver's actor did not start"
        proc = subprocess.Popen(train_args(tmp_path, one_cpu_nodes.address, 1), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=base_env(HOME=str(tmp_path)))
        lines: list[str] = []
        waiting = threading.Event()

        def read() -> None:
            for line in proc.stderr:
                lines.append(line)
                if line.startswith("pearl: waiting "):
                    waiting.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert waiting.wait(300), "".join(lines)[-3000:]  # a guard against a hang: the line comes after 10 s
        hold.stdin.close()  # the other driver ends, and its actor with it
        out, _ = proc.communicate(timeout=300)
        reader.join(timeout=60)
    finally:
        for p in (proc, hold):
            if p is not None and p.poll() is None:
                p.kill()
        hold.wait(timeout=60)
    assert proc.returncode == 0, "".join(lines)[-3000:]
    assert json.loads(out)["steps"] == 512
    line = next(x for x in lines if x.startswith("pearl: waiting "))
    assert "for Ray to start " in line and ": 1 CPU" in line and "free in all" in line and "ray status" in line


# ------------------------------------------------------------------------------------ the pure functions
def roles(share: float, actors: int, near: str | None = HEAD) -> list[RoleNeed]:
    """The launcher's learner (near the driver, softly) and `actors` workers, each asking for `share` CPU."""
    return [RoleNeed("learner", {"CPU": share}, near, soft=True, shared=True),
            *(RoleNeed(f"actor worker {i}", {"CPU": share}, shared=True) for i in range(actors))]


def test_roles_that_fit_the_totals_may_fit_no_node() -> None:
    """The issue's shares: three roles of 2/3 CPU ask for the 2 CPUs two nodes of one have, but each node holds
    one of them; at half a CPU each, one node holds two."""
    assert pack(roles(2 / 3, 2), ONE_CPU_EACH).where is None
    why = refusal(roles(2 / 3, 2), ONE_CPU_EACH)
    assert why is not None and why.startswith("the roles fit the cluster's totals but cannot be packed")
    assert "learner: 0.6667 CPU (preferably on node aaaaaaaa)" in why and "actor worker 0-1: 0.6667 CPU each" in why
    assert "node aaaaaaaa: 1 CPU, node bbbbbbbb: 1 CPU" in why and "--actors" in why
    where = pack(roles(0.5, 2), ONE_CPU_EACH).where
    assert where is not None and where["learner"] == HEAD  # its node could hold it: Ray keeps it there
    assert sorted(Counter(where.values()).values()) == [1, 2]  # two on one node, one on the other
    assert refusal(roles(0.5, 2), ONE_CPU_EACH) is None


def test_the_largest_share_packs_node_by_node() -> None:
    """One actor: a whole CPU each; two or three: half a CPU (2/3 would not pack); a GPU node beside a head
    without GPU: the nine roles on the GPU share its 8 CPUs, not the cluster's 12."""
    assert largest_share(roles(1.0, 1), ONE_CPU_EACH) == 1.0
    assert largest_share(roles(1.0, 2), ONE_CPU_EACH) == 0.5
    assert largest_share(roles(1.0, 3), ONE_CPU_EACH) == 0.5
    assert largest_share(roles(1.0, 4), ONE_CPU_EACH) == pytest.approx(1 / 3, abs=1 / UNIT)
    gpu_node = [NodeRoom(HEAD, {"CPU": 4.0}), NodeRoom(OTHER, {"CPU": 8.0, "GPU": 1.0})]
    on_gpu = [RoleNeed(f"actor worker {i}", {"CPU": 1.0, "GPU": 1 / 9}, shared=True) for i in range(9)]
    share = largest_share(on_gpu, gpu_node)
    assert share == 0.8888  # 8/9 of a CPU, truncated to Ray's units
    assert pack([RoleNeed(n.role, {**n.demand, "CPU": share}) for n in on_gpu], gpu_node).where is not None
    assert largest_share(roles(1.0, 2), [NodeRoom(HEAD, {"CPU": 0.0})]) is None  # no CPU: no share packs


def test_shares_are_in_rays_truncated_units() -> None:
    """Ray truncates what it is asked to 1/10 000: k shares of c/k fit c, where rounding 1/6 up would not."""
    assert units(1 / 3) == 3333 and units(2 / 3) == 6666 and units(0.3) == 3000
    assert pack([RoleNeed(f"r {i}", {"CPU": 2 / 3}) for i in range(3)], [NodeRoom(HEAD, {"CPU": 2.0})]).where
    assert pack([RoleNeed(f"r {i}", {"CPU": 1 / 6}) for i in range(6)], [NodeRoom(HEAD, {"CPU": 1.0})]).where
    assert equal_share([1.0, 1.0], 3) == 0.5 and equal_share([2.0], 3) == 0.6666 and equal_share([0.0], 2) is None


def test_pins_soft_and_hard() -> None:
    """A hard pin stays on its node or is refused; a soft one goes elsewhere when its node could never hold it
    (Ray's soft affinity), and stays when it could."""
    small = [NodeRoom(HEAD, {"CPU": 0.5}), NodeRoom(OTHER, {"CPU": 2.0})]
    assert pack([RoleNeed("learner", {"CPU": 1.0}, HEAD, soft=True)], small).where == {"learner": OTHER}
    assert pack([RoleNeed("learner", {"CPU": 1.0}, HEAD)], small).where is None
    why = refusal([RoleNeed("learner", {"CPU": 1.0}, HEAD)], small)
    assert why is not None and why.startswith(f"learner cannot be placed on node {HEAD}: it has 0.5 CPU")
    why = refusal([RoleNeed("replay shard 0", {"CPU": 0.0}, "c" * 56)], small)
    assert why is not None and why.startswith(f"replay shard 0 is pinned to node {'c' * 56}, which is not in")
    # the node could hold it, so Ray waits for it there: the workers must fit around it
    busy = [RoleNeed("learner", {"CPU": 0.5}, HEAD, soft=True), RoleNeed("actor worker 0", {"CPU": 0.5}, HEAD)]
    assert pack(busy, small).where is None


def test_totals_and_other_resources_are_named_with_their_fix() -> None:
    nodes = [NodeRoom(HEAD, {"CPU": 1.0}, "node aaaaaaaa (plan node a)"), NodeRoom(OTHER, {"CPU": 1.0})]
    why = refusal([RoleNeed("learner", {"CPU": 0.5, "GPU": 1.0})], nodes)
    assert why is not None and why.startswith("learner cannot be placed: the cluster has 0 GPU, the roles up to it "
                                              "ask for 1")
    assert "node aaaaaaaa (plan node a): 1 CPU + 0 GPU" in why and "--device cpu" in why
    why = refusal([RoleNeed(f"actor worker {i}", {"CPU": 0.1, "actors": 1.0}) for i in range(2)], nodes)
    assert why is not None and "the cluster has 0 actors" in why and "carry actors (ray start --resources)" in why


def test_a_search_out_of_budget_refuses_nothing() -> None:
    """An undecided search (its budget spent) refuses no run: Ray is left to place it (its waits reported)."""
    nodes = [NodeRoom(str(j) * 56, {"CPU": 1.0}) for j in range(4)]
    needs = [RoleNeed(f"r {i}", {"CPU": c}) for i, c in enumerate([0.6, 0.6, 0.6, 0.6, 0.4, 0.4, 0.4, 0.4])]
    assert pack(needs, nodes).where is not None
    tight = pack(needs, nodes, budget=1)
    assert tight.where is None and tight.undecided and tight.fits


def test_the_waiting_line_names_the_roles_and_what_is_free() -> None:
    line = waiting_line([RoleNeed("actor worker 1", {"CPU": 0.5})], ONE_CPU_EACH, {"CPU": 0.25}, 20.2)
    assert line.startswith("waiting 20 s for Ray to start actor worker 1: 0.5 CPU; the cluster has 0.25 CPU free")


def test_role_placements_share_what_packs_on_the_issues_cluster() -> None:
    """The launcher's own placements (no Ray needed): on two nodes of one CPU, two actors and the learner get
    half a CPU each, which `refusal` passes; one actor and its learner a whole one each."""
    cfg = DQNConfig(total_steps=512)
    for actors, share in ((1, 1.0), (2, 0.5), (3, 0.5)):
        job = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(HOST_DEVICE), seed=0, actors=actors, threads=1)
        learner, _, _, workers = role_placements(job, GivenPlacements(), 0, ONE_CPU_EACH, HEAD)
        assert learner.num_cpus == share and {w.num_cpus for w in workers} == {share}
        assert learner.node_id == HEAD and learner.soft
        placed = [role_need("learner", learner), *(role_need(f"actor worker {i}", w) for i, w in enumerate(workers))]
        assert refusal(placed, ONE_CPU_EACH) is None
    # on a GPU (none in the cluster): a share of one GPU that the check then refuses
    cuda = Job.of(cfg, env_spec("CartPole-v1"), Placement.single(DeviceId("cuda", 0)), seed=0, actors=2, threads=1)
    learner, _, _, workers = role_placements(cuda, GivenPlacements(), 0, ONE_CPU_EACH, HEAD)
    assert learner.num_gpus == workers[0].num_gpus == pytest.approx(1 / 3) and learner.num_cpus == 0.5
