"""The device-kind registry: one `Backend` per device family, and the one place pearl asks what a kind can do;
and `DeviceKind`, what a device physically is (pearl.device builds its ids on both).

A family is the head of a device id (``cpu``, ``cuda``, ``opencl``, ``whatif``, or a plugin's). Its `Backend`
answers everything pearl asks of a kind: how its ids read, how its devices are found (and probed) and opened,
which kernel backend runs them (the key of `Algorithm.kernels`, so which algorithms it has kernels for), whether
a learner group can learn on it and through which collective, what a launcher reserves for a role on it, which
power reader and energy counter read it, which what-if descriptors are costed as its devices, and whether it
loads precompiled binaries or stands in for an absent device. Every stage asks `DeviceId.backend`,
never the family's name or the id's text.

Built-in kinds register in their own adapter packages (`pearl/adapters/torch/backend.py`: cpu and cuda;
`pearl/adapters/opencl/backend.py`: opencl); what-if devices, which a profile models and no adapter runs, are
registered here. Another package adds a kind through the entry-point group `pearl.devices` (each entry names a
`Backend`), loaded in every process that imports pearl, as algorithm plugins are (pearl/algos/registry.py).

The functions a `Backend` names (`discover`, `open`, `power`) are "module:attribute" strings imported on first
use, so this module, and every module that asks a kind a question, imports no hardware library.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from importlib.metadata import entry_points
from enum import Enum
from typing import Any, Callable

ENTRY_POINT_GROUP = "pearl.devices"


class DeviceKind(str, Enum):
    """What a device physically is. A str, so it compares equal to (and serialises as) its value."""

    CPU = "cpu"
    GPU = "gpu"
    FPGA = "fpga"

    def __str__(self) -> str:
        return self.value


#: the built-in kinds, in the order `pearl devices` lists them and the profiler measures them
BUILTIN = ("pearl.adapters.torch.backend:CPU", "pearl.adapters.torch.backend:CUDA",
           "pearl.adapters.opencl.backend:OPENCL", "pearl.backends:WHATIF")


@dataclass(frozen=True)
class Backend:
    """What a device kind is and can do. Functions are named "module:attribute" (imported on first use)."""

    family: str
    """The head of its ids (``cuda`` in ``cuda:0``): lowercase letters, unique among the registered kinds."""
    adapter: str
    """The kernel backend that runs its devices: the key its kernels have in `Algorithm.kernels` ("torch",
    "opencl"); '' for a kind no adapter runs (what-if devices)."""
    id_form: str
    """How its ids read, for help texts: ``cuda:N``."""
    index_parts: int = 0
    """How many integers follow the head, ':'-separated (``opencl:P:D``: 2)."""
    default_index: tuple[int, ...] | None = None
    """The index the bare head means (``cuda`` is ``cuda:0``); None: the bare head is an id only with no parts."""
    named: bool = False
    """Its ids end in a name rather than integers (``whatif:<descriptor stem>``)."""
    slices: bool = False
    """Its ids may name a slice of the device (``/mig:<uuid>``, ``/mps:<percent>``)."""
    requires: str = ""
    """What to install when its library cannot be imported ("`pip install torch`")."""
    discover: str = ""
    """"module:function" returning (the devices found, each a DeviceInfo already probed; (name, why) for each
    part of the kind that is missing here). '' for a kind this machine never has."""
    skipped: str = ""
    """"module:function" returning (driver file, why its loader skips it) for each of its drivers that cannot
    load (an OpenCL `.icd` file naming a library that does not exist); '' when it has no such files."""
    open: str = ""
    """"module:function" (DeviceId, threads | None, descriptor path | None) → an Adapter; it raises DeviceError
    or BackendMissing saying what to do. '' for a kind no adapter runs."""
    gpu: bool = False
    """A role on one of its devices reserves a GPU where a launcher places roles (Ray's ``GPU`` resource)."""
    collective: str = ""
    """The collective a learner group averages its gradients through on it ("gloo"); '' when a group cannot
    learn on it."""
    power: str = ""
    """The reader of its power draw: a name in `pearl.profiler.power.READERS` ("nvml", "rapl") or
    "module:function" (DeviceId, busy callable, seconds) → a PowerReading or None; '' for none."""
    energy: str = ""
    """"module:function" DeviceId → its resource's hardware energy counter (`pearl.adapters.energy.EnergyCounter`)
    or an `Unread` saying why it has none here; '' for a kind with no counter (its share of a run's energy stays
    modelled)."""
    what_if_kinds: tuple[DeviceKind, ...] = ()
    """What-if descriptors of these kinds are costed as its devices: with its adapter's kernel set."""
    precisions: tuple[str, ...] = ("fp32",)
    """The arithmetic its adapter's learn computes in (`pearl.kernels.Precision` values)."""
    implementations: tuple[str, ...] = ("eager",)
    """How its adapter can run act and learn (`pearl.kernels.Implementation` values): eager, and captured where
    CUDA graphs replay them ($PEARL_CUDA_GRAPHS=0 leaves eager only); the profiler times each."""
    precision_check: str = ""
    """"module:function" (DeviceId, Precision) → '' when one of its devices computes that precision in hardware
    (at least as fast as fp32), else why not; '' for a kind that does every precision it lists at speed."""
    binaries: bool = False
    """Its devices can load a descriptor's precompiled kernel binary (`--descriptor`) instead of building."""
    emulates: bool = False
    """One of its devices can run the kernels a plan gives an absent what-if device (`pearl train --emulate`)."""
    modelled: bool = False
    """A profile models its devices from a descriptor; no machine has them (what-if devices)."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9]*", self.family or ""):
            raise ValueError(f"a device family is lowercase letters and digits, got {self.family!r}")
        if self.named and self.index_parts:
            raise ValueError(f"{self.family}: an id ends in integers or in a name, not both")
        if not self.modelled and not (self.adapter and self.open):
            raise ValueError(f"{self.family}: a kind a machine has names its adapter and its open function")

    def call(self, what: str, *args: Any) -> Any:
        """Call the function named by field `what` ("discover", "skipped", "open", "power", "energy",
        "precision_check")
        with `args`."""
        return resolve(getattr(self, what))(*args)


WHATIF = Backend(family="whatif", adapter="", id_form="whatif:<descriptor stem>", named=True, slices=True,
                 modelled=True)

_REGISTRY: dict[str, Backend] = {}
_BROKEN: dict[str, str] = {}  # entry-point name → why it was left out
_loaded = False


def resolve(target: str) -> Callable[..., Any]:
    """The attribute "module:attribute" names (imported now)."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def register(backend: Backend) -> Backend:
    """Add a kind (ValueError for a family already taken). A test registers its own and `unregister`s it; one
    registered at run time exists in this process only, while a plugin's exists in every process."""
    _load()
    if not isinstance(backend, Backend):
        raise ValueError(f"a device kind is registered as a pearl.backends.Backend, got {type(backend).__name__}")
    if backend.family in _REGISTRY:
        raise ValueError(f"a device kind named {backend.family!r} is already registered")
    _REGISTRY[backend.family] = backend
    return backend


def unregister(family: str) -> None:
    del _REGISTRY[family]


def backends() -> tuple[Backend, ...]:
    """Every registered kind, built-in ones first."""
    _load()
    return tuple(_REGISTRY.values())


def find(family: str) -> Backend | None:
    """The kind whose ids start with `family`, or None."""
    _load()
    return _REGISTRY.get(family)


def broken() -> dict[str, str]:
    """Device plugins left out: entry-point name → why."""
    _load()
    return dict(_BROKEN)


def for_what_if(kind: DeviceKind) -> Backend | None:
    """The kind whose devices a what-if descriptor of `kind` is costed as (the first registered), or None."""
    return next((b for b in backends() if kind in b.what_if_kinds), None)


def id_forms(adapter: str) -> str:
    """How the ids of the kinds `adapter` runs read ("cpu or cuda:N"), for help texts."""
    return " or ".join(b.id_form for b in backends() if b.adapter == adapter) or f"a {adapter} device"


def kinds_with(ability: str) -> str:
    """How the ids of the kinds that have `ability` (a Backend field: "collective", "binaries") read, for a
    message saying where to go instead ("cpu or cuda:N")."""
    return " or ".join(b.id_form for b in backends() if getattr(b, ability)) or "no registered device kind"


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for target in BUILTIN:
        entry = resolve(target)
        _REGISTRY[entry.family] = entry
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry = point.load()
        except Exception as exc:  # a plugin that fails to import is left out, not fatal
            _BROKEN[point.name] = f"{point.value} failed to load ({type(exc).__name__}: {exc})"
            continue
        if not isinstance(entry, Backend):
            _BROKEN[point.name] = f"{point.value} is a {type(entry).__name__}, not a pearl.backends.Backend"
        elif entry.family != point.name:
            _BROKEN[point.name] = f"{point.value} registers family {entry.family!r}, not its entry's name"
        elif entry.family in _REGISTRY:
            _BROKEN[point.name] = f"family {entry.family!r} is already registered"
        else:
            _REGISTRY[entry.family] = entry
