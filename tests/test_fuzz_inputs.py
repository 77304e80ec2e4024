"""Fuzzing every file pearl reads and every command's arguments (issue 7: every bad input gets a clear error).

For mutated profiles, plans and device descriptors, and for random argument lists of every command:
- a loader (load_profile, load_plan, load_descriptor) returns, or raises its PearlError naming the file; any
  other exception is a bug in the loader, and what loads can be written and read back;
- a command exits 0 (the input was still valid, and its output is then valid too) or 2 with one `error:`
  line, never with a traceback;
- a failed command changes no file, a successful one writes only complete, valid outputs, and no command
  leaves a `.*.tmp` behind.

No case may start real work (a profile sweep, a training, an OpenCL compile): the argument lists of commands
that would start one end with an argument that is checked before the work starts, placed last so that it
wins over any generated value of the same option.

CI replays the same cases on every run (derandomize). PEARL_FUZZ_SEARCH=1 draws new cases, ten times as
many, to hunt for bugs; `pytest --hypothesis-show-statistics` shows the cases per command and exit status.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from cli_support import run_cli
from pearl.descriptors import KINDS, DescriptorError, load_descriptor
from pearl.kernels import DEVICE_KERNELS
from pearl.planner.plan import PlanFileError, load_plan, save_plan
from pearl.profile.cluster import load_cluster, merge_profiles_into_cluster, save_cluster
from pearl.profile.format import ProfileError, load_profile, save_profile
from pearl.profile.network import NETWORKS_DIR, NetworkError, load_network

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "profiles" / "reference.json"
DESCRIPTORS = sorted((ROOT / "devices").glob("*.toml"))
SEARCH = os.environ.get("PEARL_FUZZ_SEARCH") == "1"


def fuzz(examples: int) -> settings:
    # tmp_path and capsys are shared by a test's examples on purpose: each example rewrites its files itself
    return settings(max_examples=examples * 10 if SEARCH else examples, deadline=None, derandomize=not SEARCH,
                    database=None, print_blob=SEARCH,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.large_base_example])


# ------------------------------------------------------------------------------------------------ mutations
RAW = "\x00raw-literal\x00"  # stands for a literal json.dumps cannot write; replaced in the text
HUGE_LITERAL = "9" * 5000  # more digits than Python turns into an int
NOT_UTF8 = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80", b"\xf8\x88\x80\x80\x80")
# strings that break a writer that does not escape (TOML, JSON) or a reader that splits on them
TRICKY_TEXT = st.sampled_from(['"', "\\", "a\"b\\c", "line\nbreak", "\t", "'", "\x7f", "\u2028", "é", "😀", "[x]",
                               "a = 1", "# not a comment", "whatif:x", "../x", " ", "\x00", "a\x00b"])
OTHER_VALUES = st.one_of(
    st.text(max_size=12), TRICKY_TEXT, st.none(), st.booleans(), st.just([]),
    st.lists(st.integers(-3, 3), min_size=1, max_size=3), st.just({}),
    st.dictionaries(st.text(max_size=4), st.integers(), min_size=1, max_size=2),
    st.integers(-10**6, -1), st.just(0), st.just(-0.0), st.floats(),
    st.sampled_from([math.nan, math.inf, -math.inf, 10**30, 10**400, 2**63, 1e308, 5e-324, RAW]),
)


class Mutant:
    """A damaged file, shown by what was done to it: the bytes of a profile would fill a screen. (Not a
    dataclass: Hypothesis prints a dataclass field by field, bytes included.)"""

    def __init__(self, how: str, data: bytes) -> None:
        self.how, self.data = how, data

    def __repr__(self) -> str:
        return f"Mutant({self.how!r}, {len(self.data)} bytes)"


@st.composite
def byte_mutations(draw: st.DrawFn, data: bytes) -> Mutant:
    """Damage of the kind a disk, an editor or an interrupted copy causes."""
    op = draw(st.sampled_from(["truncate", "flip", "insert", "not-utf8", "empty", "nesting", "bom"]))
    at = draw(st.integers(0, len(data) - 1))
    if op == "truncate":
        return Mutant(f"truncated at byte {at}", data[:at])
    if op == "flip":
        out = bytearray(data)
        flips = [(draw(st.integers(0, len(data) - 1)), draw(st.integers(0, 255)))
                 for _ in range(draw(st.integers(1, 4)))]
        for i, b in flips:
            out[i] = b
        return Mutant(f"bytes set {flips}", bytes(out))
    if op in ("insert", "not-utf8"):
        extra = draw(st.binary(min_size=1, max_size=16) if op == "insert" else st.sampled_from(NOT_UTF8))
        return Mutant(f"{extra!r} inserted at byte {at}", data[:at] + extra + data[at:])
    if op == "empty":
        content = draw(st.sampled_from([b"", b" ", b"\n", b"\x00"]))
        return Mutant(f"only {content!r}", content)
    if op == "nesting":  # deeper than the parser's recursion limit
        content = draw(st.sampled_from([b"[" * 100_000, b'{"a":' * 50_000, b"a = " + b"[" * 100_000]))
        return Mutant(f"nested: {content[:12]!r}...", content)
    return Mutant("a UTF-8 byte order mark first", b"\xef\xbb\xbf" + data)


def key_paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """The path of every value in doc (through objects and lists), the root excluded."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    out = []
    for key, value in items:
        out.append((*prefix, key))
        out += key_paths(value, (*prefix, key))
    return out


def leaves(doc: Any) -> list[Any]:
    if isinstance(doc, dict):
        return [x for v in doc.values() for x in leaves(v)]
    if isinstance(doc, list):
        return [x for v in doc for x in leaves(v)]
    return [doc]


@st.composite
def tree_mutations(draw: st.DrawFn, doc: dict, schemas: list[str], write: Callable[[Any], bytes],
                   gentle: bool = False) -> Mutant:
    """doc with one to three fields deleted, replaced by another type, nudged, or given another field's value,
    or a list entry duplicated; or doc of another top-level type or schema; written by write. Gentle: only
    list entries deleted and values nudged, which often leaves a valid file for the commands to work on."""
    doc = copy.deepcopy(doc)
    kind = "fields" if gentle else draw(st.sampled_from(["fields", "fields", "fields", "top", "schema"]))
    if kind == "top":
        top = draw(st.sampled_from([[], [doc], "pearl", 1, None, True, 2.5]))
        return Mutant(f"top level is {type(top).__name__}", write(top))
    if kind == "schema":
        doc["schema"] = draw(st.sampled_from(schemas) | OTHER_VALUES)
        return Mutant(f"schema = {doc['schema']!r}", write(doc))
    done = []
    for _ in range(draw(st.integers(1, 3))):
        paths = key_paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key, name = path[-1], "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path)
        gentle_op = "delete" if isinstance(key, int) else "nudge"
        op = gentle_op if gentle else draw(st.sampled_from(["delete", "replace", "replace", "swap", "nudge",
                                                            "duplicate"]))
        if op == "delete":
            del parent[key]
            done.append(f"{name} deleted")
        elif op == "replace":
            parent[key] = draw(OTHER_VALUES)
            done.append(f"{name} = {parent[key]!r}")
        elif op == "swap":  # another field's value: often the right type, in the wrong place
            parent[key] = copy.deepcopy(draw(st.sampled_from(leaves(doc))))
            done.append(f"{name} = {parent[key]!r}")
        elif op == "nudge":  # the same type, another value: files that stay valid reach the commands' logic
            parent[key] = _nudged(draw, parent[key])
            done.append(f"{name} = {parent[key]!r}")
        elif isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
            done.append(f"{name} repeated")
    return Mutant("; ".join(done), write(doc))


def _nudged(draw: st.DrawFn, value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return draw(st.integers(0, max(2 * value, 4)))
    if isinstance(value, float):
        return value * draw(st.sampled_from([0.0, 0.1, 0.5, 0.99, 1.01, 2.0, 100.0]))
    if isinstance(value, str):
        return draw(st.sampled_from([value + "x", value.upper(), value[:-1], "cpu", "opencl:0:0", "quick"])
                    | TRICKY_TEXT.map(lambda t: value + t))
    return value


def json_text(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True, indent=1).replace(json.dumps(RAW), HUGE_LITERAL).encode()


def toml_text(doc: Any) -> bytes:
    """doc as TOML: top-level scalars and arrays, then one [table] per object; nulls are left out (TOML has
    none). A document that is not an object becomes a single key."""
    if not isinstance(doc, dict):
        doc = {"schema": doc}
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in doc.items() if v is not None and not isinstance(v, dict)]
    for name, table in doc.items():
        if isinstance(table, dict):
            lines += ["", f"[{_toml_key(name)}]"]
            lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items() if v is not None]
    return ("\n".join(lines) + "\n").encode()


def _toml_key(key: Any) -> str:
    return json.dumps(str(key), ensure_ascii=False)


def _toml_value(value: Any) -> str:
    if value == RAW:
        return HUGE_LITERAL
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None) + "}"


def mutated(original: bytes, doc: dict, schemas: list[str], write: Callable[[Any], bytes],
            gentle: bool = False) -> st.SearchStrategy[Mutant]:
    some = byte_mutations(original) | tree_mutations(doc, schemas, write)
    return (some | tree_mutations(doc, schemas, write, gentle=True)) if gentle else some


PROFILE_BYTES = REFERENCE.read_bytes()
PROFILE_SCHEMAS = ["pearl.profile/2", "pearl.profile/1.1", "pearl.profile/0", "pearl.profile", "pearl.profile/",
                   "pearl.plan/1", "/1", "", "PEARL.PROFILE/1", "pearl.profile/1 "]
PLAN_SCHEMAS = [s.replace("profile", "plan") for s in PROFILE_SCHEMAS]
DEVICE_SCHEMAS = [s.replace("profile", "device") for s in PROFILE_SCHEMAS]
PROFILE = json.loads(PROFILE_BYTES)


def mutated_profiles(gentle: bool = False) -> st.SearchStrategy[Mutant]:
    return mutated(PROFILE_BYTES, PROFILE, PROFILE_SCHEMAS, json_text, gentle)


def plan_document() -> dict:
    """A plan from the reference profile, marked as planned on another machine: `pearl train` refuses it."""
    from pearl.planner.make import make_plan

    doc = make_plan(REFERENCE, "dqn", "CartPole-v1").to_dict()
    doc["profile"]["cpu"] = "fuzz: a CPU that is not this machine's"
    return json.loads(json.dumps(doc))


PLAN = plan_document()
PLAN_BYTES = json.dumps(PLAN, indent=1).encode()


def mutated_plans() -> st.SearchStrategy[Mutant]:
    return mutated(PLAN_BYTES, PLAN, PLAN_SCHEMAS, json_text)


BOARD = ROOT / "devices" / "amd-alveo-u250.toml"  # a descriptor with a [binary] table
BOARD_DOC = tomllib.loads(BOARD.read_text())


def edited(doc: dict, write: Callable[[Any], bytes], path: tuple, value: Any) -> Mutant:
    """doc with the value at path replaced: the regressions below, each a bug the fuzzing found."""
    doc = copy.deepcopy(doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return Mutant(f"{'.'.join(map(str, path))} = {value!r}", write(doc))


DESCRIPTOR_SOURCES = [(path.read_bytes(), tomllib.loads(path.read_text())) for path in DESCRIPTORS]


def mutated_descriptors(gentle: bool = False) -> st.SearchStrategy[Mutant]:
    return st.sampled_from(DESCRIPTOR_SOURCES).flatmap(
        lambda source: mutated(source[0], source[1], DEVICE_SCHEMAS, toml_text, gentle))


CLUSTER = json.loads(json.dumps(merge_profiles_into_cluster([("a", str(REFERENCE)), ("b", str(REFERENCE))],
                                                            NETWORKS_DIR / "40gbe.toml").to_dict()))
CLUSTER_BYTES = json.dumps(CLUSTER, indent=1).encode()
CLUSTER_SCHEMAS = [s.replace("profile", "cluster") for s in PROFILE_SCHEMAS] + ["pearl.profile/1"]
NETWORK_SOURCES = [(path.read_bytes(), tomllib.loads(path.read_text())) for path in sorted(NETWORKS_DIR.glob("*.toml"))]
NETWORK_SCHEMAS = [s.replace("profile", "network") for s in PROFILE_SCHEMAS]


def mutated_clusters() -> st.SearchStrategy[Mutant]:
    return mutated(CLUSTER_BYTES, CLUSTER, CLUSTER_SCHEMAS, json_text)


def mutated_networks() -> st.SearchStrategy[Mutant]:
    return st.sampled_from(NETWORK_SOURCES).flatmap(
        lambda source: mutated(source[0], source[1], NETWORK_SCHEMAS, toml_text))


# ------------------------------------------------------------------------------------------------- checks
def loaded_or_refused(load: Callable[[Path], Any], path: Path, error: type[Exception]) -> Any | None:
    """What load returns, or None when it raised `error` naming the file. Any other exception propagates:
    that is the bug this file hunts."""
    try:
        return load(path)
    except error as exc:
        assert str(path) in str(exc), f"the message does not name the file: {exc}"
        return None


def same_json(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


@contextlib.contextmanager
def fresh_dir() -> Iterator[Path]:
    """A new empty working folder (commands write their default outputs to the working folder), holding a
    folder `adir` and a plain file `blocker` to aim paths at."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="pearl-fuzz-") as tmp:
        root = Path(tmp)
        (root / "adir").mkdir()
        (root / "blocker").write_text("not a folder, not JSON\n")
        os.chdir(root)
        try:
            yield root
        finally:
            os.chdir(old)


def run_in(root: Path, capsys, command: str, args: list[str]) -> tuple[int, str, str, dict[Path, bytes]]:
    """Run `pearl ARGS` in root; the files it created or changed come back with the status and output."""
    before = files(root)
    code, out, err = run_cli(capsys, *args)
    after = files(root)
    changed = {p: data for p, data in after.items() if before.get(p) != data}
    event(f"{command}: exit {code}{' (help or version)' if code == 0 and is_help(out) else ''}")
    assert "Traceback" not in out + err, err
    assert not list(root.rglob(".*.tmp")), f"`pearl {' '.join(args)}` left a temporary file"
    if code == 2:
        # exactly one line, `error: ...` (click's multi-line usage messages are joined by the CLI)
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert not changed, f"`pearl {' '.join(args)}` failed but wrote {sorted(changed)}"
    else:
        assert code == 0, (code, out, err)
    return code, out, err, changed


def is_help(out: str) -> bool:
    return "Usage:" in out or out.startswith("pearl, version")


# ----------------------------------------------------------------------------------------- loaders direct
@fuzz(800)
@given(file=mutated_profiles())
@example(file=Mutant("a 5000-digit number", b'{"schema": ' + HUGE_LITERAL.encode() + b"}"))
@example(file=Mutant("deep nesting", b"[" * 100_000))
@example(file=edited(PROFILE, json_text, ("kernels", 0, "source"), []))  # was TypeError: unhashable
@example(file=edited(PROFILE, json_text, ("transfers", 0, "latency_s"), 10**400))  # was OverflowError
def test_profile_loader(tmp_path: Path, file: Mutant) -> None:
    path = tmp_path / "profile.json"
    path.write_bytes(file.data)
    profile = loaded_or_refused(load_profile, path, ProfileError)
    event(f"profile loader: {'loaded' if profile else 'refused'}")
    if profile is not None:  # what loads writes back whole and reads back the same
        again = load_profile(save_profile(profile, tmp_path / "again.json"))
        assert same_json(again.to_dict(), profile.to_dict())


@fuzz(300)
@given(file=mutated_clusters())
def test_cluster_loader(tmp_path: Path, file: Mutant) -> None:
    path = tmp_path / "cluster.json"
    path.write_bytes(file.data)
    cluster = loaded_or_refused(load_cluster, path, ProfileError)
    event(f"cluster loader: {'loaded' if cluster else 'refused'}")
    if cluster is not None:  # every link joins two nodes of the cluster; what loads writes back the same
        assert len(set(cluster.names)) == len(cluster.names) >= 1
        assert all({k.a, k.b} <= set(cluster.names) and k.a != k.b for k in cluster.links)
        again = load_cluster(save_cluster(cluster, tmp_path / "again.json"))
        assert same_json(again.to_dict(), cluster.to_dict())


@fuzz(300)
@given(file=mutated_networks())
def test_network_loader(tmp_path: Path, file: Mutant) -> None:
    path = tmp_path / "net.toml"
    path.write_bytes(file.data)
    network = loaded_or_refused(load_network, path, NetworkError)
    event(f"network loader: {'loaded' if network else 'refused'}")
    if network is not None:
        assert network.bandwidth_bytes_per_s > 0 and math.isfinite(network.bandwidth_bytes_per_s)
        assert network.latency_s >= 0 and math.isfinite(network.latency_s) and network.name


@fuzz(800)
@given(file=mutated_plans())
@example(file=edited(PLAN, json_text, ("kernels",), None))  # was TypeError
@example(file=edited(PLAN, json_text, ("solver",), "0"))  # was ValueError
@example(file=edited(PLAN, json_text, ("kernels", "learn"), "fast"))  # loaded: `pearl train` then failed
def test_plan_loader(tmp_path: Path, file: Mutant) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(file.data)
    plan = loaded_or_refused(load_plan, path, PlanFileError)
    event(f"plan loader: {'loaded' if plan else 'refused'}")
    if plan is not None:  # what `pearl train` reads from a plan is there, of the right type
        assert plan.actors >= 1 and plan.envs_per_actor >= 1 and set(plan.kernels) <= {*plan.mapping, "weight_sync"}
        assert all(isinstance(v, float) and math.isfinite(v) for v in plan.kernels.values())
        assert all(math.isfinite(plan.predicted[k]) for k in ("env_steps_per_s", "updates_per_s", "period_s"))
        again = load_plan(save_plan(plan, tmp_path / "again.json"))
        assert same_json(again.to_dict(), plan.to_dict())


@fuzz(800)
@given(file=mutated_descriptors())
@example(file=Mutant("a 5000-digit number", b"schema = " + HUGE_LITERAL.encode()))
@example(file=Mutant("deep nesting", b"schema = " + b"[" * 100_000))
@example(file=edited(BOARD_DOC, toml_text, ("binary", "path"), "a\x00b"))  # was ValueError: embedded null byte
@example(file=edited(BOARD_DOC, toml_text, ("binary", "target"), [1]))  # was loaded as the string "[1]"
@example(file=edited(BOARD_DOC, toml_text, ("figures", "peak_w"), math.nan))  # was loaded
def test_descriptor_loader(tmp_path: Path, file: Mutant) -> None:
    path = tmp_path / "device.toml"
    path.write_bytes(file.data)
    descriptor = loaded_or_refused(load_descriptor, path, DescriptorError)
    event(f"descriptor loader: {'loaded' if descriptor else 'refused'}")
    if descriptor is not None:
        assert descriptor.kind in KINDS and descriptor.vendor and descriptor.model
        assert all(isinstance(m, str) and m for m in descriptor.match)
        assert all(math.isfinite(v) and v >= 0 for v in descriptor.figures.values())
        if descriptor.binary is not None:
            assert set(descriptor.binary.kernels) <= set(DEVICE_KERNELS) and len(descriptor.binary.sha256) == 64
            assert isinstance(descriptor.binary.target, str)


@fuzz(200)
@given(file=mutated_descriptors(gentle=True))
@example(file=edited(BOARD_DOC, toml_text, ("device", "vendor"), 'a "quoted" \\ name'))  # was written unescaped
def test_build_binary_writes_a_descriptor_that_loads(tmp_path: Path, file: Mutant) -> None:
    """Whatever descriptor loads, the descriptor `pearl build-binary` writes from it loads too."""
    pytest.importorskip("pyopencl")
    from pearl.adapters.opencl.binary import descriptor_text

    path = tmp_path / "device.toml"
    path.write_bytes(file.data)
    base = loaded_or_refused(load_descriptor, path, DescriptorError)
    event(f"descriptor loader: {'loaded' if base else 'refused'}")
    if base is None:
        return
    binary = tmp_path / "pearl.bin"
    binary.write_bytes(b"a kernel binary")
    written = tmp_path / "pearl.bin.toml"
    written.write_text(descriptor_text(base, binary, 'a "target" device\\ named\nby its driver'))
    again = load_descriptor(written)
    assert (again.kind, again.vendor, again.model, again.match, again.figures) == \
        (base.kind, base.vendor, base.model, base.match, base.figures)


# ------------------------------------------------------------------------------------ commands read files
@fuzz(250)
@given(file=mutated_profiles(gentle=True), command=st.sampled_from(["plan", "plan", "compare"]),
       work=st.sampled_from([("dqn", "CartPole-v1"), ("ddpg", "Pendulum-v1")]), as_json=st.booleans(),
       objective=st.sampled_from(["throughput", "perf-per-watt"]))
def test_commands_read_mutated_profiles(capsys, file: Mutant, command: str, work: tuple[str, str], as_json: bool,
                                        objective: str) -> None:
    with fresh_dir() as root:
        (root / "fuzzed.json").write_bytes(file.data)
        refused = loaded_or_refused(load_profile, root / "fuzzed.json", ProfileError) is None
        algo, env = work
        if command == "plan":
            args = ["plan", "--profile", "fuzzed.json", "--algo", algo, "--env", env, "--objective", objective,
                    "--out", "out/plan.json"]
        else:  # an unknown env is checked after the profile is read, and before any training
            args = ["compare", "--profile", "fuzzed.json", "--algo", algo, "--env", "NoSuchEnv-v9"]
        code, out, err, changed = run_in(root, capsys, command, args + (["--json"] if as_json else []))
        if refused:
            assert code == 2 and "fuzzed.json" in err, err
        if code == 0:  # a profile that still plans: a complete, valid plan file
            assert command == "plan" and list(changed) == [root / "out" / "plan.json"]
            assert load_plan(root / "out" / "plan.json").algo == algo
            if as_json:
                json.loads(out)


@fuzz(200)
@given(file=mutated_plans())
def test_train_reads_mutated_plans(capsys, file: Mutant) -> None:
    with fresh_dir() as root:
        (root / "fuzzed.json").write_bytes(file.data)
        refused = loaded_or_refused(load_plan, root / "fuzzed.json", PlanFileError) is None
        # the plan is from another machine (plan_document); --max-restarts -1 is a second guard, checked
        # after the plan and before the launcher starts
        code, _, err, _ = run_in(root, capsys, "train", ["train", "--algo", "dqn", "--env", "CartPole-v1", "--plan",
                                                "fuzzed.json", "--runs-dir", "runs", "--max-restarts", "-1"])
        assert code == 2
        if refused:
            assert "fuzzed.json" in err, err


# The descriptor is read before the device is looked up: opencl:9:9 (absent) stops a valid descriptor
# before any compile or training; a second, missing --what-if stops `pearl profile` before it measures.
DESCRIPTOR_COMMANDS = {
    "profile": ["profile", "--quick", "--what-if", "fuzzed.toml", "--what-if", "missing.toml", "--out", "p.json"],
    "build-binary": ["build-binary", "--device", "opencl:9:9", "--descriptor", "fuzzed.toml", "--out", "out.bin"],
    "train": ["train", "--algo", "dqn", "--env", "CartPole-v1", "--device", "opencl:9:9", "--descriptor",
              "fuzzed.toml", "--runs-dir", "runs"],
}


@fuzz(200)
@given(file=mutated_descriptors(), command=st.sampled_from(sorted(DESCRIPTOR_COMMANDS)))
def test_commands_read_mutated_descriptors(capsys, file: Mutant, command: str) -> None:
    pytest.importorskip("pyopencl")
    with fresh_dir() as root:
        (root / "fuzzed.toml").write_bytes(file.data)
        refused = loaded_or_refused(load_descriptor, root / "fuzzed.toml", DescriptorError) is None
        code, _, err, _ = run_in(root, capsys, command, DESCRIPTOR_COMMANDS[command])
        assert code == 2
        if refused:
            assert "fuzzed.toml" in err, err


# ------------------------------------------------------------------------------------ random arguments
# --debug prints tracebacks on purpose; Hypothesis also draws strings it finds in pearl's source
JUNK = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12).filter(
    lambda s: s != "--debug")
INTS = st.sampled_from(["0", "-1", "-5", "1", "3", "abc", "", "1.5", "1e3", "99999999999999999999", " 2"]) | JUNK
FLOATS = st.sampled_from(["0", "-1", "0.5", "nan", "inf", "-inf", "1e999", "abc", "", "2"]) | JUNK
ENVS = st.sampled_from(["CartPole-v1", "Pendulum-v1", "NoSuchEnv-v9", "CartPol-v1", "Acrobot-v1",
                        "MountainCarContinuous-v0", "ALE/Pong-v5", "CarRacing-v3", "", ":", "0:",
                        "phys2d/CartPole-v1", "GymV26Environment-v0", "FrozenLake-v1"]) | JUNK
ALGOS = st.sampled_from(["dqn", "ddpg", "all", "ppo", "", "DQN"]) | JUNK
DEVICES = st.sampled_from(["cpu", "cuda:0", "cuda:99", "opencl:0:0", "opencl:9:9", "opencl:x", "tpu:0", "",
                           "whatif:a100", "cpu:0"]) | JUNK
# Inputs: real files of each kind, files of the wrong kind, and paths that are not files.
INPUTS = st.sampled_from([str(REFERENCE), str(DESCRIPTORS[0]), "plan.json", "missing.json", "adir", "blocker",
                          "blocker/x", "", ".", str(ROOT / "README.md")])
# Outputs stay inside the working folder: no value leaves it (no '/' out of it, no '..' below it).
OUTPUTS = st.sampled_from(["out.json", "new/dir/out.json", "adir", "blocker", "blocker/x.json", "", ".", "..",
                           "-", "runs"]) | JUNK.filter(lambda s: "/" not in s and "\\" not in s)
JUNK_OPTIONS = st.sampled_from(["--nope", "-x", "--Algo", "--steps-", "--", "-", "extra"])

# "base": a valid start that generated options then override, so that lists also reach the checks after
# click's; "last": the arguments that end every list of a command that would otherwise start work.
COMMANDS: dict[str, dict[str, Any]] = {
    "devices": {"options": {}, "flags": ["--json"], "base": [], "last": []},
    "train": {"options": {"--algo": ALGOS, "--env": ENVS, "--device": DEVICES, "--plan": INPUTS,
                          "--descriptor": INPUTS, "--steps": INTS, "--seed": INTS, "--eval-episodes": INTS,
                          "--runs-dir": OUTPUTS, "--threads": INTS, "--actors": INTS, "--envs-per-actor": INTS,
                          "--max-restarts": INTS},
              "flags": ["--sequential", "--no-learn", "--json"], "base": ["--algo", "dqn", "--env", "CartPole-v1"],
              # each is checked before any training starts
              "last": [["--steps", "0"], ["--steps", "-3"], ["--seed", "-1"], ["--threads", "0"],
                       ["--eval-episodes", "-1"], ["--actors", "0"], ["--env", "NoSuchEnv-v9"], ["--algo", "ppo"]]},
    "profile": {"options": {"--out": OUTPUTS, "--algo": ALGOS, "--device": DEVICES, "--what-if": INPUTS},
                "flags": ["--quick", "--json"], "base": ["--quick"],
                # every device and every --what-if descriptor is checked before the first measurement
                "last": [["--what-if", "missing.toml"], ["--device", "tpu:0"], ["--device", "opencl:9:9"]]},
    "plan": {"options": {"--profile": INPUTS, "--algo": ALGOS, "--env": ENVS, "--out": OUTPUTS,
                         "--objective": st.sampled_from(["throughput", "perf-per-watt", "fast", ""])},
             "flags": ["--json"], "base": ["--profile", str(REFERENCE), "--algo", "dqn", "--env", "CartPole-v1"],
             "last": []},  # a plan takes a fraction of a second: valid lists may run
    "compare": {"options": {"--profile": INPUTS, "--algo": ALGOS, "--env": ENVS, "--seconds": FLOATS,
                            "--seed": INTS, "--runs-dir": OUTPUTS},
                "flags": ["--json"], "base": ["--profile", str(REFERENCE), "--algo", "dqn", "--env", "CartPole-v1"],
                # checked before the first training; blocker is a file, so no runs folder can be made in it
                "last": [["--seconds", "0"], ["--seconds", "-1"], ["--seconds", "nan"], ["--seed", "-1"],
                         ["--runs-dir", "blocker/runs"]]},
    "ratio": {"options": {"--profile": INPUTS, "--algo": ALGOS, "--env": ENVS, "--out": OUTPUTS,
                          "--accelerator": INPUTS | st.sampled_from(["nvidia-a100-sxm4-80gb", "nvidia-a100"]),
                          "--lanes": st.sampled_from(["1,2", "0", "", "x", "-1,2", "1,,2", "99999999999999999999"])},
              "flags": ["--json"],
              "base": ["--profile", str(REFERENCE), "--algo", "dqn", "--env", "CartPole-v1", "--accelerator",
                       "nvidia-a100-sxm4-80gb"],
              # checked before the first plan of the sweep
              "last": [["--lanes", "0"], ["--lanes", "1,0"], ["--lanes", "x"], ["--out", "blocker/r.png"]]},
    # checked before the quickstart profiles this machine
    "quickstart": {"options": {"--seed": INTS, "--runs-dir": OUTPUTS}, "flags": ["--reprofile", "--json"], "base": [],
                   "last": [["--seed", "abc"], ["--seed", ""], ["--seed", "1.5"], ["--seed", "-1"]]},
    "build-binary": {"options": {"--device": DEVICES, "--descriptor": INPUTS, "--out": OUTPUTS},
                     "flags": [], "base": ["--device", "opencl:0:0", "--descriptor", str(DESCRIPTORS[0]),
                                           "--out", "out.bin"],
                     # the descriptor is read first, then the device is looked up, before any compile
                     "last": [["--device", "tpu:0"], ["--device", "opencl:9:9"], ["--device", "cpu"]]},
}


@st.composite
def argument_lists(draw: st.DrawFn, command: str) -> list[str]:
    spec = COMMANDS[command]
    options = sorted(spec["options"])
    tokens: list[list[str]] = []
    for _ in range(draw(st.integers(0, 8))):
        what = draw(st.sampled_from(["option"] * 12 + ["flag", "flag", "junk", "junk", "help"]))
        if what == "option" and options:
            name = draw(st.sampled_from(options))
            value = draw(spec["options"][name])
            tokens.append([f"{name}={value}"] if draw(st.booleans()) else [name, value])
        elif what == "flag" and spec["flags"]:
            tokens.append([draw(st.sampled_from(spec["flags"]))])
        elif what == "junk":
            tokens.append([draw(JUNK_OPTIONS | JUNK)])
        elif what == "help" and draw(st.integers(0, 9)) == 0:
            tokens.append([draw(st.sampled_from(["--help", "-h"]))])
    dangling = [draw(st.sampled_from(options))] if options and draw(st.integers(0, 9)) == 0 else []
    before = draw(st.sampled_from([[]] * 38 + [["--version"], ["-h"]]))
    last = draw(st.sampled_from(spec["last"])) if spec["last"] else []
    base = spec["base"] if draw(st.booleans()) else []
    return [*before, command, *base, *(t for token in tokens for t in token), *dangling, *last]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@fuzz(150)
@given(data=st.data())
def test_random_arguments(capsys, command: str, data: st.DataObject) -> None:
    args = data.draw(argument_lists(command), label="args")
    with fresh_dir() as root:
        (root / "plan.json").write_bytes(PLAN_BYTES)
        code, out, _, changed = run_in(root, capsys, command, args)
        if code == 0 and not is_help(out):
            assert command in ("plan", "devices"), f"`pearl {' '.join(args)}` ran: it must have failed first"
            for path in changed:  # a plan run writes its plan, whole, and nothing else
                load_plan(path)
            if "--json" in args:
                json.loads(out)
        if command not in ("plan", "devices"):
            assert not changed
