"""Replay storage, sum tree and sampler resident on an OpenCL device (kernels in replay.cl).

Unlike the torch adapter, which keeps the index on the host (`pearl.replay.ReplayIndex`), everything that
grows with the buffer or the batch lives on the device: the transitions, the priorities and their sum tree,
the running max priority, the sampled slots and their weights. The host keeps three ints (ring position,
size, sample counter) and uploads only new transitions; a sample or a priority update moves nothing
between host and device, so a learner on the same device never waits for a round trip.

Sum tree (`DeviceSumTree`)
--------------------------
The numpy `SumTree` layout in float32, all levels in one buffer, root level first::

    depth      = smallest d >= 1 with K**d >= capacity
    offset(d)  = K**0 + ... + K**(d-1)          level d holds nodes offset(d) .. offset(d) + K**d - 1
    node i of level d has children  offset(d+1) + i*K .. offset(d+1) + i*K + K-1
    leaf s     = offset(depth) + s;  leaves capacity .. K**depth - 1 are padding, always 0

Each internal node is the sequential left-to-right sum of its K children, recomputed from them (never
patched), so the tree is a pure function of its leaves. Lookup of a value 0 <= v <= total, per level:
take the first child whose running sum is STRICTLY greater than v, subtract the sum of the children before
it; if none is (v reached the node's mass), step back to the last child with positive mass. That is the
numpy rule, so wherever float32 sums are exact (small integers, multiples of 1/8, ...) both trees return
the same leaves for the same values.

A write is one launch of one work-group: its leaves (by one work-item in input order where a slot may
repeat, so a repeated slot keeps its last value), then the parents of the written slots, level by level,
bottom-up, a barrier between levels (`DeviceSumTree.write`).

Sampling (reproducible: a counter, not a stream)
------------------------------------------------
Sample number ``call`` (0, 1, 2, ... per replay) draws for element i the bits
``philox2x32(key=seed, i, call).x`` (pearl.rng). Prioritized replay is stratified over the total read on
the device::

    u_i = rng_uniform(bits_i)          v_i = min((i + u_i) * (total * inv_B), total)     (float32)
    inv_B = np.float32(1 / B)          slot_i = lookup(v_i)

and its importance weights are ``w_i = (p_i / p_min)^(-beta)`` with p_min the smallest priority in the batch
(equal to ReplayIndex's (N·P(i))^-beta normalised by the batch max), so the largest weight is 1. Uniform
replay draws ``slot_i = rng_below(bits_i, size)`` with weights 1.

Priorities are ``(|td| + eps)^alpha`` in float32; new slots get the running max priority, a one-element
device buffer that starts at 1 and only goes up. Limits: capacity <= 2**24 (rng_below and float32 sampling
values resolve 24 bits) and batch size <= 1024 (each weight scans the batch's priorities).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from pearl.adapters.base import ReplayKernels, check_state, host_array
from pearl.adapters.opencl.runtime import CLRuntime
from pearl.algos.base import OffPolicyConfig
from pearl.replay.index import Ring, _check_float
from pearl.replay.sumtree import SumTreeBase, as_indices, as_priorities, check_int
from pearl.types import EnvSpec, Params, PriorityUpdate, SampleBatch, TransitionBatch

__all__ = ["DeviceSumTree", "OpenCLReplay", "MAX_BATCH", "MAX_CAPACITY"]

_FIELDS = ("obs", "action", "reward", "next_obs", "terminated")  # the stored columns, as a state dict names them
#: Largest batch `OpenCLReplay.sample` draws: each importance weight scans the batch's priorities.
MAX_BATCH = 1024
#: Largest replay capacity: uniform slots and stratified values resolve 24 random bits.
MAX_CAPACITY = 2**24
#: Most work-items in the one group that writes leaves and refreshes their ancestors (each takes every
#: GROUP_SIZE-th slot). 256 is what an FPGA offline compiler assumes for a kernel with barriers and no size
#: attribute, and what the tiled product's 16×16 groups already need.
GROUP_SIZE = 256

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_INT32_MAX = 2**31 - 1
_U32 = 0xFFFFFFFF


def _on_context(x: Any, rt: CLRuntime) -> bool:
    return isinstance(x, cla.Array) and x.context == rt.ctx


def _whole(x: cla.Array, dtype: type, name: str) -> cla.Array:
    """A 1-D device array of dtype that kernels can take (own buffer, no offset), converting on the device."""
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {x.shape}")
    if x.dtype != dtype:
        x = x.astype(dtype)
    elif x.offset:  # a view into a larger buffer: kernels take whole buffers
        x = x.copy()
    return x


class DeviceSumTree(SumTreeBase):
    """K-ary float32 sum tree over ``capacity`` leaves in one device buffer (layout in the module docstring)."""

    def __init__(self, rt: CLRuntime, capacity: int, arity: int = 16, max_group: int = GROUP_SIZE) -> None:
        """max_group caps the work-items of a write's group (lower it for a compiler that assumes fewer)."""
        super().__init__(capacity, arity)
        self.rt = rt
        self._max_group = check_int("max_group", max_group, 1)
        depth = self._depth
        self._offsets = tuple(sum(self._arity**e for e in range(d)) for d in range(depth + 1))
        nodes = self._offsets[depth] + self._arity**depth
        if nodes > _INT32_MAX:  # kernels index the tree with int
            raise ValueError(f"a tree of capacity {capacity} and arity {arity} has {nodes} nodes; at most "
                             f"{_INT32_MAX} fit int32 indexing")
        self.buffer = rt.zeros(nodes, np.float32)
        self._root = np.zeros(1, dtype=np.float32)  # read-back target of `total`
        self._groups: dict[str, int] = {}  # per write kernel, its largest group here, found on first use

    # ------------------------------------------------------------------ properties
    @property
    def offsets(self) -> tuple[int, ...]:
        """Where each level starts in `buffer`, root level first."""
        return self._offsets

    @property
    def leaf_offset(self) -> int:
        return self._offsets[self._depth]

    @property
    def total(self) -> float:
        """The root (a blocking 4-byte read, after everything queued before it)."""
        cl.enqueue_copy(self.rt.queue, self._root, self.buffer.data)
        return float(self._root[0])

    # ------------------------------------------------------------------ updates
    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set leaves from host arrays; a repeated index keeps its LAST priority. Validated like SumTree."""
        idx = as_indices(indices, self._capacity)
        prio = as_priorities(priorities, idx.size)
        if idx.size == 0:
            return
        if prio.max() > _FLOAT32_MAX:
            raise ValueError(f"priorities must fit float32 (<= {_FLOAT32_MAX:.4g}), got {prio.max()!r}")
        self.update_device(self.rt.to_device(idx.astype(np.int32)), self.rt.to_device(prio.astype(np.float32)))

    def update_device(self, indices: cla.Array, priorities: cla.Array) -> None:
        """Set leaves from device arrays (int32 slots, float32 priorities), in order, then refresh parents.

        Device values cannot be checked without a read-back: slots outside [0, capacity) and priorities
        that are negative or not finite are skipped by the kernel instead.
        """
        for name, x in (("indices", indices), ("priorities", priorities)):
            if not _on_context(x, self.rt):
                raise ValueError(f"{name} must be a pyopencl array on this tree's context; use update() for "
                                 "host arrays")
        indices = _whole(indices, np.int32, "indices")
        priorities = _whole(priorities, np.float32, "priorities")
        if priorities.shape != indices.shape:
            raise ValueError(f"priorities must have shape {indices.shape} to match indices, got {priorities.shape}")
        if indices.size == 0:
            return
        # Work-item 0 writes in order (the last duplicate wins on every device); its group then refreshes.
        self.write("sumtree_set_leaves", indices.size, indices, priorities, indices.size)

    def write(self, kernel: str, n: int, *args: Any) -> None:
        """Launch one of the kernels that write leaves and refresh their ancestors (tree, capacity, arity and
        depth come first in each): one work-group of up to max_group work-items, as they require."""
        group = min(max(n, 1), self._group_limit(kernel))
        self.rt.launch(kernel, group, self.buffer, self._capacity, self._arity, self._depth, *args,
                       local_size=(group,))

    def _group_limit(self, kernel: str) -> int:
        """The largest group `kernel` may run as on this device (each kernel has its own limit), at most
        max_group."""
        if kernel not in self._groups:
            fits = self.rt.kernel(kernel).get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                                              self.rt.device)
            self._groups[kernel] = max(1, min(self._max_group, self.rt.device.max_work_group_size, fits))
        return self._groups[kernel]

    # ------------------------------------------------------------------ queries
    def get(self, indices: np.ndarray) -> np.ndarray:
        """The float32 priorities stored at leaves ``indices`` (host array in, host array out)."""
        idx = as_indices(indices, self._capacity)
        if idx.size == 0:
            return np.zeros(0, dtype=np.float32)
        out = self.rt.zeros(idx.size, np.float32)
        self.rt.launch("sumtree_get", idx.size, self.buffer, self.leaf_offset, self._capacity,
                       self.rt.to_device(idx.astype(np.int32)), out)
        return out.get()

    def _find(self, values: np.ndarray) -> np.ndarray:
        """Looked up on the device, the values rounded to float32."""
        # total is a float32, so rounding a value <= total to float32 keeps it <= total.
        out = self.rt.zeros(values.size, np.int32)
        self.rt.launch("sumtree_find", values.size, self.buffer, self._arity, self._depth, self._capacity,
                       self.rt.to_device(values.astype(np.float32)), out)
        return out.get().astype(np.int64)

    def sample_device(self, batch_size: int, key: int, call: int, out: cla.Array | None = None) -> cla.Array:
        """Stratified proportional sampling on the device: int32 slots (rule in the module docstring).

        Nothing is read back, so an empty tree is not detected here: its lookups return in-range slots of
        priority 0. ``out`` (int32, length batch_size) is written instead of a new array when given.
        """
        batch_size = check_int("batch_size", batch_size, 1)
        key, call = check_int("key", key, 0), check_int("call", call, 0)
        if out is None:
            out = cla.empty(self.rt.queue, batch_size, np.int32)
        elif not (_on_context(out, self.rt) and out.dtype == np.int32 and out.shape == (batch_size,)
                  and not out.offset):
            raise ValueError(f"out must be a whole int32 pyopencl array of shape ({batch_size},) on this context")
        self.rt.launch("sumtree_sample", batch_size, self.buffer, self._arity, self._depth, self._capacity,
                       np.uint32(key & _U32), np.uint32(call & _U32), np.float32(1.0 / batch_size), out)
        return out


@dataclass
class _Buffers:
    """Device arrays for one sampled batch size, allocated once and overwritten by each sample."""

    slots: cla.Array
    obs: cla.Array
    action: cla.Array
    reward: cla.Array
    next_obs: cla.Array
    terminated: cla.Array
    weights: cla.Array | None = None


@dataclass
class _Staging:
    """An insert's upload (transitions packed in rows) and the ring slots replay_scatter wrote them to."""

    rows: cla.Array
    slots: cla.Array


class OpenCLReplay(ReplayKernels):
    """Replay buffer of ``config.buffer_size`` transitions on an OpenCL device (see the module docstring).

    A sampled batch's arrays are preallocated per batch size and reused: the next `sample` with the same
    batch size overwrites them (after, in queue order, everything enqueued before it, so a learner that
    launches on the same queue reads its batch intact). Its ``indices`` stay on the device; hand them back
    in a `PriorityUpdate`.
    """

    def __init__(self, rt: CLRuntime, config: OffPolicyConfig, spec: EnvSpec, seed: int) -> None:
        cap = check_int("buffer_size", config.buffer_size, 1)
        if cap > MAX_CAPACITY:
            raise ValueError(f"buffer_size {cap} exceeds {MAX_CAPACITY}: device sampling resolves 24 random bits")
        self.rt, self.spec = rt, spec
        self._capacity = cap
        self._key = check_int("seed", seed, 0) & _U32
        self._obs_dim = check_int("obs_dim", spec.obs_dim, 1)
        self._act_width = 1 if spec.discrete else check_int("action_dim", spec.action_dim, 1)
        self._act_shape = () if spec.discrete else (self._act_width,)
        # Discrete actions as int32 (what OpenCL kernels index with), continuous as float32 rows.
        self._act_dtype = np.dtype(np.int32) if spec.discrete else np.dtype(np.float32)
        self._store = self._allocate(cap)
        self.tree: DeviceSumTree | None = None
        if config.prioritized:
            self._alpha = np.float32(_check_float("alpha", config.alpha, 0.0))
            self._eps = np.float32(_check_float("priority_eps", config.priority_eps, 0.0))
            self.tree = DeviceSumTree(rt, cap)
            self._max_priority = rt.to_device(np.ones(1, dtype=np.float32))
        # Uniform replay's gather takes no tree, but a kernel argument must be a buffer.
        self._no_tree = rt.zeros(1, np.float32)
        self._ring = Ring(cap)
        self._call = 0
        self._batches: dict[int, _Buffers] = {}
        self._row_width = 2 * self._obs_dim + self._act_width + 2  # one transition in an upload, in words
        self._staging: _Staging | None = None  # the last insert's size: the launchers insert shares of one size

    # ------------------------------------------------------------------ properties
    @property
    def size(self) -> int:
        return self._ring.size

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def prioritized(self) -> bool:
        return self.tree is not None

    @property
    def max_priority(self) -> float:
        """The running max priority (a device read-back; 1.0 for uniform replay)."""
        return float(self._max_priority.get()[0]) if self.tree is not None else 1.0

    # ------------------------------------------------------------------ kernels
    def insert(self, batch: TransitionBatch) -> None:
        m = len(batch)
        rows = self._check_rows(batch, m)
        if m == 0:
            return
        keep = max(0, m - self._capacity)  # an oversized batch: only its newest `capacity` rows survive
        n, start = m - keep, (self._ring.position + keep) % self._capacity
        self._ring.advance(m)
        stage = self._staging
        if stage is None or stage.slots.size != n:
            stage = self._staging = _Staging(self.rt.zeros((n, self._row_width), np.uint32),
                                           self.rt.zeros(n, np.int32))
        # Asynchronous: the upload's event (kept by the array) holds `packed` alive until the copy is done,
        # and the in-order queue runs it after every earlier kernel that read the staging rows.
        stage.rows.set(self._pack(rows, keep), queue=self.rt.queue, async_=True)
        s = self._store
        self.rt.launch("replay_scatter", n, s.obs, s.action, s.reward, s.next_obs, s.terminated, stage.rows,
                       stage.slots, start, self._capacity, self._obs_dim, self._act_width)
        if self.tree is not None:
            self.tree.write("replay_insert_priorities", n, stage.slots, n, self._max_priority)

    def _pack(self, rows: dict[str, np.ndarray], keep: int) -> np.ndarray:
        """rows[keep:] as one array of 32-bit words, a row per transition in replay_scatter's layout."""
        n, d, a = len(rows["reward"]) - keep, self._obs_dim, self._act_width
        packed = np.empty((n, self._row_width), dtype=np.uint32)
        packed[:, :d] = rows["obs"][keep:].view(np.uint32)
        packed[:, d:d + a] = rows["action"][keep:].reshape(n, a).view(np.uint32)
        packed[:, d + a] = rows["reward"][keep:].view(np.uint32)
        packed[:, d + a + 1:2 * d + a + 1] = rows["next_obs"][keep:].view(np.uint32)
        packed[:, 2 * d + a + 1] = rows["terminated"][keep:].view(np.uint32)
        return packed

    def sample(self, batch_size: int, beta: float) -> SampleBatch:
        batch_size = check_int("batch_size", batch_size, 1)
        if batch_size > MAX_BATCH:
            raise ValueError(f"batch_size must be <= {MAX_BATCH}, got {batch_size}")
        beta = _check_float("beta", beta, 0.0)
        if self._ring.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        call = self._call
        self._call += 1
        out = self._batch(batch_size)
        if self.tree is not None:
            self.tree.sample_device(batch_size, self._key, call, out=out.slots)
            tree, leaf_offset = self.tree.buffer, self.tree.leaf_offset
        else:
            self.rt.launch("replay_sample_uniform", batch_size, np.uint32(self._key), np.uint32(call & _U32),
                           self._ring.size, out.slots)
            tree, leaf_offset = self._no_tree, 0
        s = self._store
        self.rt.launch("replay_gather", batch_size, s.obs, s.action, s.reward, s.next_obs, s.terminated, out.slots,
                       self._obs_dim, self._act_width, tree, leaf_offset, int(self.tree is not None),
                       np.float32(beta), batch_size, out.obs, out.action, out.reward, out.next_obs, out.terminated,
                       out.weights)
        return SampleBatch(out.slots, out.obs, out.action, out.reward, out.next_obs, out.terminated, out.weights,
                           self.rt.device_id)

    def update_priorities(self, update: PriorityUpdate) -> None:
        """Priorities of slots ``update.indices`` <- (|td| + eps)^alpha, the last of a repeated slot winning.

        Device arrays on this context are used where they are (int64 / float64 are converted on the device)
        and cannot be validated without a read-back: the kernel skips slots never written and non-finite
        priorities. Host arrays (numpy, torch, another context's arrays) are validated like ReplayIndex
        does, raising ValueError, then uploaded.
        """
        if self.tree is None:
            return  # uniform replay: no read-back, no launch
        idx, td = update.indices, update.td_errors
        if _on_context(idx, self.rt) and _on_context(td, self.rt):
            idx, td = _whole(idx, np.int32, "indices"), _whole(td, np.float32, "td_errors")
            if td.shape != idx.shape:
                raise ValueError(f"indices and td_errors must be 1-D of equal length, got {idx.shape} and {td.shape}")
        else:
            idx, td = self._upload_update(idx, td)
        if idx.size == 0:
            return
        # Work-item 0 sets the leaves in order (last duplicate wins; the running max needs no atomics).
        self.tree.write("replay_set_priorities", idx.size, self._ring.size, idx, td, idx.size, self._alpha, self._eps,
                        self._max_priority)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> Params:
        n, s = self._ring.size, self._store
        out: Params = {name: getattr(s, name).get(queue=self.rt.queue)[:n].copy() for name in _FIELDS}
        out.update(position=np.asarray(self._ring.position), size=np.asarray(n),
                   sampler=np.asarray([self._key, self._call], dtype=np.int64))
        if self.tree is not None:
            out["priorities"] = self.tree.get(np.arange(n))
            out["max_priority"] = np.asarray(self.max_priority, dtype=np.float32)
        return out

    def load_state_dict(self, state: Params) -> None:
        if "size" not in state:
            raise ValueError("replay state lacks 'size'")
        ring = Ring.restored(self._capacity, int(state.get("position", -1)), int(state["size"]), "replay state")
        n = ring.size
        expected = {"obs": (n, self._obs_dim), "action": (n, *self._act_shape), "reward": (n,),
                    "next_obs": (n, self._obs_dim), "terminated": (n,), "sampler": (2,)}
        if self.tree is not None:
            expected.update(priorities=(n,), max_priority=())
        check_state(state, expected, "replay")
        if n:
            for name in _FIELDS:
                full = getattr(self._store, name)
                host = full.get(queue=self.rt.queue)
                host[:n] = np.asarray(state[name], dtype=host.dtype)
                full.set(host, queue=self.rt.queue)
            if self.tree is not None:
                self.tree.update(np.arange(n), np.asarray(state["priorities"], dtype=np.float64))
        if self.tree is not None:
            self._max_priority.set(np.asarray([state["max_priority"]], dtype=np.float32), queue=self.rt.queue)
        self._key, self._call = (int(x) for x in np.asarray(state["sampler"]))
        self._ring = ring

    # ------------------------------------------------------------------ helpers
    def _allocate(self, rows: int) -> _Buffers:
        z = self.rt.zeros
        return _Buffers(z(rows, np.int32), z((rows, self._obs_dim)), z((rows, *self._act_shape), self._act_dtype),
                        z(rows), z((rows, self._obs_dim)), z(rows))

    def _batch(self, batch_size: int) -> _Buffers:
        out = self._batches.get(batch_size)
        if out is None:
            out = self._batches[batch_size] = self._allocate(batch_size)
            out.weights = self.rt.zeros(batch_size, np.float32)
        return out

    def _check_rows(self, batch: TransitionBatch, m: int) -> dict[str, np.ndarray]:
        """The batch's fields as contiguous arrays of the storage dtypes, or a ValueError naming the bad one."""
        d = self._obs_dim
        want = {"obs": ((m, d), np.float32), "action": ((m, *self._act_shape), self._act_dtype),
                "reward": ((m,), np.float32), "next_obs": ((m, d), np.float32), "terminated": ((m,), np.float32)}
        rows = {}
        for name, (shape, dtype) in want.items():
            x = np.asarray(host_array(getattr(batch, name)))
            if x.shape != shape:
                raise ValueError(f"{name} must have shape {shape}, got {x.shape}")
            rows[name] = np.ascontiguousarray(x, dtype=dtype)
        return rows

    def _upload_update(self, indices: Any, td_errors: Any) -> tuple[cla.Array, cla.Array]:
        """Host (or foreign) indices and TD errors, validated like ReplayIndex.update_priorities, on the device."""
        idx = np.asarray(host_array(indices))
        td = np.asarray(host_array(td_errors), dtype=np.float64)
        if idx.ndim != 1 or td.shape != idx.shape:
            raise ValueError(f"indices and td_errors must be 1-D of equal length, got {idx.shape} and {td.shape}")
        self._ring.check_written(idx)
        idx = as_indices(idx, self._capacity)  # dtype and range
        if not np.isfinite(td).all():
            raise ValueError("td_errors must be finite")
        return self.rt.to_device(idx.astype(np.int32)), self.rt.to_device(td.astype(np.float32))
