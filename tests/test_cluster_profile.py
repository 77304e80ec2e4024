"""Cluster profiles: `pearl profile merge` of host profiles with a network descriptor, host profiles read as
clusters of one node, the shipped network descriptors, and every bad input as one `error:` line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_support import run_cli
from pearl.profile.cluster import load_cluster, parse_node_args
from pearl.profile.format import ProfileError, load_profile
from pearl.profile.network import NETWORKS_DIR, NetworkError, load_network

REFERENCE = Path(__file__).resolve().parent.parent / "profiles" / "reference.json"
NETWORKS = sorted(NETWORKS_DIR.glob("*.toml"))


def assert_user_error(code: int, err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def merge(capsys, tmp_path: Path, *nodes: str, network: str = "40gbe") -> Path:
    out = tmp_path / "cluster.json"
    code, _, err = run_cli(capsys, "profile", "merge", *nodes, "--network", network, "--out", str(out))
    assert code == 0, err
    return out


def test_shipped_networks_load_with_a_source_for_every_figure() -> None:
    names = {p.stem for p in NETWORKS}
    assert {"1gbe", "10gbe", "40gbe", "100gbe", "infiniband-hdr"} <= names
    for path in NETWORKS:
        net = load_network(path)
        assert net.bandwidth_bytes_per_s > 0 and net.latency_s > 0
        for line in path.read_text().splitlines():
            if re.match(r"\s*(bandwidth_bytes_per_s|latency_s)\s*=", line):
                assert "#" in line and len(line.split("#", 1)[1].strip()) > 10, f"{path}: no source: {line}"
    speeds = [load_network(NETWORKS_DIR / f"{n}.toml").bandwidth_bytes_per_s for n in ("1gbe", "10gbe", "40gbe")]
    assert speeds[0] < speeds[1] < speeds[2] and speeds[2] == pytest.approx(4 * speeds[1], rel=1e-3)


def test_merge_two_nodes_from_one_profile(capsys, tmp_path: Path) -> None:
    path = merge(capsys, tmp_path, f"a={REFERENCE}", f"b={REFERENCE}")
    cluster = load_cluster(path)
    net = load_network(NETWORKS_DIR / "40gbe.toml")
    assert cluster.names == ["a", "b"]
    host = load_profile(REFERENCE)
    for node in cluster.nodes:  # each node carries the whole host profile
        assert node.profile.to_dict() == host.to_dict() and node.origin == str(REFERENCE)
    (link,) = cluster.links
    assert link.joins("b", "a") and link.source == "modelled" and link.network.endswith("40gbe.toml")
    assert (link.latency_s, link.bandwidth_bytes_per_s) == (net.latency_s, net.bandwidth_bytes_per_s)
    assert link.seconds(1e6) == pytest.approx(net.latency_s + 1e6 / net.bandwidth_bytes_per_s)
    assert link.call_s == 0.0


def test_a_merge_with_a_transport_call_charges_it_on_every_message(capsys, tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    code, out, err = run_cli(capsys, "profile", "merge", f"a={REFERENCE}", f"b={REFERENCE}", "--network", "1gbe",
                             "--call-s", "4e-4", "--out", str(path))
    assert code == 0, err
    assert "400 µs a call" in out and "note:" not in out
    (link,) = load_cluster(path).links
    net = load_network(NETWORKS_DIR / "1gbe.toml")
    assert link.call_s == 4e-4 and link.latency_s == net.latency_s
    assert link.seconds(1e3) == pytest.approx(4e-4 + net.latency_s + 1e3 / net.bandwidth_bytes_per_s)
    # a cluster file written before the field had it reads as no call
    data = json.loads(path.read_text())
    del data["links"][0]["call_s"]
    path.write_text(json.dumps(data))
    assert load_cluster(path).links[0].call_s == 0.0


def test_three_nodes_are_joined_pairwise(capsys, tmp_path: Path) -> None:
    cluster = load_cluster(merge(capsys, tmp_path, f"a={REFERENCE}", f"b={REFERENCE}", f"c={REFERENCE}",
                                 network="1gbe"))
    assert sorted(tuple(sorted((k.a, k.b))) for k in cluster.links) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert cluster.link("a", "b") is not None and cluster.link("a", "a") is None


def test_a_host_profile_is_a_cluster_of_one_node() -> None:
    cluster = load_cluster(REFERENCE)
    host = load_profile(REFERENCE)
    (node,) = cluster.nodes
    assert cluster.links == [] and node.profile.to_dict() == host.to_dict()
    assert node.name == host.host["node"]


def test_one_node_merge_needs_no_network(capsys, tmp_path: Path) -> None:
    out = tmp_path / "one.json"
    code, _, err = run_cli(capsys, "profile", "merge", f"solo={REFERENCE}", "--out", str(out))
    assert code == 0, err
    assert load_cluster(out).names == ["solo"] and load_cluster(out).links == []


def _bad_network(tmp_path: Path, figures: str) -> str:
    path = tmp_path / "net.toml"
    path.write_text(f'schema = "pearl.network/1"\n[network]\nname = "x"\n[figures]\n{figures}\n')
    return str(path)


@pytest.mark.parametrize(("case", "fragments"), [
    ("twice", ["node 'a' is given twice"]),
    ("version", ["old.json", "'schema'", "pearl.profile/9"]),
    ("missing figure", ["net.toml", "'figures.latency_s' is missing"]),
    ("negative figure", ["net.toml", "'figures.latency_s'", "-1"]),
    ("zero bandwidth", ["net.toml", "'figures.bandwidth_bytes_per_s'"]),
    ("no network", ["--network"]),
    ("cluster as input", ["cluster.json", "'schema'", "cluster profile"]),
    ("no such network", ["nosuchnet", "40gbe"]),
    ("not name=file", ["NAME=FILE"]),
    ("negative call", ["--call-s", "-0.001"]),
    ("call not a number", ["--call-s", "nan"]),
])
def test_bad_merges_are_one_error_line(capsys, tmp_path: Path, case: str, fragments: list[str]) -> None:
    a, b, net = f"a={REFERENCE}", f"b={REFERENCE}", "40gbe"
    if case == "twice":
        b = f"a={REFERENCE}"
    elif case == "version":
        old = tmp_path / "old.json"
        old.write_text(json.dumps({**json.loads(REFERENCE.read_text()), "schema": "pearl.profile/9"}))
        b = f"b={old}"
    elif case == "missing figure":
        net = _bad_network(tmp_path, "bandwidth_bytes_per_s = 1e9")
    elif case == "negative figure":
        net = _bad_network(tmp_path, "bandwidth_bytes_per_s = 1e9\nlatency_s = -1")
    elif case == "zero bandwidth":
        net = _bad_network(tmp_path, "bandwidth_bytes_per_s = 0\nlatency_s = 1e-6")
    elif case == "cluster as input":
        b = f"b={merge(capsys, tmp_path, a, f'b={REFERENCE}')}"
    elif case == "no such network":
        net = "nosuchnet"
    elif case == "not name=file":
        b = str(REFERENCE)
    args = ["profile", "merge", a, b, "--out", str(tmp_path / "out.json")]
    if case.startswith("negative call") or case.startswith("call not"):
        args += ["--call-s", "-0.001" if case == "negative call" else "nan"]
    if case != "no network":
        args += ["--network", net]
    code, _, err = run_cli(capsys, *args)
    assert_user_error(code, err, *fragments)
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(("change", "fragments"), [
    (lambda d: d["links"][0].update(nodes=["a", "z"]), ["links[0].nodes", "no node 'z'"]),
    (lambda d: d["nodes"][1].update(name="a"), ["nodes[1].name", "'a'"]),
    (lambda d: d["links"][0].update(bandwidth_bytes_per_s=-5), ["links[0].bandwidth_bytes_per_s"]),
    (lambda d: d["links"][0].update(source="guessed"), ["links[0].source"]),
    (lambda d: d["links"][0].update(call_s=-1e-4), ["links[0].call_s"]),
    (lambda d: d["links"].append(dict(d["links"][0])), ["'links'", "one link per pair"]),
    (lambda d: d.update(schema="pearl.cluster/7"), ["'schema'", "pearl.cluster/7"]),
    (lambda d: d["nodes"][0]["profile"].update(mode="slow"), ["nodes[0].profile", "'mode'"]),
])
def test_bad_cluster_files_name_the_field(capsys, tmp_path: Path, change, fragments: list[str]) -> None:
    path = merge(capsys, tmp_path, f"a={REFERENCE}", f"b={REFERENCE}")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError) as exc:
        load_cluster(path)
    assert str(path) in str(exc.value)
    for fragment in fragments:
        assert fragment in str(exc.value)
    # the same through a command that reads it: one error line, exit 2
    code, _, err = run_cli(capsys, "plan", "--profile", str(path), "--algo", "dqn", "--env", "CartPole-v1",
                           "--out", str(tmp_path / "plan.json"))
    assert_user_error(code, err, str(path), *fragments)


def test_node_names_are_checked() -> None:
    assert parse_node_args(["a=x.json", "b=x.json"]) == [("a", "x.json"), ("b", "x.json")]
    with pytest.raises(ProfileError, match="'/'"):
        parse_node_args(["a/b=x.json"])
    with pytest.raises(NetworkError):
        load_network(Path("/no/such/net.toml"))


def test_a_cluster_device_id_splits_at_the_first_slash_only():
    """NODE/DEVICE: the node is what comes before the first "/", the rest is the device within the node, so a
    slice id on a node keeps its own "/"; a text without both parts is refused."""
    from pearl.device import NodeDevice
    from pearl.errors import DeviceError

    at = NodeDevice.parse("gpu-node/cuda:0/mps:25")
    assert (at.node, str(at.device), str(at)) == ("gpu-node", "cuda:0/mps:25", "gpu-node/cuda:0/mps:25")
    assert NodeDevice.valid("a/cpu") and not any(NodeDevice.valid(t) for t in ("cpu", "/cpu", "a/", 3))
    for text in ("cpu", "/cpu", "a/"):
        with pytest.raises(DeviceError, match="NODE/DEVICE"):
            NodeDevice.parse(text)
