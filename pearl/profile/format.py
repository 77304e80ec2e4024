"""The profile file, schema `pearl.profile/1`: everything measured (or modelled) about one machine.

    {
      "schema": "pearl.profile/1", "pearl_version": "0.1.0", "created": "2026-11-21T05:40:00+00:00",
      "mode": "quick" | "full",
      "host": {"node", "platform", "python", "cpu", "cores", "memory_bytes"},
      "devices": [{"id", "kind" (cpu | gpu | fpga), "adapter", "name", "lanes", "memory_bytes", "shares",
                   "descriptor", "descriptor_matched", "source", "share", "instances", "process_env"}],
      "workloads": [{"key", "algo", "env", "obs_dim", "action_dim", "hidden", "batch_size", "buffer_size",
                     "settings" (optional: {}; the learn settings that differ from the algorithm's defaults)}],
      "kernels": [{"workload", "kernel", "device", "batch", "median_s", "p10_s", "p90_s", "samples", "source",
                   "threads" (optional: 1), "beside" (optional: 0), "one_thread_s" (optional: null),
                   "precision" (optional: "fp32"; learn also at "bf16-mixed" where the device does it in hardware),
                   "implementation" (optional: "eager"; act and learn also "captured" where CUDA graphs replay them),
                   "device_s" (optional: null; the median by the device's own clock, on a GPU)}],
                 (kernel: a device kernel, or replay_sample_prioritized, the draw from a prioritized replay)
      "env_step": [{"env", "median_s", "p10_s", "p90_s", "samples", "source"}],
      "transfers": [{"device", "direction", "latency_s", "bandwidth_bytes_per_s", "source"}],
      "power": [{"device", "idle_w", "busy_w", "source", "method", "descriptor", "scale"}],
      "in_situ": [{"workload", "device", "iteration_s", "iterations", "inserts", "insert_rows", "batch",
                   "prioritized", "source", "first_iteration_s" (optional: null), "segment_s" (optional: null),
                   "implementation" (optional: "eager")}],
      "weight_sync": [{"workload", "device", "publish_s", "load_s", "samples", "source"}],
      "actor_step": [{"workload", "device", "envs", "step_s", "samples", "source"}],
      "group_learn": [{"workload", "device", "learners", "update_s", "samples", "source", "comm_s" (optional: null)}],
      "calibrations": [{"run", "folded", "workload", "entries", "contended" (optional)}],
      "precision_problems": [{"device", "precision", "reason"}] (optional: []; why learn was not timed at a
                            precision on a device: no bf16 units, an adapter that computes float32 only)
    }

- A workload key names the algorithm, env and network shapes (`dqn-CartPole-v1-o4-a2-h256x256`), and any
  learn setting off its default (`OffPolicyConfig.LEARN_SETTINGS`: `td3-...-h400x300-policy_delay3`), so a
  profile is reused only for the same work.
- `shares`: devices with the same value run on the same physical resource (PoCL's CPU device and `cpu`
  share "host-cpu"; `cpu` always carries "host-cpu"; a GPU's slices carry the GPU's id); the planner counts
  such a resource once.
- `share` and `instances` (optional, 1 when absent): a GPU slice's fraction of the GPU's SMs, and how many
  processes may each hold one such slice (a what-if MIG profile's instance count, an MPS share's
  100 // percent); the planner's slices[r] keeps the shares in use on one GPU at most 1.
- `process_env` (optional, {} when absent): the environment variables, as the measuring process saw them, of
  a device measured in a process of its own: a GPU slice's (CUDA_VISIBLE_DEVICES=MIG-…, or the MPS percentage
  and pipe directory), which CUDA reads once when it starts in a process. {} for a device measured in `pearl
  profile`'s own process, and for a modelled one.
- `source` is "measured" or "modelled" on every figure, or "in-situ" on one folded from a finished run on this
  machine (`pearl profile --from-run`, pearl/profile/calibrate.py); anything derived from a figure keeps its
  source, and an in-situ figure counts as measured.
- `calibrations` (optional, [] when absent): each run folded in, when, for which workload, and the entries it
  replaced or added.
- `direction` is "h2d" or "d2h"; `method` is how power was obtained: "nvml", "rapl" or "descriptor".
  `descriptor` (optional) names the descriptor file of a "descriptor" figure and `scale` (optional, 1 when
  absent) the share of its figures charged (a host's cores ÷ the descriptor's `cores`). Devices that share
  a resource carry the same figures, so `descriptor` may be another device's (PoCL's for `cpu`).
- `in_situ` (optional; older profiles lack it): the learner's iteration timed as the runtime runs it, replay
  and learn on one device: `inserts` insert calls of `insert_rows` transitions an iteration (a fraction where
  the launchers insert a segment's share in one call: 1/128 of 256 rows for DQN CartPole-v1), a sample and a
  learn at `batch`, and a priority update when `prioritized`, each on a freshly sampled batch; `iteration_s`
  per iteration, of `iterations` in all (measured: timed in chains among the kernel grid's points, in the same
  interleaved rounds). Kernels timed one at a time on one input run faster than interleaved on fresh data; the cost
  model scales the replay and learn kernels of that device by the ratio. `first_iteration_s` (optional; null
  in older profiles and in a figure folded from a run): one iteration after the learner slept a moment, as a
  segment's first update runs after the learner waited for the actors' shares (median, timed in the same
  rounds); the cost model charges a segment's first iteration at its ratio to `iteration_s`. `segment_s`
  (optional; null in older profiles, on devices other than the host and in a figure folded from a run, whose
  `iteration_s` holds its loop): the local launcher's learner loop a segment beyond its kernels (taking the
  actors' shares out of the shared-memory rings, waking the actors, the segment loop's bookkeeping), from a
  collect-only run of one actor process (`pearl.runtime.local.segment_overhead`); the cost model charges it
  once a segment, on the learner's thread. `implementation` (optional, "eager" when absent): the way its learn
  ran (the device's own: captured on `cuda:N`), whose kernel figures the cost model reads the iteration against.
- `weight_sync` (optional; older profiles lack it): the two halves of handing the policy from the learner to
  an actor process through host memory, on one device: `publish_s`, the learn kernel writing its policy
  weights into host arrays (as into the runtime's shared board), and `load_s`, a copy of those arrays (the
  actor's read of the board) loaded into the act kernel; medians of `samples` calls each.
- `actor_step` (optional; older profiles lack it): an actor's whole iteration as its process runs it, acting
  on `device`: one act call for `envs` observations, one step of a vector env of `envs` copies with its
  next-step resets and episode bookkeeping, the transitions written into a ring of host arrays; `step_s` the
  median over `samples` iterations. Less the env's bare steps and the act kernel, what is left is the actor's
  own per-step work, which the cost model adds to the actor's period (CostModel.actor_overhead).
- `group_learn` (optional; older profiles lack it): one update of a learner group of `learners` one-thread
  processes on `device` (the host's), as learner 0 leads it, at the workload's batch: `update_s`, the median
  over `samples` updates, and `comm_s` (optional; null in older profiles), the median of learner 0's seconds
  in the group's collectives in those updates (waiting for the others included), as a run's `group_comm` clock.

Loading validates every field and names the file and the field that is wrong. This module imports no
hardware library.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pearl.device import HOST_RESOURCE, DeviceKind
from pearl.errors import PearlError
from pearl.fileio import MAX_INT, FieldChecker, field_path, finite_number, is_int, read_json, write_json_atomic
from pearl.kernels import TIMING_NAMES, Implementation, Precision

FP32 = Precision.FP32.value
PRECISIONS = {p.value for p in Precision}
EAGER, IMPLEMENTATIONS = Implementation.EAGER.value, {i.value for i in Implementation}

if TYPE_CHECKING:
    from pearl.algos.base import OffPolicyConfig
    from pearl.types import EnvSpec

SCHEMA = "pearl.profile/1"
SCHEMA_NAME, SCHEMA_VERSION = SCHEMA.split("/")
SOURCES = ("measured", "modelled")
#: the source of a figure folded from a finished run (pearl/profile/calibrate.py): measured, as the run ran it
IN_SITU = "in-situ"
#: More cores than any machine pearl plans for; the planner weighs one actor option per lane of the host.
MAX_LANES = 4096


class ProfileError(PearlError):
    """A profile file that is missing, truncated, not JSON, of another schema or version, or has a bad field."""


@dataclass(frozen=True)
class DeviceEntry:
    id: str
    kind: DeviceKind
    adapter: str
    name: str
    lanes: int
    memory_bytes: int
    source: str
    shares: str | None = None
    descriptor: str | None = None
    descriptor_matched: bool = False
    #: a GPU slice's fraction of its GPU's SMs (1 for a whole device) and how many processes may each hold one
    #: such slice: a MIG profile's instance count, an MPS share's 100 // percent, 1 for one existing instance
    share: float = 1.0
    instances: int = 1
    #: (name, value) of the environment variables the measuring child process saw (sorted; `process_env` in
    #: the file, an object); () when pearl profile's own process measured the device
    process_env: tuple[tuple[str, str], ...] = ()

    @property
    def resource(self) -> str:
        return self.shares or self.id


@dataclass(frozen=True)
class UnusableDevice:
    """A device the machine has that its probe found unable to work, left out of the measurements: why."""

    id: str
    name: str
    reason: str


@dataclass(frozen=True)
class Workload:
    key: str
    algo: str
    env: str
    obs_dim: int
    action_dim: int
    hidden: tuple[int, ...]
    batch_size: int
    buffer_size: int
    #: (name, value) of the algorithm's learn settings that differ from their defaults (TD3's policy_delay),
    #: what the roofline's learn work follows (`Algorithm.work_of`); () for the default work
    settings: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class KernelTiming:
    workload: str
    kernel: str
    device: str
    batch: int
    median_s: float
    p10_s: float
    p90_s: float
    samples: int
    source: str
    #: the CPU threads the kernel ran with (torch's intra-op threads on `cpu`); optional in the file, 1 when absent
    threads: int = 1
    #: the share of each update a stand-in actor process beside it on the host was busy while it was timed, as
    #: the concurrent launchers run learn (pearl/profiler/standin.py); 0: timed alone (optional in the file)
    beside: float = 0.0
    #: (threads > 1) the median of the same kernel at one thread, timed in the same alternating blocks: the
    #: cost model's thread factor is median_s ÷ this, a ratio over one span of the machine; None (older
    #: profiles, optional in the file): ÷ the grid's one-thread figure, timed at another moment
    one_thread_s: float | None = None
    #: the arithmetic learn ran in (pearl.kernels.Precision); every other kernel is float32
    precision: str = FP32
    #: how the device ran it (pearl.kernels.Implementation): act and learn also "captured" (CUDA graphs) where
    #: the device has that beside eager; the cost model reads the faster
    implementation: str = EAGER
    #: the median of the same calls by the device's own clock (CUDA events on a GPU: the device's time from
    #: before the call's first kernel to after its last), where the adapter has one; None elsewhere (the wall
    #: time is the device's) and in older profiles. The planner's load row of the device reads this share of
    #: the wall time, the roles' rows the wall time
    device_s: float | None = None


@dataclass(frozen=True)
class PrecisionProblem:
    """Why learn was not timed at `precision` on `device` (the adapter's hardware check, `precision_problem`)."""

    device: str
    precision: str
    reason: str


@dataclass(frozen=True)
class EnvStepTiming:
    env: str
    median_s: float
    p10_s: float
    p90_s: float
    samples: int
    source: str


@dataclass(frozen=True)
class Transfer:
    device: str
    direction: str
    latency_s: float
    bandwidth_bytes_per_s: float
    source: str


@dataclass(frozen=True)
class Power:
    device: str
    idle_w: float
    busy_w: float
    source: str
    method: str
    descriptor: str | None = None
    scale: float = 1.0


@dataclass(frozen=True)
class InSituTiming:
    workload: str
    device: str
    iteration_s: float
    iterations: int
    inserts: float  # calls an iteration: under 1 where a segment of U updates is inserted in one call
    insert_rows: int
    batch: int
    prioritized: bool
    source: str
    first_iteration_s: float | None = None  # a segment's first iteration, after a pause (the module docstring)
    segment_s: float | None = None  # the learner's loop a segment beyond its kernels (the module docstring)
    implementation: str = EAGER  # the way its learn ran (the module docstring)


@dataclass(frozen=True)
class WeightSyncTiming:
    workload: str
    device: str
    publish_s: float
    load_s: float
    samples: int
    source: str


@dataclass(frozen=True)
class ActorStepTiming:
    workload: str
    device: str
    envs: int
    step_s: float
    samples: int
    source: str


@dataclass
class GroupLearnTiming:
    """One update of a learner group of `learners` processes on `device`, as learner 0 leads it (its rows sent,
    its part learnt, the gradients averaged, the TD errors gathered): seconds per update; `comm_s`, learner 0's
    part of it in the group's collectives (None in older profiles)."""

    workload: str
    device: str
    learners: int
    update_s: float
    samples: int
    source: str
    comm_s: float | None = None


@dataclass
class Profile:
    pearl_version: str
    created: str
    mode: str
    host: dict[str, Any]
    devices: list[DeviceEntry] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    kernels: list[KernelTiming] = field(default_factory=list)
    env_step: list[EnvStepTiming] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    power: list[Power] = field(default_factory=list)
    in_situ: list[InSituTiming] = field(default_factory=list)
    weight_sync: list[WeightSyncTiming] = field(default_factory=list)
    actor_step: list[ActorStepTiming] = field(default_factory=list)
    group_learn: list[GroupLearnTiming] = field(default_factory=list)
    calibrations: list[dict[str, Any]] = field(default_factory=list)
    #: devices found but left out, each with why (`pearl devices` lists them under "found, unusable")
    unusable: list[UnusableDevice] = field(default_factory=list)
    precision_problems: list[PrecisionProblem] = field(default_factory=list)

    def precisions(self, device: str, workload: str) -> set[str]:
        """The precisions learn of `workload` was timed at on `device`."""
        return {k.precision for k in self.kernels if k.kernel == "learn" and k.device == device
                and k.workload == workload}

    def precision_problem(self, device: str, precision: str) -> str:
        """Why learn was not timed at `precision` on `device` ('' when the profile says nothing)."""
        return next((p.reason for p in self.precision_problems if (p.device, p.precision) == (device, precision)), "")

    def to_dict(self) -> dict[str, Any]:
        out = {"schema": SCHEMA, **asdict(self)}
        for w in out["workloads"]:
            w["hidden"] = list(w["hidden"])
            settings = w.pop("settings")
            if settings:  # written only where set, so a default workload reads as before
                w["settings"] = dict(settings)
        for d in out["devices"]:
            d["process_env"] = dict(d["process_env"])
        return out

    def workload(self, key: str) -> Workload:
        for w in self.workloads:
            if w.key == key:
                return w
        raise KeyError(f"the profile has no workload {key!r}; it has {', '.join(w.key for w in self.workloads)}")

    def device(self, device_id: str) -> DeviceEntry:
        for d in self.devices:
            if d.id == device_id:
                return d
        raise KeyError(f"the profile has no device {device_id!r}; it has {', '.join(d.id for d in self.devices)}")


#: a transfer's directions: host to device, device to host, and (cpu) a learner group's all-gather between processes
DIRECTIONS = {"h2d", "d2h", "group"}


def workload_key(algo: str, env: str, obs_dim: int, action_dim: int, hidden: tuple[int, ...],
                 settings: tuple[tuple[str, float], ...] = ()) -> str:
    key = f"{algo}-{env}-o{obs_dim}-a{action_dim}-h{'x'.join(str(h) for h in hidden)}"
    return key + "".join(f"-{name}{value:g}" for name, value in settings)


def config_workload(config: OffPolicyConfig, spec: EnvSpec) -> Workload:
    """The workload (shapes) `config` trains on `spec`: what the profiler times, and what the cost model finds
    timed, or scales when the profile has not measured it."""
    hidden, settings = tuple(config.hidden), config.learn_settings()
    return Workload(workload_key(config.algo, spec.env_id, spec.obs_dim, spec.action_dim, hidden, settings),
                    config.algo, spec.env_id, spec.obs_dim, spec.action_dim, hidden, config.batch_size,
                    config.buffer_size, settings)


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write atomically (temp file + rename): an interrupted run leaves no half-written profile."""
    return write_json_atomic(path, profile.to_dict())


def load_profile(path: str | Path) -> Profile:
    data = read_json(path, ProfileError, f"no such profile; `pearl profile --out {path}` makes one")
    return parse_profile(data, str(path))


#: kinds profiles wrote before pearl.device: the id's family, which _kind reads as the one vocabulary
LEGACY_KINDS = ("cuda", "opencl")


def _kind(v: "_Validator", d: dict, prefix: str) -> DeviceKind:
    """The entry's DeviceKind. A profile of an older pearl wrote the id's family (cuda, opencl): a CUDA device
    is a GPU, an OpenCL device on the host's cores a CPU, a modelled OpenCL device (only FPGA descriptors
    became one) an FPGA, a measured one a GPU (the profiler never timed FPGA boards)."""
    text = v.text(d, "kind", prefix)
    if text in {k.value for k in DeviceKind}:
        return DeviceKind(text)
    if text == "cuda":
        return DeviceKind.GPU
    if text == "opencl":
        if d.get("shares") == HOST_RESOURCE:
            return DeviceKind.CPU
        return DeviceKind.FPGA if d.get("source") == "modelled" else DeviceKind.GPU
    v.fail(field_path(prefix, "kind"), f"one of {', '.join(k.value for k in DeviceKind)}", text)


def _share(v: "_Validator", d: dict, prefix: str) -> float:
    """A slice's share of its GPU (optional: 1, a whole device, in profiles before slices)."""
    if "share" not in d:
        return 1.0
    share = v.number(d, "share", prefix, positive=True)
    if share > 1:
        v.fail(field_path(prefix, "share"), "a fraction of the GPU's SMs, above 0 and at most 1", share)
    return share


def _process_env(v: "_Validator", d: dict, prefix: str) -> tuple[tuple[str, str], ...]:
    """A device's process_env (optional: {} in profiles before it): an object of text values."""
    value = d.get("process_env", {})
    if not isinstance(value, dict) or not all(isinstance(x, str) for x in (*value, *value.values())):
        v.fail(field_path(prefix, "process_env"), "an object of environment variables and their text values", value)
    return tuple(sorted(value.items()))


def _settings(v: "_Validator", w: dict, prefix: str) -> tuple[tuple[str, float], ...]:
    """A workload's learn settings (optional: {} in profiles before them): an object of positive numbers, in
    the file's order (the order the key names them)."""
    value = w.get("settings", {})
    if not isinstance(value, dict) or not all(isinstance(k, str) and finite_number(x, True) is not None
                                              for k, x in value.items()):
        v.fail(field_path(prefix, "settings"), "an object of learn settings and their positive values", value)
    return tuple((k, int(x) if is_int(x) else float(x)) for k, x in value.items())


def _device_entry(v: _Validator, d: dict, p: str) -> DeviceEntry:
    return DeviceEntry(
        id=v.text(d, "id", p), kind=_kind(v, d, p), adapter=v.text(d, "adapter", p), name=v.text(d, "name", p),
        lanes=v.integer(d, "lanes", p, 1, MAX_LANES), memory_bytes=v.integer(d, "memory_bytes", p, 0),
        source=v.source(d, p), shares=v.optional_text(d, "shares", p), descriptor=v.optional_text(d, "descriptor", p),
        descriptor_matched=bool(d.get("descriptor_matched", False)), share=_share(v, d, p),
        instances=v.integer(d, "instances", p, 1, 100) if "instances" in d else 1, process_env=_process_env(v, d, p))


def parse_profile(data: Any, where: str) -> Profile:
    v = _Validator(where)
    if not isinstance(data, dict):
        v.fail("", "a JSON object")
    schema = data.get("schema")
    if not isinstance(schema, str) or "/" not in schema or schema.split("/")[0] != SCHEMA_NAME:
        v.fail("schema", f"{SCHEMA!r}", schema)
    if schema != SCHEMA:
        raise ProfileError(f"{where}: field 'schema' is {schema!r}, a version this pearl cannot read "
                           f"(it reads {SCHEMA!r}); re-run `pearl profile` or upgrade pearl")
    mode = v.text(data, "mode")
    if mode not in ("quick", "full"):
        v.fail("mode", "'quick' or 'full'", mode)
    host = data.get("host")
    if not isinstance(host, dict):
        v.fail("host", "an object")
    profile = Profile(v.text(data, "pearl_version"), v.text(data, "created"), mode, host)
    profile.devices = [_device_entry(v, d, p) for p, d in v.items(data, "devices")]
    profile.workloads = [Workload(v.text(w, "key", p), v.text(w, "algo", p), v.text(w, "env", p),
                                  v.integer(w, "obs_dim", p, 1), v.integer(w, "action_dim", p, 1),
                                  tuple(v.int_list(w, "hidden", p)), v.integer(w, "batch_size", p, 1),
                                  v.integer(w, "buffer_size", p, 1), _settings(v, w, p))
                         for p, w in v.items(data, "workloads")]
    device_ids = {d.id for d in profile.devices}
    workload_keys = {w.key for w in profile.workloads}

    def keyed(t: dict, p: str) -> tuple[str, str]:
        """The workload and the device a timing is of, each one the profile lists."""
        return v.member(t, "workload", p, workload_keys), v.member(t, "device", p, device_ids)

    for p, k in v.items(data, "kernels"):
        timing = KernelTiming(v.member(k, "workload", p, workload_keys), v.member(k, "kernel", p, set(TIMING_NAMES)),
                              v.member(k, "device", p, device_ids), v.integer(k, "batch", p, 1),
                              *v.stats(k, p), v.source(k, p),
                              v.integer(k, "threads", p, 1, MAX_LANES) if "threads" in k else 1,
                              v.share(k, "beside", p) if "beside" in k else 0.0,
                              v.number(k, "one_thread_s", p, positive=True) if k.get("one_thread_s") is not None
                              else None, v.member(k, "precision", p, PRECISIONS) if "precision" in k else FP32,
                              v.member(k, "implementation", p, IMPLEMENTATIONS) if "implementation" in k else EAGER,
                              v.number(k, "device_s", p, positive=True) if k.get("device_s") is not None else None)
        profile.kernels.append(timing)
    profile.env_step = [EnvStepTiming(v.text(e, "env", p), *v.stats(e, p), v.source(e, p))
                        for p, e in v.items(data, "env_step")]
    profile.transfers = [Transfer(v.member(t, "device", p, device_ids), v.member(t, "direction", p, DIRECTIONS),
                                  v.number(t, "latency_s", p), v.number(t, "bandwidth_bytes_per_s", p, positive=True),
                                  v.source(t, p))
                         for p, t in v.items(data, "transfers")]
    profile.power = [Power(v.member(w, "device", p, device_ids), v.number(w, "idle_w", p), v.number(w, "busy_w", p),
                           v.source(w, p), v.member(w, "method", p, {"nvml", "rapl", "descriptor"}),
                           v.optional_text(w, "descriptor", p),
                           v.number(w, "scale", p, positive=True) if "scale" in w else 1.0)
                     for p, w in v.items(data, "power")]
    if "in_situ" in data:
        profile.in_situ = [InSituTiming(*keyed(t, p), v.number(t, "iteration_s", p, positive=True),
                                        v.integer(t, "iterations", p, 1),
                                        v.number(t, "inserts", p, positive=True), v.integer(t, "insert_rows", p, 1),
                                        v.integer(t, "batch", p, 1), v.flag(t, "prioritized", p), v.source(t, p),
                                        v.number(t, "first_iteration_s", p, positive=True)
                                        if t.get("first_iteration_s") is not None else None,
                                        v.number(t, "segment_s", p) if t.get("segment_s") is not None else None,
                                        v.member(t, "implementation", p, IMPLEMENTATIONS)
                                        if "implementation" in t else EAGER)
                           for p, t in v.items(data, "in_situ")]
    if "weight_sync" in data:
        profile.weight_sync = [WeightSyncTiming(*keyed(t, p), v.number(t, "publish_s", p), v.number(t, "load_s", p),
                                                v.integer(t, "samples", p, 1), v.source(t, p))
                               for p, t in v.items(data, "weight_sync")]
    if "actor_step" in data:
        profile.actor_step = [ActorStepTiming(*keyed(t, p), v.integer(t, "envs", p, 1, MAX_INT),
                                              v.number(t, "step_s", p, positive=True),
                                              v.integer(t, "samples", p, 1), v.source(t, p))
                              for p, t in v.items(data, "actor_step")]
    if "group_learn" in data:
        profile.group_learn = [GroupLearnTiming(*keyed(t, p), v.integer(t, "learners", p, 2, MAX_LANES),
                                                v.number(t, "update_s", p, positive=True),
                                                v.integer(t, "samples", p, 1), v.source(t, p),
                                                v.number(t, "comm_s", p) if t.get("comm_s") is not None else None)
                               for p, t in v.items(data, "group_learn")]
    if "calibrations" in data:
        profile.calibrations = [dict(c) for _, c in v.items(data, "calibrations")]
    if "precision_problems" in data:
        profile.precision_problems = [
            PrecisionProblem(v.member(d, "device", p, device_ids),
                             v.member(d, "precision", p, PRECISIONS), v.text(d, "reason", p))
            for p, d in v.items(data, "precision_problems")]
    if "unusable" in data:
        profile.unusable = [UnusableDevice(v.text(d, "id", p), v.text(d, "name", p), v.text(d, "reason", p))
                            for p, d in v.items(data, "unusable")]
    _reject_duplicates(profile, where)
    return profile


def check_same_machine(kept: Profile, host: dict[str, Any], where: str) -> None:
    """ProfileError unless `kept` (read from `where`) was measured on a machine with host's CPU and cores."""
    for field_name in ("cpu", "cores"):
        if kept.host.get(field_name) != host.get(field_name):
            raise ProfileError(f"{where}: a profile of another machine ({kept.host.get('cpu')}, "
                               f"{kept.host.get('cores')} cores), which this one would not add to; pass another "
                               "--out, or remove the file")


def merge_profiles(kept: Profile, new: Profile, where: str) -> Profile:
    """`new` with what `kept` (read from `where`) holds besides it: the workloads, envs, devices, transfers and
    power figures that `new` did not measure again. Both must be of this machine (the same CPU and cores), or
    the figures would not be comparable: ProfileError naming the file."""
    check_same_machine(kept, new.host, where)
    devices = {d.id for d in new.devices}
    keys = {w.key for w in new.workloads}
    out = Profile(new.pearl_version, new.created, new.mode, new.host,
                  devices=new.devices + [d for d in kept.devices if d.id not in devices],
                  workloads=new.workloads + [w for w in kept.workloads if w.key not in keys],
                  env_step=new.env_step + [e for e in kept.env_step if e.env not in {n.env for n in new.env_step}],
                  transfers=new.transfers + [t for t in kept.transfers if t.device not in devices],
                  power=new.power + [p for p in kept.power if p.device not in devices],
                  unusable=new.unusable + [u for u in kept.unusable
                                           if u.id not in devices | {n.id for n in new.unusable}],
                  precision_problems=new.precision_problems + [p for p in kept.precision_problems
                                                               if p.device not in devices])
    for name in ("kernels", "in_situ", "weight_sync", "actor_step", "group_learn"):
        setattr(out, name, getattr(new, name) + [t for t in getattr(kept, name) if t.workload not in keys])
    _reject_duplicates(out, where)
    return out


def _reject_duplicates(profile: Profile, where: str) -> None:
    """One entry per device, workload, measurement, env, transfer direction and power figure."""
    keyed = {
        "devices": [d.id for d in profile.devices],
        "workloads": [w.key for w in profile.workloads],
        "kernels": [(k.workload, k.kernel, k.device, k.batch, k.threads, k.beside, k.precision, k.implementation)
                    for k in profile.kernels],
        "env_step": [e.env for e in profile.env_step],
        "transfers": [(t.device, t.direction) for t in profile.transfers],
        "power": [p.device for p in profile.power],
        "in_situ": [(t.workload, t.device) for t in profile.in_situ],
        "weight_sync": [(t.workload, t.device) for t in profile.weight_sync],
        "actor_step": [(t.workload, t.device, t.envs) for t in profile.actor_step],
        "group_learn": [(t.workload, t.device, t.learners) for t in profile.group_learn],
        "unusable": [u.id for u in profile.unusable],
    }
    for name, keys in keyed.items():
        seen: set = set()
        for i, key in enumerate(keys):
            if key in seen:
                raise ProfileError(f"{where}: field '{name}[{i}]' repeats an earlier entry {key!r}")
            seen.add(key)


class _Validator(FieldChecker):
    """The shared field checks (pearl.fileio.FieldChecker) plus the profile's own: lists of entries, timing
    statistics, sources."""

    def __init__(self, where: str) -> None:
        super().__init__(where, ProfileError)

    def items(self, data: dict, name: str):
        value = data.get(name)
        if not isinstance(value, list):  # required: a misspelt "kernels" would otherwise be a profile of nothing
            self.fail(name, "a list", value)
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                self.fail(f"{name}[{i}]", "an object")
            yield f"{name}[{i}]", item

    def optional_text(self, d: dict, key: str, prefix: str) -> str | None:
        return self.checked(d, key, prefix, lambda v: v is None or isinstance(v, str), "a string or null")

    def int_list(self, d: dict, key: str, prefix: str) -> list[int]:
        def ok(v: Any) -> bool:
            return isinstance(v, list) and v != [] and all(is_int(x) and 0 < x <= MAX_INT for x in v)

        return self.checked(d, key, prefix, ok, "a non-empty list of positive integers")

    def share(self, d: dict, key: str, prefix: str) -> float:
        """A number in [0, 1]."""
        x = self.number(d, key, prefix)
        if x > 1:
            self.fail(field_path(prefix, key), "a share from 0 to 1", x)
        return x

    def stats(self, d: dict, prefix: str) -> tuple[float, float, float, int]:
        median, p10, p90 = (self.number(d, k, prefix) for k in ("median_s", "p10_s", "p90_s"))
        if not p10 <= median <= p90:
            self.fail(field_path(prefix, "median_s"), "between p10_s and p90_s", median)
        return median, p10, p90, self.integer(d, "samples", prefix, 1)

    def source(self, d: dict, prefix: str) -> str:
        return self.member(d, "source", prefix, {*SOURCES, IN_SITU})

