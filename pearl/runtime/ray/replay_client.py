"""The replay server on Ray: its shards as Ray actors and the client over their handles.

`remote_shards` places `ReplayShard` actors (each checked against the cluster first); `RemoteShardedReplay`
is `ShardedReplay`'s client with remote tables: the same routing, draws and importance weights, each read of
the shards a batched ``ray.get``, inserts and priority updates sent without waiting. `ShardedReplayKernels`
puts it behind the replay kernels' interface, so a learner role drives the replay server as it drives its own
replay.

Transport: numpy batches travel through Ray's object store (arguments and results; on one node a large array
is read in place, read-only), so a shard writes what it receives into its own storage and the client copies
what it gets back into fresh arrays before anyone may write them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from pearl.adapters.base import ReplayKernels, host_array
from pearl.algos.base import OffPolicyConfig
from pearl.errors import ConfigError, PearlError
from pearl.runtime.ray.placement import ShardPlacement, check_placements
from pearl.runtime.actors import RoleLost
from pearl.runtime.ray.session import first_line, remote_class, require_ray
from pearl.runtime.replay_server import ShardedReplay
from pearl.runtime.replay_shard import ReplayShard, ShardSample, ShardStats
from pearl.types import EnvSpec, Params, PriorityUpdate, SampleBatch, TransitionBatch

__all__ = ["RemoteShardedReplay", "ShardedReplayKernels", "remote_shards"]



class _PlacedShard(ReplayShard):
    """A replay shard that says which Ray node it runs on, asked from inside."""

    def node_id(self) -> str:
        return str(require_ray().get_runtime_context().get_node_id())


def _shard_class() -> Any:
    """``ray.remote(_PlacedShard)``, made once and only when a shard is first placed."""
    return remote_class(_PlacedShard)


def remote_shards(config: OffPolicyConfig, spec: EnvSpec, shards: int,
                  placement: ShardPlacement | Sequence[ShardPlacement] | None = None,
                  name: Callable[[str], dict[str, Any]] | None = None) -> list[Any]:
    """``shards`` ReplayShard actors of ``config.buffer_size // shards`` slots each; their handles.

    ``placement`` is one for all or one per shard. Every placement is checked against the cluster first. With
    ``name`` (a run's `pearl.runtime.ray.runs.RunNamespace.options`), shard k is the actor it names
    ``replay-<k>`` in the run's namespace.
    """
    capacity = ShardedReplay.split_capacity(config.buffer_size, shards)
    places = _placements(placement, shards)
    check_placements(places)
    cls = _shard_class()
    named = [name(f"replay-{k}") if name else {} for k in range(shards)]
    return [cls.options(**p.options(), **named[k]).remote(capacity, spec, config.prioritized, config.alpha,
                                                          config.priority_eps)
            for k, p in enumerate(places)]


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
        except ray.exceptions.RayActorError as exc:  # its table is gone with it: only a checkpoint holds it
            raise RoleLost(f"a replay shard died: {first_line(exc)}") from None

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
