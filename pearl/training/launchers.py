"""The launcher registry: each launcher's name, the class that runs it, and what it declares it can do."""

from __future__ import annotations

import difflib

from pearl.errors import ConfigError
from pearl.runtime.job import LauncherCapabilities
from pearl.runtime.launcher import SegmentLauncher

# launcher name → "module:class"; each module is imported only when its launcher is named, and none imports
# Ray itself (the Ray launcher's does so inside its functions)
LAUNCHERS = {"local": "pearl.runtime.local:LocalLauncher",
             "sequential": "pearl.runtime.sequential:SequentialLauncher",
             "ray": "pearl.runtime.ray.launcher:RayLauncher"}
LAUNCHER_ALIASES = {"parallel": "local"}  # the local launcher's name before the Ray launcher existed


def launcher_name(name: str) -> str:
    """The launcher's canonical name; ConfigError naming the choices (and the nearest) for an unknown one."""
    name = LAUNCHER_ALIASES.get(name, name)
    if name not in LAUNCHERS:
        close = difflib.get_close_matches(name, list(LAUNCHERS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"unknown launcher {name!r}{hint}; choose one of: local, sequential, ray")
    launcher_class(name).check_available()  # e.g. without Ray: one error line saying how to install it
    return name


def launcher_capabilities(name: str) -> LauncherCapabilities:
    """What the launcher `name` (or an alias) can do, as its class declares it: what pearl asks instead of
    comparing launcher names."""
    return launcher_class(launcher_name(name)).capabilities


def launcher_class(name: str) -> type[SegmentLauncher]:
    import importlib

    module, cls = LAUNCHERS[name].split(":")
    return getattr(importlib.import_module(module), cls)
