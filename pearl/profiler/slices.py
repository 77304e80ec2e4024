"""GPU slices in a profile: each slice this machine has is measured in a process of its own, started with the
slice's environment; a slice that cannot be measured there is modelled from its whole GPU, saying why.

CUDA reads CUDA_VISIBLE_DEVICES (a MIG instance), CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
CUDA_MPS_PIPE_DIRECTORY (an MPS share) once, when it starts in a process, so the `pearl profile` process, which
has measured the whole GPU, cannot time a slice. `profile_in_child` starts a fresh interpreter with this
process's environment plus the slice's (`adapters.slices.slice_env`, the one the runtime gives a role on the
slice), which profiles the device the slice is inside it (`adapters.slices.inner_device`: ``cuda:0`` for a MIG
instance, the GPU's own id for an MPS share) with `profiler.profile_device_here` (the child runs the profiler's
`serve_child`, which CHILD_COMMAND names: the profiler imports this module, never the other way) and hands the
profile back through a file. `add_slices` stores those figures under the slice's id, labelled measured, with the
environment the child saw (`DeviceEntry.process_env`). When the child fails (CUDA cannot start under that
environment, the MPS daemon refuses the client, ...), the slice is modelled from its GPU's measurements
(`whatif.add_slice_of`), labelled modelled, and `warn` is told the child's reason; a GPU that matched no
descriptor has no launch latency to model with, and its slice is left out, saying so.

Which slices: those `discover` lists (MIG instances NVML reports, MPS shares when a control daemon answers),
of a GPU this profile measured (`slices_to_profile`). This module imports no hardware library: the child does,
through the adapters.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping

from pearl.adapters.base import DeviceInfo
from pearl.adapters.slices import inner_device, slice_env
from pearl.descriptors import DeviceDescriptor
from pearl.device import DeviceId, DeviceKind
from pearl.profile.format import DeviceEntry, Power, Profile, load_profile
from pearl.profiler.options import ProfileOptions

#: a child that has not finished by then is stopped and its slice modelled (a full grid on one GPU takes minutes)
CHILD_TIMEOUT_S = 3600.0
#: how a child is started: a fresh interpreter, so that CUDA starts in it under the environment it was given,
#: running the profiler's side (a process's entry point, named here: this module imports nothing of the profiler)
CHILD_COMMAND = "from pearl.profiler.profiler import serve_child; serve_child()"


class ChildFailed(Exception):
    """A child process that handed back no profile; the message is its reason (its last error line)."""


@dataclass(frozen=True)
class ChildArgs:
    options: ProfileOptions  # naming the one device to measure
    record: tuple[str, ...]  # the environment variables whose values the child writes into its device's entry
    out: str  # where the child writes its profile


def profile_in_child(device: str, env: Mapping[str, str], options: ProfileOptions,
                     timeout: float = CHILD_TIMEOUT_S) -> Profile:
    """device measured by a fresh interpreter started with this process's environment plus env, for the
    workloads of options (its devices and what-if devices are replaced): kernels,
    in-situ iteration, weight sync and transfers; its entry's process_env holds env's variables as the child
    saw them. ChildFailed, with the child's reason, when it hands back no profile."""
    with tempfile.TemporaryDirectory(prefix="pearl-profile-") as folder:
        out = Path(folder) / "profile.json"
        args = ChildArgs(replace(options, devices=(device,), what_if=()), tuple(sorted(env)), str(out))
        try:
            proc = subprocess.run([sys.executable, "-c", CHILD_COMMAND], input=pickle.dumps(args),
                                  capture_output=True, env={**os.environ, **env}, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ChildFailed(f"its process did not finish in {timeout:.0f} s and was stopped") from None
        if proc.returncode != 0 or not out.exists():
            raise ChildFailed(_reason(proc))
        return load_profile(out)


def _reason(proc: subprocess.CompletedProcess) -> str:
    """The child's last line on stderr (its `error:` line, or a traceback's last line)."""
    lines = [line.strip() for line in proc.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    last = lines[-1] if lines else "it printed nothing"
    return f"its process exited with status {proc.returncode}: {last.removeprefix('error: ')}"


def slices_to_profile(found: list[DeviceInfo], measured: list[str],
                      devices: tuple[str, ...] | None) -> list[DeviceInfo]:
    """The slices among `found` (what `discover` lists: MIG instances that exist, MPS shares of a GPU whose
    daemon runs) whose whole GPU is among `measured` and, when --device names devices, is named there."""
    return [d for d in found if d.device_id.slice is not None and d.resource in measured
            and (devices is None or str(d.device_id.whole) in devices)]


def instances(slice_id: DeviceId) -> int:
    """How many processes may each hold one of this machine's slice: an MPS share's 100 // percent (each
    client is limited to its own percentage), one for a MIG instance (one UUID)."""
    percent = slice_id.slice.mps_percent if slice_id.slice is not None else None
    return 100 // percent if percent else 1


def add_slices(profile: Profile, wholes: Mapping[str, tuple[DeviceEntry, DeviceDescriptor | None]],
               slices: list[DeviceInfo], options: ProfileOptions, note: Callable[[str], None],
               warn: Callable[[str], None]) -> None:
    """Each slice measured in a child process (labelled measured), else modelled from its GPU, whose entry and
    descriptor `wholes` maps its id to (labelled modelled, `warn` told why); note(label) once per slice."""
    for info in slices:
        whole, descriptor = wholes[info.resource]
        try:
            inner = str(inner_device(info.device_id))
            child = profile_in_child(inner, slice_env(info.device_id), options)
        except ChildFailed as exc:
            _model(profile, whole, descriptor, info, str(exc), warn)
        else:
            adopt(profile, child, inner, info, whole)
        note(f"slice {info.id}")


def adopt(profile: Profile, child: Profile, inner: str, info: DeviceInfo, whole: DeviceEntry) -> DeviceEntry:
    """The child's figures for its device `inner`, stored under the slice info.id: kernels, in-situ iteration,
    weight sync and transfers as measured there. The slice's power is its GPU's (one resource, which the
    planner charges once), as the GPU's entry labels it."""
    measured = child.device(inner)
    entry = DeviceEntry(info.id, DeviceKind.GPU, whole.adapter, info.name, 1, info.memory_bytes, "measured",
                        whole.id, whole.descriptor, whole.descriptor_matched, info.share, instances(info.device_id),
                        measured.process_env)
    profile.devices.append(entry)
    keys = {w.key for w in profile.workloads}
    for name in ("kernels", "in_situ", "weight_sync"):
        getattr(profile, name).extend(replace(t, device=info.id) for t in getattr(child, name)
                                      if t.device == inner and t.workload in keys)
    profile.transfers += [replace(t, device=info.id) for t in child.transfers if t.device == inner]
    profile.power += [Power(info.id, p.idle_w, p.busy_w, p.source, p.method, p.descriptor, p.scale)
                      for p in profile.power if p.device == whole.id]
    return entry


def _model(profile: Profile, whole: DeviceEntry, descriptor: DeviceDescriptor | None, info: DeviceInfo,
           reason: str, warn: Callable[[str], None]) -> None:
    if descriptor is None:
        warn(f"{info.id} was not measured ({reason}), and cannot be modelled: {whole.id} matched no device "
             "descriptor, whose launch latency the model keeps; it is left out of the profile")
        return
    from pearl.profiler.whatif import add_slice_of

    add_slice_of(profile, whole, info.id, info.name, info.memory_bytes, info.share,
                 descriptor.figures["launch_latency_s"], instances(info.device_id))
    warn(f"{info.id} was not measured ({reason}); it is modelled from {whole.id}'s measurements (labelled "
         "modelled)")
