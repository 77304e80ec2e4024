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
name already registered is left out, and asking for its name is a ConfigError saying why.
"""

from __future__ import annotations

import difflib
from importlib.metadata import entry_points

from pearl.algos.base import Algorithm
from pearl.algos.ddpg import DDPG
from pearl.algos.dqn import DQN
from pearl.algos.sac import SAC
from pearl.algos.td3 import TD3
from pearl.errors import ConfigError

#: pearl's algorithms, in the order the CLI lists them and `pearl profile` measures them.
BUILTIN: tuple[Algorithm, ...] = (DQN, DDPG, TD3, SAC)

ENTRY_POINT_GROUP = "pearl.algorithms"

_REGISTRY: dict[str, Algorithm] = {}
_BROKEN: dict[str, str] = {}  # plugin name -> why it was left out


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


def algorithm_names() -> tuple[str, ...]:
    """The registered names, in registration order (the CLI's --algo choices)."""
    return tuple(_REGISTRY)


def algorithms() -> tuple[Algorithm, ...]:
    return tuple(_REGISTRY.values())


def algorithm(name: str) -> Algorithm:
    """The entry of `name`; ConfigError naming the known algorithms (and the nearest one) when there is none."""
    found = _REGISTRY.get(name) if isinstance(name, str) else None
    if found is not None:
        return found
    if name in _BROKEN:
        raise ConfigError(f"algorithm {name!r} (entry point group {ENTRY_POINT_GROUP}) was not loaded: "
                          f"{_BROKEN[name]}; fix or uninstall the package that provides it")
    known = list(_REGISTRY)
    close = difflib.get_close_matches(str(name).strip().lower(), known, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise ConfigError(f"unknown algorithm {name!r}{hint}; pearl knows: {', '.join(known)}")


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


for _entry in BUILTIN:
    register(_entry)
load_plugins()
