"""The torch adapter: `cpu` and `cuda:N`, the reference implementation of every device kernel."""

from __future__ import annotations

import functools
import os
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np
import torch

from pearl.adapters.base import ActKernel, Adapter, DeviceClock, DeviceInfo, GroupComm, LearnKernel, ReplayKernels
from pearl.adapters.torch.replay import TorchReplay
from pearl.adapters.slices import inner_device, mig_instances, mps_daemon, open_nvml, slice_devices, slice_env
from pearl.algos.base import OffPolicyConfig
from pearl.algos.params import network_sizes
from pearl.device import HOST, DeviceId, DeviceKind
from pearl.errors import BackendMissing, DeviceError
from pearl.hostinfo import cpu_flags, cpu_lanes, cpu_name, host_memory_bytes
from pearl.kernels import DEVICE_KERNELS, Implementation, Precision
from pearl.types import EnvSpec, Params


class TorchAdapter(Adapter):
    backend = "torch"
    implements = frozenset(DEVICE_KERNELS)

    def __init__(self, device: DeviceId | str, threads: int | None = None) -> None:
        """`device`: cpu or cuda:N (or a slice of it); threads, when given, sets torch's intra-op CPU threads
        (process-wide, as torch keeps it)."""
        parsed = DeviceId.of(device)
        super().__init__(str(parsed))
        self.device = torch.device(_check_device(parsed))
        if threads is not None:
            torch.set_num_threads(threads)

    def make_act(self, config: OffPolicyConfig, spec: EnvSpec, params: Params, seed: int,
                 implementation: Implementation | None = None) -> ActKernel:
        act = self.algo_kernels(config).act(self.device, config, network_sizes(config, spec), params, seed)
        return self.implemented(act, implementation, f"{config.algo}'s act")

    def make_learn(self, config: OffPolicyConfig, spec: EnvSpec, params: Params, seed: int = 0,
                   precision: Precision = Precision.FP32,
                   implementation: Implementation | None = None) -> LearnKernel:
        learn = self.algo_kernels(config).build_learn(self.device, config, network_sizes(config, spec), params,
                                                      seed, Precision.parse(precision), self.device_id)
        return self.implemented(learn, implementation, f"{config.algo}'s learn")

    def make_replay(self, config: OffPolicyConfig, spec: EnvSpec, seed: int) -> ReplayKernels:
        return TorchReplay(config, spec, self.device, self.device_id, seed)

    def from_host(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(x, device=self.device)

    def host_group(self, learners: int, spec: EnvSpec, batch_size: int,
                   start_others: Callable[[int], None], host: str = "127.0.0.1") -> GroupComm:
        from pearl.adapters.torch.learner_group import TorchGroupComm  # torch.distributed only where a group runs

        return TorchGroupComm.host(learners, spec, batch_size, self.device, self.device_id, start_others, host)

    def join_group(self, rank: int, learners: int, port: int, spec: EnvSpec, batch_size: int,
                   host: str = "127.0.0.1") -> GroupComm:
        from pearl.adapters.torch.learner_group import TorchGroupComm

        return TorchGroupComm(rank, learners, port, spec, batch_size, self.device, self.device_id, host=host)

    def time_group(self, sizes: tuple[int, ...], repeats: int) -> list[tuple[int, float]] | None:
        from pearl.adapters.torch.learner_group import time_all_gather

        return time_all_gather(sizes, repeats)  # host memory: CUDA learners' gradients travel through it too

    @contextmanager
    def acting(self) -> Iterator[None]:
        """One intra-op thread while it lasts (torch's count is the process's): a batch-1 layer's sums are split
        across threads, so the 400→300 layer of DDPG's actor gave other bits at 2 threads than at 1 (the 2-core
        Xeon VM)."""
        threads = torch.get_num_threads()
        if threads == 1:
            yield
            return
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def device_clock(self) -> DeviceClock | None:
        return CudaClock(self.device) if self.device.type == "cuda" else None

    def saturating_load(self) -> Callable[[], None] | None:
        """On a GPU, chains of large float32 products (each 2·n³ = 275 GFLOP at n = 4096 keeps every SM busy for
        milliseconds, so the launches between them leave no gap), synchronised after each chain so a window's
        end is the board's; on the host, None (a learn update at the host's threads loads its cores)."""
        if self.device.type != "cuda":
            return None
        n, chain = SATURATING_N, SATURATING_CHAIN
        a = torch.randn(n, n, device=self.device)
        b, out = torch.randn(n, n, device=self.device), torch.empty(n, n, device=self.device)

        def load() -> None:
            for _ in range(chain):
                torch.mm(a, b, out=out)
            torch.cuda.synchronize(self.device)
        return load


def _check_device(parsed: DeviceId) -> str:
    """torch's name of the device (`cuda` is read as `cuda:0`); refuse ids torch cannot run here, saying why."""
    if parsed.is_host:
        return "cpu"
    if parsed.family != "cuda":
        raise DeviceError(f"the torch adapter runs on cpu or cuda:N, not {str(parsed)!r}")
    device_id, index = str(parsed.whole), parsed.index[0]
    if parsed.slice is not None:
        index = _slice_index(parsed)
        device_id = f"cuda:{index}"
    reason = cuda_unavailable_reason()
    if reason:
        raise BackendMissing(f"{device_id} is not available: {reason}; use --device cpu "
                             "(`pearl devices` lists this machine's devices)")
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceError(f"{device_id} does not exist: this machine has {count} CUDA device(s), "
                          f"cuda:0..cuda:{count - 1}")
    return device_id


def _slice_index(device: DeviceId) -> int:
    """The CUDA index a slice is under in this process: 0 for a MIG instance (the process sees only it), the
    GPU's own for an MPS share. DeviceError when the process did not start with the slice's environment
    (CUDA reads it once, when it starts), naming the variables to set."""
    wanted = slice_env(device)
    have = {k: os.environ.get(k) for k in wanted}
    if any(have[k] != v for k, v in wanted.items() if k != "CUDA_MPS_PIPE_DIRECTORY"):
        needed = " ".join(f"{k}={v}" for k, v in wanted.items())
        raise DeviceError(f"{device} is a slice: its process must start with {needed} (the launchers "
                          "start each role's process so; in this process they are not set)")
    return inner_device(device).index[0]


def cuda_unavailable_reason() -> str:
    """Why CUDA cannot be used, or '' when it can."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} was built without CUDA"
    if not torch.cuda.is_available():
        return "no NVIDIA GPU is visible to torch (driver missing or CUDA_VISIBLE_DEVICES empty)"
    return ""


#: the busy-power window's load on a GPU (`TorchAdapter.saturating_load`): products of n × n, `chain` a call
SATURATING_N, SATURATING_CHAIN = 4096, 8

#: The product bf16's speed is judged on, (rows, inner, columns): a batch of 256 through a 400→300 layer, the
#: largest product of DDPG's and TD3's preset critics.
PRECISION_SHAPE = (256, 400, 300)
#: Timed repeats of each type's product, the types taking turns (the fastest repeat counts), each of PRECISION_PRODUCTS
#: products.
PRECISION_REPEATS = 9
PRECISION_PRODUCTS = 4
#: CPU flags of bfloat16 arithmetic units: AVX-512 BF16's dot products and AMX's bf16 tiles.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


class CudaClock(DeviceClock):
    """A GPU's time between two CUDA events on the device's current stream."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.marks = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))

    def start(self) -> None:
        self.marks[0].record(torch.cuda.current_stream(self.device))

    def stop(self) -> None:
        self.marks[1].record(torch.cuda.current_stream(self.device))

    def seconds(self) -> float:
        return self.marks[0].elapsed_time(self.marks[1]) / 1000.0  # elapsed_time is in milliseconds


def precision_verdict(fp32_s: float, bf16_s: float, where: str, why: str = "") -> str:
    """'' when the bfloat16 product (bf16_s seconds) is at least as fast as the float32 one (fp32_s); else the
    reason: bfloat16's speed as a multiple of float32's, where it was timed, and what the hardware lacks (`why`)
    when that is known."""
    if bf16_s <= fp32_s:
        return ""
    reason = f"bf16 products run at {fp32_s / bf16_s:.2g}× float32 on {where}"
    return f"{reason} ({why})" if why else reason


def time_products(device: str, dtypes: tuple[torch.dtype, ...], shape: tuple[int, int, int] = PRECISION_SHAPE,
                  repeats: int = PRECISION_REPEATS) -> dict[torch.dtype, float]:
    """Seconds of one (rows × inner)·(inner × columns) product in each dtype on device, after a warm-up: the
    fastest of `repeats` timed repeats, the types taking turns. Other work on the machine only lengthens a repeat,
    so the fastest is the hardware's speed, and taking turns puts a busy spell on both types, not on one."""
    rows, inner, cols = shape
    gen = torch.Generator().manual_seed(0)
    host = [torch.randn(rows, inner, generator=gen), torch.randn(inner, cols, generator=gen)]
    sync = (lambda: torch.cuda.synchronize(device)) if torch.device(device).type == "cuda" else (lambda: None)
    operands = {}
    for dtype in dtypes:
        a, b = (t.to(device, dtype) for t in host)
        out = torch.empty(rows, cols, dtype=dtype, device=device)
        torch.mm(a, b, out=out)  # the warm-up
        operands[dtype] = a, b, out
    sync()
    fastest = {dtype: float("inf") for dtype in dtypes}
    for _ in range(repeats):
        for dtype, (a, b, out) in operands.items():
            start = time.perf_counter()
            for _ in range(PRECISION_PRODUCTS):
                torch.mm(a, b, out=out)
            sync()
            fastest[dtype] = min(fastest[dtype], (time.perf_counter() - start) / PRECISION_PRODUCTS)
    return fastest


def device_precision_problem(device: DeviceId, precision: Precision) -> str:
    """'' when the torch device computes `precision` in hardware, else why not (`bf16_problem`); the backend
    registry's check (pearl/adapters/torch/backend.py), asked before any adapter is opened."""
    if Precision.parse(precision) is Precision.FP32:
        return ""
    return bf16_problem(_check_device(device))


@functools.cache
def bf16_problem(device: str) -> str:
    """`precision_verdict` of bfloat16 against float32 products on the torch device, timed once per process."""
    times = time_products(device, (torch.float32, torch.bfloat16))
    fp32_s, bf16_s = times[torch.float32], times[torch.bfloat16]
    if torch.device(device).type == "cuda":
        props = torch.cuda.get_device_properties(device)
        where = f"{device} ({props.name}, compute capability {props.major}.{props.minor})"
        why = "no bf16 tensor cores: they need compute capability 8.0 or later" if props.major < 8 else ""
        return precision_verdict(fp32_s, bf16_s, where, why)
    flags = cpu_flags()
    lacking = bool(flags) and not any(f in flags for f in BF16_CPU_FLAGS)
    why = f"no bf16 units: /proc/cpuinfo lists no {' or '.join(BF16_CPU_FLAGS)}" if lacking else ""
    return precision_verdict(fp32_s, bf16_s, "this CPU", why)


PROBE_N = 64


def torch_problem(device: str) -> str:
    """'' when a tiny op runs on the torch device and gives its exact result; else what failed and what to do.
    A GPU that errors on first use (a driver mismatch, a fallen-off-the-bus device, a busy exclusive-mode GPU)
    is then left out instead of failing the first kernel pearl puts there."""
    try:
        x = torch.arange(PROBE_N, dtype=torch.float32, device=device)
        out = (x * 2 + 1).cpu()
        if torch.device(device).type == "cuda":  # an error of the op surfaces at the sync
            torch.cuda.synchronize(device)
    except Exception as exc:  # noqa: BLE001 - whatever the driver raises, the device cannot be used
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"a test op failed on it: {first}; check the driver (`nvidia-smi`) or leave the device out"
    want = torch.arange(PROBE_N, dtype=torch.float32) * 2 + 1
    wrong = int((out != want).sum())
    if wrong:
        return f"a test op computed wrong results ({wrong} of {PROBE_N} values); check the driver or the device"
    return ""


def discover_cpu() -> tuple[list[DeviceInfo], list[tuple[str, str]]]:
    """The host's cores as torch's `cpu` device."""
    return [DeviceInfo(HOST, DeviceKind.CPU, "torch", cpu_name(), cpu_lanes(), host_memory_bytes(),
                       note=f"torch {torch.__version__}")], []


def discover_cuda() -> tuple[list[DeviceInfo], list[tuple[str, str]]]:
    """This machine's CUDA GPUs and their slices, each probed, and (part, reason) for those that are missing."""
    devices: list[DeviceInfo] = []
    reason = cuda_unavailable_reason()
    if reason:
        return devices, [("cuda", reason), ("slices", "MIG instances and MPS shares are slices of a CUDA GPU, "
                                                      "and there is none (see cuda)")]
    missing: list[tuple[str, str]] = []
    nvml, no_nvml = open_nvml()
    mps = mps_daemon()
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gpu = DeviceInfo(f"cuda:{i}", DeviceKind.GPU, "torch", props.name, 1, int(props.total_memory),
                         note=f"CUDA {torch.version.cuda}, compute capability {props.major}.{props.minor}, "
                              f"{props.multi_processor_count} SMs", problem=torch_problem(f"cuda:{i}"))
        devices.append(gpu)
        uuid = getattr(props, "uuid", None)  # NVML's GPU-<uuid>, so the NVML handle is this very GPU
        migs, no_mig = mig_instances(nvml, f"GPU-{uuid}" if uuid else None, i) if nvml else ([], no_nvml)
        devices += slice_devices(gpu, props.multi_processor_count, migs, mps)
        if no_mig:
            missing.append(("mig", f"{gpu.id}: {no_mig}"))
    if mps.reason:
        missing.append(("mps", mps.reason))
    return devices, missing
