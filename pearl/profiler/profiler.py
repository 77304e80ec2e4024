"""`pearl profile`: measure every kernel × every adapter that implements it × a grid of batch sizes, for
each algorithm's preset (or one workload of the user's: an algorithm on any env, with its own network and
batch), plus env stepping, host↔device transfers and power, into a `Profile`.

What is measured, per workload (algorithm preset with its network shapes) and device:
- act: n observations (n = environments an actor steps), the preset's exploration;
- replay_insert: m transitions into the preset's buffer, pre-filled so inserts wrap nothing unusual, m over the
  grid and the rows the launchers insert at a time (an actor's share of a segment: `grids.insert_sizes`);
- replay_sample: b transitions from a uniform replay, and again (`replay_sample_prioritized`) from a
  prioritized one, whose sum-tree descent costs more; a plan charges the one its config uses;
- learn: one update on a batch already resident on the device (sampled, untimed, before the call); on `cpu`
  also at the preset's batch with the host's lanes as torch's intra-op threads (`threads` on the timing), the
  figure the planner's choice of the learner's threads reads (every other figure is at 1 thread);
- priority_update: b TD errors, resident on the device as a learn call leaves them, into a *prioritized*
  replay at the indices of a fresh sample (uniform replay makes it a no-op, so its cost only exists with
  priorities);
- in situ: the learner's whole iteration (inserts, sample, learn, priority update) as the runtime runs it,
  on fresh samples: what the kernels cost interleaved, which the cost model scales the kernels to; and one
  such iteration after a pause, as a segment's first runs after the learner waited for its actors;
- weight sync: the learn kernel writing its policy into one flat host array (the runtime's shared weight
  board), and the actor's side, a copy of that array loaded into the act kernel;
- the actor's step: an actor's whole iteration at each of the act grid's env counts, as the actor process runs
  it when the caller lends the runtime's loop (`RuntimeProbes`; pearl/profiler/actor.py: one act call, one step
  of a vector env with its resets and bookkeeping, the ring write, the schedule's and counters' bookkeeping), acting
  on the host's `cpu` (or the first device profiled when `cpu` is not): what an actor does per step beyond
  the bare env step and the act kernel is host work, whatever device it acts on.
Where a device runs act and learn captured as CUDA graphs (its kind lists both `implementations`), both are
timed eagerly too, as points of the same rounds, each labelled with its way; where the adapter has a clock of the
device's own (CUDA events), every point is read by it as well (`device_s`).
Kernel figures follow pearl.profiler.timing.measure_interleaved (rounds over a device's grid points, so
every figure samples the whole sweep); the actor's steps are points of the same rounds on the device it acts on
(5 × a kernel point's time each), as the in-situ iteration is; the others timing.measure. Transfers: a 4-byte
copy gives the latency, a large one the bandwidth. Power: NVML, RAPL, else the device's descriptor (modelled).
Devices that run on the same physical resource (PoCL's CPU device and `cpu`) are marked with the same `shares` value and
get the same power figures, since they are one resource. GPU slices (MIG instances, MPS shares) this machine
has are timed each in a child process started with the slice's environment (`profile_device_here` is the
child's side), or modelled from their GPU's measurements when that fails, saying why (pearl.profiler.slices).
This module runs the measuring and times the kernel grid, env steps, transfers and power; the learner's figures
beyond the grid (threads, a learner group, in situ, weight sync) are pearl/profiler/learner.py's, the actor's
step pearl/profiler/actor.py's, and the grids pearl/profiler/grids.py's.
"""

from __future__ import annotations

import os
import pickle
import platform
import sys
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Callable

import gymnasium as gym
import numpy as np

from pearl._version import __version__
from pearl.adapters import Adapter, DeviceInfo, Discovery, ReplayKernels, discover, open_adapter
from pearl.adapters.base import K
from pearl.adapters.registry import precision_problem
from pearl.algos import OffPolicyConfig, algorithm, algorithm_names, preset
from pearl.algos.params import init_params
from pearl.device import HOST, HOST_DEVICE, HOST_RESOURCE, DeviceKind  # noqa: F401 - HOST_RESOURCE read here by callers
from pearl.descriptors import DeviceDescriptor, load_descriptor, resolve_descriptor
from pearl.envs import check_algo_fits, env_spec
from pearl.errors import ConfigError, DeviceError, PearlError
from pearl.kernels import DEVICE_KERNELS, PRIORITIZED_SAMPLE, Implementation, Precision
from pearl.profile.format import (ActorStepTiming, DeviceEntry, EnvStepTiming, InSituTiming, KernelTiming, Power,
                                  PrecisionProblem, Profile, Transfer, UnusableDevice, WeightSyncTiming, Workload,
                                  config_workload,
                                  save_profile)
from pearl.profiler import power
from pearl.profiler.actor import ActorLoop, ActorSteps
from pearl.profiler.grids import GRIDS, IN_SITU_TIME_FACTOR, Grid, insert_sizes, prefill, random_transitions
from pearl.profiler.learner import LearnerLoop, LearnerRun, group_learn, threaded_learn, weight_sync
from pearl.profiler.options import ProfileOptions
from pearl.profiler.slices import ChildArgs, add_slices, slices_to_profile
from pearl.profiler.timing import Point, measure, measure_interleaved
from pearl.schedule import Schedule
from pearl.traffic import WEIGHTS, statement
from pearl.types import EnvSpec, PriorityUpdate

GENERIC_CPU_DESCRIPTOR = "generic-x86-server-cpu.toml"
#: (config, spec, seconds) → the learner's loop a segment beyond its kernels, timed for about that long
SegmentLoop = Callable[[OffPolicyConfig, EnvSpec, float], float]


@dataclass(frozen=True)
class RuntimeProbes:
    """What a caller that has the runtime lends the profiler, which sits below it (pearl.runtime.local.PROBES):
    `actor_loop`, the actor iteration the actor step times (pearl.profiler.actor; None: the bare loop);
    `segment_loop`, the learner's loop a segment beyond its kernels (None: not timed, and the cost model charges
    none)."""

    actor_loop: ActorLoop | None = None
    segment_loop: SegmentLoop | None = None
    #: the learner role's per-update path around the in-situ iteration's kernels (pearl/profiler/learner.py
    #: `LearnerRun`; None: the kernels called bare)
    learner_run: LearnerRun | None = None


NO_PROBES = RuntimeProbes()
#: the in-situ learner iteration's labels among the kernel grid's points (progress lines): its chains, and a
#: segment's first iteration (after a pause); and the actor's iteration's
IN_SITU_POINT, FIRST_POINT = "in-situ learner iteration", "in-situ first iteration of a segment"
ACTOR_POINT = "actor step"
BF16, EAGER = Precision.BF16_MIXED, Implementation.EAGER


def workloads(options: ProfileOptions) -> list[tuple[OffPolicyConfig, EnvSpec]]:
    """The (config, env spec) of every workload to measure: each algorithm's preset, or the one workload of
    --env with its shapes (hidden, batch size, envs per actor) where given. ConfigError for a bad one."""
    entries = [algorithm(algo) for algo in options.algos]  # an unknown one → ConfigError naming the known ones
    shapes = {k: v for k, v in (("hidden", options.hidden), ("batch_size", options.batch_size),
                                ("n_envs", options.n_envs)) if v is not None}
    if options.env is None:
        if shapes:
            raise ConfigError("--hidden, --batch-size and --n-envs shape a workload of --env; give --env too")
        return [(preset(a.name, a.profile_env), env_spec(a.profile_env)) for a in entries]
    if len(options.algos) != 1:
        choices = " or ".join(f"--algo {name}" for name in algorithm_names())
        raise ConfigError(f"--env profiles one workload: give {choices} with it")
    algo = options.algos[0]
    spec = env_spec(options.env)
    check_algo_fits(algo, spec)
    config = preset(algo, options.env).replace(**shapes)
    config.validate()
    return [(config, spec)]


@dataclass
class _Target:
    info: DeviceInfo
    adapter: Adapter
    entry: DeviceEntry
    descriptor: DeviceDescriptor | None


def plan_devices(options: ProfileOptions, devices: list[DeviceInfo] | None = None) -> list[DeviceInfo]:
    """The devices to measure in this process, among `devices` (default: what `discover` finds): every usable
    one (or those --device names) but GPU slices, which pearl.profiler.slices measures in processes of their
    own. A named device that is found but unusable is a DeviceError saying why."""
    listed = discover().devices if devices is None else devices
    # an FPGA board runs precompiled binaries only: nothing for the profiler to build and time
    candidates = [d for d in listed if d.kind is not DeviceKind.FPGA and d.device_id.slice is None]
    found = {d.id: d for d in candidates if d.usable}
    if options.devices is None:
        return list(found.values())
    broken = {d.id: d for d in candidates if not d.usable}
    for name in options.devices:
        if name in broken:
            raise DeviceError(f"cannot profile {name} ({broken[name].name}): {broken[name].problem}")
    missing = [d for d in options.devices if d not in found]
    if missing:
        raise DeviceError(f"cannot profile {', '.join(missing)}: not found on this machine "
                          f"(found: {', '.join(found)}); `pearl devices` lists them")
    return [found[d] for d in options.devices]


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def run_profile(options: ProfileOptions, progress: Callable[[str], None] | None = None,
                warn: Callable[[str], None] = _warn, probes: RuntimeProbes = NO_PROBES,
                found: Discovery | None = None) -> Profile:
    """Measure this machine (`found`: what `discover` finds, by default); progress(label) is called once per
    measurement, warn(message) for each device left out (found unusable by its probe, or failing while it was
    measured: the profile records it in `unusable`) and each GPU slice that could not be measured (it is
    modelled, or left out, and the message says why). probes: what the caller lends of the runtime
    (`RuntimeProbes`)."""
    grid = GRIDS["quick" if options.quick else "full"]
    measured = workloads(options)  # a bad workload fails before any measuring
    # a path or a shipped descriptor's name; a bad descriptor fails before any measuring
    what_if = [load_descriptor(resolve_descriptor(p, Path(options.descriptors_dir))) for p in options.what_if]
    stems = [d.source.stem for d in what_if]  # each becomes the device whatif:<stem>
    if len(set(stems)) < len(stems):
        raise ConfigError(f"--what-if names two descriptors called {max(stems, key=stems.count)}.toml: their "
                          "what-if devices would share one id; rename one of the files")
    descriptors = _known_descriptors(options.descriptors_dir)
    note = progress or (lambda _label: None)
    profile = Profile(__version__, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      "quick" if options.quick else "full", _host())
    discovery = discover() if found is None else found
    found_devices = discovery.devices
    chosen = plan_devices(options, found_devices)  # a named device that cannot work fails here, before any work
    if options.devices is None:  # named devices leave nothing else out: nothing to warn of
        for line in discovery.warnings():
            warn(line)
    profile.unusable += [UnusableDevice(d.id, d.name, d.problem) for d in discovery.unusable]
    targets = _open_targets(profile, chosen, descriptors, warn)
    _measure(profile, targets, measured, grid, note, env_steps=True, probes=probes, warn=warn)
    profile.power = _power(targets, profile, grid)
    wholes = {t.info.id: (t.entry, t.descriptor) for t in targets}
    add_slices(profile, wholes, slices_to_profile([d for d in found_devices if d.usable], list(wholes),
                                                  options.devices), options, note, warn)
    for descriptor in what_if:
        from pearl.profiler.whatif import add_what_if  # the roofline model, for devices that are absent

        add_what_if(profile, descriptor, grid)
        note(f"what-if {descriptor.model}")
    return profile


def _actor_update_s(config: OffPolicyConfig, spec: EnvSpec, actor_s: float, sync: WeightSyncTiming) -> float:
    """One actor's host work per update beside a learner: its iterations for the update's env steps (actor_s each,
    1/ρ of them) and its weight loads, as many a segment as the local launcher's traffic statement says (one:
    with DDPG's one-step segments, a load every update)."""
    sched = Schedule.for_config(config, actors=1)
    loads = statement("local")(sched, config, spec)[WEIGHTS].loads
    return actor_s / config.replay_ratio + sync.load_s * loads / sched.updates_per_segment


def _open_targets(profile: Profile, chosen: list[DeviceInfo], descriptors: list[DeviceDescriptor],
                  warn: Callable[[str], None]) -> list[_Target]:
    """A target for each chosen device whose adapter opens; one that fails to (its whole program does not build,
    say) is left out, recorded in the profile and warned of."""
    targets = []
    for info in chosen:
        try:
            targets.append(_target(info, descriptors))
        except Exception as exc:  # noqa: BLE001 - whatever the device's library raises, the rest goes on
            _leave_out(profile, info, f"its adapter failed to open: {_cause(exc)}", warn)
    return targets


def _cause(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _leave_out(profile: Profile, info: DeviceInfo, why: str, warn: Callable[[str], None]) -> None:
    """Drop every figure of a device that failed while it was measured, and record it as unusable: a profile
    holds a device whole or not at all."""
    for name in ("kernels", "in_situ", "weight_sync", "actor_step", "group_learn", "transfers", "power"):
        setattr(profile, name, [t for t in getattr(profile, name) if t.device != info.id])
    profile.devices = [d for d in profile.devices if d.id != info.id]
    profile.unusable.append(UnusableDevice(info.id, info.name, why))
    warn(f"{info.id} ({info.name}) left out: {why}")


def _measure(profile: Profile, targets: list[_Target], measured: list[tuple[OffPolicyConfig, EnvSpec]], grid: Grid,
             note: Callable[[str], None], env_steps: bool, probes: RuntimeProbes = NO_PROBES,
             warn: Callable[[str], None] | None = None) -> None:
    """The targets' entries, and for each workload their kernels, in-situ iteration (on the host with the
    segment loop's figure, where the probes have one) and weight sync (and, when env_steps, the env's steps and
    the actor's iteration, the latter among the kernels of the device it acts on), then their transfers, into
    profile. With `warn`, a target whose measuring raises is left out (`_leave_out`) and the rest goes on;
    without, the error propagates (a child measuring one device reports it to its parent)."""
    profile.devices += [t.entry for t in targets]
    lacking = {t.info.id: precision_problem(t.info.device_id, BF16) for t in targets}
    profile.precision_problems += [PrecisionProblem(d, BF16.value, why) for d, why in lacking.items() if why]

    def guarded(target: _Target, measure_it: Callable[[], None]) -> None:
        if warn is None:
            measure_it()
            return
        try:
            measure_it()
        except Exception as exc:  # noqa: BLE001 - a device that vanishes or errors mid-profile: the rest goes on
            targets.remove(target)
            _leave_out(profile, target.info, f"it failed while being measured: {_cause(exc)}", warn)

    for config, spec in measured:
        workload = config_workload(config, spec)
        profile.workloads.append(workload)
        actor = None
        if env_steps:
            if all(e.env != spec.env_id for e in profile.env_step):  # TD3, SAC and DDPG share Pendulum-v1
                profile.env_step.append(_env_step(spec.env_id, grid))
            note(f"env_step {spec.env_id}")
            actor = _actor_target(targets, config)
        for target in list(targets):  # a copy: a target that fails is removed from targets
            if target.adapter.backend not in algorithm(config.algo).kernels:
                continue  # no kernels of this algorithm on this backend (SAC on OpenCL): nothing to time, nor to plan
            bf16 = not lacking[target.info.id] and learns_in(config, target.adapter.backend, BF16)
            guarded(target, partial(_measure_target, profile, target, actor is target, workload, config, spec, grid,
                                    note, probes, bf16))
    for target in list(targets):
        guarded(target, partial(_measure_transfers, profile, target, grid, note))
    group = _group_transfer(targets, grid)
    if group is not None:
        profile.transfers.append(group)
        note("learner group all-gather")


def _measure_target(profile: Profile, target: _Target, acts: bool, workload: Workload, config: OffPolicyConfig,
                    spec: EnvSpec, grid: Grid, note: Callable[[str], None], probes: RuntimeProbes,
                    bf16: bool = False) -> None:
    """One target's figures for one workload (its actor's steps too when it is the device the actor acts on;
    learn at bf16-mixed too when `bf16`)."""
    steps = ActorSteps(target.adapter, config, spec, grid, probes.actor_loop) if acts else None
    try:
        kernels, learner_iteration, actor_step = _kernels(target, workload, config, spec, grid, note, steps,
                                                                probes.learner_run, bf16)
    finally:
        if steps is not None:
            steps.close()
    profile.actor_step += actor_step
    profile.kernels += kernels
    sync = weight_sync(target.adapter, target.info, workload, config, spec, grid)
    profile.weight_sync.append(sync)
    note(f"weight sync {target.info.id}")
    actor_s = next((t.step_s for t in profile.actor_step if t.workload == workload.key), None)
    actor_update_s = None if actor_s is None else _actor_update_s(config, spec, actor_s, sync)
    for precision in (Precision.FP32, BF16) if bf16 else (Precision.FP32,):
        profile.kernels += threaded_learn(target.info, workload, config, spec, grid, actor_update_s, precision)
    profile.group_learn += group_learn(target.adapter, target.info, workload, config, spec, grid)
    if probes.segment_loop is not None and target.info.device_id == HOST_DEVICE:
        learner_iteration = replace(learner_iteration, segment_s=probes.segment_loop(
            config, spec, IN_SITU_TIME_FACTOR * grid.min_time))
        note(f"learner segment loop {target.info.id}")
    profile.in_situ.append(learner_iteration)


def _measure_transfers(profile: Profile, target: _Target, grid: Grid, note: Callable[[str], None]) -> None:
    profile.transfers += _transfers(target, grid)
    note(f"transfers {target.info.id}")


def profile_device_here(options: ProfileOptions, record: tuple[str, ...] = ()) -> Profile:
    """What a child process started with a GPU slice's environment measures for `pearl profile`
    (pearl.profiler.slices): the kernels, in-situ iteration, weight sync and transfers of the one device
    options.devices names, as this process sees it; no env steps, power, slices or what-if devices (the parent
    has those). The device's entry records the environment variables of `record` that this process has, so the
    parent's profile shows what the child ran under. DeviceError for a device this process does not find."""
    grid = GRIDS["quick" if options.quick else "full"]
    measured = workloads(options)
    profile = Profile(__version__, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      "quick" if options.quick else "full", _host())
    descriptors = _known_descriptors(options.descriptors_dir)
    targets = [_target(info, descriptors) for info in plan_devices(options)]
    seen = tuple((k, os.environ[k]) for k in sorted(record) if k in os.environ)
    for t in targets:
        t.entry = replace(t.entry, process_env=seen)
    _measure(profile, targets, measured, grid, lambda _label: None, env_steps=False)
    return profile


def serve_child() -> None:
    """The body of the child process pearl.profiler.slices.profile_in_child starts (its CHILD_COMMAND): read
    ChildArgs from stdin, measure, write the profile; a user error is one `error:` line and exit status 2, as
    from the CLI."""
    args: ChildArgs = pickle.loads(sys.stdin.buffer.read())
    try:
        save_profile(profile_device_here(args.options, args.record), args.out)
    except PearlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def count_measurements(options: ProfileOptions, probes: RuntimeProbes = NO_PROBES) -> int:
    """The calls run_profile(options, probes=probes) makes to progress: per workload its env steps, the actor's
    step, each device's timings and the host's segment loop (where the probes have one), each device's transfers,
    the learner group's all-gather, each GPU slice (measured or modelled) and each what-if device."""
    grid = GRIDS["quick" if options.quick else "full"]
    # the kernel grid with the in-situ iteration's two points among its points, + the weight sync; on the device
    # the actor is timed on, its iteration's points as well
    def per_device(config: OffPolicyConfig, device: DeviceInfo) -> int:
        learn16 = int(learns_in(config, device.adapter, BF16) and not precision_problem(device.device_id, BF16))
        ways = 2 if captures(device) else 1  # act and learn timed captured and eager
        return (len(grid.act) * ways + len(insert_sizes(grid, config))
                + (3 + (1 + learn16) * ways) * len(grid.batch_factors) + 2) * grid.rounds + 1

    actor = len(grid.act) * grid.rounds
    found = discover().devices
    chosen = plan_devices(options, found)
    planned = [d.id for d in chosen]
    devices, slices = len(planned), len(slices_to_profile(found, planned, options.devices))
    configs = [c for c, _ in workloads(options)]
    able = [[d for d in chosen if d.adapter in algorithm(c.algo).kernels] for c in configs]
    looped = probes.segment_loop is not None
    timed = sum(1 + (actor if on else 0) + sum(per_device(c, d) for d in on) + int(looped and any(d.id == HOST for d in on))
                for c, on in zip(configs, able))  # env_step, actor step, devices, the segment loop
    group = int(any(d.id == HOST and d.device_id.backend.collective for d in chosen))  # the group's all-gather
    return timed + devices + group + slices + len(options.what_if)


# --------------------------------------------------------------------------- devices and descriptors
def _known_descriptors(folder: Path) -> list[DeviceDescriptor]:
    return [load_descriptor(p) for p in sorted(Path(folder).glob("*.toml"))] if Path(folder).is_dir() else []


def _match(info: DeviceInfo, descriptors: list[DeviceDescriptor]) -> tuple[DeviceDescriptor | None, bool]:
    """The descriptor whose longest `match` string occurs in the device name (so "pthread-AMD EPYC 7763" is the
    EPYC, not any PoCL device); else the generic CPU one for CPUs (matched=False)."""
    best, best_len = None, 0
    for d in descriptors:
        if d.binary is not None:  # a board binary's descriptor describes a build, not a device model
            continue
        hits = [m for m in d.match if m.lower() in info.name.lower()]
        if hits and max(map(len, hits)) > best_len:
            best, best_len = d, max(map(len, hits))
    if best is not None:
        return best, True
    if info.kind is DeviceKind.CPU:
        generic = [d for d in descriptors if d.source.name == GENERIC_CPU_DESCRIPTOR]
        return (generic[0] if generic else None), False
    return None, False


def _target(info: DeviceInfo, descriptors: list[DeviceDescriptor]) -> _Target:
    descriptor, matched = _match(info, descriptors)
    shares = info.resource if info.resource != info.id else None  # a resource of its own is not shared
    entry = DeviceEntry(info.id, info.kind, info.adapter, info.name, info.lanes, info.memory_bytes, "measured",
                        shares, descriptor.source.name if descriptor else None, matched)
    return _Target(info, open_adapter(info.device_id, threads=1), entry, descriptor)


def _host() -> dict:
    from pearl.hostinfo import cpu_lanes, cpu_name, host_memory_bytes

    return {"node": platform.node(), "platform": platform.platform(), "python": sys.version.split()[0],
            "cpu": cpu_name(), "cores": cpu_lanes(), "memory_bytes": host_memory_bytes()}


# --------------------------------------------------------------------------- kernels
def _kernels(target: _Target, workload: Workload, config: OffPolicyConfig, spec: EnvSpec, grid: Grid,
             note: Callable[[str], None], actor: ActorSteps | None = None,
             learner_run: LearnerRun | None = None, bf16: bool = False
             ) -> tuple[list[KernelTiming], InSituTiming, list[ActorStepTiming]]:
    """Every grid point of every device kernel, the learner's iteration in situ (`LearnerLoop`) and, on the device
    the actor is timed on, the actor's iteration at each env count (`actor`), measured in interleaved rounds
    (timing.measure_interleaved): the cost model divides the in-situ iteration by the kernels (its in-situ factor)
    and weighs the actor's iteration against the learner's, so they are timed over the same span of this machine,
    whose speed drifts between them otherwise. With `bf16`, learn at bf16-mixed beside float32's at each batch,
    interleaved with it, so the planner weighs the two over the same span of the machine."""
    adapter, device, rng = target.adapter, target.info.id, np.random.default_rng(0)
    sync = adapter.synchronize
    labels: list[_Label] = [_Label(ACTOR_POINT, n) for n in actor.envs] if actor is not None else []
    points: list[Point] = list(actor.points) if actor is not None else []

    def point(kernel: str, batch: int, call: Callable[..., object], prepare: Callable | None = None,
              precision: Precision = Precision.FP32, implementation: Implementation = EAGER) -> None:
        labels.append(_Label(kernel, batch, precision, implementation))
        points.append(Point(call, sync, prepare, clock=adapter.device_clock()))

    params = init_params(config, spec, seed=0)
    explore = config.exploration(config.total_steps)  # what act gets at the end of the run (DQN's final ε)
    acts = _both_ways(lambda way: adapter.make_act(config, spec, params, seed=0, implementation=way))
    for n in grid.act:
        obs = rng.normal(size=(n, spec.obs_dim)).astype(np.float32)
        for act in acts:
            point("act", n, partial(act.act, obs, explore), implementation=act.implementation)

    replays = {p: adapter.make_replay(config.replace(prioritized=p), spec, seed=0) for p in (False, True)}
    for replay in replays.values():
        prefill(replay, spec, grid.prefill, rng)
    uniform, prioritized = replays[False], replays[True]
    for m in insert_sizes(grid, config):
        point("replay_insert", m, partial(uniform.insert, random_transitions(spec, m, rng)))

    learners = [(learner, precision) for precision in ((Precision.FP32, BF16) if bf16 else (Precision.FP32,))
                for learner in _both_ways(lambda way, p=precision: adapter.make_learn(config, spec, params,
                                                                                     precision=p, implementation=way))]
    loop = LearnerLoop(adapter, config, spec, grid, learner_run)
    for b in sorted({max(2, int(round(config.batch_size * f))) for f in grid.batch_factors}):
        point("replay_sample", b, partial(uniform.sample, b, 0.4))
        point(PRIORITIZED_SAMPLE, b, partial(prioritized.sample, b, 0.4))
        for learner, precision in learners:
            point("learn", b, partial(learner.learn, uniform.sample(b, 0.4)), precision=precision,
                  implementation=learner.implementation)
        if b == max(2, config.batch_size):  # next to the learn it is mostly made of: the same moment of the host
            point(IN_SITU_POINT, b, loop.chain)
            point(FIRST_POINT, b, loop.after_pause, loop.pause)
        # priority_update alone; each call gets a fresh untimed sample's indices and device-resident TD errors
        point("priority_update", b, prioritized.update_priorities, partial(_fresh_update, adapter, prioritized, b, rng))

    def after(r: int, i: int) -> None:
        note(f"{labels[i].on(device)} (round {r + 1}/{grid.rounds})")

    stats = measure_interleaved(points, rounds=grid.rounds, min_time=grid.min_time, warmup=grid.warmup,
                                min_samples=grid.min_samples, after=after)
    special = (IN_SITU_POINT, FIRST_POINT, ACTOR_POINT)
    out = [KernelTiming(workload.key, label.kernel, device, label.batch, st.median_s, st.p10_s, st.p90_s, st.samples,
                        "measured", precision=label.precision.value, implementation=label.implementation.value,
                        device_s=st.device_s)
           for label, st in zip(labels, stats) if label.kernel not in special]
    assert {k.kernel for k in out} == {*DEVICE_KERNELS, PRIORITIZED_SAMPLE}
    of = {name: [st for label, st in zip(labels, stats) if label.kernel == name] for name in special}
    [iteration], [first] = of[IN_SITU_POINT], of[FIRST_POINT]
    steps = [] if actor is None else actor.timings(target.info, workload, of[ACTOR_POINT])
    return out, loop.timing(target.info, workload, iteration, first), steps


@dataclass(frozen=True)
class _Label:
    """A grid point: the kernel (or the in-situ iteration's, the actor's point), its batch (or env count) and
    the way it ran."""

    kernel: str
    batch: int
    precision: Precision = Precision.FP32
    implementation: Implementation = EAGER

    def on(self, device: str) -> str:
        """The point for a progress line: "learn at bf16-mixed captured cuda:0 b=256"."""
        ways = [w for w in (self.precision is not Precision.FP32 and f"at {self.precision.value}",
                            self.implementation is not EAGER and self.implementation.value) if w]
        size = "envs" if self.kernel == ACTOR_POINT else "b"
        return " ".join([self.kernel, *ways, device]) + f" {size}={self.batch}"


def _both_ways(make: Callable[[Implementation | None], K]) -> list[K]:
    """A kernel as the adapter runs it, and eagerly too where that is another implementation (a captured one):
    the profile times both, and the planner places the faster."""
    kernel = make(None)
    return [kernel] if kernel.implementation is EAGER else [kernel, make(EAGER)]


def captures(device: DeviceInfo) -> bool:
    """Whether the device's act and learn run captured (and so are timed eagerly too)."""
    return Implementation.own(device.device_id.backend.implementations) is Implementation.CAPTURED


def learns_in(config: OffPolicyConfig, backend: str, precision: Precision) -> bool:
    """Whether the algorithm's learn kernels on `backend` compute in `precision`."""
    return precision in algorithm(config.algo).kernel_factories(backend).precisions


def _actor_target(targets: list[_Target], config: OffPolicyConfig) -> _Target | None:
    """The device the actor's iteration is timed on: `cpu` when profiled, else the first that runs the
    algorithm's kernels."""
    able = [t for t in targets if t.adapter.backend in algorithm(config.algo).kernels]
    return next((t for t in able if t.info.id == HOST), able[0] if able else None)


def _fresh_update(adapter: Adapter, replay: ReplayKernels, batch_size: int,
                  rng: np.random.Generator) -> PriorityUpdate:
    """A priority update as the learner hands it over: a sample's indices, TD errors on the device.

    The TD errors are random rather than a learn call's: the update's cost does not depend on their values,
    and preparing each timed call with a learn, which on PoCL takes far longer than the update itself, left the
    figure too few samples within its time budget for a repeatable median."""
    sampled = replay.sample(batch_size, 0.4)
    return PriorityUpdate(sampled.indices, adapter.from_host(rng.normal(size=batch_size).astype(np.float32)))


def _env_step(env_id: str, grid: Grid) -> EnvStepTiming:
    env = gym.make(env_id)
    env.reset(seed=0)
    env.action_space.seed(0)

    def step() -> None:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()

    stats = measure(step, lambda: None, min_time=grid.min_time, warmup=grid.warmup, min_samples=grid.min_samples)
    env.close()
    return EnvStepTiming(env_id, stats.median_s, stats.p10_s, stats.p90_s, stats.samples, "measured")


# --------------------------------------------------------------------------- transfers and power
def _transfers(target: _Target, grid: Grid) -> list[Transfer]:
    """Latency from a 4-byte copy, bandwidth from a large one (its time less the latency)."""
    adapter = target.adapter
    if target.info.device_id == HOST_DEVICE:
        return []  # the host itself
    timing = {"min_time": grid.min_time, "warmup": grid.warmup, "min_samples": grid.min_samples}
    small, large = np.zeros(1, np.float32), np.zeros(grid.transfer_bytes // 4, np.float32)
    out = []
    for direction in ("h2d", "d2h"):
        if direction == "h2d":
            lat = measure(partial(adapter.from_host, small), adapter.synchronize, **timing)
            big = measure(partial(adapter.from_host, large), adapter.synchronize, **timing)
        else:
            lat = measure(partial(adapter.to_host, adapter.from_host(small)), adapter.synchronize, **timing)
            big = measure(partial(adapter.to_host, adapter.from_host(large)), adapter.synchronize, **timing)
        bandwidth = large.nbytes / max(big.median_s - lat.median_s, 1e-9)
        out.append(Transfer(target.info.id, direction, lat.median_s, bandwidth, "measured"))
    return out


def _group_transfer(targets: list[_Target], grid: Grid) -> Transfer | None:
    """The host's learner-group figure (direction `group`): the latency of a 4 KB all-gather between two learner
    processes and the bandwidth of one of transfer_bytes (its time less the latency), through the host CPU's
    adapter; None without one that can train in a group."""
    host = next((t for t in targets if t.info.device_id == HOST_DEVICE), None)
    if host is None:
        return None
    timed = host.adapter.time_group((4096, grid.transfer_bytes), max(20, 4 * grid.min_samples))
    if timed is None:
        return None
    (_, small), (large_bytes, large) = timed
    return Transfer(HOST, "group", small, large_bytes / max(large - small, 1e-9), "measured")


def _power(targets: list[_Target], profile: Profile, grid: Grid) -> list[Power]:
    """Each device's own figures; devices on one resource (`shares`) then all carry the best of theirs, since
    the planner charges a resource once: measured, else a descriptor that matched the device by name (PoCL's
    own pocl-cpu.toml, a CPU model's), else the generic CPU fallback; the first device breaks ties."""
    own = {t.info.id: r for t in targets if (r := _read_power(t, grid)) is not None}

    def rank(t: _Target) -> tuple[int, int]:
        reading = own[t.info.id]
        return (0 if reading.source == "measured" else 1 if t.entry.descriptor_matched else 2, targets.index(t))

    out = []
    for t in targets:
        group = [o for o in targets if o.info.id in own and (o is t or (t.entry.shares is not None and
                                                                        o.entry.shares == t.entry.shares))]
        if group:
            r = own[min(group, key=rank).info.id]
            out.append(Power(t.info.id, r.idle_w, r.busy_w, r.source, r.method, r.descriptor, r.scale))
    return out


def _read_power(target: _Target, grid: Grid) -> power.PowerReading | None:
    device = target.info.device_id
    reader = device.backend.power if device.slice is None else ""  # a slice's draw is its whole GPU's
    measured = power.read(reader, device, _lazy_busy_loop(target), grid.power_seconds) if reader else None
    if measured is not None:
        return measured
    if target.descriptor is None:
        return None
    # a device on the host's cores (cpu, PoCL's CPU device) is charged the share of the chip it has
    return power.from_descriptor(target.descriptor, target.info.lanes if target.info.kind is DeviceKind.CPU else None)


def _lazy_busy_loop(target: _Target) -> Callable[[], None]:
    """`_busy_loop`, built on its first call: a reader that cannot read here (no RAPL, no NVML) never builds it."""
    built: list[Callable[[], None]] = []

    def busy() -> None:
        if not built:
            built.append(_busy_loop(target))
        built[0]()
    return busy


def _busy_loop(target: _Target) -> Callable[[], None]:
    """Keep the device busy: with its adapter's saturating load where it has one (a GPU, which a small update
    leaves near idle), else with the DQN preset's learn (a representative dense load)."""
    saturating = target.adapter.saturating_load()
    if saturating is not None:
        return saturating
    config, spec = preset("dqn", "CartPole-v1"), env_spec("CartPole-v1")  # a fixed load, not one per algorithm
    adapter, rng = target.adapter, np.random.default_rng(1)
    replay = adapter.make_replay(config.replace(buffer_size=4096), spec, seed=1)
    replay.insert(random_transitions(spec, 4096, rng))
    learner = adapter.make_learn(config, spec, init_params(config, spec, seed=1))

    def busy() -> None:
        learner.learn(replay.sample(config.batch_size, 0.4))
        adapter.synchronize()

    return busy
