"""Network descriptors: TOML files in top-level networks/ describing a network between nodes, which
`pearl profile merge --network` models every link of a cluster profile from.

    schema = "pearl.network/1"
    [network]  name
    [figures]  bandwidth_bytes_per_s (> 0, per direction), latency_s (>= 0, one way)

Every figure carries its public source (or the word "assumption") in a comment, as device descriptors do.
Loading validates every field and names the file and the field that is wrong. This module imports no
hardware library.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pearl.descriptors import devices_dir
from pearl.errors import PearlError
from pearl.fileio import finite_number, read_toml

SCHEMA = "pearl.network/1"
FIGURES = ("bandwidth_bytes_per_s", "latency_s")
#: networks/ in a checkout (beside devices/), else the copy a wheel carries as pearl/_networks (setup.py)
_PACKAGE = Path(__file__).resolve().parent.parent
NETWORKS_DIR = (devices_dir(_PACKAGE).parent / "networks" if devices_dir(_PACKAGE).name == "devices"
                else _PACKAGE / "_networks")


class NetworkError(PearlError):
    """A network descriptor that is missing, not TOML, or has a missing or invalid field."""


@dataclass(frozen=True)
class Network:
    source: Path
    name: str
    bandwidth_bytes_per_s: float
    latency_s: float


def resolve_network(name_or_path: str | Path) -> Path:
    """A descriptor from a path, or the bare name of a shipped one (`40gbe`, with or without `.toml`)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    stem = path.name[:-5] if path.name.endswith(".toml") else path.name
    shipped = NETWORKS_DIR / f"{stem}.toml"
    if "/" not in str(name_or_path) and shipped.is_file():
        return shipped
    names = sorted(p.stem for p in NETWORKS_DIR.glob("*.toml")) if NETWORKS_DIR.is_dir() else []
    raise NetworkError(f"{name_or_path}: no such network descriptor (a path, or one of: {', '.join(names)})")


def load_network(path: str | Path) -> Network:
    """Parse and validate a network descriptor; every problem names the file and the field."""
    path = Path(path)
    where = str(path)
    data = read_toml(path, NetworkError, "no such network descriptor")
    if data.get("schema") != SCHEMA:
        raise NetworkError(f"{where}: field 'schema' must be {SCHEMA!r}, got {data.get('schema')!r}")
    network = data.get("network")
    if not isinstance(network, dict) or not isinstance(network.get("name"), str) or not network["name"]:
        raise NetworkError(f"{where}: field 'network.name' must be a non-empty string")
    figures = data.get("figures")
    if not isinstance(figures, dict):
        raise NetworkError(f"{where}: field 'figures' must be a table with {', '.join(FIGURES)}")
    values = {}
    for name in FIGURES:
        if name not in figures:
            raise NetworkError(f"{where}: field 'figures.{name}' is missing")
        value = finite_number(figures[name], positive=name == "bandwidth_bytes_per_s")
        if value is None or value < 0:
            need = "a finite number > 0" if name == "bandwidth_bytes_per_s" else "a finite number >= 0"
            raise NetworkError(f"{where}: field 'figures.{name}' must be {need}, got {figures[name]!r}")
        values[name] = value
    return Network(path, network["name"], values["bandwidth_bytes_per_s"], values["latency_s"])
