"""A learner group's communication in torch.distributed (gloo): the batches, the averaged gradients, the results.

Learner 0 (the run's own learner, which keeps replay) hands every other learner its rows of each update's batch
with one `scatter` of a packed byte buffer, whose header also carries the command (update, compare digests,
stop). The gradients are averaged with `all_gather` and a sum in learner order on every learner, so each gets
the same bits whatever gloo's reduction would do, and for a given group size every run gives the same bits
(`GroupShare`). Learner 0 then `gather`s the TD errors and losses of the others' rows, for priorities and
metrics. CUDA tensors travel through host memory (gloo's CPU path), so the bits do not depend on the
interconnect.

Bytes per update and learner: the batch rows once, (N − 1) gradient copies (all_gather: each learner receives
every other's), and the TD errors once. The first two are what `pearl.profiler` times and the planner prices.
"""

from __future__ import annotations

import datetime
import hashlib
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist

from pearl.adapters.base import GroupComm
from pearl.types import EnvSpec, GroupShare, Params, SampleBatch

_HEADER = 16  # bytes: the command and the rows, two int64
# A learner may wait this long in one collective: learner 0's evaluations and checkpoints happen between updates.
COLLECTIVE_TIMEOUT = datetime.timedelta(hours=2)
JOIN_TIMEOUT = datetime.timedelta(seconds=120)  # a learner imports torch and builds its kernel before it joins


def split_rows(total: int, learners: int) -> list[tuple[int, int]]:
    """(start, rows) of each learner's part of a batch of `total` rows: contiguous, the first ones one row
    longer when `learners` does not divide `total`."""
    base, extra = divmod(total, learners)
    out, start = [], 0
    for rank in range(learners):
        rows = base + (rank < extra)
        out.append((start, rows))
        start += rows
    return out


@dataclass(frozen=True)
class _Field:
    name: str
    shape: tuple[int, ...]  # one row's
    dtype: torch.dtype

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * torch.empty((), dtype=self.dtype).element_size()


def _fields(spec: EnvSpec) -> tuple[_Field, ...]:
    """A sampled batch's arrays in the order they are packed (the 8-byte action first keeps every field aligned)."""
    action_dtype = torch.from_numpy(np.zeros(0, dtype=spec.action_dtype)).dtype
    return (_Field("action", tuple(spec.action_shape), action_dtype),
            _Field("obs", (spec.obs_dim,), torch.float32), _Field("next_obs", (spec.obs_dim,), torch.float32),
            _Field("reward", (), torch.float32), _Field("terminated", (), torch.float32),
            _Field("weights", (), torch.float32))


class TorchGroupComm(GroupComm):
    """One learner's end of a gloo process group of `world` learners (see the module docstring)."""

    def __init__(self, rank: int, world: int, port: int, spec: EnvSpec, batch_size: int, device: torch.device,
                 device_id: str, store: dist.TCPStore | None = None, host: str = "127.0.0.1") -> None:
        if dist.is_initialized():
            raise RuntimeError("torch.distributed is already set up in this process; a learner group sets up its own")
        self.rank, self.world, self.device, self.device_id = rank, world, device, device_id
        self.parts = split_rows(batch_size, world)
        self.total = batch_size
        self.fields = _fields(spec)
        widest = max(rows for _, rows in self.parts)
        self.offsets, offset = {}, _HEADER
        for f in self.fields:
            self.offsets[f.name] = offset
            offset += widest * f.row_bytes
        self.buffer_bytes = offset
        self.widest = widest
        if store is None:
            store = dist.TCPStore(host, port, world, is_master=False, timeout=JOIN_TIMEOUT)
        # Every learner checks in before the group forms, which waits as long as a collective may: a learner
        # that never starts (a process that failed, an actor Ray cannot place) fails the group within JOIN_TIMEOUT.
        if rank:
            store.set(f"pearl/joined/{rank}", "1")
        else:
            store.wait([f"pearl/joined/{r}" for r in range(1, world)], JOIN_TIMEOUT)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=COLLECTIVE_TIMEOUT)
        self._weights = [rows / batch_size for _, rows in self.parts]

    @classmethod
    def host(cls, world: int, spec: EnvSpec, batch_size: int, device: torch.device, device_id: str,
             start_others: Callable[[int], None], host: str = "127.0.0.1") -> "TorchGroupComm":
        """Learner 0's end: open the group's rendezvous on a free port, `start_others(port)`, and wait for them."""
        store = dist.TCPStore(host, 0, world, is_master=True, wait_for_workers=False, timeout=JOIN_TIMEOUT)
        start_others(store.port)
        return cls(0, world, store.port, spec, batch_size, device, device_id, store=store, host=host)

    # ------------------------------------------------------------------------------------ the batch
    def share(self) -> GroupShare:
        start, rows = self.parts[self.rank]
        return GroupShare(start, rows, self.total, self.average)

    def post(self, command: int, batch: SampleBatch | None = None) -> SampleBatch | None:
        """Learner 0: send `command` (with each learner's rows of `batch` for an update); its own rows back."""
        # learner 0's own buffer is scattered to itself and never read: its header alone, no rows copied
        buffers = [self._pack(command, batch if rank else None, start, rows)
                   for rank, (start, rows) in enumerate(self.parts)]
        self._timed(dist.scatter, buffers[0], buffers, src=0)
        if batch is None:
            return None
        start, rows = self.parts[0]
        return SampleBatch(batch.indices[start:start + rows], *(getattr(batch, f)[start:start + rows] for f in
                           ("obs", "action", "reward", "next_obs", "terminated", "weights")), batch.device)

    def receive(self) -> tuple[int, SampleBatch | None]:
        """The other learners: the next command from learner 0, and this learner's rows for an update."""
        buffer = torch.empty(self.buffer_bytes, dtype=torch.uint8)
        self._timed(dist.scatter, buffer, None, src=0)
        command, rows = (int(v) for v in buffer[:_HEADER].view(torch.int64))
        if command != GroupComm.UPDATE:
            return command, None
        arrays = {}
        for f in self.fields:
            at = self.offsets[f.name]
            raw = buffer[at:at + rows * f.row_bytes].view(f.dtype).reshape(rows, *f.shape)
            arrays[f.name] = raw.to(self.device)
        return command, SampleBatch(np.zeros(rows, np.int64), arrays["obs"], arrays["action"], arrays["reward"],
                                    arrays["next_obs"], arrays["terminated"], arrays["weights"], self.device_id)

    def _pack(self, command: int, batch: SampleBatch | None, start: int, rows: int) -> torch.Tensor:
        out = torch.zeros(self.buffer_bytes, dtype=torch.uint8)
        out[:_HEADER].view(torch.int64)[:] = torch.tensor([command, rows if batch is not None else 0])
        if batch is None:
            return out
        for f in self.fields:
            part = torch.as_tensor(getattr(batch, f.name))[start:start + rows].to(f.dtype).cpu().contiguous()
            at = self.offsets[f.name]
            out[at:at + rows * f.row_bytes] = part.reshape(-1).view(torch.uint8)
        return out

    def _timed(self, collective: Callable[..., object], *args: object, **kwargs: object) -> None:
        t0 = time.perf_counter()
        collective(*args, **kwargs)
        self.comm_s += time.perf_counter() - t0

    # ------------------------------------------------------------------------------- the reductions
    def average(self, arrays: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Every learner's arrays weighted by its rows and summed in learner order (`GroupShare.average`)."""
        names = list(arrays)
        flat = torch.cat([arrays[n].detach().reshape(-1).float() for n in names]).cpu()
        gathered = [torch.empty_like(flat) for _ in range(self.world)]
        self._timed(dist.all_gather, gathered, flat)
        total = gathered[0].mul(self._weights[0])
        for rank in range(1, self.world):
            total.add_(gathered[rank], alpha=self._weights[rank])
        out, at = {}, 0
        for n in names:
            a = arrays[n]
            out[n] = total[at:at + a.numel()].view(a.shape).to(device=a.device, dtype=a.dtype)
            at += a.numel()
        return out

    def gather(self, td_errors: torch.Tensor, metrics: dict[str, torch.Tensor]
               ) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
        """Learner 0 gets every learner's TD errors, in batch order, and the losses averaged as the gradients are;
        the others get (None, {})."""
        names = sorted(metrics)
        td = torch.zeros(self.widest, dtype=torch.float32)
        rows = self.parts[self.rank][1]
        td[:rows] = td_errors.detach().float().reshape(-1).cpu()
        values = torch.stack([torch.as_tensor(metrics[n]).detach().float().reshape(()).cpu() for n in names]) \
            if names else torch.zeros(0)
        mine = torch.cat([td, values])
        gathered = [torch.empty_like(mine) for _ in range(self.world)] if self.rank == 0 else None
        self._timed(dist.gather, mine, gathered, dst=0)
        if gathered is None:
            return None, {}
        all_td = torch.cat([g[:r] for g, (_, r) in zip(gathered, self.parts)]).to(td_errors.device)
        mean = gathered[0][self.widest:].mul(self._weights[0])
        for rank in range(1, self.world):
            mean.add_(gathered[rank][self.widest:], alpha=self._weights[rank])
        return all_td, {n: mean[i] for i, n in enumerate(names)}

    def differing(self, state: Params) -> list[int]:
        """Learner 0: the learners whose state (parameters, optimiser moments, update count) is not its own bit
        for bit; the others: []. Every learner calls it at the same point."""
        digest = hashlib.sha256()
        for name in sorted(state):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(state[name]).tobytes())
        mine = torch.frombuffer(bytearray(digest.digest()), dtype=torch.uint8)
        gathered = [torch.empty_like(mine) for _ in range(self.world)]
        dist.all_gather(gathered, mine)
        if self.rank != 0:
            return []
        return [rank for rank in range(1, self.world) if not torch.equal(gathered[rank], gathered[0])]

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


# ------------------------------------------------------------------------------- what the profiler times
def time_all_gather(sizes: tuple[int, ...], repeats: int) -> list[tuple[int, float]]:
    """(bytes, median seconds) of an all-gather of float32 arrays of each size in `sizes` (bytes) between this
    process and one more on this host (gloo over loopback), `repeats` times each after a warm-up: what a learner
    group of two pays per gradient average. The other process is `_peer`."""
    import subprocess
    import sys

    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False, timeout=JOIN_TIMEOUT)
    peer = subprocess.Popen([sys.executable, "-c", "from pearl.adapters.torch.learner_group import _peer; _peer()",
                             str(store.port), ",".join(map(str, sizes)), str(repeats)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        dist.init_process_group("gloo", store=store, rank=0, world_size=2, timeout=JOIN_TIMEOUT)
        out = [(size, _gather_times(size, repeats)) for size in sizes]
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        peer.wait(30)
    return out


def _gather_times(nbytes: int, repeats: int) -> float:
    x = torch.zeros(max(1, nbytes // 4))
    got = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    times = []
    for i in range(repeats + 3):
        t0 = time.perf_counter()
        dist.all_gather(got, x)
        if i >= 3:  # the first calls set up the pair's buffers
            times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _peer() -> None:
    """The other process of `time_all_gather`: joins at argv's port and gathers the same sizes as often."""
    import sys

    port, sizes, repeats = int(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")], int(sys.argv[3])
    store = dist.TCPStore("127.0.0.1", port, 2, is_master=False, timeout=JOIN_TIMEOUT)
    dist.init_process_group("gloo", store=store, rank=1, world_size=2, timeout=JOIN_TIMEOUT)
    for size in sizes:
        _gather_times(size, repeats)
    dist.destroy_process_group()
