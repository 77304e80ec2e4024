"""The cluster profile, schema `pearl.cluster/1`: several nodes, each with a host profile (its devices,
lanes, power and kernel figures, `pearl.profile/1`), and the links between them.

    {
      "schema": "pearl.cluster/1", "pearl_version", "created",
      "nodes": [{"name", "from": the file the node's profile was read from (or null), "profile": {pearl.profile/1}}],
      "links": [{"nodes": [A, B], "latency_s", "bandwidth_bytes_per_s", "call_s", "source", "network"}]
    }

- A link joins two nodes in both directions; `latency_s` is one way, `bandwidth_bytes_per_s` per direction,
  `call_s` the transport's own cost per message (a Ray actor call, one way; 0 when absent). A message of n
  bytes costs call_s + latency_s + n / bandwidth_bytes_per_s.
  `source` is "measured" (object transfers timed between the two nodes) or "modelled" (from the network
  descriptor named by `network`, pearl/profile/network.py).
- Every pair of nodes has one link, or none: a pair without a link cannot exchange data (the planner keeps
  every data edge of a plan within the pairs that have one).
- One machine's profile may stand for several nodes (a what-if cluster of identical machines).
- A host profile (`pearl.profile/1`) is a cluster of one node, named by its host's `node` field, with no
  links: `load_cluster` reads both kinds of file, so every host profile stays valid where a cluster is read.

`merge_profiles_into_cluster` is `pearl profile merge NAME=FILE ... --network DESCRIPTOR`. Loading and
merging validate every field and name the file and the field or node that is wrong. This module imports no
hardware library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Any

from pearl._version import __version__
from pearl.fileio import FieldChecker, finite_number, read_json, write_json_atomic
from pearl.profile.format import SCHEMA as HOST_SCHEMA
from pearl.profile.format import SCHEMA_NAME as HOST_SCHEMA_NAME
from pearl.profile.format import SOURCES, Profile, ProfileError, load_profile, parse_profile
from pearl.profile.network import load_network, resolve_network

SCHEMA = "pearl.cluster/1"
SCHEMA_NAME = SCHEMA.split("/")[0]
#: the name of the one node of a host profile whose host has no `node` field
LOCAL = "local"


@dataclass
class Node:
    name: str
    profile: Profile
    origin: str | None = None  # the file the profile was read from


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    latency_s: float
    bandwidth_bytes_per_s: float
    source: str
    network: str | None = None
    #: the transport's software cost per message on top of the network's latency (a Ray actor call, one way);
    #: 0 on a measured link, whose latency was timed through the transport and so holds it already
    call_s: float = 0.0

    def joins(self, a: str, b: str) -> bool:
        return {a, b} == {self.a, self.b}

    @property
    def message_s(self) -> float:
        """What one message costs beyond its bytes: the transport's call and the network's latency."""
        return self.call_s + self.latency_s

    def seconds(self, nbytes: float) -> float:
        """One message of `nbytes` over the link: call + latency + bytes / bandwidth."""
        return self.message_s + nbytes / self.bandwidth_bytes_per_s


@dataclass
class Cluster:
    pearl_version: str
    created: str
    nodes: list[Node]
    links: list[Link] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"the cluster has no node {name!r}; it has {', '.join(self.names)}")

    def link(self, a: str, b: str) -> Link | None:
        return next((link for link in self.links if link.joins(a, b)), None)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "pearl_version": self.pearl_version, "created": self.created,
                "nodes": [{"name": n.name, "from": n.origin, "profile": n.profile.to_dict()} for n in self.nodes],
                "links": [{"nodes": [k.a, k.b], "latency_s": k.latency_s,
                           "bandwidth_bytes_per_s": k.bandwidth_bytes_per_s, "call_s": k.call_s,
                           "source": k.source, "network": k.network} for k in self.links]}


def single_node(profile: Profile, origin: str | None = None) -> Cluster:
    """A host profile as the cluster of one node it stands for."""
    name = profile.host.get("node") if isinstance(profile.host.get("node"), str) and profile.host["node"] else LOCAL
    return Cluster(profile.pearl_version, profile.created, [Node(name, profile, origin)], [])


def save_cluster(cluster: Cluster, path: str | Path) -> Path:
    return write_json_atomic(path, cluster.to_dict())


def load_cluster(path: str | Path) -> Cluster:
    """A cluster profile, or a host profile as a cluster of one node."""
    data = read_json(path, ProfileError, f"no such profile; `pearl profile --out {path}` makes one")
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(schema, str) and schema.split("/")[0] == HOST_SCHEMA_NAME:
        return single_node(parse_profile(data, str(path)), str(path))
    return parse_cluster(data, str(path))


def parse_cluster(data: Any, where: str) -> Cluster:
    check = FieldChecker(where, ProfileError)
    if not isinstance(data, dict):
        check.fail("<top>", "a JSON object")
    schema = data.get("schema")
    if not isinstance(schema, str) or schema.split("/")[0] != SCHEMA_NAME:
        check.fail("schema", f"{SCHEMA!r} (or a host profile's {HOST_SCHEMA!r})", schema)
    if schema != SCHEMA:
        raise ProfileError(f"{where}: field 'schema' is {schema!r}, a version this pearl cannot read "
                           f"(it reads {SCHEMA!r}); merge the nodes' profiles again or upgrade pearl")
    nodes_data = data.get("nodes")
    if not isinstance(nodes_data, list) or not nodes_data:
        check.fail("nodes", "a non-empty list of nodes", nodes_data)
    nodes: list[Node] = []
    for i, n in enumerate(nodes_data):
        if not isinstance(n, dict):
            check.fail(f"nodes[{i}]", "an object")
        name = check.text(n, "name", f"nodes[{i}]")
        if name in {m.name for m in nodes}:
            check.fail(f"nodes[{i}].name", "a name no other node has", name)
        origin = n.get("from")
        if origin is not None and not isinstance(origin, str):
            check.fail(f"nodes[{i}].from", "a string or null", origin)
        nodes.append(Node(name, parse_profile(n.get("profile"), f"{where} (nodes[{i}].profile)"), origin))
    links_data = data.get("links", [])
    if not isinstance(links_data, list):
        check.fail("links", "a list of links", links_data)
    links = [_parse_link(check, link, f"links[{i}]", [n.name for n in nodes]) for i, link in enumerate(links_data)]
    for a, b in combinations(links, 2):
        if a.joins(b.a, b.b):
            check.fail("links", "one link per pair of nodes", f"two between {a.a} and {a.b}")
    return Cluster(check.text(data, "pearl_version"), check.text(data, "created"), nodes, links)


def _parse_link(check: FieldChecker, data: Any, path: str, names: list[str]) -> Link:
    if not isinstance(data, dict):
        check.fail(path, "an object")
    ends = data.get("nodes")
    if not isinstance(ends, list) or len(ends) != 2 or not all(isinstance(e, str) for e in ends):
        check.fail(f"{path}.nodes", "two node names", ends)
    for end in ends:
        if end not in names:
            check.fail(f"{path}.nodes", f"names of nodes of this cluster ({', '.join(names)}); there is no node "
                       f"{end!r}", ends)
    if ends[0] == ends[1]:
        check.fail(f"{path}.nodes", "two different nodes", ends)
    network = data.get("network")
    if network is not None and not isinstance(network, str):
        check.fail(f"{path}.network", "a string or null", network)
    call_s = check.number(data, "call_s", path) if "call_s" in data else 0.0  # absent in files before it
    return Link(ends[0], ends[1], check.number(data, "latency_s", path),
                check.number(data, "bandwidth_bytes_per_s", path, positive=True),
                check.member(data, "source", path, set(SOURCES)), network, call_s)


def parse_node_args(pairs: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """NAME=FILE arguments as (name, file); a malformed one or a name given twice is a ProfileError."""
    out: list[tuple[str, str]] = []
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise ProfileError(f"{pair!r}: a node is NAME=FILE (a node name, then the profile file of it)")
        if "/" in name:
            raise ProfileError(f"{pair!r}: node names may not hold '/' (device ids are NODE/DEVICE)")
        earlier = next((p for n, p in out if n == name), None)
        if earlier is not None:
            raise ProfileError(f"node {name!r} is given twice ({name}={earlier} and {pair}); name each node once")
        out.append((name, path))
    if not out:
        raise ProfileError("name at least one node: NAME=FILE")
    return out


def _shown(path: Path) -> str:
    """A path relative to the working folder when it lies below it (networks/40gbe.toml), else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def merge_profiles_into_cluster(pairs: list[tuple[str, str]], network: str | Path | None,
                                call_s: float = 0.0) -> Cluster:
    """A cluster of the named host profiles, every pair of nodes joined by a link modelled from the network
    descriptor (`network` may be None for one node), each message also paying `call_s`, the transport's own
    cost (a Ray actor call, measured by benchmarks/ray_calls.py). Each file must be a host profile of the
    version this pearl reads (a ProfileError names the file and field); one file may stand for several nodes."""
    if finite_number(call_s) is None:
        raise ProfileError(f"--call-s must be a finite number of seconds >= 0, got {call_s!r}")
    nodes = []
    for name, path in pairs:
        data = read_json(path, ProfileError, f"no such profile; `pearl profile --out {path}` makes one")
        schema = data.get("schema") if isinstance(data, dict) else None
        if isinstance(schema, str) and schema.split("/")[0] == SCHEMA_NAME:
            raise ProfileError(f"{path}: field 'schema' is {schema!r}, a cluster profile; merge takes the "
                               f"nodes' host profiles ({HOST_SCHEMA!r})")
        nodes.append(Node(name, load_profile(path), str(path)))
    links = []
    if len(nodes) > 1:
        if network is None:
            raise ProfileError("a cluster of several nodes needs --network DESCRIPTOR (e.g. networks/40gbe.toml) "
                               "to model its links")
        net = load_network(resolve_network(network))
        links = [Link(a.name, b.name, net.latency_s, net.bandwidth_bytes_per_s, "modelled", _shown(net.source),
                      float(call_s)) for a, b in combinations(nodes, 2)]
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return Cluster(__version__, created, nodes, links)


def left_out(cluster: Cluster) -> list[str]:
    """One line per device a node's profile recorded as unusable (left out of its measurements), with why: what
    a command planning on the profile warns of."""
    prefix = len(cluster.nodes) > 1
    return [f"{n.name + '/' if prefix else ''}{u.id} ({u.name}) left out: {u.reason}"
            for n in cluster.nodes for u in n.profile.unusable]
