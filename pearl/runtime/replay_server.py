"""The replay server role: replay tables (shards), the client that samples across them, and the rate limiter.

In the spirit of Reverb (a table = sampler + remover + rate limiter), written for pearl. Plain Python and
numpy, no Ray: the Ray launcher places `ReplayShard` objects as actors (`pearl.runtime.ray.replay_client`), and
the same classes run in process for tests and for the sequential schedule.

The tables themselves and the index encoding are in `pearl.runtime.replay_shard`.

Sharding (`ShardedReplay`)
--------------------------
Capacity ``C`` is split evenly over S shards, ``C // S`` each (the remainder is dropped, so S must not
exceed C). Inserted batches go **whole** to one shard, round-robin (batch k to shard k mod S) or to the
shard the caller names (`shard_for`: actor a's n-th batch to shard (a + n) mod S, whatever the arrival
order): one call per batch, never one per row, and with equal batch sizes the shards fill evenly. A batch
is never split, so a batch larger than a shard keeps only its newest ``C // S`` rows (as one buffer keeps
its newest C).

Sampling B rows draws the union of the shards as if it were one tree over all their slots:

- prioritized: with shard totals ``T_s`` and ``T = T_0 + ... + T_{S-1}``, the B values
  ``v_i = (i + u_i) * T / B`` (stratified, as `pearl.replay.SumTree.sample`) fall in the concatenated
  ranges ``[T_0 + ... + T_{s-1}, T_0 + ... + T_s)``; each goes to its shard, which looks up
  ``v_i - offset_s`` in its own tree. So shard s gets, in expectation, ``B * T_s / T`` draws, and slot j of
  shard s is drawn with probability ``P = p_j / T``: the distribution of a single tree over the union.
  With one shard the values, slots and weights are bit for bit those of `ReplayIndex.sample` for the
  same generator state.
- uniform: union positions ``k ~ U{0, N - 1}`` with ``N = size_0 + ... + size_{S-1}`` map to (shard, slot)
  by the cumulative sizes, so each stored row is drawn with probability 1 / N.

Importance weights follow `pearl.replay.ReplayIndex`: ``w = (N * P) ** -beta`` over the union's N and P,
divided by the largest w in the batch, floored at float32's smallest normal (all ones for uniform replay).

A sample reads every shard's (size, total) first and looks the values up second. In process nothing can
change in between; across Ray actors an insert or priority update landing in between makes the draw
approximate for that batch (values past a shard's new total are clamped to it), as in Ape-X's sharded
replay. `ShardedReplay.sample_many` draws k batches against one such reading (two round trips for all k).
Priority updates are routed by the index encoding (`replay_shard`); the learner may send them without waiting.

No rate limiter
---------------
Reverb's tables hold the sample-to-insert ratio with a rate limiter. Here the schedule (pearl/schedule.py)
fixes which env steps and which updates make up every segment, so the ratio is exact by construction and the
server only stores and samples.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from pearl.adapters.base import decode_json, encode_json
from pearl.algos.base import OffPolicyConfig
from pearl.errors import ConfigError
from pearl.runtime.replay_shard import (
    MAX_SHARDS,
    SHARD_SHIFT,
    SLOT_MASK,
    ReplayShard,
    ShardSample,
    ShardStats,
    check_count,
    decode_indices,
    encode_indices,
)
from pearl.types import EnvSpec, Params, SampleBatch, TransitionBatch

__all__ = ["ShardedReplay", "sampler_rng", "shard_for"]

_TINY32 = float(np.finfo(np.float32).tiny)


def shard_for(actor_id: int, sequence: int, shards: int) -> int:
    """The shard of an actor's ``sequence``-th batch, ``(actor_id + sequence) mod shards``: round-robin per actor,
    actors starting on different shards, independent of the order batches arrive in."""
    return (int(actor_id) + int(sequence)) % int(shards)


def sampler_rng(seed: int, role: str = "replay", counter: int = 0) -> np.random.Generator:
    """The generator of one role, a function of (seed, role, counter) only, so a run's draws never depend on
    which process or node the role lands on."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(role.encode()), int(counter)]))


def _check_beta(beta: object) -> float:
    number = not isinstance(beta, bool) and isinstance(beta, (int, float, np.integer, np.floating))
    if not (number and math.isfinite(beta) and beta >= 0):
        raise ConfigError(f"beta must be a finite number >= 0, got {beta!r}")
    return float(beta)


class ShardedReplay:
    """The client side of a sharded replay: routes inserts, samples the union, routes priority updates back.

    Holds the shards itself; `pearl.runtime.ray.replay_client.RemoteShardedReplay` is the same client over Ray
    actor handles, overriding only the five transport methods (``_stats``, ``_lookup``, ``_gather``,
    ``_insert``, ``_update``). Sampling is deterministic for a seed: every draw comes from ``rng``, by default
    `sampler_rng(seed)`.
    """

    def __init__(self, capacity: int, spec: EnvSpec, shards: int, prioritized: bool = False, alpha: float = 0.6,
                 eps: float = 1e-6, seed: int = 0, rng: np.random.Generator | None = None) -> None:
        self.shard_capacity = self.split_capacity(capacity, shards)
        self.num_shards = shards
        self.spec = spec
        self.prioritized = bool(prioritized)
        self.rng = rng if rng is not None else sampler_rng(seed)
        self.next_shard = 0
        self._offsets: np.ndarray | None = None
        self._make_shards(alpha, eps)

    @classmethod
    def from_config(cls, config: OffPolicyConfig, spec: EnvSpec, shards: int, seed: int) -> "ShardedReplay":
        """config.buffer_size split over ``shards``, the config's replay kind, drawing from `sampler_rng(seed)`."""
        return cls(config.buffer_size, spec, shards, config.prioritized, config.alpha, config.priority_eps, seed)

    @staticmethod
    def split_capacity(capacity: int, shards: int) -> int:
        """Each shard's capacity, ``capacity // shards`` (ConfigError unless 1 <= shards <= capacity)."""
        capacity = check_count("replay capacity (buffer_size)", capacity, 1)
        shards = check_count("replay shards", shards, 1)
        if shards > capacity:
            raise ConfigError(f"{shards} replay shards cannot split a buffer of {capacity} transitions: "
                              "use at most buffer_size shards")
        if shards > MAX_SHARDS or capacity // shards > SLOT_MASK:
            raise ConfigError(f"replay shards hold at most 2**{SHARD_SHIFT} slots each, up to {MAX_SHARDS} shards")
        return capacity // shards

    def _make_shards(self, alpha: float, eps: float) -> None:
        self.shards = [ReplayShard(self.shard_capacity, self.spec, self.prioritized, alpha, eps)
                       for _ in range(self.num_shards)]

    # ------------------------------------------------------------------ transport (overridden for Ray)
    def _stats(self) -> list[ShardStats]:
        return [s.stats() for s in self.shards]

    def _lookup(self, requests: dict[int, np.ndarray]) -> dict[int, ShardSample]:
        return {s: self.shards[s].lookup(v) for s, v in requests.items()}

    def _gather(self, requests: dict[int, np.ndarray]) -> dict[int, ShardSample]:
        return {s: self.shards[s].gather(v) for s, v in requests.items()}

    def _insert(self, shard: int, batch: TransitionBatch) -> None:
        self.shards[shard].insert(batch)

    def _update(self, shard: int, slots: np.ndarray, td_errors: np.ndarray) -> None:
        self.shards[shard].update_priorities(slots, td_errors)

    # ------------------------------------------------------------------ the client
    @property
    def capacity(self) -> int:
        return self.shard_capacity * self.num_shards

    @property
    def size(self) -> int:
        return sum(s.size for s in self._stats())

    def insert(self, batch: TransitionBatch, shard: int | None = None) -> int:
        """Send the whole batch to ``shard``, by default the next one in round-robin order; returns the shard.

        Round-robin follows the order batches reach this client. Where several actors' batches interleave in
        an order that timing decides, pass ``shard=shard_for(actor_id, sequence, S)`` instead, so which shard
        holds a row is a function of the run, not of timing.
        """
        if shard is None:
            shard = self.next_shard
            self.next_shard = (shard + 1) % self.num_shards
        elif isinstance(shard, bool) or not isinstance(shard, (int, np.integer)) or not 0 <= shard < self.num_shards:
            raise ConfigError(f"replay shard {shard!r} does not exist: there are {self.num_shards}")
        self._insert(int(shard), batch)
        return int(shard)

    def sample(self, batch_size: int, beta: float = 0.4) -> SampleBatch:
        """``batch_size`` rows from the union of the shards, with union importance weights (module docstring)."""
        return self.sample_many(1, batch_size, beta)[0]

    def sample_many(self, count: int, batch_size: int, beta: float = 0.4) -> list[SampleBatch]:
        """``count`` batches drawn against one reading of the shards, in one stats call and one read per shard.

        They are the batches ``count`` successive `sample` calls would give with nothing written in between
        (the same draws from ``rng``, rows and weights); over Ray that is two round trips for all of them, not
        two per batch. Every batch sees the priorities read at the start, so a learner that takes k batches at
        once updates priorities up to k batches late.
        """
        count = check_count("count", count, 1)
        batch_size = check_count("batch_size", batch_size, 1)
        beta = _check_beta(beta)
        stats = self._stats()
        n = sum(s.size for s in stats)
        if n == 0:
            raise ConfigError("cannot sample an empty replay")
        draw = self._draw_prioritized if self.prioritized else self._draw_uniform
        draws = [draw(batch_size, stats) for _ in range(count)]
        wanted = sorted({s for _, requests in draws for s in requests})
        merged = {s: np.concatenate([r[s] for _, r in draws if s in r]) for s in wanted}
        got = self._lookup(merged) if self.prioritized else self._gather(merged)
        taken = dict.fromkeys(wanted, 0)
        out = []
        for shard, requests in draws:
            parts = {}
            for s, v in requests.items():
                parts[s] = got[s].part(taken[s], taken[s] + v.size)
                taken[s] += v.size
            slots, prio, rows = self._assemble(shard, parts, batch_size)
            weights = self._weights(prio, stats, n, beta) if self.prioritized else np.ones(batch_size, np.float32)
            out.append(SampleBatch(encode_indices(shard, slots), rows["obs"], rows["action"], rows["reward"],
                                   rows["next_obs"], rows["terminated"], weights, "host"))
        return out

    def _draw_prioritized(self, b: int, stats: list[ShardStats]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """Stratified values over the concatenated shard totals, each routed to its shard (module docstring):
        the shard of every draw, and per shard the values relative to its start."""
        totals = np.array([s.total for s in stats], dtype=np.float64)
        cum = np.cumsum(totals)
        total = float(cum[-1])
        if not (total > 0.0 and math.isfinite(total)):
            raise ConfigError(f"cannot sample: total priority is {total!r}")
        values = self.rng.random(b)
        values += np.arange(b, dtype=np.float64)
        values *= total / b
        np.minimum(values, total, out=values)
        shard = np.searchsorted(cum, values, side="right")
        last = int(np.flatnonzero(totals > 0)[-1])
        np.minimum(shard, last, out=shard)  # v == total (or rounding past it): the last shard holding priority
        starts = cum - totals
        return shard, {int(s): values[shard == s] - starts[s] for s in np.unique(shard)}

    def _draw_uniform(self, b: int, stats: list[ShardStats]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """Union positions k ~ U{0, N - 1}, mapped to (shard, slot) by the cumulative sizes."""
        sizes = np.array([s.size for s in stats], dtype=np.int64)
        cum = np.cumsum(sizes)
        k = self.rng.integers(0, int(cum[-1]), b, dtype=np.int64)
        shard = np.searchsorted(cum, k, side="right")
        slots = k - (cum - sizes)[shard]
        return shard, {int(s): slots[shard == s] for s in np.unique(shard)}

    def _assemble(self, shard: np.ndarray, got: dict[int, ShardSample],
                  b: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Put each shard's rows back at the batch positions that asked for them (new arrays, writable)."""
        first = next(iter(got.values()))
        slots = np.empty(b, dtype=np.int64)
        prio = np.empty(b, dtype=np.float64)
        rows = {k: np.empty((b, *v.shape[1:]), dtype=v.dtype) for k, v in first.rows.items()}
        for s, part in got.items():
            where = shard == s
            slots[where] = part.slots
            prio[where] = part.priorities
            for k in rows:
                rows[k][where] = part.rows[k]
        return slots, prio, rows

    @staticmethod
    def _weights(prio: np.ndarray, stats: list[ShardStats], n: int, beta: float) -> np.ndarray:
        """``(N * P) ** -beta / max``, P = p / T over the union (pearl.replay.ReplayIndex.sample's convention)."""
        total = 0.0
        for s in stats:
            total += s.total  # left to right: one shard's total comes back unchanged
        weights = (n * (prio / total)) ** -beta
        weights /= weights.max()
        return np.maximum(weights, _TINY32).astype(np.float32)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Route TD errors to the shards their indices name, in order (a repeated slot keeps its last error)."""
        idx = np.asarray(indices)
        td = np.asarray(td_errors)
        if idx.ndim != 1 or td.shape != idx.shape:
            raise ConfigError(f"indices and td_errors must be 1-D of equal length, got {idx.shape} and {td.shape}")
        if not self.prioritized or idx.size == 0:
            return
        shard, slots = decode_indices(idx)
        if idx.min() < 0 or shard.max() >= self.num_shards:
            raise ConfigError(f"replay index names shard {int(shard.max())}, there are {self.num_shards}")
        for s in np.unique(shard):
            where = shard == s
            self._update(int(s), slots[where], td[where])

    # ------------------------------------------------------------------ checkpoints
    def _shard_states(self) -> list[Params]:
        return [s.state_dict() for s in self.shards]

    def _load_shard_states(self, states: list[Params]) -> None:
        for shard, state in zip(self.shards, states, strict=True):
            shard.load_state_dict(state)

    def state_dict(self) -> Params:
        """Every shard's state as ``shard<i>.<key>``, the round-robin position and the sampler's state (arrays)."""
        out: Params = {"shards": np.asarray(self.num_shards), "next_shard": np.asarray(self.next_shard),
                       "sampler": encode_json(self.rng.bit_generator.state)}
        for i, state in enumerate(self._shard_states()):
            out.update({f"shard{i}.{k}": v for k, v in state.items()})
        return out

    def load_state_dict(self, state: Params) -> None:
        """Restore a `state_dict` of a sharded replay with as many shards of the same capacity and shapes."""
        for key in ("shards", "next_shard", "sampler"):
            if key not in state:
                raise ConfigError(f"sharded replay state lacks {key!r}")
        if int(state["shards"]) != self.num_shards:
            raise ConfigError(f"sharded replay state has {int(state['shards'])} shards, this replay has "
                              f"{self.num_shards}")
        try:
            sampler = decode_json(state["sampler"])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        states = [{k[len(f"shard{i}."):]: v for k, v in state.items() if k.startswith(f"shard{i}.")}
                  for i in range(self.num_shards)]
        self._load_shard_states(states)
        self.rng.bit_generator.state = sampler
        self.next_shard = int(state["next_shard"]) % self.num_shards

