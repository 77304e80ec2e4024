"""The algorithm registry: one `Algorithm` entry (pearl/algos/base.py) per algorithm, and the one place an
algorithm name is looked up.

Every stage asks `algorithm(name)` for what it needs (config class, network shapes, policy network, roofline
work, action space, kernel factories) instead of comparing names, so an unknown name fails here, loudly, with
the known names and the nearest one; nothing is ever built as some other algorithm by default. Adding an
algorithm is one entry in BUILTIN plus the algorithm's own modules (docs/ARCHITECTURE.md lists them).
"""

from __future__ import annotations

import difflib

from pearl.algos.base import Algorithm
from pearl.algos.ddpg import DDPG
from pearl.algos.dqn import DQN
from pearl.algos.sac import SAC
from pearl.algos.td3 import TD3
from pearl.errors import ConfigError

#: pearl's algorithms, in the order the CLI lists them and `pearl profile` measures them.
BUILTIN: tuple[Algorithm, ...] = (DQN, DDPG, TD3, SAC)

_REGISTRY: dict[str, Algorithm] = {}


def register(entry: Algorithm) -> Algorithm:
    """Add an entry (ValueError for a name already taken). Built-in entries are registered on import; a test
    registers its own and `unregister`s it when done. An entry registered at run time exists in this process
    only: the local and Ray launchers' actor processes import pearl afresh and see BUILTIN, so such an entry
    trains with the sequential launcher alone."""
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
    known = list(_REGISTRY)
    close = difflib.get_close_matches(str(name).strip().lower(), known, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise ConfigError(f"unknown algorithm {name!r}{hint}; pearl knows: {', '.join(known)}")


for _entry in BUILTIN:
    register(_entry)
