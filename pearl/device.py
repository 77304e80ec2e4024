"""Device identity: the one vocabulary of device kinds, and device ids as typed values.

Every module that needs to know what a device is reads it here, never from a device's human-readable note
or by matching the text of its id:

- `DeviceKind`: cpu, gpu or fpga (an OpenCL ACCELERATOR board is an fpga: it runs precompiled binaries).
  Adapters report it, descriptors declare it, profiles record it.
- `DeviceId`: ``cpu``, ``cuda:N``, ``opencl:P:D``, ``whatif:<descriptor stem>``, and slices of a GPU:
  ``cuda:N/mig:MIG-<uuid>`` (a MIG instance NVML reports, addressed by its UUID), ``cuda:N/mps:P`` (an MPS
  client limited to P % of the SMs, 1 ≤ P ≤ 100), and a what-if GPU's modelled slices
  ``whatif:<stem>/mig:<profile>`` and ``whatif:<stem>/mps:P``.
- `NodeDevice`: a device of a cluster plan, ``NODE/DEVICE`` (``a/cpu``, ``b/cuda:0/mps:25``): node names hold
  no "/" (`pearl profile merge` refuses them), so the node ends at the first "/" and the rest, which may be a
  slice, is the device id within that node. Every module reads a cluster id through it.
- `HOST_DEVICE` is the device env_step runs on, `HOST_RESOURCE` the physical resource of every device on the
  host's own cores (``cpu`` and PoCL's CPU device). A device's resource is what the planner's constraint
  (g) sums load over: the host's cores, or one GPU for the GPU and each of its slices.

Pure Python: this module imports no hardware library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pearl.backends import Backend, DeviceKind, find
from pearl.errors import DeviceError

__all__ = ["DeviceId", "DeviceKind", "NodeDevice", "Slice", "HOST_DEVICE", "HOST", "HOST_RESOURCE"]

DEVICE_ID_HELP = ("device ids look like cpu, cuda:0, cuda:0/mps:25, cuda:0/mig:MIG-<uuid> or opencl:0:0; "
                  "`pearl devices` lists this machine's devices")
HOST_RESOURCE = "host-cpu"
SLICE_KINDS = ("mig", "mps")


@dataclass(frozen=True)
class Slice:
    """Part of a GPU: a MIG instance (`name` its UUID, or a profile name such as 1g.10gb for a what-if GPU)
    or an MPS share (`name` the percentage of SMs, 1..100)."""

    kind: str  # "mig" or "mps"
    name: str

    @property
    def mps_percent(self) -> int | None:
        return int(self.name) if self.kind == "mps" else None

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class DeviceId:
    """A parsed device id: its family (cpu, cuda, opencl, whatif), its numbers or name, and a slice."""

    family: str
    index: tuple[int, ...] = ()
    name: str = ""  # a whatif device's descriptor stem
    slice: Slice | None = None

    @classmethod
    def parse(cls, text: str) -> DeviceId:
        """The id text names; DeviceError saying what ids look like when it is not one."""
        if not isinstance(text, str):
            raise DeviceError(f"a device id must be text, got {text!r}; {DEVICE_ID_HELP}")
        whole, sep, part = text.partition("/")
        piece = _parse_slice(text, part) if sep else None
        head, _, tail = whole.partition(":")
        kind = _kind(head)
        if kind is None:
            raise DeviceError(f"unknown device {text!r}; {DEVICE_ID_HELP}")
        if not _tail_fits(kind, tail):
            raise DeviceError(f"unknown device {text!r}: a {head} id reads {kind.id_form}; {DEVICE_ID_HELP}")
        if piece is not None and not kind.slices:
            raise DeviceError(f"{text!r}: only a GPU (cuda:N or a whatif: GPU) has slices; {DEVICE_ID_HELP}")
        if kind.named:
            return cls(head, name=tail, slice=piece)
        index = tuple(int(x) for x in tail.split(":")) if tail else kind.default_index or ()
        return cls(head, index, slice=piece)

    @classmethod
    def of(cls, device: DeviceId | str) -> DeviceId:
        """`device` itself, or the id its text names: for the Python API's entry points (`open_adapter`, the
        adapters' constructors), where a user may type ``"cpu"``; inside pearl ids travel typed."""
        return device if isinstance(device, DeviceId) else cls.parse(device)

    def __str__(self) -> str:
        if self.family == "whatif":
            base = f"whatif:{self.name}"
        else:
            base = ":".join([self.family, *map(str, self.index)])
        return base if self.slice is None else f"{base}/{self.slice}"

    @property
    def whole(self) -> DeviceId:
        """The device this one is a slice of (itself when it is whole)."""
        return DeviceId(self.family, self.index, self.name)

    @property
    def is_host(self) -> bool:
        """The host's own device, where env_step runs (`HOST_DEVICE`)."""
        return self.family == "cpu" and self.slice is None

    @property
    def backend(self) -> Backend:
        """The registered kind of the device (`pearl.backends`): what it can do, asked of it, never of its name."""
        kind = _kind(self.family)
        if kind is None:
            raise DeviceError(f"no device kind {self.family!r} is registered; {DEVICE_ID_HELP}")
        return kind

    @property
    def is_what_if(self) -> bool:
        """A device a profile models from a descriptor; this machine has none."""
        return self.backend.modelled


def _kind(family: str) -> Backend | None:
    return find(family)  # the registry loads its kinds on first use


def _tail_fits(kind: Backend, tail: str) -> bool:
    """Whether the id's text after the head is what ids of `kind` hold there."""
    if kind.named:
        return re.fullmatch(r"[A-Za-z0-9._-]+", tail) is not None
    if not tail:
        return kind.index_parts == 0 or kind.default_index is not None
    return kind.index_parts > 0 and re.fullmatch(r"\d+" + r"(:\d+)" * (kind.index_parts - 1), tail) is not None


def _parse_slice(text: str, part: str) -> Slice:
    kind, _, name = part.partition(":")
    if kind not in SLICE_KINDS or not name:
        raise DeviceError(f"{text!r}: a slice is mig:<MIG uuid> or mps:<percent of SMs>; {DEVICE_ID_HELP}")
    if kind == "mps":
        if not name.isdigit() or not 1 <= int(name) <= 100:
            raise DeviceError(f"{text!r}: an MPS share is a whole percentage of the SMs from 1 to 100, got {name!r}")
        name = str(int(name))
    elif not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise DeviceError(f"{text!r}: a MIG instance is named by its UUID (MIG-...; `pearl devices` lists them)")
    return Slice(kind, name)


def check_slice_use(act: DeviceId, learner: tuple[DeviceId, ...], actors: int, act_in_learner: bool = False) -> None:
    """DeviceError when a placement's slices cannot be held at once: one process (the learner's: its replay
    and learn devices, and act too when act_in_learner) on two devices of one GPU of which one is a slice
    (a process sees one MIG instance, or runs with one MPS percentage), or MPS shares of one GPU summing over
    100 % (each of `actors` actor processes holds its own share, the learner process one)."""
    process = {*learner, *((act,) if act_in_learner else ())}
    for gpu in {d.whole for d in process if d.slice is not None}:
        held = sorted(str(d) for d in process if d.whole == gpu)
        if len(held) > 1:
            raise DeviceError(f"one process would run on {' and '.join(held)}: a process holds one slice of "
                              f"{gpu}; place the replay kernels and learn on one of them")
    holders = [(d, 1) for d in process] + ([] if act_in_learner else [(act, actors)])
    total: dict[DeviceId, int] = {}
    for d, n in holders:
        if d.slice is not None and d.slice.kind == "mps":
            total[d.whole] = total.get(d.whole, 0) + n * int(d.slice.name)
    for gpu, percent in sorted(total.items(), key=lambda kv: str(kv[0])):
        if percent > 100:
            raise DeviceError(f"the MPS shares of {gpu} sum to {percent} % (each actor process holds its own "
                              f"share, the learner process one): at most 100 %; use fewer actors or smaller shares")


HOST_DEVICE = DeviceId("cpu")
HOST = str(HOST_DEVICE)


@dataclass(frozen=True)
class NodeDevice:
    """A device of a plan: ``NODE/DEVICE`` on a node of a cluster plan (the node, and the device id within that
    node's profile), or the device alone (`node` None) on the one machine a host plan was made for."""

    node: str | None
    device: DeviceId

    @classmethod
    def parse(cls, text: str, cluster: bool = True) -> NodeDevice:
        """A cluster id NODE/DEVICE (`cluster`), or a host plan's device id; DeviceError when `text` is neither
        (a cluster id without both parts, or a device part that is no device id)."""
        if not cluster:
            return cls(None, DeviceId.parse(text))
        if not cls.valid(text):
            raise DeviceError(f"{text!r} is not a cluster device id NODE/DEVICE (a node name, '/', its device)")
        node, _, device = text.partition("/")
        return cls(node, DeviceId.parse(device))

    @staticmethod
    def valid(text: object) -> bool:
        """Whether `text` reads as NODE/DEVICE: a node and a device on either side of its first "/"."""
        if not isinstance(text, str):
            return False
        node, sep, device = text.partition("/")
        return bool(sep and node and device)

    def __str__(self) -> str:
        return str(self.device) if self.node is None else f"{self.node}/{self.device}"
