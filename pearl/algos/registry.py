"""The algorithm registry: one `Algorithm` entry (pearl/algos/base.py) per algorithm, and the one place an
algorithm name is looked up.

Every stage asks `algorithm(name)` for what it needs (config class, network shapes, policy network, roofline
work, action space, kernel factories) instead of comparing names, so an unknown name fails here, loudly, with
the known names and the nearest one; nothing is ever built as some other algorithm by default. Adding an
algorithm is one entry in BUILTIN plus the algorithm's own modules (docs/ARCHITECTURE.md lists them).

Another package adds algorithms through the entry-point group `pearl.algorithms`: each entry point, named as
the algorithm, names its `Algorithm` entry (``sac2 = mypkg.algo:SAC2``). They are registered when this module is
imported, after BUILTIN, so every process that imports pearl (the local launcher's actor processes, Ray's
workers) has them. One that fails to load, is no `Algorithm`, is named otherwise than its entry, or takes a
name already registered is left out, and asking for its name is an UnknownAlgorithm (a ConfigError) saying why.
An entry whose declared state does not hold together fails to load (`Algorithm.__post_init__` checks it).

A process has the plugins of its own Python environment: on a Ray cluster every node must have the plugin
installed as the driver has it. Where a role's node lacks it, the role fails to load the algorithm's config
class or to find its name, and the driver reports that as one line (`missing_on_node`, from
pearl/runtime/ray/session.py) naming the algorithm and the package to install there.
"""

from __future__ import annotations

import difflib
from importlib.metadata import entry_points

from pearl._version import __version__
from pearl.algos.base import Algorithm
from pearl.algos.ddpg import DDPG
from pearl.algos.dqn import DQN
from pearl.algos.sac import SAC
from pearl.algos.td3 import TD3
from pearl.errors import UnknownAlgorithm

#: pearl's algorithms, in the order the CLI lists them and `pearl profile` measures them.
BUILTIN: tuple[Algorithm, ...] = (DQN, DDPG, TD3, SAC)

ENTRY_POINT_GROUP = "pearl.algorithms"

_REGISTRY: dict[str, Algorithm] = {}
_BROKEN: dict[str, str] = {}  # plugin name -> why it was left out
_PLUGINS: dict[str, tuple[str, str]] = {}  # plugin name -> (its entry point's value, its distribution as named)


def register(entry: Algorithm) -> Algorithm:
    """Add an entry (ValueError for a name already taken). Built-in entries are registered on import; a test
    registers its own and `unregister`s it when done. An entry registered at run time exists in this process
    only: the local and Ray launchers' actor processes import pearl afresh and see BUILTIN and the installed
    plugins (`pearl.algorithms` entry points), so such an entry trains with the sequential launcher alone; a
    plugin trains on every launcher."""
    if entry.name in _REGISTRY:
        raise ValueError(f"an algorithm named {entry.name!r} is already registered")
    _REGISTRY[entry.name] = entry
    return entry


def unregister(name: str) -> None:
    """Remove a registered entry (KeyError when there is none by that name)."""
    del _REGISTRY[name]
    _PLUGINS.pop(name, None)


def algorithm_names() -> tuple[str, ...]:
    """The registered names, in registration order (the CLI's --algo choices)."""
    return tuple(_REGISTRY)


def algorithms() -> tuple[Algorithm, ...]:
    return tuple(_REGISTRY.values())


def algorithm(name: str) -> Algorithm:
    """The entry of `name`; UnknownAlgorithm (a ConfigError) naming the known algorithms (and the nearest one)
    when there is none."""
    found = _REGISTRY.get(name) if isinstance(name, str) else None
    if found is not None:
        return found
    if name in _BROKEN:
        raise UnknownAlgorithm(f"algorithm {name!r} (entry point group {ENTRY_POINT_GROUP}) was not loaded: "
                               f"{_BROKEN[name]}; fix or uninstall the package that provides it", name)
    known = list(_REGISTRY)
    close = difflib.get_close_matches(str(name).strip().lower(), known, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UnknownAlgorithm(f"unknown algorithm {name!r}{hint}; pearl knows: {', '.join(known)}", str(name))


def broken_plugins() -> tuple[str, ...]:
    """The names of the installed plugins that were left out (`algorithm` says why for each)."""
    return tuple(_BROKEN)


def algorithm_of_module(module: str) -> str | None:
    """The algorithm from outside pearl (a plugin, or an entry registered at run time) whose config class, or
    plugin entry point, is in `module`'s top-level package: what a role that cannot import `module` lacks.
    None when none is."""
    top = module.split(".")[0]
    for name, entry in _REGISTRY.items():
        homes = {entry.config_class.__module__, _PLUGINS.get(name, ("",))[0].split(":")[0]}
        if entry not in BUILTIN and top in {home.split(".")[0] for home in homes}:
            return name
    return None


def missing_on_node(name: str, where: str, why: str) -> str:
    """One line for algorithm `name`, which this process has but `where` (a Ray node) does not (`why`: what
    failed there), saying what to install there."""
    if name in _PLUGINS:
        value, dist = _PLUGINS[name]
        return (f"algorithm {name!r} is not available on {where} ({why}): install {dist} there, in the Python "
                f"environment Ray runs pearl's roles with; a plugin algorithm ({ENTRY_POINT_GROUP} entry point "
                f"{name} = {value}) must be installed on every node, as on the driver")
    if name in _REGISTRY and _REGISTRY[name] not in BUILTIN:
        return (f"algorithm {name!r} was registered at run time in this process only, so {where} does not have it "
                f"({why}): make it a plugin ({ENTRY_POINT_GROUP} entry point) installed on every node, or train it "
                "with the sequential launcher")
    return f"{where} runs a pearl without algorithm {name!r} ({why}): install this driver's pearl ({__version__}) there"


def load_plugins() -> None:
    """Register the `pearl.algorithms` entry points not registered yet (see the module docstring)."""
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in _REGISTRY:
            if _REGISTRY[point.name] not in BUILTIN:
                continue  # loaded already
            _BROKEN[point.name] = f"{point.value} takes the name of pearl's own {point.name}"
            continue
        try:
            entry = point.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break pearl; its name says why
            _BROKEN[point.name] = f"importing {point.value} failed: {type(exc).__name__}: {exc}"
            continue
        if not isinstance(entry, Algorithm) or entry.name != point.name:
            _BROKEN[point.name] = f"{point.value} is not an Algorithm entry named {point.name!r}"
            continue
        register(entry)
        dist = point.dist
        _PLUGINS[point.name] = (point.value, f"{dist.name} {dist.version}" if dist is not None else
                                f"the package that provides {point.value}")


for _entry in BUILTIN:
    register(_entry)
load_plugins()
