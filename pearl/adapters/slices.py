"""Slices of an NVIDIA GPU as devices: MIG instances that exist (read through NVML) and MPS shares.

- A MIG instance is listed as ``cuda:N/mig:MIG-<uuid>`` with its own SMs and memory. pearl never creates,
  destroys or reconfigures one: it lists what the machine has. A process runs on it when it starts with
  ``CUDA_VISIBLE_DEVICES=MIG-<uuid>`` (the instance is then its ``cuda:0``).
- An MPS share ``cuda:N/mps:P`` is a client of a running MPS control daemon limited to P % of the SMs
  (``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``), reaching the daemon through its pipe directory. The daemon is
  detected from its pipe directory's ``control`` socket and the presence of ``nvidia-cuda-mps-control``;
  nothing is started here.

NVML is reached through the `Nvml` protocol (pynvml/nvidia-ml-py's functions), so tests can give synthetic
answers to the same code path. This module imports pynvml only inside `open_nvml`.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from pearl.adapters.base import DeviceInfo
from pearl.device import DeviceId, Slice
from pearl.errors import DeviceError

#: where an MPS control daemon puts its pipes when CUDA_MPS_PIPE_DIRECTORY is unset
DEFAULT_MPS_PIPE_DIR = "/tmp/nvidia-mps"
MPS_CONTROL = "nvidia-cuda-mps-control"
#: the MPS shares `pearl devices` lists for a GPU; any whole percentage from 1 to 100 is accepted
LISTED_MPS_SHARES = (25, 50)


@dataclass(frozen=True)
class MigInstance:
    uuid: str  # "MIG-…"
    name: str  # NVML's name, e.g. "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    sm_count: int
    memory_bytes: int


@dataclass(frozen=True)
class MpsDaemon:
    pipe_dir: str | None  # None: no daemon to reach
    reason: str  # why there is none ('' when there is one)


def open_nvml() -> tuple[Any | None, str]:
    """pynvml initialised, or None and why NVML cannot be used."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError as exc:
        return None, f"NVML cannot be imported ({exc}); `pip install nvidia-ml-py` to list MIG instances"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return None, f"NVML cannot be initialised ({exc}): no NVIDIA driver here"
    return pynvml, ""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def mig_instances(nvml: Any, gpu_uuid: str | None, index: int) -> tuple[list[MigInstance], str]:
    """The MIG instances of one GPU (by its UUID when known, else its NVML index), or [] and why none."""
    try:
        handle = (nvml.nvmlDeviceGetHandleByUUID(gpu_uuid) if gpu_uuid
                  else nvml.nvmlDeviceGetHandleByIndex(index))
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError as exc:
        return [], f"NVML reports no MIG mode ({exc}): this GPU has no MIG"
    if current != nvml.NVML_DEVICE_MIG_ENABLE:
        return [], "MIG mode is off on this GPU (enabling it is the administrator's: pearl changes no GPU setting)"
    found = []
    for i in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
        except nvml.NVMLError:  # an empty slot
            continue
        attributes = nvml.nvmlDeviceGetAttributes(mig)
        found.append(MigInstance(_text(nvml.nvmlDeviceGetUUID(mig)), _text(nvml.nvmlDeviceGetName(mig)),
                                 int(attributes.multiprocessorCount), int(attributes.memorySizeMB) << 20))
    if not found:
        return [], "MIG mode is on but no MIG instance exists (creating them is the administrator's)"
    return found, ""


def mps_daemon(env: Mapping[str, str] = os.environ, exists: Callable[[str], bool] = os.path.exists,
               which: Callable[[str], str | None] = shutil.which) -> MpsDaemon:
    """Whether an MPS control daemon can be reached, from its pipe directory; starts nothing."""
    pipe_dir = env.get("CUDA_MPS_PIPE_DIRECTORY") or DEFAULT_MPS_PIPE_DIR
    if exists(os.path.join(pipe_dir, "control")):
        return MpsDaemon(pipe_dir, "")
    if which(MPS_CONTROL) is None:
        return MpsDaemon(None, f"{MPS_CONTROL} is not installed (it comes with the NVIDIA driver)")
    return MpsDaemon(None, f"the MPS control daemon is not running (no {pipe_dir}/control); start one with "
                           f"`{MPS_CONTROL} -d` (set CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY for a "
                           "daemon of your own)")


def slice_devices(gpu: DeviceInfo, sm_count: int, migs: list[MigInstance], mps: MpsDaemon) -> list[DeviceInfo]:
    """The slices of gpu (a whole `cuda:N` of sm_count SMs) as devices on gpu's resource."""
    out = []
    for m in migs:
        out.append(replace(gpu, id=f"{gpu.id}/mig:{m.uuid}", name=m.name, memory_bytes=m.memory_bytes,
                           resource=gpu.resource, share=m.sm_count / sm_count if sm_count else 0.0,
                           note=f"MIG instance, {m.sm_count} of {sm_count} SMs"))
    if mps.pipe_dir is not None and not migs:  # MPS within MIG instances is possible but not offered here
        for p in LISTED_MPS_SHARES:
            out.append(replace(gpu, id=f"{gpu.id}/mps:{p}", resource=gpu.resource, share=p / 100,
                               note=f"MPS client limited to {p} % of the SMs (any 1..100: cuda:N/mps:P)"))
    return out


def slice_env(device: DeviceId, env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment variables a process needs to run on device (none for a whole device): a MIG instance
    by its UUID, an MPS share by its percentage and the daemon's pipe directory."""
    piece = device.slice
    if piece is None:
        return {}
    if piece.kind == "mig":
        return {"CUDA_VISIBLE_DEVICES": piece.name}
    daemon = mps_daemon(env)
    out = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": piece.name,
           "CUDA_MPS_PIPE_DIRECTORY": env.get("CUDA_MPS_PIPE_DIRECTORY") or daemon.pipe_dir or DEFAULT_MPS_PIPE_DIR}
    if env.get("CUDA_MPS_LOG_DIRECTORY"):
        out["CUDA_MPS_LOG_DIRECTORY"] = env["CUDA_MPS_LOG_DIRECTORY"]
    return out


def inner_device(device: DeviceId) -> DeviceId:
    """The id device has inside a process started with slice_env(device): ``cuda:0`` for a MIG instance (the
    process sees only it), the GPU's own id for an MPS share (the process sees the GPU, limited to its share),
    device itself when it is whole."""
    if device.slice is None:
        return device
    return DeviceId("cuda", (0,)) if device.slice.kind == "mig" else device.whole


def in_slice_env(device: DeviceId, env: Mapping[str, str] = os.environ) -> bool:
    """Whether this process already runs with device's slice environment (the launcher started it so)."""
    wanted = slice_env(device, env)
    return all(env.get(k) == v for k, v in wanted.items() if k != "CUDA_MPS_PIPE_DIRECTORY")


def enter_slice(device: DeviceId) -> None:
    """Give this process device's slice environment before CUDA starts in it (CUDA reads it once);
    DeviceError when CUDA has already started here with another."""
    if in_slice_env(device):
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise DeviceError(f"{device} is a slice, and CUDA has already started in this process without its "
                          "environment; run the roles that use it in processes of their own")
    os.environ.update(slice_env(device))


def check_slice(device: DeviceId, present: list[DeviceId], reasons: list[str]) -> None:
    """DeviceError unless device's slice exists here: a MIG instance NVML lists, or an MPS share of a GPU
    whose daemon runs. present: the ids `discover` found; reasons: why slices are missing."""
    piece: Slice | None = device.slice
    if piece is None or device in present:
        return
    if piece.kind == "mps" and replace(device, slice=Slice("mps", str(LISTED_MPS_SHARES[0]))) in present:
        return  # the daemon runs: every percentage of 1..100 is a share
    why = "; ".join(reasons) or "`pearl devices` lists the slices this machine has"
    raise DeviceError(f"{device} does not exist on this machine: {why}")
