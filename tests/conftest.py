import sys
import time
from pathlib import Path

import pytest

# tests import their helper modules (reference_maths) by name
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def no_pearl_actor_left():
    """After every test that left this process connected to Ray: no actor of any pearl run alive on that
    cluster (what `ray list actors` shows of them, through Ray's public list of named actors)."""
    yield
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return
    from pearl.runtime.ray.runs import pearl_namespaces

    deadline = time.monotonic() + 20  # a killed actor leaves Ray's list once its process is gone
    while (left := pearl_namespaces(ray)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"pearl actors alive after the test: {left}"
