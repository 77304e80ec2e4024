"""What-if devices: a device that is not present, costed from its descriptor by the roofline model.

Every entry it adds is labelled `modelled`: the kernels at the batch sizes measured for the real devices
(roofline: launches × launch latency + max(FLOPs / peak FLOP/s, bytes / memory bandwidth)), the host link
from the descriptor's bandwidth and latency, and the descriptor's idle and peak power. A GPU descriptor
becomes a `cuda` device of the torch adapter, an FPGA one an `opencl` device, a CPU one a `cpu` device;
the id is `whatif:<descriptor file stem>`, which the runtime will refuse to run on.
"""

from __future__ import annotations

from pearl.costmodel.roofline import kernel_work, roofline_time
from pearl.descriptors import DeviceDescriptor
from pearl.device import DeviceKind
from pearl.kernels import DEVICE_KERNELS
from pearl.profile.format import DeviceEntry, KernelTiming, Power, Profile, Transfer

#: the adapter that would run each kind of absent device
ADAPTER = {DeviceKind.GPU: "torch", DeviceKind.FPGA: "opencl", DeviceKind.CPU: "torch"}


def what_if_id(descriptor: DeviceDescriptor) -> str:
    return f"whatif:{descriptor.source.stem}"


def add_what_if(profile: Profile, descriptor: DeviceDescriptor, grid: object = None) -> str:
    """Add the descriptor's device, its kernels, transfers and power to profile; returns its id."""
    device_id = what_if_id(descriptor)
    if any(d.id == device_id for d in profile.devices):
        raise ValueError(f"{device_id} is already in the profile")
    kind = DeviceKind(descriptor.kind)
    adapter = ADAPTER[kind]
    figures = descriptor.figures
    profile.devices.append(DeviceEntry(device_id, kind, adapter, f"{descriptor.vendor} {descriptor.model}", 1,
                                       int(figures["memory_bytes"]), "modelled", None, descriptor.source.name, True))
    for workload in profile.workloads:
        for kernel in DEVICE_KERNELS:
            batches = sorted({k.batch for k in profile.kernels if k.workload == workload.key and k.kernel == kernel}
                             or {workload.batch_size})
            for batch in batches:
                seconds = roofline_time(kernel_work(kernel, workload, batch), figures)
                profile.kernels.append(KernelTiming(workload.key, kernel, device_id, batch, seconds, seconds, seconds,
                                                    1, "modelled"))
    for direction in ("h2d", "d2h"):
        profile.transfers.append(Transfer(device_id, direction, figures["host_link_latency_s"],
                                          figures["host_link_bandwidth_bytes_per_s"], "modelled"))
    # an absent device is a whole device of its own: its descriptor's figures, unscaled
    profile.power.append(Power(device_id, figures["idle_w"], figures["peak_w"], "modelled", "descriptor",
                               descriptor.source.name))
    return device_id
