"""OpenCL plumbing shared by every kernel group: find a device by id, get the one program, launch kernels.

All `.cl` files of this package form ONE program, concatenated in `KERNEL_FILES` order, so an FPGA
toolchain compiles the same text offline into one binary (`.aocx`, `.xclbin`) that holds every kernel. Two
ways to get the program:

- from source, for CPU and GPU OpenCL devices (pyopencl caches built programs on disk);
- from a precompiled binary named by a device descriptor, for FPGA boards: the binary's SHA-256 and its
  target device are checked against the descriptor first, and nothing is compiled at run time.

Kernel objects are fetched once per runtime (fetching again warns and is slow in pyopencl). Sources are
OpenCL C 1.2 without extensions: float32, no atomics on floats, no printf. The networks' and learn kernels'
numbers are of type `real` (nn.cl): float in the program every device runs; double in a second program built
from source with -D PEARL_FP64 where the device has cl_khr_fp64 (`CLRuntime.in_float64`), for kernels built from
float64 parameters: tests hold the hand-derived kernels to the autograd reference in it.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from pearl.adapters.opencl.probe import build_advice, build_cause
from pearl.algos.registry import algorithm_names
from pearl.device import DeviceId
from pearl.errors import BackendMissing, DeviceError, PearlError

KERNEL_DIR = Path(__file__).parent
#: The program's parts, in order: later files use functions defined in earlier ones. Between the shared parts
#: and replay comes `<name>.cl` of every registered algorithm that has one, in registry order (dqn, ddpg), so
#: a new algorithm's OpenCL kernels join the program by their file's name alone.
KERNEL_FILES: tuple[str, ...] = ("rng.cl", "nn.cl", "optim.cl",
                                 *(f"{name}.cl" for name in algorithm_names() if (KERNEL_DIR / f"{name}.cl").exists()),
                                 "replay.cl")
BUILD_OPTIONS = ["-cl-std=CL1.2"]
FP64_OPTIONS = ["-D", "PEARL_FP64"]


class ProgramBuildError(PearlError):
    """The OpenCL compiler rejected the program; the message carries its first error, `log` the whole log."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class BinaryMismatch(PearlError):
    """A precompiled binary is missing, or its hash, target device or kernel list disagrees with its descriptor."""


def program_source() -> str:
    """The whole program: every kernel file, each preceded by a #line marker so compiler logs name it."""
    parts = []
    for name in KERNEL_FILES:
        path = KERNEL_DIR / name
        if path.exists():
            parts.append(f'#line 1 "{name}"\n{path.read_text(encoding="utf-8")}')
    return "\n".join(parts)


_SCALARS = {"int": np.int32, "uint": np.uint32, "float": np.float32, "real": None}  # real: the program's type
_KERNEL_DECL = re.compile(r"__kernel\s+void\s+(\w+)\s*\(([^)]*)\)", re.S)


def kernel_signatures(source: str, real: Any = np.float32) -> dict[str, list[Any]]:
    """Scalar argument dtypes of every kernel in source (None for a pointer), in argument order; `real` is the
    program's (float32, or float64 in the PEARL_FP64 program).

    pyopencl packs undeclared scalars through a slow generic path, one scalar at a time; declared, a whole
    argument list packs at once, which matters for `act`, launched every env step.
    """
    signatures = {}
    for name, args in _KERNEL_DECL.findall(source):
        types = []
        for arg in args.split(","):
            words = arg.replace("*", " * ").split()
            if "*" in words:
                types.append(None)
            else:
                scalar = [w for w in words if w in _SCALARS]
                if not scalar:
                    raise ProgramBuildError(f"kernel {name}: cannot tell the type of argument {arg.strip()!r}")
                types.append(_SCALARS[scalar[0]] or real)
        signatures[name] = types
    return signatures


def find_device(device: DeviceId | str) -> cl.Device:
    """The device behind opencl:P:D (a DeviceId, or its text from the Python API or `pearl build-binary`), or a
    DeviceError naming what exists."""
    parsed = DeviceId.of(device)
    if parsed.family != "opencl":
        raise DeviceError(f"OpenCL device ids look like opencl:<platform>:<device>, not {str(parsed)!r}")
    device_id, (p, d) = str(parsed), parsed.index
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:
        raise BackendMissing(f"{device_id}: no OpenCL platform found ({exc}); "
                             "`pip install pocl-binary-distribution` adds a CPU one") from None
    if p >= len(platforms):
        raise DeviceError(f"{device_id}: this machine has {len(platforms)} OpenCL platform(s); "
                          "`pearl devices` lists them")
    devices = platforms[p].get_devices()
    if d >= len(devices):
        raise DeviceError(f"{device_id}: OpenCL platform {p} has {len(devices)} device(s); `pearl devices` lists them")
    return devices[d]


def build_from_source(ctx: cl.Context, source: str | None = None, real: Any = np.float32) -> cl.Program:
    """The program built for ctx's device; `real` float64 builds its double variant (nn.cl)."""
    options = BUILD_OPTIONS + (FP64_OPTIONS if real == np.float64 else [])
    try:
        with warnings.catch_warnings():  # a driver's chatty build log ("Compilation started") is no failure
            warnings.simplefilter("ignore", cl.CompilerWarning)
            return cl.Program(ctx, source if source is not None else program_source()).build(options=options)
    except cl.RuntimeError as exc:  # the message holds the compiler's log: its first error says what is wrong
        log = str(exc)
        raise ProgramBuildError(f"the OpenCL program failed to build: {build_cause(log)}; {build_advice(log)}",
                                log) from None


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def program_binary(program: cl.Program) -> bytes:
    """The device binary of a built program (what the binary path loads back)."""
    return program.get_info(cl.program_info.BINARIES)[0]


def load_binary(ctx: cl.Context, device: cl.Device, path: Path, sha256: str, target: str) -> cl.Program:
    """Load a precompiled program after checking its hash and that it was built for this device."""
    if not path.is_file():
        raise BinaryMismatch(f"the kernel binary {path} does not exist; build it for this board or fix the "
                             "descriptor's binary.path")
    actual = sha256_file(path)
    if actual != sha256:
        raise BinaryMismatch(f"{path} has SHA-256 {actual[:16]}…, its descriptor expects {sha256[:16]}…; "
                             "the file was changed or the descriptor is stale — refusing to load it")
    if target and target not in device.name:
        raise BinaryMismatch(f"{path} was built for {target!r}, but this device is {device.name.strip()!r}")
    try:
        with warnings.catch_warnings():  # a driver's chatty build log is no failure
            warnings.simplefilter("ignore", cl.CompilerWarning)
            return cl.Program(ctx, [device], [path.read_bytes()]).build()
    except cl.Error as exc:
        raise BinaryMismatch(f"the OpenCL runtime refused the binary {path}: {exc}") from None


@dataclass
class CLRuntime:
    """One context, one in-order queue and one program on one device, shared by every kernel group. `real` is
    the program's type for the networks' numbers; `from_binary`, whether the program is a precompiled one."""

    device_id: str
    device: cl.Device
    ctx: cl.Context
    queue: cl.CommandQueue
    program: cl.Program
    real: Any = np.float32
    from_binary: bool = False
    _kernels: dict[str, cl.Kernel] = field(default_factory=dict)
    _fp64: "CLRuntime | None" = None

    @classmethod
    def open(cls, device: DeviceId | str, binary: tuple[Path, str, str] | None = None) -> "CLRuntime":
        """binary = (path, sha256, target) loads a precompiled program instead of building from source."""
        parsed = DeviceId.of(device)
        found = find_device(parsed)
        ctx = cl.Context([found])
        queue = cl.CommandQueue(ctx)
        program = load_binary(ctx, found, *binary) if binary else build_from_source(ctx)
        return cls(str(parsed), found, ctx, queue, program, from_binary=binary is not None)

    def in_float64(self) -> "CLRuntime":
        """This device's context and queue with the double program (`real` = double), built from source on
        first use: buffers pass between the two. ValueError where the device runs a precompiled binary or lacks
        cl_khr_fp64."""
        if self.real == np.float64:
            return self
        if self._fp64 is None:
            if self.from_binary:
                raise ValueError(f"{self.device_id} runs a precompiled float32 binary: float64 kernels build "
                                 "from source only")
            if "cl_khr_fp64" not in self.device.extensions.split():
                raise ValueError(f"{self.device_id} ({self.device.name.strip()}) has no float64 (cl_khr_fp64)")
            program = build_from_source(self.ctx, real=np.float64)
            self._fp64 = CLRuntime(self.device_id, self.device, self.ctx, self.queue, program, np.float64)
        return self._fp64

    def kernel_names(self) -> set[str]:
        return {k.function_name for k in self.program.all_kernels()}

    def kernel(self, name: str) -> cl.Kernel:
        """Each kernel object is fetched once, its scalar argument types declared, and reused."""
        if name not in self._kernels:
            if name not in self.kernel_names():
                raise BinaryMismatch(f"the OpenCL program on {self.device_id} has no kernel {name!r}")
            kernel = getattr(self.program, name)
            types = _signatures(self.real).get(name)
            if types is None or kernel.get_info(cl.kernel_info.NUM_ARGS) != len(types):
                raise BinaryMismatch(f"kernel {name} on {self.device_id} does not match pearl's source "
                                     "(a stale precompiled binary?)")
            kernel.set_scalar_arg_dtypes(types)
            self._kernels[name] = kernel
        return self._kernels[name]

    def launch(self, name: str, global_size: int | tuple[int, ...], *args: Any,
               local_size: tuple[int, ...] | None = None) -> cl.Event:
        """Enqueue kernel `name`; scalars take the kernel's declared types, arrays pass their buffer."""
        kernel = self.kernel(name)
        size = (global_size,) if isinstance(global_size, int) else global_size
        kernel.set_args(*[a.data if isinstance(a, cla.Array) else a for a in args])
        return cl.enqueue_nd_range_kernel(self.queue, kernel, size, local_size)

    def zeros(self, shape: int | tuple[int, ...], dtype: Any = np.float32) -> cla.Array:
        return cla.zeros(self.queue, shape, dtype)

    def reals(self, shape: int | tuple[int, ...]) -> cla.Array:
        """Zeros of the program's `real` type: the networks' buffers."""
        return cla.zeros(self.queue, shape, self.real)

    def to_device(self, x: np.ndarray) -> cla.Array:
        return cla.to_device(self.queue, np.ascontiguousarray(x))

    def finish(self) -> None:
        self.queue.finish()


_SIGNATURE_CACHE: dict[Any, dict[str, list[Any]]] = {}


def _signatures(real: Any = np.float32) -> dict[str, list[Any]]:
    if real not in _SIGNATURE_CACHE:
        _SIGNATURE_CACHE[real] = kernel_signatures(program_source(), real)
    return _SIGNATURE_CACHE[real]
