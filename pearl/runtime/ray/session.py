"""Ray itself: whether it is installed, starting a local instance, joining a cluster, leaving it.

Ray is imported only inside these functions (`require_ray`), so this module, and every module of the Ray
package built on it, imports where Ray is not installed; the missing-Ray error is one line saying how to
install it.

Security: anyone who reaches a Ray cluster's ports runs code as you. Ray 2.60 guards them with a token
(token authentication, on by default for `ray start --head` and a local ``ray.init()``, which writes the token
to ~/.ray/auth_token when none is there), which protects only while the token stays secret and a cluster may
turn off; so an instance that pearl starts itself also listens on the loopback address only and
starts no dashboard (`ray start --node-ip-address=127.0.0.1` is not enough: Ray 2.60 still binds every
interface, checked with ``ss -ltn``). Ray's public knob for the node address is the environment variable
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``: off, Ray treats the machine as a one-node cluster and uses 127.0.0.1
as the node's address, and (Ray 2.60, checked with ``ss -ltn``) every server it starts then binds to
loopback. The hidden ``ray.init(_node_ip_address="127.0.0.1")`` is private and, in Ray 2.60, resolved back
to the machine's external address, so it is not used. Ray reads the variable when it is first imported:
`start_local_ray` sets it before importing Ray and refuses to go on (shutting the instance down) when the
node it got is not on loopback, e.g. because Ray was imported earlier in the process.

Joining (`connect`) uses token authentication exactly when Ray does for an explicit address: when the user's
environment says so (``RAY_AUTH_MODE=token``, the token in ``RAY_AUTH_TOKEN``, the file ``RAY_AUTH_TOKEN_PATH``
names or ~/.ray/auth_token). A token file alone says nothing about the cluster: a local start leaves one behind,
and a driver in token mode joins a cluster without authentication but has every actor it asks for cancelled.
So after joining, `check_cluster` starts one small actor before any role is placed: it tells such an
authentication mismatch, a node that cannot start pearl's actors, and a node whose Ray or Python differs from
the driver's apart, each as one line with its fix.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import platform
import re
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from pearl.errors import ConfigError, PearlError

__all__ = ["INSTALL_HINT", "LOOPBACK", "PROGRESS_S", "check_address", "check_cluster", "check_installed",
           "client_server_failed", "connect", "first_line", "join_refused", "lacking", "node_lacks", "remote_class",
           "require_ray", "shutdown", "start_local_ray", "token_mode", "version_mismatch"]

LOOPBACK = "127.0.0.1"
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_AUTH_MODE_ENV = "RAY_AUTH_MODE"
#: a local start in this process turned token mode on for it (Ray reads the mode once per process, so it stays on)
_LOCAL_TURNED_TOKEN_ON = False
PROGRESS_S = 10.0  # a role that Ray has not started yet is reported this often (`answer`'s `waiting`)
GRPC_TIMEOUT_S = 10.0  # a Ray head's gRPC handshake takes milliseconds; generous for a loaded machine
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
    global _LOCAL_TURNED_TOKEN_ON
    _LOCAL_TURNED_TOKEN_ON = _LOCAL_TURNED_TOKEN_ON or _AUTH_MODE_ENV not in os.environ  # Ray sets it to token
    ray.init(address="local", num_cpus=num_cpus, object_store_memory=object_store_memory, include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    node_ip = ray.util.get_node_ip_address()
    if node_ip != LOOPBACK:
        ray.shutdown()
        raise ConfigError(f"the local Ray instance came up on {node_ip}, not on loopback ({LOOPBACK}), so it was "
                          f"shut down: Ray was imported before pearl started it; set {_LOOPBACK_ENV}=0 in the "
                          "environment or let pearl import Ray")
    return str(ray.get_runtime_context().gcs_address)


@functools.cache
def remote_class(cls: type, **options: Any) -> Any:
    """``ray.remote(**options)(cls)`` (``ray.remote(cls)`` without options), made once per class and options and
    only when a role of that class is first placed: Ray is imported then, not when pearl is."""
    ray = require_ray()
    return ray.remote(**options)(cls) if options else ray.remote(cls)


def connect(address: str) -> None:
    """Join an existing Ray cluster at ``address`` (``host:port`` of its head, or ``ray://...``) with the
    authentication the user's environment asks for (see the module docstring), then `check_cluster`."""
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(f"--ray-address must be a cluster address such as 10.0.0.5:6379, got {address!r}")
    check_installed()  # the install hint first: without Ray no address can help
    check_address(address)
    ray = require_ray()
    with _stderr_kept() as log:  # Ray's C++ client says only there why the cluster refused the driver
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, ValueError, RuntimeError, ray.exceptions.RayError) as exc:
            raise ConfigError(join_refused(address, exc, log.read_text(errors="replace"))) from None
    try:
        check_cluster(address)
    except BaseException:
        ray.shutdown()
        raise


def token_mode() -> bool:
    """Whether this process asks for Ray's token authentication (the user's ``RAY_AUTH_MODE``, as Ray reads it)."""
    return os.environ.get(_AUTH_MODE_ENV, "").strip().lower() == "token"


_TOKEN_WHERE = ("the cluster's token in RAY_AUTH_TOKEN (or in the file RAY_AUTH_TOKEN_PATH names, by default "
                "~/.ray/auth_token; `ray get-auth-token` on the head prints it)")


def join_refused(address: str, exc: BaseException, log: str = "") -> str:
    """One line saying why Ray refused to join the cluster at ``address`` and what fixes it: Ray's version
    check, the cluster's authentication (which Ray's client logs on stderr while it retries), else Ray's own
    first line."""
    text = str(exc)
    if "Version mismatch" in text:
        return version_mismatch(address, text)
    if address.startswith("ray://") and "Initialization failure from server" in text:
        return client_server_failed(address, text)
    if address.startswith("ray://") and "ray client" in text.lower():
        return (f"no Ray Client server answers at {address}: give the port of the head's Ray Client server "
                "(`ray start --head` opens 10001; --ray-client-server-port), or the cluster's GCS address as "
                "host:port without ray://")
    if "no authentication token was found" in text:  # Ray's AuthenticationError before it tries the cluster
        return (f"cannot join the Ray cluster at {address}: {_AUTH_MODE_ENV}=token asks for token authentication "
                f"but no token was found; put {_TOKEN_WHERE}")
    if "Unauthenticated" in log or "InvalidAuthToken" in log or "token" in text.lower():
        if token_mode():
            return (f"the Ray cluster at {address} refused authentication: the token this driver sent is not the "
                    f"cluster's; put {_TOKEN_WHERE}")
        return (f"the Ray cluster at {address} refused authentication: it requires a token; set "
                f"{_AUTH_MODE_ENV}=token and {_TOKEN_WHERE}")
    return f"cannot join the Ray cluster at {address}: {first_line(exc)}"


def client_server_failed(address: str, text: str) -> str:
    """Ray Client's proxy on the head answered but could not start the server that runs this driver there (its
    start-up took longer than the proxy waits on a busy head, or it failed): one line with Ray's reason and the
    fixes."""
    lines = [line.strip() for line in text.split("from server:", 1)[-1].splitlines() if line.strip()]
    last = lines[-1].split(": ", 1)[-1] if lines else "no reason given"  # a traceback's last line: Type: message
    reason = re.split(r"(?<=[!.])\s", last, maxsplit=1)[0]
    return (f"the Ray Client server at {address} answered but could not start this driver's server on the head "
            f"({reason}): its log is ray_client_server_<port>.err in the head's Ray log folder "
            "(/tmp/ray/session_latest/logs); on a busy head try again, or start the head with "
            "RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S above its 30 s, or join with the GCS address host:port")


def version_mismatch(address: str, text: str) -> str:
    """Ray's version-mismatch error (the cluster's Ray and Python, then this process's) as one line with the fix."""
    found = re.findall(r"Ray:\s*(\S+)\s*Python:\s*(\S+)", text)
    if len(found) < 2:
        return f"cannot join the Ray cluster at {address}: {' '.join(text.split())}"
    (ray_there, py_there), (ray_here, py_here) = found[:2]
    return (f"version mismatch: the Ray cluster at {address} runs Ray {ray_there} on Python {py_there}, this driver "
            f"Ray {ray_here} on Python {py_here}; run pearl with Ray {ray_there} on Python {py_there} "
            f"(pip install \"ray=={ray_there}\") or join a cluster of this driver's versions")


class _Probe:
    """The first actor pearl starts on a cluster it joined: its versions, asked from inside a worker there."""

    def versions(self) -> tuple[str, str]:
        import ray

        return str(ray.__version__), platform.python_version()


def check_cluster(address: str, timeout: float = 120.0) -> None:
    """ConfigError in one line, before any role is placed, when the cluster cannot start pearl's actors: every
    one is cancelled (a driver in token mode on a cluster without authentication), the actor's runtime
    environment or pearl's import fails there, no node takes it within ``timeout``, or the worker's Ray or
    Python differs from the driver's."""
    ray = require_ray()
    probe = ray.remote(num_cpus=0, max_restarts=0)(_Probe).remote()
    try:
        there = ray.get(probe.versions.remote(), timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        raise ConfigError(f"the Ray cluster at {address} started no actor of pearl's within {timeout:.0f} s: its nodes "
                          "lack the resources or are busy (`ray status` on the head shows what is pending)") from None
    except ray.exceptions.RuntimeEnvSetupError as exc:
        raise ConfigError(f"the Ray cluster at {address} could not set up the runtime environment of pearl's actors: "
                          f"{first_line(exc)}") from None
    except ray.exceptions.RayActorError as exc:
        raise ConfigError(_probe_died(address, exc)) from None
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if exc.cause is not None else exc
        raise ConfigError(f"pearl's actors fail on the Ray cluster at {address}: {type(cause).__name__}: "
                          f"{first_line(cause)} (is pearl installed on every node, as on the driver?)") from None
    finally:
        ray.kill(probe, no_restart=True)
    here = (str(ray.__version__), platform.python_version())
    if tuple(there) != here:
        raise ConfigError(version_mismatch(address, f"Ray: {there[0]} Python: {there[1]} Ray: {here[0]} "
                                                    f"Python: {here[1]}"))


def _probe_died(address: str, exc: BaseException) -> str:
    why = first_line(exc)
    if isinstance(exc, require_ray().exceptions.ActorDiedError) and token_mode() and _LOCAL_TURNED_TOKEN_ON:
        return (f"the Ray cluster at {address} cancelled pearl's first actor ({why}): a local Ray instance started "
                "earlier in this process turned token authentication on for the whole process (Ray reads the mode "
                "once per process), and a cluster without it cancels every actor such a driver starts; join it "
                "from a new process")
    if isinstance(exc, require_ray().exceptions.ActorDiedError) and token_mode():
        return (f"the Ray cluster at {address} cancelled pearl's first actor ({why}): this driver asks for token "
                f"authentication ({_AUTH_MODE_ENV}=token) and a cluster without it cancels every actor such a driver "
                f"starts; unset {_AUTH_MODE_ENV} (or set {_AUTH_MODE_ENV}=disabled) to join it")
    if "runtime env" in why.lower() or "runtime_env" in why.lower():
        return f"the Ray cluster at {address} could not set up the runtime environment of pearl's actors: {why}"
    return (f"the Ray cluster at {address} could not start pearl's first actor: {why} (the cluster's logs, "
            "`ray logs` on the head, say why)")


@contextlib.contextmanager
def _stderr_kept() -> Iterator[Path]:
    """File descriptor 2 (where Ray's C++ client logs) into a temporary file for the block, which yields its path;
    what was written there goes back to stderr after the block unless the block raised."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryDirectory(prefix="pearl-ray-") as folder:
        path = Path(folder) / "stderr"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.dup2(fd, 2)
        os.close(fd)
        failed = True
        try:
            yield path
            failed = False
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if not failed:
                sys.stderr.write(path.read_text(errors="replace"))


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
    if _speaks_grpc(host, int(port), GRPC_TIMEOUT_S) is False:
        raise ConfigError(f"cannot join the Ray cluster at {address}: something answers there, but not as a Ray "
                          f"head (no gRPC within {GRPC_TIMEOUT_S:.0f} s); give the head's GCS address (port 6379 by "
                          "default, `ray start --head` prints it) or ray://HOST:10001 for its Ray Client server")


def _speaks_grpc(host: str, port: int, timeout: float) -> bool | None:
    """Whether a gRPC connection (HTTP/2, what a Ray head's GCS and Ray Client server speak) comes up at the
    address within ``timeout``; None where grpcio is not installed. Ray itself waits on a port that accepts but
    does not speak gRPC for longer than 10 minutes."""
    if importlib.util.find_spec("grpc") is None:
        return None
    import grpc

    channel = grpc.insecure_channel(f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


def shutdown() -> None:
    """Disconnect; an instance this process started (`start_local_ray`) stops with every process it ran."""
    ray = require_ray()
    ray.shutdown()


def answer(refs: Any, timeout: float | None, late: str, failed: str, died: Callable[[str], Exception],
           waiting: Callable[[list[Any], float], str] | None = None) -> Any:
    """``ray.get`` of a role's answer (a ref, or a list of them): an error the role raised that pearl knows (a
    PearlError, in a call or while the role was created) as itself, or what its node lacks of the driver's
    Python environment (`node_lacks`); past `timeout`, ActorFailed(`late`); any other failure,
    ActorFailed(`failed`: the error's type and first line); the role's death, `died(first line)`. With
    `waiting`, a line on stderr every `PROGRESS_S` while some refs are pending: ``waiting(pending, seconds)``."""
    from pearl.runtime.actors import ActorFailed  # here: joining a cluster need not load the roles (gymnasium)

    ray = require_ray()
    try:
        if waiting is not None:
            timeout = _wait_saying(ray, refs, timeout, waiting)
        return ray.get(refs, timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        raise ActorFailed(late) from None
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if exc.cause is not None else exc
        known = _known_error(cause, exc)
        if known is not None:
            raise known from None
        raise ActorFailed(f"{failed}: {type(cause).__name__}: {first_line(cause)}") from None
    except ray.exceptions.RayActorError as exc:
        task = _creation_error(exc)
        known = None if task is None else _known_error(task.cause, task)
        if known is not None:
            raise known from None
        raise died(first_line(exc)) from None


def _wait_saying(ray: ModuleType, refs: Any, timeout: float | None, waiting: Callable[[list[Any], float], str]
                 ) -> float | None:
    """Wait for `refs` in slices of `PROGRESS_S`, a ``pearl: waiting(...)`` line on stderr after each whole slice
    that left some pending (a role Ray cannot start yet says nothing else); what is left of `timeout`."""
    many = list(refs) if isinstance(refs, list) else [refs]
    start = time.monotonic()
    while True:
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        step = PROGRESS_S if left is None else min(PROGRESS_S, left)
        if step <= 0:
            return 0.0
        _, pending = ray.wait(many, num_returns=len(many), timeout=step)
        if not pending:
            return None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        if step == PROGRESS_S:
            print(f"pearl: {waiting(pending, time.monotonic() - start)}", file=sys.stderr, flush=True)


def _creation_error(exc: BaseException) -> Any:
    """The RayTaskError of a role that died while Ray created it (its arguments could not be unpickled on its
    node, or its ``__init__`` raised); None for any other death. Ray (2.60) builds the ActorDiedError of a
    failed creation from that RayTaskError, its only argument, and keeps it nowhere else."""
    ray = require_ray()
    if not getattr(exc, "actor_init_failed", False) or not exc.args:
        return None
    task = exc.args[0]
    return task if isinstance(task, ray.exceptions.RayTaskError) else None


def _known_error(cause: BaseException | None, task: Any) -> PearlError | None:
    """What a role's error says to the user: what its node lacks (`lacking`), a PearlError as itself; None for
    anything else."""
    lacks = lacking(cause, task)
    if lacks is not None:
        return lacks
    return cause if isinstance(cause, PearlError) else None


def lacking(cause: BaseException | None, task: Any) -> ConfigError | None:
    """An algorithm the node of a role lacks (its registry raised UnknownAlgorithm), or a module it cannot
    import (a role's arguments could not be unpickled there), as `node_lacks`' one line; `task` is the role's
    RayTaskError, which says the node. None for any other error."""
    from pearl.algos.registry import algorithm_of_module
    from pearl.errors import UnknownAlgorithm

    where = f"Ray node {getattr(task, 'ip', None) or '(unknown)'}"
    if isinstance(cause, UnknownAlgorithm) and cause.algo:
        return node_lacks(where, algo=cause.algo, why=f"there: {first_line(cause)}")
    ray = require_ray()
    unpickling = isinstance(cause, ray.exceptions.RaySystemError)  # Ray could not rebuild the role's arguments
    inner = cause.client_exc if unpickling else cause
    if not isinstance(inner, ImportError) or not inner.name:
        return None
    if unpickling or algorithm_of_module(inner.name) is not None:  # else the role's own import: its error as is
        return node_lacks(where, module=inner.name, why=first_line(inner))
    return None


def node_lacks(where: str, why: str, algo: str | None = None, module: str | None = None) -> ConfigError:
    """A role on `where` lacks algorithm `algo` (its registry there does not have it), or cannot import `module`
    (a role's arguments hold objects of that module, e.g. a plugin algorithm's config): one line naming the
    algorithm and what to install there (`pearl.algos.registry.missing_on_node`)."""
    from pearl.algos.registry import algorithm_of_module, missing_on_node

    algo = algo if algo is not None else algorithm_of_module(module or "")
    if algo is not None:
        return ConfigError(missing_on_node(algo, where, why))
    return ConfigError(f"a role on {where} cannot import module {module!r} ({why}), which its arguments need: "
                       "install it there, in the Python environment Ray runs pearl's roles with, as on the driver")


def first_line(exc: BaseException) -> str:
    """The first line of an error's message: what a role's failure reports of the error that ended it."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"
