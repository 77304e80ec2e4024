"""pearl's imports run one way. Every module of pearl/ sits in one layer of the list in docs/ARCHITECTURE.md
("Data flows one way"), which this file reads, so the two cannot drift; a module imports only its own layer and
the layers below, and no import runs in a circle.

The graph is read from the source with `ast`: every import statement, at module level, inside functions and
under `if TYPE_CHECKING:` (a type is a dependency too). `import a.b` and `from a import b` where a.b is a module
import a.b; `from a import name` imports a; relative imports are resolved. Importing a.b also runs the package
a's `__init__`, so it counts as importing a, unless a is the importer's own package (it is loaded already); the
root package `pearl` is every module's own, and its `__init__` imports only the version at module level
(checked below), so importing any module of pearl loads nothing else of it. Imports by name at run time
(`importlib.import_module` in the algorithm registry and the launcher table, the child processes' commands)
are not imports of the source and are not seen here.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pearl"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"

#: Imports against the layer order kept on purpose: (importer, imported module or package) → why.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    # `pearl profile --ray-address` measures a Ray cluster's nodes and links through the runtime's Ray plumbing:
    # `require_ray` (pearl.runtime.ray.session) and the node resource `RoleNodes.resource` names
    # (pearl.runtime.job.NODE_RESOURCE). Moving `require_ray` below the profiler would add a module that
    # imports Ray outside pearl/runtime/ray/, which tests/test_replay_server.py pins to that package and this one.
    ("pearl.profiler.cluster_nodes", "pearl.runtime"): "measures a Ray cluster through the runtime's Ray session",
}

#: Compute libraries only an adapter imports (pynvml is read for power too; see ALLOWED_HARDWARE).
HARDWARE = ("torch", "pyopencl", "pynvml")
#: profiler/power.py reads a GPU's power through NVML: a measurement of the device, not a kernel run on it.
ALLOWED_HARDWARE = {("pearl.profiler.power", "pynvml")}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int


@dataclass(frozen=True)
class Layer:
    name: str
    prefixes: tuple[str, ...]  # a module is in the layer whose longest prefix names it ("pearl" alone: the root)


# ------------------------------------------------------------------------------------------------ the graph
def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package: dotted name → file."""
    return {module_name(p, package.parent): p for p in sorted(package.rglob("*.py"))}


def _ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names, relative levels resolved against the importer."""
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(importer: str, source: str, known: set[str], is_package: bool = False) -> list[Import]:
    """The imports of one module's source among the modules `known`, by the rules of the module docstring."""
    found: list[Import] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            named = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(importer, is_package, node)
            submodules = [f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in known]
            # the package itself is imported when a name is taken from it; for submodules alone it only loads
            named = submodules + ([module] if len(submodules) < len(node.names) else [])
        else:
            continue
        for name in named:
            parts = name.split(".")
            loaded = [".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in known]
            if not loaded:
                continue  # not one of ours
            targets = {loaded[-1]} | {p for p in loaded[:-1] if p not in _ancestors(importer)}
            found += [Import(importer, t, node.lineno) for t in sorted(targets) if t != importer]
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """importer → {imported: the first line importing it}."""
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    known = set(modules)
    for name, path in modules.items():
        for imp in imports_of(name, path.read_text(encoding="utf-8"), known, path.name == "__init__.py"):
            graph[name][imp.imported] = min(imp.line, graph[name].get(imp.imported, imp.line))
    return graph


# ------------------------------------------------------------------------------------------------ the checks
def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Tarjan's components of more than one module (a module importing itself is no import here)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def _cycle_through(start: str, component: set[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """A shortest import path from start back to start inside its component: [start, ..., start]."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, {})):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if w in component and w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"{start} is in no cycle of its component")


def cycles(graph: dict[str, dict[str, int]]) -> list[str]:
    """Each circle of imports, as a path with the lines of its imports."""
    found = []
    for component in _strongly_connected(graph):
        path = _cycle_through(min(component), component, graph)
        steps = " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(path, path[1:]))
        found.append(f"{steps} -> {path[-1]}" + (f"; its circle holds {sorted(component)}"
                                                 if len(component) > len(path) - 1 else ""))
    return found


def _names(prefix: str, module: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_index(module: str, layers: list[Layer]) -> int | None:
    """The layer (0 = the lowest) whose longest prefix names module; the root "pearl" names only itself."""
    best: tuple[int, int] | None = None
    for i, layer in enumerate(layers):
        for prefix in layer.prefixes:
            if module == prefix or ("." in prefix and _names(prefix, module)):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), i)
    return None if best is None else best[1]


def upward_imports(graph: dict[str, dict[str, int]], layers: list[Layer],
                   allowed: dict[tuple[str, str], str] | None = None) -> list[str]:
    """Every import of a layer above the importer's, and every module's package that sits above it (importing the
    module runs the package's `__init__` first), but those `allowed` names: (importer, imported module or
    package)."""
    found = []
    for importer in sorted(graph):
        mine = layer_index(importer, layers)
        edges = dict(graph[importer])
        edges.update({p: 0 for p in _ancestors(importer) if p in graph and "." in p})
        for imported, line in sorted(edges.items()):
            theirs = layer_index(imported, layers)
            if any(i == importer and _names(p, imported) for i, p in allowed or {}):
                continue
            if mine is not None and theirs is not None and theirs > mine:
                how = f"line {line}" if line else "its package"
                found.append(f"{importer} ({layers[mine].name}) imports {imported} ({layers[theirs].name}), {how}")
    return found


def unplaced(modules: set[str], layers: list[Layer]) -> list[str]:
    return sorted(m for m in modules if layer_index(m, layers) is None)


# ------------------------------------------------------------------------------------------------ the layer list
def layers_in(markdown: str) -> list[Layer]:
    """The layer list of ARCHITECTURE.md's "Data flows one way": the fenced block whose first line starts with
    "layers, top first"; each further line is a layer's name then its modules (words starting with `pearl`), or
    more modules of the layer above it, without a name. Returned lowest first."""
    section = markdown.split("## Data flows one way", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    [block] = [b for b in blocks if b.startswith("layers, top first")]
    layers = []
    for line in block.splitlines()[1:]:
        if not line.strip():
            continue
        words = line.split()
        modules = tuple(w for w in words if w == "pearl" or w.startswith("pearl."))
        name = " ".join(w for w in words if w not in modules)
        if name:
            layers.append(Layer(name, modules))
        else:
            layers[-1] = Layer(layers[-1].name, layers[-1].prefixes + modules)
    return layers[::-1]


def documented_layers() -> list[Layer]:
    return layers_in(ARCHITECTURE.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------------ pearl's graph
@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    return import_graph(package_modules())


def test_the_layer_list_is_well_formed() -> None:
    layers = documented_layers()
    assert len(layers) >= 5 and all(layer.name and layer.prefixes for layer in layers), layers
    prefixes = [p for layer in layers for p in layer.prefixes]
    assert len(prefixes) == len(set(prefixes)), "a module or package is listed in two layers"
    modules = package_modules()
    stale = [p for p in prefixes if p not in modules]
    assert not stale, f"ARCHITECTURE.md's layers name modules pearl does not have: {stale}"


def test_every_module_sits_in_a_layer() -> None:
    missing = unplaced(set(package_modules()), documented_layers())
    assert not missing, f"place {missing} in a layer of docs/ARCHITECTURE.md's 'Data flows one way'"


def test_no_import_runs_in_a_circle(graph) -> None:
    found = cycles(graph)
    assert not found, "imports in a circle:\n" + "\n".join(found)


def test_no_module_imports_a_layer_above_its_own(graph) -> None:
    found = upward_imports(graph, documented_layers(), ALLOWED_UPWARD)
    assert not found, "imports against the layer order of docs/ARCHITECTURE.md:\n" + "\n".join(found)


def test_every_allowed_upward_import_is_still_made(graph) -> None:
    # an exception nothing needs any more is dropped, so it cannot hide a new upward import later
    layers = documented_layers()
    for importer, imported in ALLOWED_UPWARD:
        assert any(_names(imported, m) for m in graph[importer]), \
            f"{importer} no longer imports {imported}: drop it from ALLOWED_UPWARD"
        assert layer_index(imported, layers) > layer_index(importer, layers), \
            f"{importer} importing {imported} is no longer upward: drop it from ALLOWED_UPWARD"


def test_only_adapters_import_compute_libraries() -> None:
    found = []
    for name, path in package_modules().items():
        if name == "pearl.adapters" or name.startswith("pearl.adapters."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                roots = [node.module.split(".")[0]]
            else:
                continue
            found += [f"{name} imports {r} (line {node.lineno})" for r in roots
                      if r in HARDWARE and (name, r) not in ALLOWED_HARDWARE]
    assert not found, "\n".join(found)


def test_the_package_root_imports_only_the_version_when_loaded() -> None:
    """Every import of a pearl module runs pearl/__init__.py first: at module level it imports the version and
    nothing else of pearl's (the API is loaded on first use, the rest under TYPE_CHECKING)."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    loaded = {imp.imported for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
              for imp in imports_of("pearl", ast.unparse(node), set(package_modules()), is_package=True)}
    assert loaded == {"pearl._version"}


def test_the_lazy_api_names_the_modules_its_type_imports_name() -> None:
    import pearl

    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    [checking] = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    typed = {alias.name: node.module for node in checking.body if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    assert typed == pearl._LAZY
    assert set(pearl.__all__) == {*pearl._LAZY, "__version__"}


LAZY_PROBE = """
import json, sys
import {module}
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


@pytest.mark.parametrize("module", ["pearl", "pearl.device", "pearl.planner", "pearl.costmodel", "pearl.schedule",
                                    "pearl.profile.format"])
def test_importing_a_lower_module_loads_neither_training_nor_the_runtime(module) -> None:
    heavy = ["pearl.training", "pearl.runtime", "gymnasium", "torch", "pyopencl", "ray"]
    out = subprocess.run([sys.executable, "-c", LAZY_PROBE.format(module=module, heavy=heavy)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"import {module} loaded {out.strip()}"


def test_the_public_api_resolves_on_first_use() -> None:
    probe = ("import sys, pearl; assert 'pearl.training' not in sys.modules; "
             "from pearl import DQNConfig, preset; "
             "print(pearl.__version__, pearl.train.__module__, pearl.RunOptions.__name__, pearl.TrainResult.__name__, "
             "pearl.KERNELS is __import__('pearl.kernels').kernels.KERNELS, pearl.PearlError.__module__, "
             "pearl.DDPGConfig.__name__, DQNConfig.__name__, preset is pearl.preset, pearl.algorithm('dqn').name, "
             "'dqn' in pearl.algorithm_names(), sorted(dir(pearl)) == sorted(pearl.__all__))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    from pearl._version import __version__

    assert out.split() == [__version__, "pearl.training", "RunOptions", "TrainResult", "True", "pearl.errors",
                           "DDPGConfig", "DQNConfig", "True", "dqn", "True", "True"]
    missing = subprocess.run([sys.executable, "-c", "import pearl; pearl.no_such_name"], cwd=ROOT,
                             capture_output=True, text=True)
    assert missing.returncode == 1
    assert "AttributeError: module 'pearl' has no attribute 'no_such_name'" in missing.stderr


def test_the_version_is_written_once() -> None:
    """pyproject.toml reads it from pearl/_version.py, and no module of pearl takes it from the package root."""
    from pearl._version import __version__

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject and 'attr = "pearl._version.__version__"' in pyproject
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    assert not [n for n, p in package_modules().items() if "from pearl import __version__" in p.read_text()]


# ------------------------------------------------------------------------------------------------ the checker itself
def test_the_import_reader_follows_each_form_of_import() -> None:
    known = {"pkg", "pkg.a", "pkg.a.b", "pkg.sub", "pkg.sub.x", "pkg.sub.y", "pkg.c"}
    source = ("import pkg.a.b\n"
              "from pkg.sub import x, name\n"
              "from . import y\n"
              "from ..c import thing\n"
              "import numpy\n"
              "def later():\n"
              "    from pkg import c\n")
    got = {(i.imported, i.line) for i in imports_of("pkg.sub.y2", source, known | {"pkg.sub.y2"})}
    # pkg.a's __init__ runs for pkg.a.b; pkg.sub is the importer's own package, so loading it for a submodule is
    # no import, but taking a name from it (line 2) is
    assert got == {("pkg.a.b", 1), ("pkg.a", 1), ("pkg.sub.x", 2), ("pkg.sub", 2), ("pkg.sub.y", 3), ("pkg.c", 4),
                   ("pkg.c", 7)}
    # in a package's __init__, "." is the package itself
    assert {i.imported for i in imports_of("pkg.sub", "from .x import f\n", known, is_package=True)} == {"pkg.sub.x"}


def test_the_checker_finds_a_cycle_and_an_upward_import() -> None:
    graph = {"p.low": {"p.mid": 3}, "p.mid": {"p.high": 5}, "p.high": {"p.low": 7}, "p.leaf": {}}
    [found] = cycles(graph)
    assert found == "p.high (line 7) -> p.low (line 3) -> p.mid (line 5) -> p.high"
    assert cycles({"a": {"b": 1}, "b": {}}) == []

    layers = [Layer("bottom", ("p.low", "p.leaf")), Layer("middle", ("p.mid",)), Layer("top", ("p.high",))]
    assert upward_imports(graph, layers) == ["p.low (bottom) imports p.mid (middle), line 3",
                                            "p.mid (middle) imports p.high (top), line 5"]
    assert upward_imports({"p.high": {"p.low": 1}, "p.low": {}}, layers) == []
    assert upward_imports(graph, layers, {("p.low", "p.mid"): "why"}) == ["p.mid (middle) imports p.high (top), line 5"]
    # a module's package above its own layer is an upward load too
    nested = [Layer("bottom", ("p.pkg.inner",)), Layer("top", ("p.pkg",))]
    assert upward_imports({"p.pkg": {}, "p.pkg.inner": {}}, nested) == [
        "p.pkg.inner (bottom) imports p.pkg (top), its package"]
    assert unplaced({"p.low", "p.other"}, layers) == ["p.other"]


def test_the_layer_list_is_read_top_first_and_longest_prefix_wins() -> None:
    text = ("## Data flows one way\n\n```\nflow a -> b\n```\n\n```\nlayers, top first    modules\n"
            "entry                pearl  pearl.cli\ncore                 pearl.runtime  pearl.runtime.clock\n"
            "base                 pearl.errors\n                     pearl.types\n```\n\n## Next\n")
    layers = layers_in(text)
    assert [(layer.name, layer.prefixes) for layer in layers] == [
        ("base", ("pearl.errors", "pearl.types")), ("core", ("pearl.runtime", "pearl.runtime.clock")),
        ("entry", ("pearl", "pearl.cli"))]
    assert layer_index("pearl.runtime.local", layers) == 1 and layer_index("pearl", layers) == 2
    assert layer_index("pearl.device", layers) is None  # the root names itself only
