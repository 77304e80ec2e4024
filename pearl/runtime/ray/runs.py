"""A run's actors named in a Ray namespace of its own, its lease, and removing what a lost driver left behind.

Every role actor of a run is named in the namespace ``pearl-<run id>`` (`RunNamespace`): ``learner``,
``worker-<i>``, ``replay-<k>``, and first of all ``run``, a `RunLease` that the driver renews every `RENEW_S`
from a thread of its own. The pearl namespaces on a cluster are its registry of runs: `stop` kills every actor
named in the run's own, whatever ended the run.

Ray ends the actors a driver owns when it sees that driver's process die, but not while it still counts the
driver alive: a Ray Client driver's session outlives the client for the reconnect grace period the client asked
for (``RAY_CLIENT_RECONNECT_GRACE_PERIOD``, 30 s by default), and a driver that hangs, or whose machine is cut off,
keeps its roles holding the cluster meanwhile. So a launcher joining a cluster first removes the runs whose
driver is gone (`remove_lost_runs`): a pearl namespace whose lease was not renewed for `STALE_S`, or whose lease
actor is dead or missing, has every actor killed, and one line says so. A run whose lease does not answer in
time (its actor still starting) is left alone, as is every run whose driver renews its lease.

Only Ray's public API: ``ray.util.list_named_actors(all_namespaces=True)``, ``ray.get_actor``, ``ray.kill``
(Ray's state API needs the dashboard, which pearl's own instance does not start).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from pearl.runtime.ray.session import first_line, remote_class, require_ray

__all__ = ["LEASE", "PREFIX", "RENEW_S", "STALE_S", "RunLease", "RunNamespace", "pearl_namespaces",
           "remove_lost_runs"]

PREFIX = "pearl-"
LEASE = "run"  # the lease actor's name in each run's namespace
RENEW_S = 1.0  # the driver renews its lease this often
STALE_S = 15.0  # a lease not renewed for this long: the driver is gone (a thread renews it, whatever the loop does)
ASK_TIMEOUT_S = 30.0  # a lease actor that does not answer within this is still starting: its run is left alone



class RunLease:
    """The run's entry in the cluster's registry of runs: who drives it and when the driver last renewed it."""

    def __init__(self, driver: str) -> None:
        self.driver = driver
        self.renewed = time.monotonic()

    def renew(self) -> None:
        self.renewed = time.monotonic()

    def age(self) -> tuple[float, str]:
        """Seconds since the last renewal (the actor's own clock: the driver's may be another machine's), and
        who drives the run."""
        return time.monotonic() - self.renewed, self.driver


def _on_drivers_node() -> dict[str, Any]:
    """Ray's options pinning an actor to the driver's node (a Ray Client driver's: the head's); none where Ray
    does not say which node that is."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        here = require_ray().get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - not every kind of driver has a node: Ray places the lease
        return {}
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(str(here), soft=False)} if here else {}


def _lease_class() -> Any:
    return remote_class(RunLease, num_cpus=0, max_restarts=0)


@dataclass
class RunNamespace:
    """One run's namespace on the cluster: the names its roles get, its lease and the thread that renews it."""

    name: str = field(default_factory=lambda: PREFIX + uuid.uuid4().hex[:12])
    lease: Any = None
    #: how many times the run's roles were placed again (`RayLauncher`'s recovery): the roles of generation g > 0
    #: are named ``<role>.<g>``, so a new role never waits for the name of the dead one it replaces
    generation: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def options(self, role: str) -> dict[str, Any]:
        """Keyword arguments for Ray's ``.options()`` naming one role's actor in this namespace."""
        name = role if self.generation == 0 or role == LEASE else f"{role}.{self.generation}"
        return {"name": name, "namespace": self.name}

    def open(self) -> None:
        """Place the lease actor (before any role) on the driver's node, which lives as long as the driver (a
        lease on a node lost mid-run would stop being renewed, and the run be taken for lost), and start
        renewing it."""
        driver = f"{socket.gethostname()} pid {os.getpid()}"
        self.lease = _lease_class().options(**self.options(LEASE), **_on_drivers_node()).remote(driver)
        self._thread = threading.Thread(target=self._renew, name="pearl-ray-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_S):
            try:
                self.lease.renew.remote()
            except Exception:  # noqa: BLE001 - Ray disconnected or the lease killed: the run is ending anyway
                return

    def close(self) -> None:
        """Stop renewing and kill every actor named in the namespace, the lease last."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return
        lease, self.lease = self.lease, None
        try:
            names = pearl_namespaces(ray).get(self.name, [])
        except Exception:  # noqa: BLE001 - the cluster cannot be asked: kill what this driver holds
            names = []
        for name in sorted(names, key=lambda n: n == LEASE):
            _kill(ray, self.name, name)
        if lease is not None and LEASE not in names:
            try:
                ray.kill(lease, no_restart=True)
            except Exception:  # noqa: BLE001 - as in `_kill`
                pass


def pearl_namespaces(ray: Any) -> dict[str, list[str]]:
    """Every pearl namespace on the cluster and the names of the live actors in it."""
    out: dict[str, list[str]] = {}
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry["namespace"].startswith(PREFIX):
            out.setdefault(entry["namespace"], []).append(entry["name"])
    return out


def remove_lost_runs(own: str | None = None) -> list[str]:
    """Kill the actors of every pearl run on the cluster whose driver is gone (see the module docstring), each
    run's removal said in one line on stderr; the lines."""
    ray = require_ray()
    lines = []
    for namespace, names in sorted(pearl_namespaces(ray).items()):
        if namespace == own:
            continue
        why = _lost(ray, namespace, names)
        if why is None:
            continue
        for name in names:
            _kill(ray, namespace, name)
        lines.append(f"pearl: removed the {len(names)} actor(s) left on the cluster by run {namespace}: {why}")
        print(lines[-1], file=sys.stderr, flush=True)
    return lines


def _lost(ray: Any, namespace: str, names: list[str]) -> str | None:
    """Why the run in ``namespace`` is lost, or None while its driver may be alive."""
    if LEASE not in names:
        return "it has no lease (its driver placed roles without one, or the lease died)"
    try:
        age, driver = ray.get(ray.get_actor(LEASE, namespace=namespace).age.remote(), timeout=ASK_TIMEOUT_S)
    except ray.exceptions.GetTimeoutError:
        return None
    except ValueError:  # the lease is gone since the namespaces were listed: its run stopped or was removed
        return None
    except ray.exceptions.RayActorError as exc:
        return f"its lease died ({first_line(exc)})"
    if age < STALE_S:
        return None
    return f"its driver ({driver}) last renewed the run's lease {age:.0f} s ago"


def _kill(ray: Any, namespace: str, name: str) -> None:
    try:
        ray.kill(ray.get_actor(name, namespace=namespace), no_restart=True)
    except ValueError:  # gone already
        pass
    except Exception:  # noqa: BLE001 - the cluster cannot be asked; Ray ends the actors with their driver
        pass
