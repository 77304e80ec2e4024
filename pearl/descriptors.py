"""Device descriptors: TOML files in top-level devices/ describing a device model.

They feed the power model and what-if planning for devices that are absent, and for FPGA boards they name the
precompiled kernel binary the board runs. Layout (every figure carries its public source in a comment):

    schema = "pearl.device/1"
    [device]   kind ("cpu" | "gpu" | "fpga"), vendor, model, match (substrings of the device name it describes),
               cores (optional, CPUs: the cores the figures are for; a host with fewer is charged its share of the
               power, `pearl.profiler.power.from_descriptor`)
    [figures]  idle_w, peak_w, fp32_peak_flops, memory_bandwidth_bytes_per_s, memory_bytes,
               host_link_bandwidth_bytes_per_s, host_link_latency_s, launch_latency_s; and, optional,
               bf16_peak_flops (dense bfloat16 matrix products accumulating in float32, for a device with units
               for them: a what-if device then has learn at bf16-mixed)
    [mig]      (optional, GPUs) gpu_sms (the whole GPU's SMs) and profiles, a list of {name ("1g.10gb"), sms,
               memory_eighths (the instance's eighths of the memory and of its bandwidth), instances (how many
               of it fit)}: the MIG instances a what-if GPU offers as slices
    [binary]   (optional) path (relative to the descriptor), sha256, target (substring of the device name the
               binary was built for), kernels (catalogue kernels the binary implements)

This module imports no hardware library.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from pearl.device import DeviceKind
from pearl.errors import PearlError
from pearl.fileio import finite_number, read_toml
from pearl.kernels import DEVICE_KERNELS

SCHEMA = "pearl.device/1"
KINDS = tuple(k.value for k in DeviceKind)  # the one vocabulary (pearl.device)
FIGURES = ("idle_w", "peak_w", "fp32_peak_flops", "memory_bandwidth_bytes_per_s", "memory_bytes",
           "host_link_bandwidth_bytes_per_s", "host_link_latency_s", "launch_latency_s")
#: figures a descriptor may leave out
OPTIONAL_FIGURES = ("bf16_peak_flops",)


def devices_dir(package: Path) -> Path:
    """Where the shipped descriptors are: devices/ beside the package in a source checkout (an editable
    install), else the copy a wheel carries inside the package (setup.py puts it there)."""
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "devices").is_dir():
        return checkout / "devices"
    return package / "_devices"


DEVICES_DIR = devices_dir(Path(__file__).resolve().parent)


class DescriptorError(PearlError):
    """A descriptor file that is missing, not TOML, or has a missing or invalid field."""


@dataclass(frozen=True)
class BinarySpec:
    path: Path
    sha256: str
    target: str
    kernels: tuple[str, ...]


@dataclass(frozen=True)
class MigProfile:
    """A MIG GPU-instance profile: its SMs, its eighths of the memory (and of the memory bandwidth, which MIG
    partitions with it) and how many instances of it one GPU holds."""

    name: str
    sms: int
    memory_eighths: int
    instances: int


@dataclass(frozen=True)
class DeviceDescriptor:
    source: Path
    kind: str
    vendor: str
    model: str
    match: tuple[str, ...]
    figures: dict[str, float]
    binary: BinarySpec | None = None
    cores: int | None = None
    gpu_sms: int | None = None  # a GPU's SMs, from its [mig] table
    mig: tuple[MigProfile, ...] = ()

    def matches(self, device_name: str) -> bool:
        return any(m.lower() in device_name.lower() for m in self.match)


def shipped_names(folder: Path | None = None) -> list[str]:
    """The names of the descriptors shipped in devices/ (file names without .toml), sorted."""
    folder = DEVICES_DIR if folder is None else folder
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def resolve_descriptor(name_or_path: str | Path, folder: Path | None = None) -> Path:
    """A descriptor file from a path, or from the bare name of a shipped one (`nvidia-a100-sxm4-80gb`, with or
    without `.toml`). A path that exists wins over a shipped name; a miss names the shipped descriptors."""
    folder = DEVICES_DIR if folder is None else folder
    path = Path(name_or_path)
    if _exists(path):
        return path
    text = str(name_or_path)
    if "/" not in text and text not in ("", ".", ".."):
        stem = text[:-5] if text.endswith(".toml") else text
        shipped = folder / f"{stem}.toml"
        if _exists(shipped):
            return shipped
    names = shipped_names(folder)
    stem = path.name[:-5] if path.name.endswith(".toml") else path.name
    close = difflib.get_close_matches(stem, names, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    listing = f"shipped descriptors: {', '.join(names)}" if names else f"no descriptors in {folder}"
    raise DescriptorError(f"{text}: no such device descriptor (a path, or a name from devices/); {hint}{listing}")


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


def load_descriptor(path: str | Path) -> DeviceDescriptor:
    """Parse and validate a descriptor; every problem names the file and the field."""
    path = Path(path)
    data = read_toml(path, DescriptorError, "no such device descriptor")
    where = str(path)
    _known_keys(data, ("schema", "device", "figures", "binary", "mig"), where, "")
    if data.get("schema") != SCHEMA:
        raise DescriptorError(f"{where}: field 'schema' must be {SCHEMA!r}, got {data.get('schema')!r}")
    device = _table(data, "device", where)
    _known_keys(device, ("kind", "vendor", "model", "match", "cores"), where, "device.")
    kind = _text(device, "kind", where, "device")
    if kind not in KINDS:
        raise DescriptorError(f"{where}: field 'device.kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    match = device.get("match", [])
    if not isinstance(match, list) or not all(isinstance(m, str) and m for m in match):
        raise DescriptorError(f"{where}: field 'device.match' must be a list of non-empty strings")
    cores = device.get("cores")
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or not 1 <= cores <= 1 << 20):
        raise DescriptorError(f"{where}: field 'device.cores' must be a whole number of cores >= 1, got {cores!r}")
    figures_table = _table(data, "figures", where)
    _known_keys(figures_table, FIGURES + OPTIONAL_FIGURES, where, "figures.")
    figures = {}
    for name in FIGURES + tuple(n for n in OPTIONAL_FIGURES if n in figures_table):
        value = figures_table.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DescriptorError(f"{where}: field 'figures.{name}' is missing or not a number")
        number = finite_number(value)
        if number is None:  # TOML allows nan, inf and integers beyond the float range
            raise DescriptorError(f"{where}: field 'figures.{name}' must be a finite number >= 0, got {value}")
        figures[name] = number
    if figures["peak_w"] < figures["idle_w"]:
        raise DescriptorError(f"{where}: field 'figures.peak_w' ({figures['peak_w']}) is below "
                              f"idle_w ({figures['idle_w']})")
    binary = _binary(data["binary"], path) if "binary" in data else None
    gpu_sms, mig = _mig(data["mig"], where, kind) if "mig" in data else (None, ())
    return DeviceDescriptor(path, kind, _text(device, "vendor", where, "device"),
                            _text(device, "model", where, "device"), tuple(match), figures, binary, cores,
                            gpu_sms, mig)


def _count(table: dict, name: str, where: str, prefix: str, most: int) -> int:
    value = table.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise DescriptorError(f"{where}: field '{prefix}{name}' must be a whole number from 1 to {most}, "
                              f"got {value!r}")
    return value


def _mig(table: object, where: str, kind: str) -> tuple[int, tuple[MigProfile, ...]]:
    """The [mig] table: the GPU's SMs and its MIG profiles, each checked against them."""
    if not isinstance(table, dict):
        raise DescriptorError(f"{where}: field 'mig' must be a table")
    if kind != DeviceKind.GPU:
        raise DescriptorError(f"{where}: a [mig] table describes a GPU's instances; this descriptor's kind is {kind}")
    _known_keys(table, ("gpu_sms", "profiles"), where, "mig.")
    gpu_sms = _count(table, "gpu_sms", where, "mig.", 1 << 16)
    entries = table.get("profiles")
    if not isinstance(entries, list) or not entries:
        raise DescriptorError(f"{where}: field 'mig.profiles' must list the GPU's MIG profiles")
    profiles = []
    for i, entry in enumerate(entries):
        prefix = f"mig.profiles[{i}]."
        if not isinstance(entry, dict):
            raise DescriptorError(f"{where}: field 'mig.profiles[{i}]' must be a table")
        _known_keys(entry, ("name", "sms", "memory_eighths", "instances"), where, prefix)
        name = entry.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"\d+g\.\d+gb", name):
            raise DescriptorError(f"{where}: field '{prefix}name' must be a MIG profile name like 1g.10gb, "
                                  f"got {name!r}")
        profiles.append(MigProfile(name, _count(entry, "sms", where, prefix, gpu_sms),
                                   _count(entry, "memory_eighths", where, prefix, 8),
                                   _count(entry, "instances", where, prefix, 7)))
    if len({p.name for p in profiles}) < len(profiles):
        raise DescriptorError(f"{where}: field 'mig.profiles' names one profile twice")
    return gpu_sms, tuple(profiles)


def _binary(table: object, path: Path) -> BinarySpec:
    where = str(path)
    if not isinstance(table, dict):
        raise DescriptorError(f"{where}: field 'binary' must be a table")
    _known_keys(table, ("kernels", "sha256", "path", "target"), where, "binary.")
    kernels = table.get("kernels")
    if not isinstance(kernels, list) or not kernels:
        raise DescriptorError(f"{where}: field 'binary.kernels' must list the kernels the binary implements")
    unknown = [k for k in kernels if k not in DEVICE_KERNELS]
    if unknown:
        raise DescriptorError(f"{where}: field 'binary.kernels' names unknown kernel(s) {unknown}; "
                              f"device kernels are {', '.join(DEVICE_KERNELS)}")
    sha = _text(table, "sha256", where, "binary")
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha.lower()):
        raise DescriptorError(f"{where}: field 'binary.sha256' must be 64 hex digits")
    binary = _text(table, "path", where, "binary")
    if "\x00" in binary:  # TOML allows "\u0000"; no file system does
        raise DescriptorError(f"{where}: field 'binary.path' must be a file path, got {binary!r}")
    target = table.get("target", "")
    if not isinstance(target, str):
        raise DescriptorError(f"{where}: field 'binary.target' must be a string (part of the device name the "
                              f"binary was built for), got {target!r}")
    return BinarySpec((path.parent / binary).resolve(), sha.lower(), target, tuple(kernels))


def toml_string(text: str) -> str:
    """text as a TOML basic string: quotes, backslashes and control characters escaped, so that a descriptor
    written from any loaded one (device names come from drivers, vendors from users) loads back the same."""
    escaped = (f"\\u{ord(c):04x}" if c < " " or c == "\x7f" else "\\" + c if c in '"\\' else c for c in text)
    return '"' + "".join(escaped) + '"'


def _known_keys(table: dict, known: tuple[str, ...], where: str, prefix: str) -> None:
    """A misspelt key would otherwise be ignored (a `[binry]` table: a board descriptor without its binary)."""
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean '{prefix}{close[0]}'?" if close else f"; known: {', '.join(known)}"
            raise DescriptorError(f"{where}: unknown field '{prefix}{key}'{hint}")


def _table(data: dict, name: str, where: str) -> dict:
    value = data.get(name)
    if not isinstance(value, dict):
        raise DescriptorError(f"{where}: table [{name}] is missing")
    return value


def _text(table: dict, name: str, where: str, prefix: str) -> str:
    value = table.get(name)
    if not isinstance(value, str) or not value:
        raise DescriptorError(f"{where}: field '{prefix}.{name}' is missing or not a non-empty string")
    return value
