"""Ray transport for pearl's roles: starting or joining a Ray instance, the roles as Ray actors.

The only module of pearl that imports Ray, and only inside its functions, so it can be imported (and its
missing-Ray error raised) where Ray is not installed. It is imported only when the Ray launcher is chosen.

Security: anyone who reaches a Ray cluster's ports runs code as you. Ray 2.60 guards them with a token
(token authentication, on by default for `ray start --head` and a local ``ray.init()``; `connect` asks for it
when a token is at hand, see `use_token_if_available`), which protects only while the token stays secret and
a cluster may turn off; so an instance that pearl starts itself also listens on the loopback address only and
starts no dashboard (`ray start --node-ip-address=127.0.0.1` is not enough: Ray 2.60 still binds every
interface, checked with ``ss -ltn``). Ray's public knob for the node address is the environment variable
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``: off, Ray treats the machine as a one-node cluster and uses 127.0.0.1
as the node's address, and (Ray 2.60, checked with ``ss -ltn``) every server it starts then binds to
loopback. The hidden ``ray.init(_node_ip_address="127.0.0.1")`` is private and, in Ray 2.60, resolved back
to the machine's external address, so it is not used. Ray reads the variable when it is first imported:
`start_local_ray` sets it before importing Ray and refuses to go on (shutting the instance down) when the
node it got is not on loopback, e.g. because Ray was imported earlier in the process.

Roles: actor workers, the learner (`RayLearnerRole`) and the replay shards are Ray actors, each placed with
its declared ``num_cpus``/``num_gpus`` and custom resources or node affinity (`ShardPlacement`); every role's
placement is checked against the cluster (`check_roles`) before any role starts.

Transport: numpy batches travel through Ray's object store (arguments and results; on one node a large
array is read in place, read-only), so a shard or the learner writes what it receives into its own storage
and the client copies what it gets back into fresh arrays before anyone may write them. A worker's batch
goes to the learner as an object ref the driver passes on unread; the learner's published weights are an
object ref too, versioned by segment, which a worker fetches only when it needs a newer version.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from pearl.adapters.base import ReplayKernels, host_array
from pearl.algos.base import OffPolicyConfig
from pearl.adapters.slices import slice_env
from pearl.device import DeviceId
from pearl.errors import ConfigError, PearlError
from pearl.runtime.actor_worker import ActorWorker, Collected, WorkerRestarted
from pearl.runtime.checkpoint import Checkpoint, Checkpointer, actor_seed
from pearl.runtime.launcher import Job, LoopStats, RoleNodes, SegmentLauncher
from pearl.runtime.record import RunRecord
from pearl.runtime.learner_role import LearnerRole, LearnerStatus
from pearl.runtime.local import ActorFailed, raise_on_sigterm
from pearl.runtime.protocol import Episode, KernelClock, merge_clocks
from pearl.runtime.replay_server import ReplayShard, ShardedReplay, ShardSample, ShardStats
from pearl.types import EnvSpec, Params, PriorityUpdate, SampleBatch, TransitionBatch

__all__ = ["INSTALL_HINT", "LOOPBACK", "RayLauncher", "RayLearnerRole", "RemoteShardedReplay", "ShardPlacement",
           "check_address", "check_installed", "check_placements", "check_roles",
           "connect", "plan_node_ids", "remote_shards", "require_ray", "shutdown", "start_local_ray"]

LOOPBACK = "127.0.0.1"
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_AUTH_MODE_ENV = "RAY_AUTH_MODE"
INSTALL_HINT = 'the Ray launcher needs Ray, which is not installed: pip install "pearl[ray]"'
_SHARD_CLASS: Any = None


def require_ray() -> ModuleType:
    """The ``ray`` module, or a ConfigError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


def check_installed() -> None:
    """ConfigError saying how to install Ray when it is missing; Ray is not imported (see the module docstring)."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(INSTALL_HINT)


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
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(f"--ray-address must be a cluster address such as 10.0.0.5:6379, got {address!r}")
    check_installed()  # the install hint first: without Ray no address can help
    check_address(address)
    use_token_if_available()
    ray = require_ray()
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"cannot join the Ray cluster at {address}: {exc}") from None


def use_token_if_available() -> None:
    """Ask for Ray's token authentication when a token is at hand and the mode is unset, as `ray start` does for
    itself: Ray 2.60's `ray start --head` turns it on and keeps the token in ~/.ray/auth_token, and a driver
    without ``RAY_AUTH_MODE=token`` is refused (after 20 s of retries). Set before Ray is imported: Ray reads it
    then."""
    if _AUTH_MODE_ENV in os.environ:
        return
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if os.environ.get("RAY_AUTH_TOKEN") or path.is_file():
        os.environ[_AUTH_MODE_ENV] = "token"


def check_address(address: str, timeout: float = 5.0) -> None:
    """ConfigError unless something accepts a TCP connection at the cluster address ("auto" is Ray's own
    search): Ray itself retries an address where nothing listens for minutes before it gives up."""
    if address == "auto":
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray-address must be host:port (e.g. 10.0.0.5:6379) or ray://host:port, got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(f"cannot join the Ray cluster at {address}: nothing answers there "
                          f"({exc.strerror or exc}); is its head running (`ray start --head`)?") from None


def shutdown() -> None:
    """Disconnect; an instance this process started (`start_local_ray`) stops with every process it ran."""
    ray = require_ray()
    ray.shutdown()


@dataclass(frozen=True)
class ShardPlacement:
    """Where one role's actor (a replay shard, an actor worker) goes and what it reserves (Ray's resources are
    logical: admission only)."""

    num_cpus: float = 1.0
    resources: dict[str, float] = field(default_factory=dict)
    num_gpus: float = 0.0  # fractional where roles share a GPU
    node_id: str | None = None  # a Ray node id (hex) to pin the shard to
    soft: bool = False  # with node_id: run elsewhere when that node cannot take it
    max_restarts: int = 0  # Ray restarts a dead shard empty; the run then needs a checkpoint to refill it
    #: environment the role's process starts with: a GPU slice's (pearl.adapters.slices.slice_env), which CUDA
    #: reads once, when it starts in the process
    env: dict[str, str] = field(default_factory=dict)

    def options(self) -> dict[str, Any]:
        """Keyword arguments for Ray's ``.options()``."""
        opts: dict[str, Any] = {"num_cpus": self.num_cpus, "max_restarts": self.max_restarts}
        if self.num_gpus:
            opts["num_gpus"] = self.num_gpus
        if self.resources:
            opts["resources"] = dict(self.resources)
        if self.env:
            opts["runtime_env"] = {"env_vars": dict(self.env)}
        if self.node_id is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.node_id, soft=self.soft)
        return opts

    def demand(self) -> dict[str, float]:
        gpus = {"GPU": float(self.num_gpus)} if self.num_gpus else {}
        return {"CPU": float(self.num_cpus), **gpus, **{k: float(v) for k, v in self.resources.items()}}


class _PlacedShard(ReplayShard):
    """A replay shard that says which Ray node it runs on, asked from inside."""

    def node_id(self) -> str:
        return str(require_ray().get_runtime_context().get_node_id())


def _shard_class() -> Any:
    """``ray.remote(_PlacedShard)``, made once and only when a shard is first placed."""
    global _SHARD_CLASS
    if _SHARD_CLASS is None:
        _SHARD_CLASS = require_ray().remote(_PlacedShard)
    return _SHARD_CLASS


def plan_node_ids(names: Sequence[str]) -> dict[str, str]:
    """The Ray node id of each plan node: the live node that carries the resource ``pearl_node_NAME``
    (`RoleNodes.resource`). ConfigError naming the first plan node that no node, or more than one, carries."""
    ray = require_ray()
    live = [n for n in ray.nodes() if n.get("Alive")]
    out: dict[str, str] = {}
    for name in names:
        resource = RoleNodes.resource(name)
        carriers = [n["NodeID"] for n in live if n.get("Resources", {}).get(resource, 0) > 0]
        if not carriers:
            raise ConfigError(f"the Ray cluster has no node for plan node {name!r}: start that node with "
                              f"`ray start --address HEAD --resources '{{\"{resource}\": 1}}'` (the cluster's "
                              f"nodes carry {_node_resources(live) or 'no pearl_node_ resource'})")
        if len(carriers) > 1:
            raise ConfigError(f"{len(carriers)} Ray nodes carry {resource}, so plan node {name!r} is ambiguous: "
                              "give that resource to one node only")
        out[name] = carriers[0]
    return out


def _node_resources(nodes: list[dict[str, Any]]) -> str:
    prefix = RoleNodes.resource("")
    return ", ".join(sorted(r for n in nodes for r in n.get("Resources", {}) if r.startswith(prefix)))


def check_placements(placements: Sequence[ShardPlacement], role: str = "replay shard") -> None:
    """`check_roles` for roles of one kind, named "<role> <i>"."""
    check_roles([(f"{role} {i}", p) for i, p in enumerate(placements)])


def check_roles(roles: Sequence[tuple[str, ShardPlacement]]) -> None:
    """ConfigError naming the role and the resource when the cluster cannot hold every role's placement, before
    any actor is created: the total of each resource, and each pinned node's own resources."""
    ray = require_ray()
    totals = ray.cluster_resources()
    asked: dict[str, float] = {}
    for name, p in roles:
        for res, amount in p.demand().items():
            asked[res] = asked.get(res, 0.0) + amount
            if asked[res] > totals.get(res, 0.0) + 1e-9:
                raise ConfigError(f"{name} cannot be placed: the cluster has {totals.get(res, 0.0):g} {res}, "
                                  f"the roles up to it ask for {asked[res]:g}")
    nodes = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
    pinned: dict[tuple[str, str], float] = {}  # (node, resource) → asked by the roles pinned to it so far
    for name, p in roles:
        if p.node_id is None or p.soft:
            continue
        if p.node_id not in nodes:
            raise ConfigError(f"{name} is pinned to node {p.node_id}, which is not in the cluster")
        have = nodes[p.node_id].get("Resources", {})
        for res, amount in p.demand().items():
            pinned[p.node_id, res] = total = pinned.get((p.node_id, res), 0.0) + amount
            if total > have.get(res, 0.0) + 1e-9:
                raise ConfigError(f"{name} cannot be placed on node {p.node_id}: it has {have.get(res, 0.0):g} "
                                  f"{res}, the roles pinned to it up to this one ask for {total:g}")


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


class ShardedReplayKernels(ReplayKernels):
    """The replay kernels of a run whose replay is the replay server: `RemoteShardedReplay` behind the interface
    the learner's `ReplayManager` drives (host batches; the learner's adapter moves them to its device)."""

    def __init__(self, replay: ShardedReplay) -> None:
        self.replay = replay

    @property
    def size(self) -> int:
        return self.replay.size

    def insert(self, batch: TransitionBatch) -> None:
        self.replay.insert(batch)

    def sample(self, batch_size: int, beta: float) -> SampleBatch:
        return self.replay.sample(batch_size, beta)

    def samples(self, count: int, batch_size: int, beta: float) -> Iterator[SampleBatch]:
        """Uniform batches all at once: two round trips to the shards for a segment's updates instead of two an
        update (the same draws, since nothing the learner does moves a uniform draw); prioritized ones in turn,
        so each sees the priority update before it."""
        if self.replay.prioritized:
            yield from super().samples(count, batch_size, beta)
        elif count > 0:
            yield from self.replay.sample_many(count, batch_size, beta)

    def update_priorities(self, update: PriorityUpdate) -> None:
        self.replay.update_priorities(host_array(update.indices), host_array(update.td_errors))

    def state_dict(self) -> Params:
        return self.replay.state_dict()

    def load_state_dict(self, state: Params) -> None:
        self.replay.load_state_dict(state)


# ------------------------------------------------------------------------------------ the Ray launcher
_WORKER_CLASS: Any = None
_ROLE_CLASS: Any = None
STARTUP_TIMEOUT_S = 300.0  # roles are placed, started and set up (envs, act kernel, learner) within this
STOP_STATE_TIMEOUT_S = 120.0  # an interrupted run's learner hands over its state for the checkpoint within this
_RESTART_SEED = 104_729  # a restarted worker's seed moves by this per restart (as the local launcher's actors)


def _worker_class() -> Any:
    """``ray.remote(ActorWorker)``, made once and only when a worker is first placed."""
    global _WORKER_CLASS
    if _WORKER_CLASS is None:
        _WORKER_CLASS = require_ray().remote(ActorWorker)
    return _WORKER_CLASS


def _role_class() -> Any:
    """``ray.remote(RayLearnerRole)``, made once and only when a learner is first placed."""
    global _ROLE_CLASS
    if _ROLE_CLASS is None:
        _ROLE_CLASS = require_ray().remote(RayLearnerRole)
    return _ROLE_CLASS


class RayLearnerRole(LearnerRole):
    """The learner's role as the Ray launcher places it: replay in the role, or the replay server's shards
    (their handles given), and the node it runs on, asked from inside."""

    def __init__(self, job: Job, devices: list[str], shards: list[Any] | None = None) -> None:
        kernels = None
        if shards:
            cfg = job.config
            kernels = ShardedReplayKernels(RemoteShardedReplay(shards, cfg.buffer_size, job.spec, cfg.prioritized,
                                                               cfg.alpha, cfg.priority_eps, job.seed + 2))
        self.sharded = bool(shards)
        super().__init__(job, devices, None, kernels)

    def restore(self, resume: Checkpoint) -> None:
        try:
            super().restore(resume)
        except PearlError as exc:
            if not self.sharded:
                raise
            raise ConfigError(f"{resume.path}: its replay does not fit the replay shards: {exc}") from None

    def node_id(self) -> str:
        return str(require_ray().get_runtime_context().get_node_id())

    def pid(self) -> int:
        return os.getpid()

    def ready(self) -> int:
        """The update count (a call that returns once the role is built)."""
        return self.learner.updates


class _RemoteRole:
    """The driver's side of the placed learner role: the calls `SegmentLauncher` makes, sent to the Ray actor.

    The per-segment calls (insert, train, publish) are sent without waiting: Ray runs one caller's calls to an
    actor in order, so the learner applies them in the schedule's order while the driver goes on to collect
    the next segment. Their errors surface at the next health check or answered call. The others (status,
    evaluate, state, ...) wait for the answer, and so for every call sent before them."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.pending: list[Any] = []

    def _call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        return _role_get(getattr(self.handle, method).remote(*args), timeout)

    def check(self) -> None:
        """Raise the error of a per-segment call that failed (as ActorFailed, or as its pearl error)."""
        if self.pending:
            ray = require_ray()
            done, self.pending = ray.wait(self.pending, num_returns=len(self.pending), timeout=0)
            for ref in done:
                _role_get(ref)

    def insert_refs(self, refs: list[Any]) -> None:
        self.pending.append(self.handle.insert.remote(*refs))  # Ray resolves them in the learner's process

    def train(self, updates: int, beta: float) -> None:
        self.pending.append(self.handle.train.remote(updates, beta))

    def policy_ref(self) -> Any:
        return self.handle.policy.remote()

    def policy(self) -> Params:
        return {k: np.array(v) for k, v in _role_get(self.policy_ref()).items()}

    def evaluate(self, steps: int) -> Any:
        return self._call("evaluate", steps)

    def status(self) -> LearnerStatus:
        return self._call("status")

    def state(self, include_replay: bool, timeout: float | None = None) -> tuple[Params, Params | None]:
        learn, replay = self._call("state", include_replay, timeout=timeout)
        return _writable(learn), None if replay is None else _writable(replay)

    def best_policy(self) -> Any:
        best = self._call("best_policy")
        if best is not None and best.best is not None:
            best.best = _writable(best.best)
        return best

    def clocks(self) -> list[KernelClock]:
        return self._call("clocks")


def _writable(state: Params) -> Params:
    return {k: np.array(v) for k, v in state.items()}  # copies of the object store's read-only arrays


def _role_get(ref: Any, timeout: float | None = None) -> Any:
    """``ray.get`` of a learner call: its pearl error as itself, any other failure or death as ActorFailed."""
    ray = require_ray()
    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        raise ActorFailed(f"the learner did not answer within {timeout:.0f} s") from None
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if exc.cause is not None else exc
        if isinstance(cause, PearlError):
            raise cause from None
        raise ActorFailed(f"the learner failed: {type(cause).__name__}: {_first_line(cause)}") from None
    except ray.exceptions.RayActorError as exc:
        raise ActorFailed(f"the learner died: {_first_line(exc)}") from None


@dataclass
class _InFlight:
    """A segment whose collection was asked for: the weights it acts with and each worker's two futures (the
    batch, then what was measured)."""

    tag: int
    weights: Any  # the object ref of the published policy
    futures: list[list[Any]]


class RayLauncher(SegmentLauncher):
    """Every role a Ray actor placed by the plan: actor workers, the learner (with replay, or a client of the
    replay server's shards), the replay shards; the driver (this process) runs only the segment loop,
    checkpoints, evaluations' timing and the metrics lines.

    The workers collect segment k + 1 .. k + lag while the learner trains on segment k: `start` asks every
    worker for segments first .. first + lag (with the starting policy, the learner's, as one object ref);
    `_collect(k)` waits for what each worker measured of segment k and sends the learner the refs of the
    batches, in actor order; the loop sends the segment's updates; `_publish(k)` asks the learner for W(k)
    (an object ref, never fetched by the driver) and every worker for segment k + 1 + lag, which acts with
    it. Ray runs one caller's calls to an actor in order, so each worker collects its segments in turn and
    the learner inserts, trains and publishes in the schedule's order. Which rows reach replay and which
    weights each step acts with are the schedule's, so the parameters equal the sequential and the local
    launcher's bit for bit.

    A worker that dies is restarted by Ray (``max_restarts``); the driver sets it up again at the rows the
    learner received from it (reseeded, as the local launcher's actors) and asks again for every segment in
    flight. The learner is not restarted: its death ends the run, which `pearl train --resume` goes on with.
    """

    name = "ray"

    def __init__(self, job: Job, resume: Checkpoint | None = None, checkpointer: Checkpointer | None = None,
                 address: str | None = None, max_restarts: int = 3,
                 actor_placement: ShardPlacement | None = None, replay_shards: int = 0,
                 replay_placement: ShardPlacement | None = None,
                 learner_placement: ShardPlacement | None = None, role_nodes: RoleNodes | None = None) -> None:
        """`role_nodes` (a cluster plan's): each role pinned to the Ray node of its plan node (see
        `plan_node_ids`); the placements given explicitly win over it."""
        super().__init__(job, resume, checkpointer)
        self.plan_nodes = role_nodes
        self.node_ids: dict[str, str] = {}  # plan node → Ray node id, once resolved
        self.shard_nodes: list[str] = []  # the Ray node each replay shard runs on, asked from inside it
        self.replay_shards, self.replay_placement = replay_shards, replay_placement
        self.learner_placement = learner_placement
        self.shard_handles: list[Any] = []
        self.address, self.max_restarts, self.actor_placement = address, max_restarts, actor_placement
        self.restarts, self.restart_log = 0, []
        self.workers: list[Any] = []
        self.pids: list[int] = []
        self.nodes: list[str] = []  # the Ray node each worker runs on, asked from inside it
        self.learner_node: str | None = None  # the learner role's, asked from inside it
        self.seeds = [actor_seed(job.seed, i, self.steps) for i in range(job.actors)]
        self.inflight: dict[int, _InFlight] = {}
        self.discarded: list[Any] = []  # futures a worker's death made void (read at stop, so Ray reports none)
        self.episodes: list[Episode] = []
        self.clocks: dict[int, KernelClock] = {}  # each worker's latest clock
        self.retired: list[KernelClock] = []  # the clocks of workers that died
        self.dropped_by: dict[int, int] = {}
        self.started_here = False  # pearl started the local Ray instance
        self.joined = False  # this launcher connected the driver (and disconnects it at stop)
        self.finished = False
        self._previous_sigterm: Any = None
        self._terminated = threading.Event()  # set by the SIGTERM handler
        self.waits: dict[str, float] = {}

    def _make_role(self) -> Any:
        return None  # placed by `start`, once Ray runs

    @property
    def adapters(self) -> dict[str, Any]:
        return {}  # the driver opens no device: the roles open theirs

    def _learner_devices(self) -> list[str]:
        return sorted({self.placement.replay, self.placement.learn})  # the workers open the act device

    # --------------------------------------------------------------------------------- start / stop
    def start(self) -> None:
        ray = self._join()
        self._previous_sigterm = raise_on_sigterm(self._terminated)  # after ray.init, which installs its own
        learner, shards, workers = self._placements(ray)
        learner = dataclasses.replace(learner, env={**learner.env, **slice_env(self.placement.learn)})
        acts = self.act_devices()
        workers = [dataclasses.replace(w, env={**w.env, **slice_env(acts[i])}) for i, w in enumerate(workers)]
        roles = [("learner", learner)]
        roles += [(f"replay shard {i}", shard) for i, shard in enumerate(shards)]
        roles += [(f"actor worker {i}", w) for i, w in enumerate(workers)]
        check_roles(roles)  # every role, before any is started
        if self.replay_shards:
            self.shard_handles = remote_shards(self.config, self.spec, self.replay_shards, shards)
            self.shard_nodes = self._get([h.node_id.remote() for h in self.shard_handles], "setting up",
                                         STARTUP_TIMEOUT_S)  # asked from inside each shard
        handle = _role_class().options(**learner.options()).remote(self.job, self._learner_devices(),
                                                                     self.shard_handles or None)
        self.role = _RemoteRole(handle)
        if self.resume is not None:
            self.role.pending.append(handle.restore.remote(ray.put(self.resume)))
        self.learner_node = self.role._call("node_id", timeout=STARTUP_TIMEOUT_S)  # asked from inside the role
        self.updates = self.role._call("ready")
        self.role.check()
        cls, sched = _worker_class(), self.schedule
        self.workers = [cls.options(**workers[i].options()).remote(
            i, self.config, self.spec, acts[i], self.job.descriptor_for(acts[i]), sched)
            for i in range(self.job.actors)]
        first = self.role.policy_ref()
        self.pids = self._get([w.setup.remote(self.seeds[i], sched.steps_before(self.first_segment, i), first)
                               for i, w in enumerate(self.workers)], "setting up", STARTUP_TIMEOUT_S)
        self.nodes = self._get([w.node_id.remote() for w in self.workers], "setting up")  # asked from inside
        for k in range(self.first_segment, min(self.first_segment + sched.lag + 1, sched.segments)):
            self._submit(k, sched.weights_for(k), first)

    def _join(self) -> ModuleType:
        """Connect the driver: to the cluster at the address, to Ray already running in this process, or to
        a local instance started here (loopback only, no dashboard)."""
        running = sys.modules.get("ray")
        if self.address is not None:
            connect(self.address)
            self.joined = True
        elif running is not None and running.is_initialized():
            return running  # the caller's Ray: theirs to shut down
        else:
            start_local_ray()
            self.started_here = self.joined = True
        return require_ray()

    def act_devices(self) -> list[str]:
        """Each worker's act device: the job's, or for a cluster plan that spreads the actors its node's."""
        if self.plan_nodes is None:
            return [self.placement.act] * self.job.actors
        return [self.plan_nodes.worker(i, self.placement.act)[1] for i in range(self.job.actors)]

    def _placements(self, ray: ModuleType) -> tuple[ShardPlacement, list[ShardPlacement], list[ShardPlacement]]:
        """The learner's, each replay shard's and each worker's placement: the ones given, else an equal part
        of the cluster's CPUs, at most one, for the learner and each worker (Ray's CPUs are admission only:
        the roles share the cores), none for a shard; on a CUDA device a GPU, or an equal part of one for the
        roles that share it; the learner near the driver where that node can take it. With `plan_nodes`, each
        role pinned to its plan node (`_plan_placements`)."""
        if self.plan_nodes is not None:
            return self._plan_placements(ray, self.plan_nodes)
        have = ray.cluster_resources()
        cpus = min(1.0, float(have.get("CPU", 1.0)) / (self.job.actors + 1))
        learn_gpu, act_gpu = (DeviceId.parse(d).family == "cuda" for d in (self.placement.learn, self.placement.act))
        shared = 1.0 / (self.job.actors + 1) if learn_gpu and act_gpu else None  # one GPU for all of them
        worker = self.actor_placement or ShardPlacement(
            num_cpus=cpus, num_gpus=0.0 if not act_gpu else shared or
            min(1.0, max(float(have.get("GPU", 0.0)), 1.0) / self.job.actors))
        learner = self.learner_placement or ShardPlacement(
            num_cpus=cpus, num_gpus=0.0 if not learn_gpu else shared or 1.0,
            node_id=str(ray.get_runtime_context().get_node_id()), soft=True)
        shard = self.replay_placement or ShardPlacement(num_cpus=0)
        return learner, [shard] * self.replay_shards, \
            [dataclasses.replace(worker, max_restarts=self.max_restarts)] * self.job.actors

    def run(self, record: RunRecord | None = None, progress: Callable[[int], None] | None = None,
            max_seconds: float | None = None) -> LoopStats:
        """The segment loop; SIGTERM ends it as SystemExit(143) also when it lands inside a Ray call: Ray turns
        the handler's exception into its own SystemExit(1) there (3 and 4 of 6 SIGTERMs in two tries did)."""
        try:
            return super().run(record, progress, max_seconds)
        except BaseException:
            if self._terminated.is_set():
                raise SystemExit(128 + signal.SIGTERM) from None
            raise

    def _plan_placements(self, ray: ModuleType, nodes: RoleNodes) -> tuple[ShardPlacement, list[ShardPlacement],
                                                                             list[ShardPlacement]]:
        """A cluster plan's placements: every role pinned (hard) to the Ray node of its plan node, each actor
        worker to its own (a plan may spread them over nodes); on each node the learner and the workers there
        share its CPUs equally, at most one each (admission only, as above); a CUDA role a GPU, or an equal
        part of one with the roles on the same node's same GPU. A sharded replay server: each shard pinned to
        its own plan node (`RoleNodes.shards`)."""
        self.node_ids = ids = plan_node_ids(nodes.names())
        cpus_of = {n["NodeID"]: float(n.get("Resources", {}).get("CPU", 0.0)) for n in ray.nodes() if n.get("Alive")}
        acts = [nodes.worker(i, self.placement.act) for i in range(self.job.actors)]
        on_node = {name: sum(node == name for node, _ in acts) + (name == nodes.learner) for name in nodes.names()}
        learn_gpu = _is_cuda(self.placement.learn)
        learner_gpu = (nodes.learner, self.placement.learn)

        def cpus(name: str) -> float:
            return min(1.0, cpus_of.get(ids[name], 0.0) / max(on_node[name], 1))

        def gpus(where: tuple[str, str]) -> float:  # an equal part of the GPU for every role on it
            sharing = acts.count(where) + (learn_gpu and where == learner_gpu)
            return 1.0 / sharing if _is_cuda(where[1]) else 0.0

        workers = [self.actor_placement or ShardPlacement(num_cpus=cpus(node), node_id=ids[node],
                                                          num_gpus=gpus((node, act))) for node, act in acts]
        learner = self.learner_placement or ShardPlacement(
            num_cpus=cpus(nodes.learner), node_id=ids[nodes.learner], num_gpus=gpus(learner_gpu))
        if nodes.shards and len(nodes.shards) != self.replay_shards:
            raise ConfigError(f"the plan shards the replay server over {len(nodes.shards)} nodes, the launcher was "
                              f"given {self.replay_shards} replay shards")
        homes = nodes.shards or (nodes.replay,) * self.replay_shards
        shards = [self.replay_placement or ShardPlacement(num_cpus=0, node_id=ids[n]) for n in homes]
        return learner, shards, [dataclasses.replace(w, max_restarts=self.max_restarts) for w in workers]

    def stop(self) -> None:
        ray = sys.modules.get("ray")
        workers, self.workers, self.inflight = self.workers, [], {}
        role, shards, self.shard_handles = self.role, self.shard_handles, []
        self.role = None
        try:
            if ray is not None and ray.is_initialized():
                for w in workers:
                    ray.kill(w, no_restart=True)
                self._drop_discarded(ray)
                if role is not None:
                    self._keep_state(role)
                    ray.kill(role.handle, no_restart=True)
                for s in shards:
                    ray.kill(s)
        finally:
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
                self._previous_sigterm = None
            if self.joined:
                self.joined = False
                shutdown()  # a local instance pearl started stops with every process it ran

    def _keep_state(self, role: _RemoteRole) -> None:
        """Before the learner stops early: its state, so that a checkpoint taken after `stop` (an interrupted
        run's) holds what it learnt. Best effort: a learner that died or hangs leaves none."""
        if self.finished or self.checkpointer is None or self.steps == self.start_steps:
            return
        try:
            self._kept = role.state(self.checkpointer.include_replay, timeout=STOP_STATE_TIMEOUT_S)
        except (PearlError, OSError):
            self._kept = None

    def checkpoint_now(self) -> str | None:
        if self._kept is None and self.role is None:
            return None  # the learner stopped without handing over its state (it died, or hung)
        return super().checkpoint_now()

    def _drop_discarded(self, ray: ModuleType) -> None:
        """Read the void futures' errors: Ray prints an error that no one read when its future is freed."""
        discarded, self.discarded = self.discarded, []
        for ref in discarded:
            try:
                ray.get(ref, timeout=1.0)
            except Exception:  # noqa: BLE001 - their errors are the known deaths, already handled
                pass

    # ------------------------------------------------------------------------------ the schedule's hooks
    def _submit(self, k: int, tag: int, weights: Any) -> None:
        self.inflight[k] = _InFlight(tag, weights, [self._ask(w, k, tag, weights) for w in self.workers])

    @staticmethod
    def _ask(worker: Any, k: int, tag: int, weights: Any) -> list[Any]:
        """Worker's share of segment k: the futures of its batch and of what it measured. The weights' ref goes
        in a list, so the worker fetches them only when it needs a newer version than it holds."""
        return list(worker.collect.options(num_returns=2).remote(k, tag, [weights]))

    def _collect(self, k: int, insert: Callable[[TransitionBatch], None], wait: Callable[[], None]) -> None:
        """Wait for what every worker measured of segment k, then send the learner its batches' refs in actor
        order, in one call (so replay holds whole segments whenever the run is interrupted)."""
        ray = require_ray()
        while True:
            futures = [f[1] for f in self.inflight[k].futures]
            t0 = time.perf_counter()
            _, waiting = ray.wait(futures, num_returns=len(futures), timeout=0.2)
            self.waited += time.perf_counter() - t0
            if not waiting:
                break
            wait()
        got = [self._result(k, i) for i in range(len(self.workers))]
        self.role.insert_refs([f[0] for f in self.inflight.pop(k).futures])
        self.steps += sum(c.rows for c in got)
        for i, collected in enumerate(got):
            self.episodes.extend(collected.episodes)
            clock = self.clocks.setdefault(i, KernelClock())
            clock.seconds.update(collected.seconds)
            clock.calls.update(collected.calls)
            self.dropped_by[i] = collected.dropped
        self.dropped = sum(self.dropped_by.values())

    def _publish(self, tag: int) -> None:
        """W(tag) as an object ref the learner makes, and every worker asked for the segment that acts with it."""
        k = tag + 1 + self.schedule.lag
        if k < self.schedule.segments:
            self._submit(k, tag, self.role.policy_ref())

    def _health(self) -> None:
        if self.role is not None:
            self.role.check()

    def _episodes(self) -> list[Episode]:
        out, self.episodes = self.episodes, []
        return out

    def _extra_metrics(self) -> dict[str, Any]:
        return {"runtime/actor_restarts": self.restarts}

    def _clocks(self) -> tuple[dict[str, float], dict[str, int]]:
        seconds, calls = merge_clocks((*self.clocks.values(), *self.retired, *self.role.clocks()))
        if not self.config.prioritized:  # uniform replay: the learner skips the no-op priority update
            seconds.setdefault("priority_update", 0.0)
            calls.setdefault("priority_update", 0)
        self.waits = {"learner_wait_s": self.waited}
        return seconds, calls

    def _finish(self, stats: LoopStats) -> LoopStats:
        stats = super()._finish(stats)
        self.finished = True
        stats.restarts, stats.lost_steps_max = self.restarts, self.restarts * self.config.n_envs
        stats.waits = dict(self.waits)
        stats.roles = self.role_nodes()
        return stats

    def role_nodes(self) -> dict[str, str]:
        """Each role's node, as each role reported it: the id's first 8 hex digits and the node's address."""
        ray = require_ray()
        address = {n["NodeID"]: n.get("NodeManagerAddress", "?") for n in ray.nodes()}
        plan_name = {node: f", plan node {name}" for name, node in self.node_ids.items()}
        named = [("learner", self.learner_node)] + [(f"actor worker {i}", n) for i, n in enumerate(self.nodes)]
        named += [(f"replay shard {i}", n) for i, n in enumerate(self.shard_nodes)]
        return {role: f"node {node[:8]} ({address.get(node, '?')}{plan_name.get(node, '')})"
                for role, node in named if node is not None}

    # ------------------------------------------------------------------------------------ failures
    def _result(self, k: int, i: int) -> Collected:
        """What worker i measured of segment k; a worker that died (or failed) is restarted and asked again."""
        ray = require_ray()
        while True:
            try:
                return ray.get(self.inflight[k].futures[i][1])
            except ray.exceptions.RayActorError as exc:
                self._restart(k, i, f"died: {_first_line(exc)}")
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause if exc.cause is not None else exc
                if isinstance(cause, WorkerRestarted):  # it died after the call was sent; Ray restarted it
                    self._restart(k, i, "died (Ray restarted it)")
                    continue
                reason = f"failed: {type(cause).__name__}: {_first_line(cause)}"
                self._check_restart_limit(i, reason)
                ray.kill(self.workers[i], no_restart=False)  # its state is unknown: Ray starts it afresh
                self._restart(k, i, reason)

    def _check_restart_limit(self, i: int, reason: str) -> None:
        if self.restarts >= self.max_restarts:
            raise ActorFailed(f"actor {i} {reason} (after {self.restarts} restart(s); the limit is "
                              f"{self.max_restarts})")

    def _restart(self, k: int, i: int, reason: str) -> None:
        """Set worker i up again (Ray restarted its process) at the rows the learner received from it, and ask
        it again for every segment in flight, k first."""
        self._check_restart_limit(i, reason)
        self.restarts += 1
        self.restart_log.append(f"actor {i} {reason}")
        if i in self.clocks:
            self.retired.append(self.clocks.pop(i))
        seed = self.seeds[i] + _RESTART_SEED * self.restarts
        worker = self.workers[i]
        self.pids[i], self.nodes[i] = self._setup_restarted(i, seed, self.schedule.steps_before(k, i),
                                                            self.inflight[k].weights)
        for j in sorted(self.inflight):
            flight = self.inflight[j]
            self.discarded.extend(flight.futures[i])
            flight.futures[i] = self._ask(worker, j, flight.tag, flight.weights)

    def _setup_restarted(self, i: int, seed: int, collected: int, weights: Any) -> list[Any]:
        """Wait until Ray runs worker i in a new process (its pid changed: a killed one may still answer for a
        moment), then set it up; the new pid and node. Calls that reach it while it restarts are sent again."""
        ray, worker, old = require_ray(), self.workers[i], self.pids[i]
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            try:
                if ray.get(worker.pid.remote()) != old:
                    return self._get([worker.setup.remote(seed, collected, weights), worker.node_id.remote()],
                                     "restarting")
            except ray.exceptions.ActorUnavailableError:
                pass
            except ray.exceptions.RayActorError as exc:
                raise ActorFailed(f"actor {i} could not be restarted: {_first_line(exc)}") from None
            if time.monotonic() > deadline:
                raise ActorFailed(f"actor {i} was not restarted within {STARTUP_TIMEOUT_S:.0f} s")
            time.sleep(0.05)

    def _get(self, refs: list[Any], doing: str, timeout: float | None = None) -> list[Any]:
        """``ray.get``; a worker's error (or death) while `doing` ends the run with its message."""
        ray = require_ray()
        try:
            return ray.get(refs, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise ActorFailed(f"the actor workers were not running after {timeout:.0f} s {doing}: the cluster may "
                              "lack the resources they ask for (`ray status` shows what is pending)") from None
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if exc.cause is not None else exc
            if isinstance(cause, PearlError):
                raise cause from None
            raise ActorFailed(f"an actor worker failed {doing}: {type(cause).__name__}: {_first_line(cause)}") \
                from None
        except ray.exceptions.RayActorError as exc:
            raise ActorFailed(f"an actor worker died {doing}: {_first_line(exc)}") from None


def _is_cuda(device: str) -> bool:
    return DeviceId.parse(device).family == "cuda"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"


# ------------------------------------------------------------------------------ profiling a running cluster
#: payload sizes of the link measurement (bytes): small messages fix the per-call cost, large ones the bandwidth
LINK_SIZES = (1_000, 100_000, 1_000_000, 10_000_000)


def cluster_node_names() -> dict[str, str]:
    """Each live Ray node's name: NAME of its ``pearl_node_NAME`` resource, else ``node-`` and its id's first 8
    hex digits; Ray node id → name."""
    prefix = RoleNodes.resource("")
    out: dict[str, str] = {}
    for n in require_ray().nodes():
        if n.get("Alive"):
            names = sorted(r[len(prefix):] for r in n.get("Resources", {}) if r.startswith(prefix))
            out[n["NodeID"]] = names[0] if names else f"node-{n['NodeID'][:8]}"
    return out


def run_on_each_node(fn: Callable[[], Any]) -> dict[str, Any]:
    """``fn()`` run by a Ray task pinned (hard) to each live node in turn, one node at a time so that no
    measurement shares the machine with another; its result per node name (`cluster_node_names`)."""
    ray = require_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0)(_call)
    out: dict[str, Any] = {}
    for node_id, name in sorted(cluster_node_names().items(), key=lambda kv: kv[1]):
        strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
        out[name] = ray.get(task.options(scheduling_strategy=strategy).remote(fn))
    return out


def _call(fn: Callable[[], Any]) -> Any:
    return fn()


class _Receiver:
    """Takes an array by object ref (Ray fetches it to this actor's node first): the far end of a link."""

    def take(self, array: np.ndarray) -> int:
        return int(array.nbytes)


class _Sender:
    """Puts a fresh array in its node's object store and has the receiver take it: one transfer, timed."""

    def send(self, receiver: Any, sizes: Sequence[int], reps: int) -> dict[int, float]:
        ray = require_ray()
        ray.get(receiver.take.remote(np.zeros(8, np.uint8)))  # the receiver is up
        out: dict[int, float] = {}
        for size in sizes:
            times = []
            for _ in range(reps):
                ref = ray.put(np.ones(size, np.uint8))  # new each time: the far node has no copy yet
                t0 = time.perf_counter()
                ray.get(receiver.take.remote(ref))
                times.append(time.perf_counter() - t0)
            out[size] = float(np.median(times))
        return out


def measure_links(sizes: Sequence[int] = LINK_SIZES, reps: int = 5) -> list[tuple[str, str, float, float]]:
    """Every pair of live nodes: an actor on one puts arrays of each size and an actor on the other takes them
    by ref (both directions, the median of `reps` each); a least-squares line t = c + bytes / bw over the sizes
    gives (a, b, latency_s = c / 2, one way; bandwidth_bytes_per_s = bw), both directions averaged. These are
    Ray's costs (a call, the object transfer), what a crossing edge costs the Ray launcher."""
    ray = require_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    names = cluster_node_names()
    ids = sorted(names, key=names.get)
    sender, receiver = ray.remote(num_cpus=0)(_Sender), ray.remote(num_cpus=0)(_Receiver)
    out = []
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            fits = []
            for src, dst in ((a, b), (b, a)):
                s = sender.options(scheduling_strategy=NodeAffinitySchedulingStrategy(src, soft=False)).remote()
                r = receiver.options(scheduling_strategy=NodeAffinitySchedulingStrategy(dst, soft=False)).remote()
                seconds = ray.get(s.send.remote(r, list(sizes), reps))
                ray.kill(s)
                ray.kill(r)
                slope, intercept = np.polyfit(np.array(sizes, float), np.array([seconds[k] for k in sizes]), 1)
                fits.append((max(float(intercept), 1e-9) / 2, 1.0 / max(float(slope), 1e-15)))
            out.append((names[a], names[b], sum(f[0] for f in fits) / 2, sum(f[1] for f in fits) / 2))
    return out
