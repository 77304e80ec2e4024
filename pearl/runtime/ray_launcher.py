"""Ray transport for pearl's roles: starting or joining a Ray instance, replay shards as Ray actors.

The only module of pearl that imports Ray, and only inside its functions, so it can be imported (and its
missing-Ray error raised) where Ray is not installed. It is imported only when the Ray launcher is chosen.

Security: Ray has no access control worth the name for a cluster's ports (anyone who reaches them runs code
as you), so an instance that pearl starts itself listens on the loopback address only and starts no
dashboard. Ray's public knob for the node address is the environment variable
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``: off, Ray treats the machine as a one-node cluster and uses 127.0.0.1
as the node's address, and (Ray 2.60, checked with ``ss -ltn``) every server it starts then binds to
loopback. The hidden ``ray.init(_node_ip_address="127.0.0.1")`` is private and, in Ray 2.60, resolved back
to the machine's external address, so it is not used. Ray reads the variable when it is first imported:
`start_local_ray` sets it before importing Ray and refuses to go on (shutting the instance down) when the
node it got is not on loopback, e.g. because Ray was imported earlier in the process.

Transport: numpy batches travel through Ray's object store (arguments and results; on one node a large
array is read in place, read-only), so a shard writes what it receives into its own storage and the client
copies what it gets back into fresh arrays before anyone may write them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from pearl.algos.base import OffPolicyConfig
from pearl.errors import ConfigError, PearlError
from pearl.runtime.replay_server import ReplayShard, ShardedReplay, ShardSample, ShardStats
from pearl.types import EnvSpec, Params, TransitionBatch

__all__ = ["INSTALL_HINT", "LOOPBACK", "RemoteShardedReplay", "ShardPlacement", "check_placements", "connect",
           "remote_shards", "require_ray", "shutdown", "start_local_ray"]

LOOPBACK = "127.0.0.1"
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
INSTALL_HINT = 'the Ray launcher needs Ray, which is not installed: pip install "pearl[ray]"'
_SHARD_CLASS: Any = None


def require_ray() -> ModuleType:
    """The ``ray`` module, or a ConfigError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


def start_local_ray(num_cpus: int | None = None, object_store_memory: int | None = None) -> str:
    """Start a Ray instance on this machine only (loopback, no dashboard) and connect to it; its GCS address.

    ``num_cpus`` None sizes it to this machine. ``address="local"`` starts a new instance even when
    ``RAY_ADDRESS`` or a running instance exists, so pearl never joins someone else's cluster by accident.
    """
    os.environ[_LOOPBACK_ENV] = "0"
    ray = require_ray()
    if ray.is_initialized():
        raise ConfigError("Ray is already initialised in this process: call pearl's shutdown() first")
    ray.init(address="local", num_cpus=num_cpus, object_store_memory=object_store_memory, include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    node_ip = ray.util.get_node_ip_address()
    if node_ip != LOOPBACK:
        ray.shutdown()
        raise ConfigError(f"the local Ray instance came up on {node_ip}, not on loopback ({LOOPBACK}), so it was "
                          f"shut down: Ray was imported before pearl started it; set {_LOOPBACK_ENV}=0 in the "
                          "environment or let pearl import Ray")
    return str(ray.get_runtime_context().gcs_address)


def connect(address: str) -> None:
    """Join an existing Ray cluster at ``address`` (``host:port`` of its head, or ``ray://...``)."""
    ray = require_ray()
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(f"--ray-address must be a cluster address such as 10.0.0.5:6379, got {address!r}")
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"cannot join the Ray cluster at {address}: {exc}") from None


def shutdown() -> None:
    """Disconnect; an instance this process started (`start_local_ray`) stops with every process it ran."""
    ray = require_ray()
    ray.shutdown()


@dataclass(frozen=True)
class ShardPlacement:
    """Where one replay shard actor goes and what it reserves (Ray's resources are logical: admission only)."""

    num_cpus: float = 1.0
    resources: dict[str, float] = field(default_factory=dict)
    node_id: str | None = None  # a Ray node id (hex) to pin the shard to
    soft: bool = False  # with node_id: run elsewhere when that node cannot take it
    max_restarts: int = 0  # Ray restarts a dead shard empty; the run then needs a checkpoint to refill it

    def options(self) -> dict[str, Any]:
        """Keyword arguments for Ray's ``.options()``."""
        opts: dict[str, Any] = {"num_cpus": self.num_cpus, "max_restarts": self.max_restarts}
        if self.resources:
            opts["resources"] = dict(self.resources)
        if self.node_id is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.node_id, soft=self.soft)
        return opts

    def demand(self) -> dict[str, float]:
        return {"CPU": float(self.num_cpus), **{k: float(v) for k, v in self.resources.items()}}


def _shard_class() -> Any:
    """``ray.remote(ReplayShard)``, made once and only when a shard is first placed."""
    global _SHARD_CLASS
    if _SHARD_CLASS is None:
        _SHARD_CLASS = require_ray().remote(ReplayShard)
    return _SHARD_CLASS


def check_placements(placements: Sequence[ShardPlacement], role: str = "replay shard") -> None:
    """ConfigError naming the role and the resource when the cluster cannot hold every placement, before any
    actor is created: the total of each resource, and each pinned node's own resources."""
    ray = require_ray()
    totals = ray.cluster_resources()
    asked: dict[str, float] = {}
    for i, p in enumerate(placements):
        for name, amount in p.demand().items():
            asked[name] = asked.get(name, 0.0) + amount
            if asked[name] > totals.get(name, 0.0) + 1e-9:
                raise ConfigError(f"{role} {i} cannot be placed: the cluster has {totals.get(name, 0.0):g} {name}, "
                                  f"the {role}s up to it ask for {asked[name]:g}")
    nodes = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
    for i, p in enumerate(placements):
        if p.node_id is None or p.soft:
            continue
        if p.node_id not in nodes:
            raise ConfigError(f"{role} {i} is pinned to node {p.node_id}, which is not in the cluster")
        have = nodes[p.node_id].get("Resources", {})
        for name, amount in p.demand().items():
            if amount > have.get(name, 0.0) + 1e-9:
                raise ConfigError(f"{role} {i} cannot be placed on node {p.node_id}: it has {have.get(name, 0.0):g} "
                                  f"{name}, the shard asks for {amount:g}")


def remote_shards(config: OffPolicyConfig, spec: EnvSpec, shards: int,
                  placement: ShardPlacement | Sequence[ShardPlacement] | None = None) -> list[Any]:
    """``shards`` ReplayShard actors of ``config.buffer_size // shards`` slots each; their handles.

    ``placement`` is one for all or one per shard. Every placement is checked against the cluster first.
    """
    capacity = ShardedReplay.split_capacity(config.buffer_size, shards)
    places = _placements(placement, shards)
    check_placements(places)
    cls = _shard_class()
    return [cls.options(**p.options()).remote(capacity, spec, config.prioritized, config.alpha, config.priority_eps)
            for p in places]


def _placements(placement: ShardPlacement | Sequence[ShardPlacement] | None, shards: int) -> list[ShardPlacement]:
    if placement is None:
        return [ShardPlacement()] * shards
    if isinstance(placement, ShardPlacement):
        return [placement] * shards
    places = list(placement)
    if len(places) != shards:
        raise ConfigError(f"{len(places)} shard placements given for {shards} replay shards")
    return places


class RemoteShardedReplay(ShardedReplay):
    """`ShardedReplay` over Ray actor handles of `ReplayShard`: same routing, draws and weights, remote tables.

    A sample is two batched round trips (every shard's stats, then the lookups of the shards drawn), each one
    ``ray.get`` on a list. Inserts and priority updates are sent without waiting; Ray runs one caller's calls
    to an actor in order, so the next sample of a shard sees them. Their results are collected at the next
    stats call (an error they raised surfaces there, as its pearl error), or by `flush`.
    """

    def __init__(self, handles: Sequence[Any], capacity: int, spec: EnvSpec, prioritized: bool = False,
                 alpha: float = 0.6, eps: float = 1e-6, seed: int = 0, rng: np.random.Generator | None = None,
                 max_pending: int = 256) -> None:
        self.handles = list(handles)
        self.pending: list[Any] = []
        self.max_pending = max_pending
        super().__init__(capacity, spec, len(self.handles), prioritized, alpha, eps, seed, rng)

    @classmethod
    def place(cls, config: OffPolicyConfig, spec: EnvSpec, shards: int, seed: int,
              placement: ShardPlacement | Sequence[ShardPlacement] | None = None) -> "RemoteShardedReplay":
        """Place the shard actors (`remote_shards`) and return the client over them."""
        handles = remote_shards(config, spec, shards, placement)
        return cls(handles, config.buffer_size, spec, config.prioritized, config.alpha, config.priority_eps, seed)

    def _make_shards(self, alpha: float, eps: float) -> None:
        self.shards = []  # the tables live in the actors

    # ------------------------------------------------------------------ transport
    def _get(self, refs: list[Any]) -> list[Any]:
        """``ray.get`` that re-raises a pearl error raised inside an actor as itself."""
        ray = require_ray()
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, PearlError):
                raise exc.cause from None
            raise

    def _track(self, ref: Any) -> None:
        self.pending.append(ref)
        if len(self.pending) >= self.max_pending:
            self.flush()

    def flush(self) -> None:
        """Wait for every insert and priority update sent so far (raising the first error among them)."""
        pending, self.pending = self.pending, []
        self._get(pending)

    def _stats(self) -> list[ShardStats]:
        stats = self._get([h.stats.remote() for h in self.handles])
        self.flush()  # sent before the stats calls, so already done: this only collects their errors
        return stats

    def _call_many(self, method: str, requests: dict[int, np.ndarray]) -> dict[int, ShardSample]:
        refs = [getattr(self.handles[s], method).remote(v) for s, v in requests.items()]
        return dict(zip(requests, self._get(refs)))

    def _lookup(self, requests: dict[int, np.ndarray]) -> dict[int, ShardSample]:
        return self._call_many("lookup", requests)

    def _gather(self, requests: dict[int, np.ndarray]) -> dict[int, ShardSample]:
        return self._call_many("gather", requests)

    def _insert(self, shard: int, batch: TransitionBatch) -> None:
        self._track(self.handles[shard].insert.remote(batch))

    def _update(self, shard: int, slots: np.ndarray, td_errors: np.ndarray) -> None:
        self._track(self.handles[shard].update_priorities.remote(slots, td_errors))

    def _shard_states(self) -> list[Params]:
        self.flush()
        return [{k: np.array(v) for k, v in state.items()}  # writable copies of the object store's arrays
                for state in self._get([h.state_dict.remote() for h in self.handles])]

    def _load_shard_states(self, states: list[Params]) -> None:
        self.flush()
        self._get([h.load_state_dict.remote(s) for h, s in zip(self.handles, states, strict=True)])

    def kill(self) -> None:
        """Stop the shard actors (their contents are lost)."""
        ray = require_ray()
        for h in self.handles:
            ray.kill(h)
        self.handles, self.pending = [], []
