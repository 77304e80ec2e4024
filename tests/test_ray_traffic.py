"""The Ray launcher's traffic statement (pearl.traffic.ray) against what a short real run counts: the workers'
batches and weight fetches, the learner's inserts, samples and TD errors, the driver's calls.

One local Ray instance for the whole module (starting one costs seconds), loopback only; Ray is imported only
after RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 is set, and skipped where it is not installed."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from traffic_support import CASES, counted, stated

from pearl import traffic
from pearl.envs import env_spec
from pearl.device import HOST_DEVICE
from pearl.runtime.job import Job, Placement

TESTS = Path(__file__).parent
pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason='Ray is not installed (pip install "pearl[ray]")')


@pytest.fixture(scope="module")
def ray_instance():
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray is first imported: loopback only
    old_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), old_path]))
    from pearl.runtime.ray.session import require_ray

    ray = require_ray()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=80 * 2**20)
    try:
        yield ray
    finally:
        ray.shutdown()
        if old_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_path


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_ray_runs_counted_traffic_is_the_ray_statement(ray_instance, case) -> None:
    """Every edge's messages, bytes, publishes and loads, and the driver's per-segment calls, summed over a run
    (a short last segment, segments before learning and the last lag + 1, which publish nothing, included)."""
    from pearl.runtime.ray.launcher import RayLauncher

    cfg, env = CASES[case]
    job = Job.of(cfg, env_spec(env), Placement.single(HOST_DEVICE), seed=3, actors=2, policy_lag=1, threads=1)
    launcher = RayLauncher(job)
    stats = launcher.run()
    got = counted(stats)
    assert got == stated(launcher)
    assert got[traffic.CALLS].messages > 2 * launcher.schedule.segments  # the workers' collects, at least
