"""What-if devices: a device that is not present, costed from its descriptor by the roofline model.

Every entry it adds is labelled `modelled`: the kernels at the batch sizes measured for the real devices
(roofline: launches × launch latency + max(FLOPs / peak FLOP/s, bytes / memory bandwidth)), the host link
from the descriptor's bandwidth and latency, and the descriptor's idle and peak power. A GPU descriptor
becomes a `cuda` device of the torch adapter, an FPGA one an `opencl` device, a CPU one a `cpu` device;
the id is `whatif:<descriptor file stem>`, which the runtime will refuse to run on. A GPU whose descriptor
lists MIG profiles also gets its slices (`slices`): one device per MIG profile and per MPS share, modelled
by the roofline at the slice's share of the SMs and of the memory bandwidth, launch latency unchanged.

Learn is also costed at bf16-mixed where the descriptor states `bf16_peak_flops` and the kind that costs it
computes learn at bf16 (`Backend.precisions`); otherwise the profile records why not, as it does for a
measured device without bf16 units.
"""

from __future__ import annotations

from pearl.algos import algorithm
from pearl.backends import for_what_if
from pearl.descriptors import DeviceDescriptor
from pearl.device import DeviceKind
from pearl.errors import ConfigError
from pearl.kernels import DEVICE_KERNELS, PRIORITIZED_SAMPLE, Precision
from pearl.profile.format import (DeviceEntry, KernelTiming, Power, PrecisionProblem, Profile, Transfer,
                                  WeightSyncTiming)
from pearl.roofline import kernel_work, roofline_time

FP32, BF16 = Precision.FP32, Precision.BF16_MIXED

#: the MPS shares (percent of the SMs) a what-if GPU offers beside its MIG profiles
MPS_SHARES = (10, 25, 50)


def what_if_adapter(kind: DeviceKind) -> str:
    """The kernel backend an absent device of `kind` would run: that of the kind registered to cost it
    (`Backend.what_if_kinds`); ConfigError when no registered kind costs it."""
    backend = for_what_if(kind)
    if backend is None:
        raise ConfigError(f"no registered device kind costs a what-if {kind} device")
    return backend.adapter


def what_if_id(descriptor: DeviceDescriptor) -> str:
    return f"whatif:{descriptor.source.stem}"


def add_what_if(profile: Profile, descriptor: DeviceDescriptor, grid: object = None) -> str:
    """Add the descriptor's device, its kernels, transfers and power to profile, and for a GPU with MIG
    profiles its slices (`slices`); returns the whole device's id."""
    device_id = what_if_id(descriptor)
    if any(d.id == device_id for d in profile.devices):
        raise ValueError(f"{device_id} is already in the profile")
    kind = DeviceKind(descriptor.kind)
    name = f"{descriptor.vendor} {descriptor.model}"
    _add(profile, descriptor, DeviceEntry(device_id, kind, what_if_adapter(kind), name, 1,
                                          int(descriptor.figures["memory_bytes"]), "modelled", None,
                                          descriptor.source.name, True), descriptor.figures)
    for entry, figures in slices(descriptor):
        _add(profile, descriptor, entry, figures)
    return device_id


def slices(descriptor: DeviceDescriptor) -> list[tuple[DeviceEntry, dict[str, float]]]:
    """The modelled slices of a what-if GPU, each with the figures its roofline uses: every MIG profile of its
    descriptor but one that is all of the GPU (``whatif:<stem>/mig:<profile>``: its SMs' share of the FLOP/s,
    its memory eighths of the memory and of the bandwidth) and the MPS shares MPS_SHARES
    (``whatif:<stem>/mps:P``: P % of the FLOP/s and, as a client's share of the bandwidth, P % of that too).
    Launch latency and the host link are the whole GPU's. None without [mig] profiles: MPS runs on any CUDA
    GPU, but a GPU descriptor without its SM layout is not known to be one that slices."""
    if not descriptor.mig or descriptor.gpu_sms is None:
        return []
    base, figures = what_if_id(descriptor), descriptor.figures
    name = f"{descriptor.vendor} {descriptor.model}"
    out = []
    for m in descriptor.mig:
        share, memory = m.sms / descriptor.gpu_sms, m.memory_eighths / 8
        if share == 1 and memory == 1:
            continue  # the H100's 7g.80gb: all of the GPU, which the whole device already is
        entry = DeviceEntry(f"{base}/mig:{m.name}", DeviceKind.GPU, what_if_adapter(DeviceKind.GPU), f"{name} MIG {m.name}", 1,
                            int(figures["memory_bytes"] * memory), "modelled", base, descriptor.source.name, True,
                            share, m.instances)
        out.append((entry, _scaled(figures, share, memory)))
    for p in MPS_SHARES:
        share = p / 100
        entry = DeviceEntry(f"{base}/mps:{p}", DeviceKind.GPU, what_if_adapter(DeviceKind.GPU), f"{name} MPS {p} %", 1,
                            int(figures["memory_bytes"]), "modelled", base, descriptor.source.name, True,
                            share, 100 // p)
        out.append((entry, _scaled(figures, share, share)))
    return out


def add_slice_of(profile: Profile, whole: DeviceEntry, slice_id: str, name: str, memory_bytes: int, share: float,
                 launch_latency_s: float, instances: int = 1) -> DeviceEntry:
    """A slice of a measured GPU that could not be measured itself (pearl.profiler.slices), modelled from the
    GPU's own timings: each kernel keeps its launches' latency and does the rest of its time at the slice's
    share of the SMs and bandwidth, t = L + (t_whole − L) / share with L = launches × launch latency (at least
    t_whole); transfers, power and the weight sync are the GPU's. Labelled modelled; `instances` processes
    may each hold one (an MPS share's 100 // percent, one MIG instance's 1)."""
    entry = DeviceEntry(slice_id, DeviceKind.GPU, whole.adapter, name, 1, memory_bytes, "modelled", whole.id,
                        whole.descriptor, whole.descriptor_matched, share, instances)
    profile.devices.append(entry)
    workloads = {w.key: w for w in profile.workloads}
    for k in [k for k in profile.kernels if k.device == whole.id]:
        fixed = kernel_work(k.kernel, workloads[k.workload], k.batch).launches * launch_latency_s
        seconds = max(k.median_s, fixed + max(0.0, k.median_s - fixed) / share)
        profile.kernels.append(KernelTiming(k.workload, k.kernel, slice_id, k.batch, seconds, seconds, seconds, 1,
                                            "modelled"))
    profile.transfers += [Transfer(slice_id, t.direction, t.latency_s, t.bandwidth_bytes_per_s, "modelled")
                          for t in profile.transfers if t.device == whole.id]
    profile.power += [Power(slice_id, p.idle_w, p.busy_w, "modelled", p.method, p.descriptor, p.scale)
                      for p in profile.power if p.device == whole.id]
    profile.weight_sync += [WeightSyncTiming(w.workload, slice_id, w.publish_s, w.load_s, w.samples, "modelled")
                            for w in profile.weight_sync if w.device == whole.id]
    return entry


def _scaled(figures: dict[str, float], compute: float, memory: float) -> dict[str, float]:
    peaks = {name: figures[name] * compute for name in ("fp32_peak_flops", "bf16_peak_flops") if name in figures}
    return {**figures, **peaks, "memory_bandwidth_bytes_per_s": figures["memory_bandwidth_bytes_per_s"] * memory}


def bf16_problem(descriptor: DeviceDescriptor, figures: dict[str, float]) -> str:
    """'' when a what-if device of `descriptor` has learn at bf16-mixed; else why not."""
    backend = for_what_if(DeviceKind(descriptor.kind))  # there is one: what_if_adapter found it
    if BF16.value not in backend.precisions:
        return f"the {backend.adapter} adapter computes learn in {', '.join(backend.precisions)} only"
    if "bf16_peak_flops" not in figures:
        return f"its descriptor ({descriptor.source.name}) states no bf16_peak_flops"
    return ""


def _add(profile: Profile, descriptor: DeviceDescriptor, entry: DeviceEntry, figures: dict[str, float]) -> None:
    """The entry, its kernels by the roofline on figures, its host link and power (the whole GPU's: a slice
    is charged by the planner through its resource, which all of them share)."""
    profile.devices.append(entry)
    no_bf16 = bf16_problem(descriptor, figures)
    if no_bf16:
        profile.precision_problems.append(PrecisionProblem(entry.id, BF16.value, no_bf16))
    for workload in profile.workloads:
        if entry.adapter not in algorithm(workload.algo).kernels:
            continue  # the algorithm has no kernels on this device's backend: the planner must not place it there
        for kernel in (*DEVICE_KERNELS, PRIORITIZED_SAMPLE):
            batches = sorted({k.batch for k in profile.kernels if k.workload == workload.key and k.kernel == kernel
                              and k.precision == FP32.value} or {workload.batch_size})
            precisions = (FP32, BF16) if kernel == "learn" and not no_bf16 else (FP32,)
            for precision, batch in ((p, b) for p in precisions for b in batches):
                seconds = roofline_time(kernel_work(kernel, workload, batch), figures, precision)
                profile.kernels.append(KernelTiming(workload.key, kernel, entry.id, batch, seconds, seconds, seconds,
                                                    1, "modelled", precision=precision.value))
    whole = descriptor.figures
    for direction in ("h2d", "d2h"):
        profile.transfers.append(Transfer(entry.id, direction, whole["host_link_latency_s"],
                                          whole["host_link_bandwidth_bytes_per_s"], "modelled"))
    # an absent device is a whole device of its own: its descriptor's figures, unscaled
    profile.power.append(Power(entry.id, whole["idle_w"], whole["peak_w"], "modelled", "descriptor",
                               descriptor.source.name))
