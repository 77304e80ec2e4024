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

import dataclasses
import importlib.util
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from pearl.adapters.base import ReplayKernels, host_array
from pearl.algos.base import OffPolicyConfig
from pearl.device import DeviceId
from pearl.errors import ConfigError, PearlError
from pearl.runtime.actor_worker import ActorWorker, Collected, WorkerRestarted
from pearl.runtime.checkpoint import Checkpoint, Checkpointer, actor_seed
from pearl.runtime.launcher import Job, LoopStats, SegmentLauncher
from pearl.runtime.local import ActorFailed, raise_on_sigterm
from pearl.runtime.protocol import Episode, KernelClock, ReplayManager, merge_clocks
from pearl.runtime.replay_server import ReplayShard, ShardedReplay, ShardSample, ShardStats
from pearl.types import EnvSpec, Params, PriorityUpdate, SampleBatch, TransitionBatch

__all__ = ["INSTALL_HINT", "LOOPBACK", "RayLauncher", "RemoteShardedReplay", "ShardPlacement", "check_address",
           "check_installed",
           "check_placements", "connect", "remote_shards", "require_ray", "shutdown", "start_local_ray"]

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
    ray = require_ray()
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(f"--ray-address must be a cluster address such as 10.0.0.5:6379, got {address!r}")
    check_address(address)
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"cannot join the Ray cluster at {address}: {exc}") from None


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

    def options(self) -> dict[str, Any]:
        """Keyword arguments for Ray's ``.options()``."""
        opts: dict[str, Any] = {"num_cpus": self.num_cpus, "max_restarts": self.max_restarts}
        if self.num_gpus:
            opts["num_gpus"] = self.num_gpus
        if self.resources:
            opts["resources"] = dict(self.resources)
        if self.node_id is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.node_id, soft=self.soft)
        return opts

    def demand(self) -> dict[str, float]:
        gpus = {"GPU": float(self.num_gpus)} if self.num_gpus else {}
        return {"CPU": float(self.num_cpus), **gpus, **{k: float(v) for k, v in self.resources.items()}}


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
    pinned: dict[tuple[str, str], float] = {}  # (node, resource) → asked by the roles pinned to it so far
    for i, p in enumerate(placements):
        if p.node_id is None or p.soft:
            continue
        if p.node_id not in nodes:
            raise ConfigError(f"{role} {i} is pinned to node {p.node_id}, which is not in the cluster")
        have = nodes[p.node_id].get("Resources", {})
        for name, amount in p.demand().items():
            pinned[p.node_id, name] = asked = pinned.get((p.node_id, name), 0.0) + amount
            if asked > have.get(name, 0.0) + 1e-9:
                raise ConfigError(f"{role} {i} cannot be placed on node {p.node_id}: it has {have.get(name, 0.0):g} "
                                  f"{name}, the {role}s pinned to it up to this one ask for {asked:g}")


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

    def update_priorities(self, update: PriorityUpdate) -> None:
        self.replay.update_priorities(host_array(update.indices), host_array(update.td_errors))

    def state_dict(self) -> Params:
        return self.replay.state_dict()

    def load_state_dict(self, state: Params) -> None:
        self.replay.load_state_dict(state)


# ------------------------------------------------------------------------------------ the Ray launcher
_WORKER_CLASS: Any = None
STARTUP_TIMEOUT_S = 300.0  # workers are placed, started and set up (envs, act kernel) within this
_RESTART_SEED = 104_729  # a restarted worker's seed moves by this per restart (as the local launcher's actors)


def _worker_class() -> Any:
    """``ray.remote(ActorWorker)``, made once and only when a worker is first placed."""
    global _WORKER_CLASS
    if _WORKER_CLASS is None:
        _WORKER_CLASS = require_ray().remote(ActorWorker)
    return _WORKER_CLASS


@dataclass
class _InFlight:
    """A segment whose collection was asked for: the weights it acts with and each worker's future."""

    tag: int
    weights: Any  # the object ref of the published policy
    futures: list[Any]


class RayLauncher(SegmentLauncher):
    """Actor workers as Ray actors, replay and learner in this process (the driver), on the run's schedule.

    The workers collect segment k + 1 .. k + lag while the learner trains on segment k: `start` asks every
    worker for segments first .. first + lag (with the starting policy, put in the object store once);
    `_collect(k)` waits for segment k's futures and inserts them in actor order; `_publish(k)` puts W(k) in
    the object store and asks every worker for segment k + 1 + lag, which acts with it. Ray runs one caller's
    calls to an actor in order, so each worker collects its segments in turn. Which rows reach replay and
    which weights each step acts with are the schedule's, so the parameters equal the sequential and the
    local launcher's bit for bit.

    A worker that dies is restarted by Ray (``max_restarts``); the learner sets it up again at the rows it has
    received from it (reseeded, as the local launcher's actors) and asks again for every segment in flight.
    """

    name = "ray"

    def __init__(self, job: Job, resume: Checkpoint | None = None, checkpointer: Checkpointer | None = None,
                 address: str | None = None, max_restarts: int = 3,
                 actor_placement: ShardPlacement | None = None, replay_shards: int = 0,
                 replay_placement: ShardPlacement | None = None) -> None:
        # with replay shards, a checkpoint's replay goes into the shards (at start), not into the driver's replay
        held = resume if replay_shards and resume is not None and resume.replay is not None else None
        super().__init__(job, dataclasses.replace(resume, replay=None) if held is not None else resume, checkpointer)
        if held is not None:
            self.resume, self.schedule = held, job.schedule(held)
        self.replay_shards, self.replay_placement = replay_shards, replay_placement
        self.remote_replay: RemoteShardedReplay | None = None
        self.address, self.max_restarts, self.actor_placement = address, max_restarts, actor_placement
        self.restarts, self.restart_log = 0, []
        self.workers: list[Any] = []
        self.pids: list[int] = []
        self.nodes: list[str] = []  # the Ray node each worker runs on (and the learner's: this process's)
        self.learner_node: str | None = None
        self.seeds = [actor_seed(job.seed, i, self.steps) for i in range(job.actors)]
        self.inflight: dict[int, _InFlight] = {}
        self.discarded: list[Any] = []  # futures a worker's death made void (read at stop, so Ray reports none)
        self.episodes: list[Episode] = []
        self.clocks: dict[int, KernelClock] = {}  # each worker's latest clock
        self.retired: list[KernelClock] = []  # the clocks of workers that died
        self.dropped_by: dict[int, int] = {}
        self.started_here = False  # pearl started the local Ray instance
        self.joined = False  # this launcher connected the driver (and disconnects it at stop)
        self._previous_sigterm: Any = None
        self.waits: dict[str, float] = {}

    def _learner_devices(self) -> list[str]:
        return sorted({self.placement.replay, self.placement.learn})  # the workers open the act device

    # --------------------------------------------------------------------------------- start / stop
    def start(self) -> None:
        ray = self._join()
        self._previous_sigterm = raise_on_sigterm()  # after ray.init, which installs its own handler
        placement = dataclasses.replace(self._placement(ray), max_restarts=self.max_restarts)
        check_placements([placement] * self.job.actors, role="actor worker")
        if self.replay_shards:
            self._place_replay()
        cls, sched = _worker_class(), self.schedule
        self.workers = [cls.options(**placement.options()).remote(
            i, self.config, self.spec, self.placement.act, self.job.descriptor_for(self.placement.act), sched)
            for i in range(self.job.actors)]
        first = ray.put(self.policy)
        self.pids = self._get([w.setup.remote(self.seeds[i], sched.steps_before(self.first_segment, i), first)
                               for i, w in enumerate(self.workers)], "setting up", STARTUP_TIMEOUT_S)
        self.nodes = self._get([w.node_id.remote() for w in self.workers], "setting up")  # asked from inside
        self.learner_node = str(ray.get_runtime_context().get_node_id())
        for k in range(self.first_segment, min(self.first_segment + sched.lag + 1, sched.segments)):
            self._submit(k, sched.weights_for(k), first)

    def _place_replay(self) -> None:
        """The replay server: `replay_shards` ReplayShard actors (a checkpoint's replay loaded into them)."""
        placement = self.replay_placement or ShardPlacement(num_cpus=0)
        cfg, spec = self.config, self.spec
        self.remote_replay = RemoteShardedReplay.place(cfg, spec, self.replay_shards, self.job.seed + 2, placement)
        self.replay = ReplayManager(ShardedReplayKernels(self.remote_replay), cfg.batch_size)
        if self.resume is not None and self.resume.replay is not None:
            try:
                self.replay.kernels.load_state_dict(self.resume.replay)
            except (ValueError, TypeError, KeyError, PearlError) as exc:
                raise ConfigError(f"{self.resume.path}: its replay does not fit {self.replay_shards} replay "
                                  f"shard(s): {exc}") from None

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

    def _placement(self, ray: ModuleType) -> ShardPlacement:
        """The workers' placement: the one given, else one CPU each, or an equal part of the CPUs when the
        cluster has fewer CPUs than workers (Ray's CPUs are admission only; the workers share the cores), and
        a share of a GPU each when they act on one."""
        if self.actor_placement is not None:
            return self.actor_placement
        have = ray.cluster_resources()
        cpus = float(have.get("CPU", 1.0))
        # acting on a GPU: a share of one (the check below names a cluster without one)
        gpus = min(1.0, max(float(have.get("GPU", 0.0)), 1.0) / self.job.actors) \
            if DeviceId.parse(self.placement.act).family == "cuda" else 0.0
        return ShardPlacement(num_cpus=min(1.0, cpus / self.job.actors), num_gpus=gpus)

    def stop(self) -> None:
        ray = sys.modules.get("ray")
        workers, self.workers, self.inflight = self.workers, [], {}
        try:
            if ray is not None and ray.is_initialized():
                for w in workers:
                    ray.kill(w, no_restart=True)
                self._drop_discarded(ray)
                if self.remote_replay is not None and self.remote_replay.handles:
                    self._keep_replay()
                    self.remote_replay.kill()
        finally:
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
                self._previous_sigterm = None
            if self.joined:
                self.joined = False
                shutdown()  # a local instance pearl started stops with every process it ran

    def _drop_discarded(self, ray: ModuleType) -> None:
        """Read the void futures' errors: Ray prints an error that no one read when its future is freed."""
        discarded, self.discarded = self.discarded, []
        for ref in discarded:
            try:
                ray.get(ref, timeout=1.0)
            except Exception:  # noqa: BLE001 - their errors are the known deaths, already handled
                pass

    def _keep_replay(self) -> None:
        """Before the shards stop: their contents into an in-process ShardedReplay, so that a checkpoint taken
        after `stop` (an interrupted run's) still holds the replay."""
        remote = self.remote_replay
        assert remote is not None
        local = ShardedReplay(self.config.buffer_size, self.spec, self.replay_shards, remote.prioritized,
                              self.config.alpha, self.config.priority_eps)
        local.load_state_dict(remote.state_dict())
        self.replay.kernels = ShardedReplayKernels(local)

    # ------------------------------------------------------------------------------ the schedule's hooks
    def _submit(self, k: int, tag: int, weights: Any) -> None:
        self.inflight[k] = _InFlight(tag, weights, [w.collect.remote(k, tag, weights) for w in self.workers])

    def _collect(self, k: int, insert: Callable[[TransitionBatch], None], wait: Callable[[], None]) -> None:
        """Wait for every worker's share of segment k, then insert the shares in actor order (all at once, so
        replay holds whole segments whenever the run is interrupted)."""
        ray = require_ray()
        futures = self.inflight[k].futures
        while True:
            t0 = time.perf_counter()
            _, waiting = ray.wait(futures, num_returns=len(futures), timeout=0.2)
            self.waited += time.perf_counter() - t0
            if not waiting:
                break
            wait()
        got = [self._result(k, i) for i in range(len(self.workers))]
        del self.inflight[k]
        for i, collected in enumerate(got):
            batch = collected.batch
            if len(batch):  # the object store's arrays are read-only: replay gets its own copy
                insert(TransitionBatch(*(np.array(getattr(batch, f)) for f in _BATCH_FIELDS), i,
                                       batch.policy_version))
            self.episodes.extend(collected.episodes)
            clock = self.clocks.setdefault(i, KernelClock())
            clock.seconds.update(collected.seconds)
            clock.calls.update(collected.calls)
            self.dropped_by[i] = collected.dropped
        self.dropped = sum(self.dropped_by.values())

    def _publish(self, tag: int) -> None:
        """W(tag) into the object store, and every worker asked for the segment that acts with it."""
        k = tag + 1 + self.schedule.lag
        if k < self.schedule.segments:
            self._submit(k, tag, require_ray().put(self.learner.snapshot().params))

    def _episodes(self) -> list[Episode]:
        out, self.episodes = self.episodes, []
        return out

    def _extra_metrics(self) -> dict[str, Any]:
        return {"runtime/actor_restarts": self.restarts}

    def _clocks(self) -> tuple[dict[str, float], dict[str, int]]:
        seconds, calls = merge_clocks((*self.clocks.values(), *self.retired, self.replay.clock, self.learner.clock))
        if not self.config.prioritized:  # uniform replay: the learner skips the no-op priority update
            seconds.setdefault("priority_update", 0.0)
            calls.setdefault("priority_update", 0)
        self.waits = {"learner_wait_s": self.waited}
        return seconds, calls

    def _finish(self, stats: LoopStats) -> LoopStats:
        stats = super()._finish(stats)
        stats.restarts, stats.lost_steps_max = self.restarts, self.restarts * self.config.n_envs
        stats.waits = dict(self.waits)
        return stats

    # ------------------------------------------------------------------------------------ failures
    def _result(self, k: int, i: int) -> Collected:
        """Worker i's share of segment k; a worker that died (or failed) is restarted and asked again."""
        ray = require_ray()
        while True:
            try:
                return ray.get(self.inflight[k].futures[i])
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
            self.discarded.append(flight.futures[i])
            flight.futures[i] = worker.collect.remote(j, flight.tag, flight.weights)

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


_BATCH_FIELDS = ("obs", "action", "reward", "next_obs", "terminated")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"
