"""A learn kernel's update captured as CUDA graphs and replayed over static buffers.

An eager update on a GPU launches each of its few dozen small kernels from Python, and on pearl's networks the
launches, not the arithmetic, set its time (a DQN update at batch 64 took 1,172 µs on an H200 whose roofline
says 66). A graph of the whole update (forward, loss, backward written out, clipping, fused Adam on its device
step count, the target update) is one launch.

What a graph cannot hold is a branch the host takes: a graph records the kernels one run of the Python code
launched, so the update's host-side decisions are baked in. The kernels that can be captured say what those
decisions are for their coming update (`graph_key()`: DQN's hard target copy, TD3's delayed actor step, each
Adam's denormal flush), and `CapturedLearn` keeps one graph per key and batch size, captured the first time
they come. The host's counters (the kernel's `updates`, each optimiser's `taken`: `graph_counters()`) are moved
by capture-time Python once; `CapturedLearn` records by how much and moves them by as much after each replay, so
`state_dict` and every host decision stay the eager kernel's. Under bf16-mixed every network is marked changed
before a capture and after a replay, so each graph casts its weights itself and an eager call after one casts
them afresh.

A graph reads fixed addresses: the batch is copied into static buffers (one set per batch size), unless it
already is in fixed buffers (`SampleBatch.fixed`: a replay on the same device gathers each draw into buffers of
its own, below), which the graphs of its size then read where they are, with no copy. The draws TD3 and SAC make
on the host for an update are copied into a buffer of their own before each replay (`stage`,
`LearnDraws.stage`), and the TD errors and metrics are cloned out of the graph's (the next replay overwrites
them). The first `WARMUP` updates of each batch size run eagerly on a side stream, as CUDA graph capture wants
(lazy initialisation, the caching allocator's first blocks, the networks' buffers for that size). A capture that
fails (an op that waits for the host, a library that cannot be captured) says so in one warning line and the
kernel runs eagerly from then on. `grads`/`apply` (a learner group's split update) always run eagerly.
`PEARL_CUDA_GRAPHS=0` in the environment runs everything eagerly. Captures are thread-local: another thread of
the process (the energy meter's, a launcher's) may use CUDA while one runs.

Replay's gather is captured too (`CapturedGather`). The host still draws the slots (the replay index: ring, sum
tree, the seed's generator), so a seed samples the same transitions eager or captured, and the draw waits for
nothing on the device. The slots (and, when prioritized, the weights) go up in one copy from pinned memory that
does not wait either, and one replay gathers the five fields into that batch size's fixed buffers. Eagerly the
same gather is a pageable copy and a launch per field, and the learn graph copies each field once more.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from pearl.adapters.base import LearnKernel
from pearl.kernels import Implementation
from pearl.types import Gradients, GroupShare, LearnResult, Params, SampleBatch

#: eager updates on a side stream before the first capture
WARMUP = 3

BATCH_TENSORS = ("obs", "action", "reward", "next_obs", "terminated", "weights")


@dataclass
class _Graph:
    graph: Any  # torch.cuda.CUDAGraph
    result: LearnResult  # the graph's own output tensors
    advance: dict[str, int]  # how much one update moves each host counter


class CapturedLearn(LearnKernel):
    """`kernel`'s `learn` as CUDA graphs, one per `kernel.graph_key()`; everything else is the kernel's own."""

    def __init__(self, kernel: LearnKernel, device: torch.device, warn: Callable[[str], None] | None = None) -> None:
        self.kernel, self.device = kernel, device
        self.graphs: dict[tuple, _Graph] = {}  # by (batch rows, the kernel's key)
        self.static: dict[int, SampleBatch] = {}  # the batch buffers the graphs of each batch size read
        self.own: set[int] = set()  # batch sizes that keep buffers of their own, whatever comes
        self.warmed: dict[int, int] = {}  # eager updates so far, by batch size
        self.failed = ""  # why capturing failed ('' while it has not)
        self._warn = warn or (lambda line: print(f"warning: {line}", file=sys.stderr))
        self._side = torch.cuda.Stream(device)

    @property
    def updates(self) -> int:  # type: ignore[override]
        return self.kernel.updates

    @updates.setter
    def updates(self, value: int) -> None:
        self.kernel.updates = value

    implementation = Implementation.CAPTURED

    @property
    def captured(self) -> bool:
        """At least one of its updates runs as a graph (and none has failed to capture)."""
        return bool(self.graphs) and not self.failed

    def eager(self) -> LearnKernel:
        """The kernel it replays, run eagerly (before any capture: its graphs would read this kernel's tensors)."""
        return self.kernel

    def learn(self, batch: SampleBatch) -> LearnResult:
        if self.failed:
            return self.kernel.learn(batch)
        rows = int(batch.reward.shape[0])
        if self.warmed.get(rows, 0) < WARMUP:
            self.warmed[rows] = self.warmed.get(rows, 0) + 1
            return self._warm(batch)
        static = self._fill(batch, rows)  # first: a change of buffers drops the size's graphs
        key = (rows, *self.kernel.graph_key())
        entry = self.graphs.get(key)
        self._stage(rows)
        if entry is None:
            entry = self._capture(key, static)
            if entry is None:
                self._unstage()
                return self.kernel.learn(batch)
        with torch.cuda.device(self.device):
            entry.graph.replay()
        self._unstage()
        self._advance(entry.advance)
        self._changed()
        metrics = entry.result.metrics
        return LearnResult(entry.result.td_errors.clone(),
                           {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in metrics.items()})

    def _warm(self, batch: SampleBatch) -> LearnResult:
        return _on_side(self._side, self.device, lambda: self.kernel.learn(batch))

    def _fill(self, batch: SampleBatch, rows: int) -> SampleBatch:
        """The static buffers the graphs of the batch's size read, holding the batch: a fixed batch's own tensors,
        which the graphs then read where they are (nothing copied while the batches of that size are those
        buffers), else buffers of this kernel's into which each batch is copied. A size's source changes at
        most twice: to the first fixed batch's buffers, and, when another batch comes after those, to buffers of
        its own for good. Its graphs read the old addresses, so a change drops them (captured afresh)."""
        static = self.static.get(rows)
        if static is not None and not _same_tensors(batch, static):
            adopt = batch.fixed and rows not in self.own
            if static.fixed or adopt:
                self.graphs = {key: entry for key, entry in self.graphs.items() if key[0] != rows}
                if static.fixed:
                    self.own.add(rows)
                static = None
        if static is None:
            static = batch if batch.fixed and rows not in self.own else SampleBatch(
                batch.indices, *(torch.empty_like(getattr(batch, name)) for name in BATCH_TENSORS), batch.device)
            self.static[rows] = static
        if not _same_tensors(batch, static):
            for name in BATCH_TENSORS:
                getattr(static, name).copy_(getattr(batch, name))
        return static

    def _capture(self, key: tuple, static: SampleBatch) -> _Graph | None:
        """The graph of the update for `key`, recorded over the static batch (capture runs no kernel, so the
        update still has to be replayed); None, with one warning line, where it cannot be captured."""
        before = self._counters()
        self._changed()
        try:
            graph, result = _record(lambda: self.kernel.learn(static), self.device)
        except Exception as exc:  # noqa: BLE001 - any failure to capture falls back to the eager update
            self._restore(before)
            self._changed()
            self.failed = _why(exc)
            self._warn(f"{self.device}: the {type(self.kernel).__name__} update could not be captured as a CUDA "
                       f"graph ({self.failed}); it runs eagerly")
            return None
        after = self._counters()
        self._restore(before)  # replay, then advance, as for every later update of this key
        entry = _Graph(graph, result, {name: after[name] - before[name] for name in before})
        self.graphs[key] = entry
        return entry

    def _steps(self) -> dict[str, Any]:
        """What counts the host's optimiser steps: the kernel's `graph_counters()` where it has them (SAC's
        temperature besides its networks' Adams), else its optimisers."""
        counters = getattr(self.kernel, "graph_counters", self.kernel._optimizers)()
        return {name: c for name, c in counters.items() if hasattr(c, "taken")}

    def _counters(self) -> dict[str, int]:
        """The host's counters an update moves: the kernel's updates and each optimiser's steps."""
        return {"updates": self.kernel.updates, **{f"taken.{n}": c.taken for n, c in self._steps().items()}}

    def _restore(self, counters: dict[str, int]) -> None:
        steps = self._steps()
        for name, value in counters.items():
            if name == "updates":
                self.kernel.updates = value
            else:
                steps[name.removeprefix("taken.")].taken = value

    def _stage(self, rows: int) -> None:
        """The coming update's host-made inputs (TD3's and SAC's draws) into the device buffers its graph reads."""
        if hasattr(self.kernel, "stage"):
            self.kernel.stage(rows)

    def _unstage(self) -> None:
        if hasattr(self.kernel, "unstage"):
            self.kernel.unstage()

    def _advance(self, by: dict[str, int]) -> None:
        now = self._counters()
        self._restore({name: now[name] + by[name] for name in by})

    def _changed(self) -> None:
        """Every network's low-precision copy is stale: the next product (in a graph or eager) casts again."""
        for net in self.kernel._nets().values():
            net.changed()

    # ------------------------------------------------------------------ the rest is the kernel's own
    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        return self.kernel.grads(batch, share)

    def apply(self, gradients: Gradients) -> LearnResult:
        result = self.kernel.apply(gradients)
        self._changed()
        return result

    def get_params(self) -> Params:
        return self.kernel.get_params()

    def write_policy(self, out: Params) -> None:
        self.kernel.write_policy(out)

    def policy_params(self) -> Params:
        return self.kernel.policy_params()

    def state_dict(self) -> Params:
        return self.kernel.state_dict()

    def load_state_dict(self, state: Params) -> None:
        self.kernel.load_state_dict(state)
        self._changed()

    def _nets(self) -> dict[str, Any]:
        return self.kernel._nets()

    def _optimizers(self) -> dict[str, Any]:
        return self.kernel._optimizers()

    def __getattr__(self, name: str) -> Any:  # the kernel's own attributes (its networks, its config)
        if name == "kernel":
            raise AttributeError(name)
        return getattr(self.kernel, name)


def graphs_wanted(device: torch.device) -> bool:
    """Graphs on a CUDA device unless $PEARL_CUDA_GRAPHS is 0 (on the host, launches cost nothing to save)."""
    return device.type == "cuda" and Implementation.captures_allowed()


def captured(kernel: LearnKernel, device: torch.device) -> LearnKernel:
    """`kernel` as CUDA graphs on a CUDA device, for a kernel that says what its update's host branches are
    (`graph_key`); else `kernel` itself."""
    if not graphs_wanted(device) or not hasattr(kernel, "graph_key"):
        return kernel
    return CapturedLearn(kernel, device)


class CapturedForward:
    """An act kernel's forward pass as CUDA graphs, one per batch size: the observations copied from the host
    into that size's static input, the graph replayed, its static output handed back (valid until the next
    call; act kernels read it back to the host at once). The weights are the network's own tensor, which a
    weight sync overwrites in place, so a graph acts with the newest policy. The first `WARMUP` calls of a size
    run eagerly on a side stream; a capture that fails warns once and every call runs eagerly."""

    def __init__(self, net: Callable[[torch.Tensor], torch.Tensor], dtype: torch.dtype, device: torch.device,
                 warn: Callable[[str], None] | None = None) -> None:
        self.net, self.dtype, self.device = net, dtype, device
        self.inputs: dict[int, torch.Tensor] = {}
        self.graphs: dict[int, tuple[Any, torch.Tensor]] = {}  # by rows: the graph and its output
        self.warmed: dict[int, int] = {}
        self.failed = ""
        self._warn = warn or (lambda line: print(f"warning: {line}", file=sys.stderr))
        self._side = torch.cuda.Stream(device)

    def __call__(self, obs: Any) -> torch.Tensor:
        rows = int(obs.shape[0])
        if self.failed or self.warmed.get(rows, 0) < WARMUP:
            return self._eager(obs, rows)
        if rows not in self.inputs:
            self.inputs[rows] = torch.empty(tuple(obs.shape), dtype=self.dtype, device=self.device)
        static = self.inputs[rows]
        static.copy_(torch.as_tensor(obs))
        if rows not in self.graphs and not self._capture(rows, static):
            return self._eager(obs, rows)
        graph, out = self.graphs[rows]
        with torch.cuda.device(self.device):
            graph.replay()
        return out

    def _eager(self, obs: Any, rows: int) -> torch.Tensor:
        x = torch.as_tensor(obs, dtype=self.dtype, device=self.device)
        if self.failed:
            return self.net(x)
        self.warmed[rows] = self.warmed.get(rows, 0) + 1
        return _on_side(self._side, self.device, lambda: self.net(x))

    def _capture(self, rows: int, static: torch.Tensor) -> bool:
        try:
            graph, out = _record(lambda: self.net(static), self.device)
        except Exception as exc:  # noqa: BLE001 - any failure to capture falls back to the eager forward
            self.failed = _why(exc)
            self._warn(f"{self.device}: act's forward pass could not be captured as a CUDA graph ({self.failed}); "
                       "it runs eagerly")
            return False
        self.graphs[rows] = (graph, out)
        return True


class CapturedGather:
    """Replay's gather as CUDA graphs, one per batch size: `store`'s rows at the host-drawn slots into that size's
    fixed buffers (the module docstring). The slots (and the weights, when prioritized) are written into pinned
    host buffers and copied up without waiting; before the pinned buffers are written again, the host waits for
    the last copy out of them (long done by then, as a rule). A batch's tensors are valid until the next draw of
    its size. The first `WARMUP` draws of a size, and every draw after a capture failed (one warning line), gather
    eagerly into fresh tensors."""

    def __init__(self, store: dict[str, torch.Tensor], fields: tuple[str, ...], prioritized: bool,
                 device: torch.device, warn: Callable[[str], None] | None = None) -> None:
        self.store, self.fields, self.prioritized, self.device = store, fields, prioritized, device
        self.sizes: dict[int, _Gather] = {}
        self.warmed: dict[int, int] = {}
        self.failed = ""
        self._warn = warn or (lambda line: print(f"warning: {line}", file=sys.stderr))
        self._side = torch.cuda.Stream(device)

    def __call__(self, slots: Any, weights: Any) -> tuple[dict[str, torch.Tensor], torch.Tensor, bool]:
        """(the fields at `slots`, the weights on the device, whether they are fixed buffers)."""
        rows = int(slots.shape[0])
        if self.failed or self.warmed.get(rows, 0) < WARMUP:
            return self._eager(slots, weights, rows)
        entry = self.sizes.get(rows) or self._capture(rows)
        if entry is None:
            return self._eager(slots, weights, rows)
        entry.copied.synchronize()
        entry.host_slots.numpy()[:] = slots
        if self.prioritized:
            entry.host_weights.numpy()[:] = weights
        with torch.cuda.device(self.device):  # the copies, the event and the graph on the replay's device
            entry.slots.copy_(entry.host_slots, non_blocking=True)
            if self.prioritized:
                entry.weights.copy_(entry.host_weights, non_blocking=True)
            entry.copied.record()
            entry.graph.replay()
        return entry.out, entry.weights, True

    def _eager(self, slots: Any, weights: Any, rows: int) -> tuple[dict[str, torch.Tensor], torch.Tensor, bool]:
        if not self.failed:
            self.warmed[rows] = self.warmed.get(rows, 0) + 1
        return (*gather_eagerly(self.store, self.fields, slots, weights, self.device), False)

    def _capture(self, rows: int) -> _Gather | None:
        slots = torch.zeros(rows, dtype=torch.int64, device=self.device)
        weights = torch.ones(rows, dtype=torch.float32, device=self.device)  # uniform replay's, for good
        try:
            _on_side(self._side, self.device, lambda: gather(self.store, self.fields, slots))
            graph, out = _record(lambda: gather(self.store, self.fields, slots), self.device)
        except Exception as exc:  # noqa: BLE001 - any failure to capture falls back to the eager gather
            self.failed = _why(exc)
            self._warn(f"{self.device}: replay's gather could not be captured as a CUDA graph ({self.failed}); "
                       "it runs eagerly")
            return None
        entry = _Gather(graph, out, slots, weights, torch.empty(rows, dtype=torch.int64, pin_memory=True),
                        torch.empty(rows, dtype=torch.float32, pin_memory=True), torch.cuda.Event())
        self.sizes[rows] = entry
        return entry


@dataclass
class _Gather:
    graph: Any  # torch.cuda.CUDAGraph
    out: dict[str, torch.Tensor]  # the graph's output: the batch's fields
    slots: torch.Tensor  # the device slots the graph reads
    weights: torch.Tensor  # the batch's weights on the device
    host_slots: torch.Tensor  # pinned
    host_weights: torch.Tensor  # pinned
    copied: Any  # torch.cuda.Event: the last copy out of the pinned buffers


def gather(store: dict[str, torch.Tensor], fields: tuple[str, ...], where: torch.Tensor) -> dict[str, torch.Tensor]:
    """`store`'s rows at the device slots `where`, field by field: replay's sample, eager or in a graph."""
    return {name: store[name].index_select(0, where) for name in fields}


def gather_eagerly(store: dict[str, torch.Tensor], fields: tuple[str, ...], slots: Any, weights: Any,
                   device: torch.device) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """(`store`'s rows at the host slots `slots`, the host `weights`) on `device`, each a fresh tensor: replay's
    sample without a graph."""
    where = torch.from_numpy(slots).to(device, non_blocking=True)
    return gather(store, fields, where), torch.from_numpy(weights).to(device, non_blocking=True)


def captured_gather(store: dict[str, torch.Tensor], fields: tuple[str, ...], prioritized: bool,
                    device: torch.device) -> CapturedGather | None:
    """Replay's gather as CUDA graphs on a CUDA device; None on the host (or with the switch off)."""
    return CapturedGather(store, fields, prioritized, device) if graphs_wanted(device) else None


def _same_tensors(batch: SampleBatch, static: SampleBatch) -> bool:
    return all(getattr(batch, name) is getattr(static, name) for name in BATCH_TENSORS)


def _on_side(side: Any, device: torch.device, work: Callable[[], Any]) -> Any:
    """work() on the side stream, after what the device's stream has queued and before what it queues next: the
    eager warm-up CUDA graph capture wants."""
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        out = work()
    torch.cuda.current_stream(device).wait_stream(side)
    return out


def _record(work: Callable[[], Any], device: torch.device) -> tuple[Any, Any]:
    """(the CUDA graph of work() on `device`, its output tensors), captured thread-locally; what capturing raised,
    else. `device` is made current: capture's stream, like a replay's, is the current device's (cuda:1's kernels
    captured or replayed on cuda:0's stream would not run where their tensors are)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.device(device), torch.cuda.graph(graph, capture_error_mode="thread_local"):
        out = work()
    return graph, out


def _why(exc: Exception) -> str:
    """A failed capture in one line: the error's type and its first line."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def captured_forward(net: Callable[[torch.Tensor], torch.Tensor], dtype: torch.dtype,
                     device: torch.device) -> CapturedForward | None:
    """An act kernel's forward as CUDA graphs on a CUDA device; None on the host (or with the switch off)."""
    return CapturedForward(net, dtype, device) if graphs_wanted(device) else None
