"""The replay server over Ray actors: same draws as in process, placement checks, errors, nothing left running.

One local Ray instance for the whole module (starting one costs seconds), started by pearl's own
`start_local_ray`, so its loopback-only, no-dashboard set-up is what is tested. Ray is imported only through
pearl's launcher module: Ray reads its node-address setting when first imported.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("ray") is None:
    pytest.skip('Ray is not installed (pip install "pearl[ray]")', allow_module_level=True)

from pearl.algos import DQNConfig  # noqa: E402
from pearl.errors import ConfigError  # noqa: E402
from pearl.runtime.ray import replay_client, session  # noqa: E402
from pearl.runtime.ray.placement import ShardPlacement  # noqa: E402
from pearl.runtime.ray.replay_client import RemoteShardedReplay  # noqa: E402
from pearl.runtime.replay_server import ShardedReplay  # noqa: E402
from pearl.runtime.replay_shard import FIELDS, encode_indices  # noqa: E402
from pearl.types import EnvSpec, TransitionBatch  # noqa: E402

SPEC = EnvSpec("Counter-v0", obs_dim=3, action_kind="discrete", action_dim=2)
HALF = ShardPlacement(num_cpus=0.5)


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc, so no extra dependency)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
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
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(pid)
    return out


@pytest.fixture(scope="module")
def ray_instance():
    address = session.start_local_ray(num_cpus=2)
    started = descendants(os.getpid())
    assert started, "start_local_ray started no process below this one"
    yield address
    session.shutdown()
    deadline = time.monotonic() + 15
    while alive(started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(started), f"Ray processes left after shutdown: {sorted(alive(started))}"


def rows(start: int, count: int) -> TransitionBatch:
    k = np.arange(start, start + count)
    obs = np.repeat(k[:, None], 3, axis=1).astype(np.float32)
    return TransitionBatch(obs, k.astype(np.int64), k.astype(np.float32), obs + 0.5, (k % 2).astype(np.float32))


def test_local_instance_listens_on_loopback_only(ray_instance: str) -> None:
    import ray

    assert ray_instance.startswith("127.0.0.1:")
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    assert all(n["NodeManagerAddress"] == "127.0.0.1" for n in ray.nodes())
    with pytest.raises(ConfigError, match="already initialised"):
        session.start_local_ray()


@pytest.mark.parametrize("prioritized", [True, False])
def test_remote_sharded_sampling_equals_the_local_client(ray_instance: str, prioritized: bool) -> None:
    cfg = DQNConfig(buffer_size=600, prioritized=prioritized)
    local = ShardedReplay.from_config(cfg, SPEC, 3, seed=7)
    remote = RemoteShardedReplay.place(cfg, SPEC, 3, seed=7, placement=HALF)
    try:
        start = 0
        td_rng = np.random.default_rng(0)
        for m in (40, 7, 90, 33, 12):
            local.insert(rows(start, m))
            remote.insert(rows(start, m))
            start += m
        for _ in range(4):
            a, b = local.sample(64, 0.5), remote.sample(64, 0.5)
            for name in ("indices", "weights", *FIELDS):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
            assert b.obs.flags.writeable  # the client's copy, not the object store's read-only view
            td = td_rng.normal(size=64)
            local.update_priorities(a.indices, td)
            remote.update_priorities(b.indices, td)
        assert remote.size == local.size == 182
        for a, b in zip(local.sample_many(3, 32), remote.sample_many(3, 32), strict=True):
            for name in ("indices", "weights", *FIELDS):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        # a checkpoint of the remote replay restores into the local one, and they go on drawing alike
        fresh = ShardedReplay.from_config(cfg, SPEC, 3, seed=0)
        fresh.load_state_dict(remote.state_dict())
        np.testing.assert_array_equal(fresh.sample(32).indices, local.sample(32).indices)
    finally:
        remote.kill()


def test_errors_of_fire_and_forget_updates_surface_as_pearl_errors(ray_instance: str) -> None:
    remote = RemoteShardedReplay.place(DQNConfig(buffer_size=100, prioritized=True), SPEC, 2, seed=0,
                                       placement=HALF)
    try:
        remote.insert(rows(0, 5))
        remote.update_priorities(encode_indices(0, np.array([50])), np.ones(1))  # slot never written
        with pytest.raises(ConfigError, match="never been written"):
            remote.flush()
        remote.insert(rows(5, 5))
        assert remote.size == 10
    finally:
        remote.kill()


def test_a_shard_that_cannot_be_placed_is_refused_before_any_actor_starts(ray_instance: str) -> None:
    import ray

    def idle() -> bool:  # every CPU free again (a killed actor gives its share back a moment later)
        deadline = time.monotonic() + 10
        while ray.available_resources().get("CPU") != 2.0 and time.monotonic() < deadline:
            time.sleep(0.1)
        return ray.available_resources().get("CPU") == 2.0

    cfg = DQNConfig(buffer_size=100)
    assert idle()
    with pytest.raises(ConfigError, match="replay shard 0 cannot be placed.* gpu_node"):
        replay_client.remote_shards(cfg, SPEC, 2, ShardPlacement(num_cpus=0.5, resources={"gpu_node": 1}))
    with pytest.raises(ConfigError, match="replay shard 2 cannot be placed: the cluster has 2 CPU"):
        replay_client.remote_shards(cfg, SPEC, 3, ShardPlacement(num_cpus=1.0))
    with pytest.raises(ConfigError, match="not in the cluster"):
        replay_client.remote_shards(cfg, SPEC, 1, ShardPlacement(num_cpus=0.5, node_id="ab" * 28))
    assert idle()  # the shards before the one refused were not started either (3 x 1 CPU would hold 2)
    node = ray.get_runtime_context().get_node_id()
    handles = replay_client.remote_shards(cfg, SPEC, 1, ShardPlacement(num_cpus=0.5, node_id=node))
    assert ray.get(handles[0].stats.remote()).size == 0
    ray.kill(handles[0])


def test_large_batches_go_through_the_object_store_and_come_back_writable(ray_instance: str) -> None:
    # 20 000 rows make arrays above Ray's inline limit, so the shard reads them from the object store (read-only)
    # and the checkpoint's arrays come back through it too.
    cfg = DQNConfig(buffer_size=40_000, prioritized=True)
    remote = RemoteShardedReplay.place(cfg, SPEC, 2, seed=1, placement=HALF)
    try:
        remote.insert(rows(0, 20_000))
        remote.insert(rows(20_000, 20_000))
        state = remote.state_dict()
        for i in (0, 1):
            np.testing.assert_array_equal(state[f"shard{i}.reward"], np.arange(i * 20_000, (i + 1) * 20_000))
            assert state[f"shard{i}.obs"].flags.writeable
        local = ShardedReplay.from_config(cfg, SPEC, 2, seed=1)
        local.load_state_dict(state)
        batch = remote.sample(128)
        np.testing.assert_array_equal(batch.obs[:, 0], batch.reward)
        np.testing.assert_array_equal(local.sample(128).indices, batch.indices)
    finally:
        remote.kill()
