"""Ray itself: whether it is installed, starting a local instance, joining a cluster, leaving it.

Ray is imported only inside these functions (`require_ray`), so this module, and every module of the Ray
package built on it, imports where Ray is not installed; the missing-Ray error is one line saying how to
install it.

Security: anyone who reaches a Ray cluster's ports runs code as you. Ray 2.60 guards them with a token
(token authentication, on by default for `ray start --head` and a local ``ray.init()``; `connect` asks for it
when a token is at hand, see `use_token_if_available`), which protects only while the token stays secret and
a cluster may turn off; so an instance that pearl starts itself also listens on the loopback address only and
starts no dashboard (`ray start --node-ip-address=127.0.0.1` is not enough: Ray 2.60 still binds every
interface, checked with ``ss -ltn``). Ray's public knob for the node address is the environment variable
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``: off, Ray treats the machine as a one-node cluster and uses 127.0.0.1
as the node's address, and (Ray 2.60, checked with ``ss -ltn``) every server it starts then binds to
loopback. The hidden ``ray.init(_node_ip_address="127.0.0.1")`` is private and, in Ray 2.60, resolved back
to the machine's external address, so it is not used. Ray reads the variable when it is first imported:
`start_local_ray` sets it before importing Ray and refuses to go on (shutting the instance down) when the
node it got is not on loopback, e.g. because Ray was imported earlier in the process.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from pathlib import Path
from types import ModuleType

from pearl.errors import ConfigError

__all__ = ["INSTALL_HINT", "LOOPBACK", "check_address", "check_installed", "connect", "first_line", "require_ray",
           "shutdown", "start_local_ray", "use_token_if_available"]

LOOPBACK = "127.0.0.1"
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_AUTH_MODE_ENV = "RAY_AUTH_MODE"
INSTALL_HINT = 'the Ray launcher needs Ray, which is not installed: pip install "pearl[ray]"'


def require_ray() -> ModuleType:
    """The ``ray`` module, or a ConfigError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


def check_installed() -> None:
    """ConfigError saying how to install Ray when it is missing; Ray is not imported (see the module docstring)."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(INSTALL_HINT)


def start_local_ray(num_cpus: int | None = None, object_store_memory: int | None = None) -> str:
    """Start a Ray instance on this machine only (loopback, no dashboard) and connect to it; its GCS address.

    ``num_cpus`` None sizes it to this machine. ``address="local"`` starts a new instance even when
    ``RAY_ADDRESS`` or a running instance exists, so pearl never joins someone else's cluster by accident.
    """
    os.environ[_LOOPBACK_ENV] = "0"
    ray = require_ray()
    if ray.is_initialized():
        raise ConfigError("Ray is already initialised in this process: call pearl's shutdown() first")
    ray.init(address="local", num_cpus=num_cpus, object_store_memory=object_store_memory, include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    node_ip = ray.util.get_node_ip_address()
    if node_ip != LOOPBACK:
        ray.shutdown()
        raise ConfigError(f"the local Ray instance came up on {node_ip}, not on loopback ({LOOPBACK}), so it was "
                          f"shut down: Ray was imported before pearl started it; set {_LOOPBACK_ENV}=0 in the "
                          "environment or let pearl import Ray")
    return str(ray.get_runtime_context().gcs_address)


def connect(address: str) -> None:
    """Join an existing Ray cluster at ``address`` (``host:port`` of its head, or ``ray://...``)."""
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(f"--ray-address must be a cluster address such as 10.0.0.5:6379, got {address!r}")
    check_installed()  # the install hint first: without Ray no address can help
    check_address(address)
    use_token_if_available()
    ray = require_ray()
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"cannot join the Ray cluster at {address}: {exc}") from None


def use_token_if_available() -> None:
    """Ask for Ray's token authentication when a token is at hand and the mode is unset, as `ray start` does for
    itself: Ray 2.60's `ray start --head` turns it on and keeps the token in ~/.ray/auth_token, and a driver
    without ``RAY_AUTH_MODE=token`` is refused (after 20 s of retries). Set before Ray is imported: Ray reads it
    then."""
    if _AUTH_MODE_ENV in os.environ:
        return
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if os.environ.get("RAY_AUTH_TOKEN") or path.is_file():
        os.environ[_AUTH_MODE_ENV] = "token"


def check_address(address: str, timeout: float = 5.0) -> None:
    """ConfigError unless something accepts a TCP connection at the cluster address ("auto" is Ray's own
    search): Ray itself retries an address where nothing listens for minutes before it gives up."""
    if address == "auto":
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray-address must be host:port (e.g. 10.0.0.5:6379) or ray://host:port, got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(f"cannot join the Ray cluster at {address}: nothing answers there "
                          f"({exc.strerror or exc}); is its head running (`ray start --head`)?") from None


def shutdown() -> None:
    """Disconnect; an instance this process started (`start_local_ray`) stops with every process it ran."""
    ray = require_ray()
    ray.shutdown()


def first_line(exc: BaseException) -> str:
    """The first line of an error's message: what a role's failure reports of the error that ended it."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"
