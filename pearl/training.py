"""`pearl.train`: train one algorithm on one environment with each role on a chosen device, then evaluate.

Rates are measured over the training loop only (evaluation excluded):
    env_steps_per_s        = env steps / training wall time
    updates_per_s          = gradient updates / training wall time
    learner_samples_per_s  = updates_per_s × batch size
    replay_ratio           = updates / env steps collected after learning_starts
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from pearl._version import __version__
from pearl.algos import OffPolicyConfig, algo_config_class, algorithm, config_from_dict, has_preset, preset
from pearl.algos.params import init_params
from pearl.device import HOST, DeviceId, NodeDevice, check_slice_use
from pearl.envs import check_algo_fits, env_spec
from pearl.errors import CheckpointError, ConfigError, DeviceError, PearlError, PlanError, RunDirError
from pearl.fileio import FieldChecker, read_json
from pearl.runtime.checkpoint import FOLDER as CHECKPOINTS
from pearl.runtime.checkpoint import Checkpoint, Checkpointer, describe, estimate_bytes, latest
from pearl.runtime.evaluate import confirm, evaluate
from pearl.runtime.launcher import Job, LauncherCapabilities, LoopStats, Placement, RoleNodes, SegmentLauncher
from pearl.runtime.record import RunRecord, check_runs_dir
from pearl.runtime.seeds import Seeds
from pearl.schedule import DEFAULT_LAG
from pearl.types import MAX_ENVS, EnvSpec, Params

if TYPE_CHECKING:
    from pearl.planner.plan import Plan
    from pearl.profile.format import Profile

# The learner's threads when neither --threads nor a plan nor a profile of this machine says otherwise: a plan
# whose profile times learn at 1 thread only prices T threads as 1 and keeps 1 (ties keep fewer threads). One
# thread suits the presets' small MLPs when nothing is known (DQN CartPole on a 2-core EPYC: about 1,190 env
# steps/s with 1 thread against 850 with 2, same results).
DEFAULT_THREADS = 1
MAX_THREADS = 4096  # a typo must not ask torch for millions of threads
DEFAULT_CHECKPOINT_EVERY = 5_000  # updates; DQN CartPole's 50,000 steps make ~24,500 updates
EVALUATIONS_PER_RUN = 10  # in-training evaluations when eval_every is left to pearl


@dataclass
class RunOptions:
    """Everything one training run is given: the CLI, the Python API, config.json and resume all use this."""

    algo: str | None = None
    """Algorithm: a name the registry knows (`pearl.algos.algorithm_names()`: dqn, ddpg, td3, sac). May be left out
    with a plan, which names it."""
    env: str | None = None
    """Gymnasium environment id (e.g. CartPole-v1, or module:EnvName-v0). May be left out with a plan."""
    device: str | None = None
    """Device of every kernel (cpu, cuda:N, opencl:P:D) when there is no plan; cpu by default."""
    plan: str | None = None
    """A plan file (`pearl plan`): every kernel runs on its planned device with the planned actor count."""
    config: OffPolicyConfig | None = None
    """Hyperparameters; None takes pearl's preset for (algo, env), else the algorithm's defaults."""
    config_file: str | None = None
    """A JSON or TOML file of hyperparameters (name = value) changed from those (`--config FILE`)."""
    settings: dict[str, str] = field(default_factory=dict)
    """Hyperparameters changed last, as text parsed by each field's kind (`--set name=value`)."""
    steps: int | None = None
    """Env steps to train (overrides config.total_steps)."""
    seed: int = 0
    """Seed of the weights, the envs, exploration and replay sampling: with it a run repeats bit for bit."""
    eval_episodes: int = 10
    """Greedy episodes the final (and the best) policy is scored on after training."""
    eval_every: int | None = None
    """Env steps between in-training evaluations that keep the best policy (0: none; None: about ten per run)."""
    eval_every_episodes: int = 10
    """Greedy episodes of each in-training evaluation (other seeds than the final evaluation's)."""
    launcher: str = "local"
    """How the roles run: "local" (actor processes beside the learner), "sequential" (in turn, one process)
    or "ray" (Ray actors, on one machine or a cluster). The learning is the same; only the speed differs."""
    policy_lag: int = DEFAULT_LAG
    """L: segment k is collected with the weights published after segment k − 1 − L (0: the presets' strictly
    sequential schedule; 1: actors collect while the learner trains on the previous segment)."""
    segment_steps: int | None = None
    """Env steps per schedule segment (None: the algorithm's round, grown to fit every actor's envs)."""
    actors: int | None = None
    """Actor processes (default: the plan's, else 1)."""
    envs_per_actor: int | None = None
    """Environments each actor steps, batched into one act call (default: the plan's or the config's)."""
    learn: bool = True
    """False collects only (acting, env steps, replay inserts): the actor side's speed."""
    threads: int | None = None
    """CPU threads the learner's kernels may use (torch's intra-op threads; actor processes use 1). None picks
    them as a plan would on this machine: a plan's `threads`; else, with the learner on `cpu` and a profile of
    this machine at hand (`profile_at_hand`: <runs_dir>/profiles/<host>-quick.json, which `pearl quickstart`
    keeps, or profiles/<host>-full.json / -quick.json, which `pearl profile` writes; same CPU and cores) that
    times this workload's learn at more than one thread, the T ∈ {1, …, lanes} a plan would take for this
    layout: the planner's own prediction of it at each T, contention beside the actor processes included
    (pearl.planner.make.layout_threads), or with the sequential launcher, whose roles run in turn, the T whose
    learn is fastest (pearl.planner.accounting.fastest_threads); ties to fewer threads; else 1
    (DEFAULT_THREADS). On the 2-core EPYC the presets' learn gave the same bits at 1 and 2 threads; the thread
    count changes speed only there."""
    descriptor: str | None = None
    """Device descriptor (TOML) whose precompiled kernel binary an OpenCL device loads."""
    emulate: dict[str, str] = field(default_factory=dict)
    """An absent (what-if) device of the plan → the OpenCL device of this machine that runs its kernels."""
    max_restarts: int = 3
    """Times a dead actor process is started again before the run ends with its error."""
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY
    """Updates between checkpoints in runs/<id>/checkpoints/ (0: only at the end)."""
    checkpoint_replay: bool = True
    """Whether checkpoints hold the replay contents (a resume without them refills replay first)."""
    runs_dir: str = "runs"
    """Where runs/<id>/ is written."""
    max_seconds: float | None = None
    """Stop training after this much wall time (at the next segment boundary)."""
    ray_address: str | None = None
    """The Ray cluster to join (launcher "ray"); None starts a local Ray instance on this machine."""
    replay_shards: int = 0
    """Launcher "ray": replay as this many replay-server shard actors (0: replay in the learner's process, as
    the other launchers, which keeps their parameters bit for bit; the shards' sampler draws differently)."""

    def replace(self, **changes: Any) -> "RunOptions":
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ConfigError(f"unknown run option(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **changes)


@dataclass
class TrainResult:
    algo: str
    env: str
    steps: int
    seed: int
    device: str
    env_steps_per_s: float
    updates_per_s: float
    learner_samples_per_s: float
    replay_ratio: float
    eval_return_mean: float  # the headline policy's (see `headline`)
    eval_return_std: float
    eval_episodes: int
    wall_s: float
    run_dir: str
    updates: int = 0
    train_wall_s: float = 0.0
    preset: bool = False
    placement: dict[str, str] = field(default_factory=dict)
    actors: int = 1
    plan_check: dict = field(default_factory=dict)
    learning_env_steps_per_s: float | None = None  # over the learning phase only (after learning_starts)
    learning_updates_per_s: float | None = None
    launcher: str = "local"
    envs_per_actor: int = 1
    learn: bool = True
    threads: int = DEFAULT_THREADS  # the learner's threads the run used (RunOptions.threads, resolved)
    dropped_steps: int = 0
    actor_restarts: int = 0
    lost_steps_max: int = 0
    waits: dict[str, float] = field(default_factory=dict)
    eval_returns: list[float] = field(default_factory=list)  # the headline policy's
    kernel_seconds: dict[str, float] = field(default_factory=dict)
    start_steps: int = 0  # env steps a resumed run started from (rates count this run's share only)
    resumed_from: str | None = None  # the checkpoint it went on from
    skipped_checkpoints: list[str] = field(default_factory=list)  # newer ones that were damaged, and why
    checkpoints: list[str] = field(default_factory=list)  # files written by this run, oldest first
    checkpoint_s: float = 0.0  # seconds spent writing them (inside train_wall_s)
    schedule: dict[str, int] = field(default_factory=dict)  # segment steps, updates per segment, policy lag
    headline: str = "final"  # which policy eval_return_* describe: "best" (kept by in-training evaluations) or "final"
    confirmation: dict[str, Any] = field(default_factory=dict)  # best and final on fresh episodes: the headline's pick
    final: dict[str, Any] = field(default_factory=dict)  # the final policy: return_mean, return_std, returns
    best: dict[str, Any] = field(default_factory=dict)  # the best policy: the same, and when it was found
    evaluations: list[dict[str, Any]] = field(default_factory=list)  # every in-training evaluation
    eval_s: float = 0.0  # seconds of in-training evaluation (inside train_wall_s)
    hyperparameters_note: str = ""  # where the hyperparameters came from (preset, defaults, --set, --config)
    roles: dict[str, str] = field(default_factory=dict)  # where each role ran (the Ray launcher's nodes)
    #: what the run sent on each edge, as its launcher counted it (`pearl.traffic`: its statement's figures)
    traffic: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def parse_emulation(specs: Sequence[str]) -> dict[str, str]:
    """`--emulate ABSENT=opencl:P:D` options as {absent device: OpenCL device}; ConfigError for a malformed one."""
    out: dict[str, str] = {}
    for spec in specs:
        absent, sep, emulator = spec.partition("=")
        if not sep or not absent or not emulator:
            raise ConfigError(f"--emulate takes ABSENT=opencl:P:D (e.g. whatif:nvidia-a100-sxm4-80gb=opencl:0:0), "
                              f"got {spec!r}")
        if absent in out:
            raise ConfigError(f"--emulate names {absent} twice")
        out[absent] = emulator
    return out


def _checked_plan(path: str, algo: str | None, env_id: str | None, device: str | None,
                  emulate: dict[str, str] | None = None, launcher: str = "sequential") -> "Plan":
    """The plan, refused with the reason when it is for other work than algo/env (when given), another
    machine, or absent devices that `emulate` does not map to an OpenCL device of this machine."""
    from pearl.hostinfo import cpu_lanes, cpu_name
    from pearl.planner.plan import load_plan

    if device is not None:
        raise ConfigError("--plan places every kernel itself; drop --device (or drop --plan)")
    plan = load_plan(path)
    for name, given, planned in (("--algo", algo, plan.algo), ("--env", env_id, plan.env)):
        if given is not None and given != planned:
            raise ConfigError(f"{path} is a plan for {plan.algo} on {plan.env}, but {name} says {given}; drop "
                              f"{name} (the plan names it) or make a plan with `pearl plan --algo "
                              f"{algo or plan.algo} --env {env_id or plan.env}`")
    if is_cluster_plan(plan):  # a plan of a cluster profile: its nodes are checked when Ray runs (plan_node_ids)
        _check_cluster_plan(path, plan, launcher, emulate or {})
        return plan
    here = (cpu_name(), cpu_lanes())
    there = (plan.profile.get("cpu"), plan.profile.get("cores"))
    if here != there:
        raise PlanError(f"{path} was planned from a profile of another machine ({there[0]}, {there[1]} cores); "
                        f"this one is {here[0]}, {here[1]} cores: run `pearl profile` here and plan again")
    emulate = emulate or {}
    _check_emulation(path, plan, emulate)
    absent = sorted(d for d in set(plan.mapping.values()) if _is_what_if(d) and d not in emulate)
    if absent:
        raise PlanError(f"{path} places kernels on {', '.join(absent)}, a device modelled from its descriptor "
                        "that this machine does not have; plan without --what-if devices to train, or run those "
                        f"kernels on an OpenCL device of this machine with --emulate {absent[0]}=opencl:0:0")
    return plan


def _check_slices(placement: Placement, actors: int, launcher: str) -> None:
    """DeviceError when the placement's GPU slices cannot be held at once (pearl.device.check_slice_use), or
    name a slice this machine lacks (a MIG instance, an MPS share without a daemon): before any process starts."""
    devices = [d for d in placement.devices() if _family(d) == "cuda" and DeviceId.parse(d).slice is not None]
    if not devices:
        return
    # a launcher that runs the roles in turn runs act in the learner's process too
    check_slice_use(placement.act, (placement.replay, placement.learn), actors,
                    not launcher_capabilities(launcher).concurrent_roles)
    from pearl.adapters.registry import check_slice_exists

    for d in devices:
        check_slice_exists(d)


def role_slices(placement: Placement, actors: int) -> dict[str, dict]:
    """Which slice each role's processes run on, with the environment they start with (config.json)."""
    from pearl.adapters.slices import slice_env

    out = {}
    for role, device, processes in (("actors", placement.act, actors), ("learner", placement.learn, 1)):
        if _family(device) == "cuda" and DeviceId.parse(device).slice is not None:
            out[role] = {"device": device, "processes": processes, "env": slice_env(device)}
    return out


def _check_backends(algo: str, placement: Placement) -> None:
    """DeviceError, before any work, when act or learn is placed on a backend the algorithm's registry entry names
    no kernels for (SAC on an OpenCL device)."""
    entry = algorithm(algo)
    for device in (placement.act, placement.learn):
        family = _family(device)
        if family in ("cpu", "cuda", "opencl"):
            entry.check_backend("opencl" if family == "opencl" else "torch")


def _family(device: str) -> str | None:
    """The device id's family (cpu, cuda, opencl, whatif); None for text that is no device id (the adapter
    that is asked to open it says what ids look like)."""
    try:
        return DeviceId.parse(device).family
    except DeviceError:
        return None


def _is_opencl(device: str) -> bool:
    return _family(device) == "opencl"


def _is_what_if(device: str) -> bool:
    return _family(device) == "whatif"


def is_cluster_plan(plan: "Plan") -> bool:
    """A plan of a cluster profile (`pearl profile merge`): its device ids are NODE/DEVICE."""
    return isinstance(plan.profile.get("nodes"), dict)


def _check_cluster_plan(path: str, plan: "Plan", launcher: str, emulate: dict[str, str]) -> None:
    nodes = ", ".join(plan.profile["nodes"])
    if not launcher_capabilities(launcher).cluster_plans:
        raise PlanError(f"{path} places roles on the nodes {nodes} of a cluster; run it with --launcher ray "
                        "(and --ray-address of a cluster whose nodes carry pearl_node_NAME resources), not "
                        f"--launcher {launcher}")
    if emulate:
        raise ConfigError(f"--emulate stands in for a device of this machine; {path} is a cluster plan, whose "
                          "devices are its nodes' own")
    for name, ids in (("mapping", plan.mapping.values()), ("actor_devices", plan.actor_devices),
                      ("replay_shards", plan.replay_shards)):
        bad = sorted(d for d in ids if not NodeDevice.valid(d))
        if bad:
            raise PlanError(f"{path}: field '{name}' names {bad[0]}, not a NODE/DEVICE id of its nodes ({nodes})")
    devices = {k: NodeDevice.parse(d) for k, d in plan.mapping.items()}
    acting = [NodeDevice.parse(d) for d in plan.actor_devices]
    absent = sorted({str(nd) for nd in [*devices.values(), *acting] if _is_what_if(nd.device)})
    if absent:
        raise PlanError(f"{path} places kernels on {', '.join(absent)}, a device modelled from its descriptor; a "
                        "cluster plan runs on its nodes' own devices: plan without --what-if devices to train")
    if devices["replay_insert"].node != devices["learn"].node and devices["replay_insert"].device != "cpu":
        raise PlanError(f"{path} places the replay server on {devices['replay_insert']}, away from the "
                        "learner; a replay server of its own node keeps replay on that node's cpu in this pearl")
    shard_devices = sorted(d for d in plan.replay_shards if NodeDevice.parse(d).device != "cpu")
    if shard_devices:
        raise PlanError(f"{path}: field 'replay_shards' puts a shard on {shard_devices[0]}; a replay shard keeps its "
                        "table in its node's host memory (cpu) in this pearl")


def role_nodes(plan: "Plan") -> RoleNodes:
    """The plan node of each role of a cluster plan, and each actor worker's node and act device: the plan's
    `actor_devices` dealt out in order of device id (workers 0 .. m−1 on the first, and so on). The schedule
    gives worker i its share and seed whatever its node, so where the workers run changes no learned bit as
    long as their act devices compute alike (cpu on every node)."""
    node = {k: NodeDevice.parse(d).node for k, d in plan.mapping.items()}
    spread = plan.actor_devices or {plan.mapping["act"]: plan.actors}
    placed = [(NodeDevice.parse(d), n) for d, n in sorted(spread.items())]
    workers = tuple((at.node, at.device) for at, n in placed for _ in range(n))
    shards = tuple(NodeDevice.parse(d).node for d, n in sorted(plan.replay_shards.items()) for _ in range(n))
    return RoleNodes(actors=node["act"], replay=node["replay_insert"], learner=node["learn"],
                     workers=workers if len(spread) > 1 else (), shards=shards)


def local_devices(plan: "Plan") -> dict[str, str]:
    """A plan's mapping with each cluster device id NODE/DEVICE as the DEVICE its node opens."""
    return {k: NodeDevice.parse(d).device if is_cluster_plan(plan) else d for k, d in plan.mapping.items()}


def _check_planned_workload(path: str, plan: "Plan", config: OffPolicyConfig, spec: EnvSpec) -> None:
    """A plan costs one network shape: training another one with it would compare its predictions with a
    different workload. Plans older than the "workload" field are not checked."""
    from pearl.profile.format import workload_key

    planned = plan.predicted.get("workload")
    key = workload_key(config.algo, spec.env_id, spec.obs_dim, spec.action_dim, tuple(config.hidden))
    if planned is not None and planned != key:
        raise ConfigError(f"{path} was planned for workload {planned}, but these hyperparameters train {key}; "
                          "give `pearl train` the --set/--config you gave `pearl plan`, or plan again")


def _check_emulation(path: str, plan: "Plan", emulate: dict[str, str]) -> None:
    planned = set(plan.mapping.values())
    for absent, emulator in sorted(emulate.items()):
        if absent not in planned:
            raise ConfigError(f"--emulate names {absent}, which {path} places no kernel on (it uses "
                              f"{', '.join(sorted(planned))})")
        if not _is_what_if(absent):
            raise ConfigError(f"--emulate stands in for a device this machine lacks (a whatif: device of the plan); "
                              f"{absent} is one of this machine's own")
        if not _is_opencl(emulator):
            raise ConfigError(f"--emulate runs {absent}'s kernels on an OpenCL device (opencl:P:D, see `pearl "
                              f"devices`); {emulator} is not one")


def plan_check(plan: "Plan", stats, config: OffPolicyConfig, result: TrainResult,
               emulate: dict[str, str] | None = None) -> dict:
    """Predicted against measured, overall and per kernel (seconds per iteration = one update). Kernels of an
    emulated device carry `emulated_on`: their measured time is the emulator's, not the planned device's."""
    emulate = emulate or {}
    steps_per_iteration = 1.0 / config.replay_ratio
    measured: dict[str, dict] = {}
    for kernel, predicted in plan.kernels.items():
        seconds = stats.kernel_seconds.get(kernel, 0.0)
        actor_side = kernel in ("env_step", "act", "replay_insert")
        per_iteration = (seconds / max(stats.steps, 1) * steps_per_iteration if actor_side
                         else seconds / max(stats.updates, 1))
        device = plan.mapping.get(kernel) or f"{plan.mapping['learn']}>{plan.mapping['act']}"  # weight_sync
        measured[kernel] = {"device": device, "predicted_s": predicted, "measured_s": per_iteration,
                            "ratio": per_iteration / predicted if predicted > 0 else None}
        if device in emulate:
            measured[kernel]["emulated_on"] = emulate[device]
    figures = ("env_steps_per_s", "updates_per_s", "learner_samples_per_s")
    return {"predicted": {k: plan.predicted[k] for k in figures},
            "measured": learning_phase_rates(result, config.batch_size),
            "kernels": measured,
            "note": (f"the {result.launcher} launcher runs actors, replay and learner concurrently, as the plan "
                     "assumes" if launcher_capabilities(result.launcher).concurrent_roles else
                     "the sequential launcher runs the roles in turn; the plan predicts them running concurrently")
            + "".join(f"; {a}'s kernels ran on {e} (emulated: measured is {e}, predicted is {a})"
                      for a, e in sorted(emulate.items()) if a in plan.mapping.values())}


#: how far measured env steps/s may depart from the plan's prediction before `pearl train` warns
DEPARTURE = 0.25


def plan_departure(check: dict, run_dir: str) -> str | None:
    """One warning line when the measured speed departs from the plan's by more than DEPARTURE, naming the
    kernel whose seconds per iteration departed most and how to fold the run into the profile; else None."""
    predicted, measured = check["predicted"]["env_steps_per_s"], check["measured"]["env_steps_per_s"]
    if measured <= 0 or abs(predicted - measured) / measured <= DEPARTURE:
        return None
    kernel, k = max(check["kernels"].items(), key=lambda item: abs(item[1]["measured_s"] - item[1]["predicted_s"]))
    return (f"measured {measured:,.0f} env steps/s, the plan predicted {predicted:,.0f} "
            f"({(measured - predicted) / predicted:+.0%}); {kernel} on {k['device']} departed most "
            f"({k['measured_s'] * 1e6:,.1f} µs per iteration against {k['predicted_s'] * 1e6:,.1f}); "
            f"`pearl profile --from-run {run_dir} --out FILE` folds this run into a profile for the next plan")


def learning_phase_rates(result: TrainResult, batch_size: int) -> dict[str, float]:
    """The measured rates a plan's prediction compares with: over the learning phase (after learning_starts,
    when actors and learner both run, as the plan models), or over the whole run when it never learnt."""
    steps = result.learning_env_steps_per_s
    updates = result.learning_updates_per_s
    if steps is None or updates is None:
        steps, updates = result.env_steps_per_s, result.updates_per_s
    return {"env_steps_per_s": steps, "updates_per_s": updates, "learner_samples_per_s": updates * batch_size,
            "phase": "learning" if result.learning_env_steps_per_s is not None else "whole run"}


def max_actors() -> int:
    """Actor processes allowed: four per core (an actor beyond one per core only waits its turn)."""
    return 4 * (os.cpu_count() or 1)


def check_positive_int(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


# launcher name → "module:class"; each module is imported only when its launcher is named, and none imports
# Ray itself (the Ray launcher's does so inside its functions)
LAUNCHERS = {"local": "pearl.runtime.local:LocalLauncher",
             "sequential": "pearl.runtime.sequential:SequentialLauncher",
             "ray": "pearl.runtime.ray.launcher:RayLauncher"}
LAUNCHER_ALIASES = {"parallel": "local"}  # the local launcher's name before the Ray launcher existed


def launcher_name(name: str) -> str:
    """The launcher's canonical name; ConfigError naming the choices (and the nearest) for an unknown one."""
    name = LAUNCHER_ALIASES.get(name, name)
    if name not in LAUNCHERS:
        close = difflib.get_close_matches(name, list(LAUNCHERS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"unknown launcher {name!r}{hint}; choose one of: local, sequential, ray")
    _launcher_class(name).check_available()  # e.g. without Ray: one error line saying how to install it
    return name


def launcher_capabilities(name: str) -> LauncherCapabilities:
    """What the launcher `name` (or an alias) can do, as its class declares it: what pearl asks instead of
    comparing launcher names."""
    return _launcher_class(launcher_name(name)).capabilities


def _launcher_class(name: str) -> type[SegmentLauncher]:
    import importlib

    module, cls = LAUNCHERS[name].split(":")
    return getattr(importlib.import_module(module), cls)


@dataclass
class _Setup:
    """A run's options, checked, and what follows from them: what `train` builds from RunOptions and `resume`
    from config.json."""

    options: RunOptions
    algo: str
    env_id: str
    config: OffPolicyConfig
    spec: EnvSpec
    placement: Placement
    device: str  # the label of the run: the device of every kernel, or "plan"
    actors: int
    eval_every: int
    plan: "Plan | None"

    @property
    def job(self) -> Job:
        o = self.options
        return Job(self.config, self.spec, self.placement, o.seed, self.actors, o.threads, o.descriptor, o.learn,
                   o.policy_lag, o.segment_steps, self.eval_every, o.eval_every_episodes)

    def config_record(self) -> dict:
        o = self.options
        return {
            "kind": "config", "algo": self.algo, "env": self.env_id, "seed": o.seed, "device": self.device,
            "placement": self.placement.to_dict(), "threads": o.threads, "descriptor": o.descriptor,
            "launcher": o.launcher, "actors": self.actors, "envs_per_actor": self.config.n_envs,
            "learn": o.learn, "max_restarts": o.max_restarts, "checkpoint_every": o.checkpoint_every,
            "checkpoint_replay": o.checkpoint_replay, "emulate": dict(o.emulate), "policy_lag": o.policy_lag,
            "segment_steps": o.segment_steps, "eval_every": self.eval_every, "ray_address": o.ray_address,
            "replay_shards": o.replay_shards, "slices": role_slices(self.placement, self.actors),
            "eval_every_episodes": o.eval_every_episodes, "schedule": self.job.schedule().to_dict(),
            "preset": has_preset(self.algo, self.env_id),
            "hyperparameters": self.config.to_dict(), "env_spec": asdict(self.spec), "pearl_version": __version__,
            "host": {"node": platform.node(), "platform": platform.platform(), "python": sys.version.split()[0]},
        }


def train(algo: str | None = None, env_id: str | None = None, *, options: RunOptions | None = None,
          progress: Callable[[int], None] | None = None, **fields: Any) -> TrainResult:
    """Train `algo` on `env_id` as `options` say (or the RunOptions fields given as keywords), evaluate the
    final policy and the best one the in-training evaluations kept, and write runs/<id>/.

    See `RunOptions` for every option. The runs folder is checked first (creatable, writable, room for the
    checkpoints), and so is everything else a user can get wrong, before any work is done.
    """
    base = options if options is not None else RunOptions()
    if algo is not None or env_id is not None:
        fields = {"algo": algo if algo is not None else base.algo, "env": env_id if env_id is not None
                  else base.env, **fields}
    return _train(base.replace(**fields), progress)


def planned_work(o: RunOptions) -> tuple[str, int | None]:
    """A label and the env steps of the run the options describe, for a progress bar (None when unknown:
    the options are checked when training starts, with their proper errors)."""
    try:
        algo, env_id = o.algo, o.env
        if o.plan is not None and (algo is None or env_id is None):
            from pearl.planner.plan import load_plan
            planned = load_plan(o.plan)
            algo, env_id = algo or planned.algo, env_id or planned.env
        total = o.steps or (o.config.total_steps if o.config is not None else preset(algo, env_id).total_steps)
        return f"{algo} {env_id}", total
    except (PearlError, TypeError):
        return "train", None


def _train(o: RunOptions, progress: Callable[[int], None] | None) -> TrainResult:
    wall0 = time.perf_counter()
    setup = _setup(o)
    check_runs_dir(o.runs_dir, _disk_needed(setup))
    checkpointer = _checkpointer(setup)
    runner = _runner(setup, None, checkpointer)  # a bad or absent device fails here, before runs/<id>/ exists
    record = RunRecord(o.runs_dir, setup.algo, setup.env_id, o.seed)
    if setup.plan is not None:
        record.write("plan.json", setup.plan.to_dict())
    record.write("config.json", setup.config_record())
    return _execute(setup, runner, record, checkpointer, None, o.eval_episodes, progress, o.max_seconds, wall0)


def parse_settings(specs: Sequence[str]) -> dict[str, str]:
    """`--set name=value` options as {name: text}; ConfigError for a malformed one."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ConfigError(f"--set takes name=value (e.g. learning_rate=1e-3 or hidden=64,64), got {spec!r}")
        out[name.strip()] = value.strip()
    return out


def configured(algo: str, env_id: str, config_file: str | None = None,
               settings: dict[str, str] | None = None) -> OffPolicyConfig:
    """The preset of (algo, env) (or the algorithm's defaults) with a --config file's fields and then --set's,
    each validated: the hyperparameters `pearl train` and `pearl plan` use."""
    config = preset(algo, env_id)
    if config_file is not None:
        config = _hyperparameters_file(config_file, config)
    return config.with_text(settings) if settings else config


def _hyperparameters_file(path: str, config: OffPolicyConfig) -> OffPolicyConfig:
    """config with the fields a JSON or TOML file sets (validated field by field); ConfigError naming the file."""
    if path.endswith(".toml"):
        from pearl.descriptors import tomllib
        from pearl.fileio import read_text

        try:
            data = tomllib.loads(read_text(path, ConfigError, "pass --config with a TOML or JSON file"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    else:
        data = read_json(path, ConfigError, "pass --config with a JSON or TOML file of hyperparameters")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a table of hyperparameters (name = value)")
    data.pop("algo", None)
    if isinstance(data.get("hidden"), list):
        data["hidden"] = tuple(data["hidden"])
    try:
        changed = config.replace(**data)
        changed.validate()
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return changed


def _setup(o: RunOptions) -> _Setup:
    """Check every option (one ConfigError naming the first bad one) and derive the run's configuration."""
    o = o.replace(launcher=launcher_name(o.launcher), emulate=dict(o.emulate))
    for name, value, minimum in (("--seed", o.seed, 0), ("--eval-episodes", o.eval_episodes, 0),
                                 ("--checkpoint-every", o.checkpoint_every, 0),
                                 ("--eval-every-episodes", o.eval_every_episodes, 1)):
        check_positive_int(name, value, minimum)
    for name, value in (("--steps", o.steps), ("--eval-every", o.eval_every), ("--threads", o.threads)):
        if value is not None:
            check_positive_int(name, value, minimum=0 if name == "--eval-every" else 1)
    if o.threads is not None and o.threads > MAX_THREADS:
        raise ConfigError(f"--threads must be at most {MAX_THREADS}, got {o.threads}")
    if isinstance(o.policy_lag, bool) or not isinstance(o.policy_lag, int) or o.policy_lag < 0:
        raise ConfigError(f"--policy-lag must be an integer >= 0, got {o.policy_lag!r}")
    capabilities = launcher_capabilities(o.launcher)
    if o.ray_address is not None:
        if not capabilities.cluster_plans:
            raise ConfigError(f"--ray-address joins a Ray cluster; it needs --launcher ray, not {o.launcher}")
        if not isinstance(o.ray_address, str) or not o.ray_address.strip():
            raise ConfigError(f"--ray-address must be a cluster address such as 10.0.0.5:6379, got {o.ray_address!r}")
        from pearl.runtime.ray.session import check_address
        check_address(o.ray_address)  # before the run folder is made: Ray would retry a dead address for minutes
    check_positive_int("--replay-shards", o.replay_shards, minimum=0)
    if o.replay_shards and not capabilities.replay_shards:
        raise ConfigError(f"--replay-shards places replay-server actors on Ray; it needs --launcher ray, "
                          f"not {o.launcher}")
    if o.emulate and o.plan is None:
        raise ConfigError("--emulate stands in for an absent device of a plan; it needs --plan")
    if o.plan is not None and (o.actors is not None or o.envs_per_actor is not None):
        raise ConfigError("--plan sets the actors and envs per actor; drop --actors/--envs-per-actor "
                          "(or drop --plan)")
    loaded = _checked_plan(o.plan, o.algo, o.env, o.device, o.emulate, o.launcher) if o.plan is not None else None
    check_positive_int("--max-restarts", o.max_restarts, minimum=0)
    algo, env_id = (loaded.algo, loaded.env) if loaded is not None else (o.algo, o.env)
    if algo is None or env_id is None:
        raise ConfigError("--algo and --env are required (or --plan PLAN, which names them, or --resume RUN_DIR)")
    algo_config_class(algo)  # an algorithm the registry does not know → ConfigError naming the known ones
    spec = env_spec(env_id)
    check_algo_fits(algo, spec)
    config = o.config if o.config is not None else preset(algo, env_id)
    if config.algo != algo:
        raise ConfigError(f"a {config.algo} config cannot train {algo}")
    if o.config_file is not None:
        config = _hyperparameters_file(o.config_file, config)
    if o.settings:
        config = config.with_text(o.settings)
    if o.steps is not None:
        config = config.replace(total_steps=o.steps)
    for name, value, most in (("--actors", o.actors, max_actors()), ("--envs-per-actor", o.envs_per_actor, MAX_ENVS)):
        if value is not None:
            check_positive_int(name, value)
            if value > most:  # each actor is a process, each env an env object: a typo must not fork thousands
                raise ConfigError(f"{name} must be at most {most} on this machine, got {value}")
    if loaded is not None:
        _check_planned_workload(o.plan, loaded, config, spec)
        where = {k: o.emulate.get(d, d) for k, d in local_devices(loaded).items()}
        placement = Placement(where["act"], where["replay_insert"], where["learn"])
        actors, envs, device = loaded.actors, loaded.envs_per_actor, "plan"
    else:
        device = o.device or HOST
        placement, actors, envs = Placement.single(device), o.actors or 1, o.envs_per_actor
    if envs is not None:
        config = config.replace(n_envs=envs)
    if not o.learn:  # collection only: the actors act with the policy from the first step
        config = config.replace(learning_starts=0)
    config.validate()
    _check_slices(placement, actors, o.launcher)
    _check_backends(algo, placement)
    if o.descriptor is not None and not any(_is_opencl(d) for d in placement.devices()):
        raise DeviceError(f"--descriptor names a kernel binary for an OpenCL device; {device} loads none "
                          "(drop --descriptor, or train on an opencl:P:D device)")
    eval_every = o.eval_every if o.eval_every is not None else max(1, config.total_steps // EVALUATIONS_PER_RUN)
    if o.threads is None:
        o = o.replace(threads=loaded.threads if loaded is not None else
                      default_threads(config, spec, placement, actors, o.launcher, o.runs_dir))
    setup = _Setup(o, algo, env_id, config, spec, placement, device, actors, eval_every if o.learn else 0, loaded)
    setup.job.schedule()  # a lag or segment layout that cannot work → ConfigError, before any work
    return setup


def profile_at_hand(runs_dir: str) -> "Profile | None":
    """This machine's profile where pearl keeps one (RunOptions.threads names the files), the first that reads
    and was measured on this CPU with these cores; None when there is none."""
    from pearl.hostinfo import cpu_lanes, cpu_name
    from pearl.profile.format import load_profile

    node = platform.node() or "host"
    for path in (Path(runs_dir) / "profiles" / f"{node}-quick.json", Path("profiles") / f"{node}-full.json",
                 Path("profiles") / f"{node}-quick.json"):
        if not path.is_file():
            continue
        try:
            profile = load_profile(path)
        except PearlError:
            continue  # a damaged or older file: `pearl profile` says why when it is asked to read it
        if profile.host.get("cpu") == cpu_name() and profile.host.get("cores") == cpu_lanes():
            return profile
    return None


def default_threads(config: OffPolicyConfig, spec: EnvSpec, placement: Placement, actors: int, launcher: str,
                    runs_dir: str) -> int:
    """The learner's threads when the run names none and has no plan (RunOptions.threads says the rule)."""
    from pearl.hostinfo import cpu_lanes

    lanes = cpu_lanes()
    if placement.learn != HOST or lanes < 2:
        return DEFAULT_THREADS
    profile = profile_at_hand(runs_dir)
    if profile is None:
        return DEFAULT_THREADS
    from pearl.costmodel import CostModel
    from pearl.planner.accounting import fastest_threads
    from pearl.planner.build import config_workload
    from pearl.planner.make import layout_threads
    from pearl.planner.problem import PLACED, REPLAY

    model, workload = CostModel(profile), config_workload(config, spec)
    try:
        if launcher_capabilities(launcher).concurrent_roles:  # priced beside the actors, as a plan prices it
            where = {k: placement.replay if k in REPLAY else getattr(placement, k) for k in PLACED}
            return layout_threads(profile, config, spec, where, actors)
        counts = [t for t in model.thread_counts("learn", HOST, workload) if t <= lanes]
        return fastest_threads(lanes, {t: model.kernel_time("learn", HOST, workload, config.batch_size, t).seconds
                                       for t in counts})
    except (KeyError, ValueError, PearlError):  # the profile does not time this workload, or its devices
        return DEFAULT_THREADS


def resume(run_dir: str, *, eval_episodes: int = 10, progress: Callable[[int], None] | None = None,
           max_seconds: float | None = None, max_restarts: int | None = None) -> TrainResult:
    """Go on with the run recorded in run_dir from its newest readable checkpoint, as it was configured
    (config.json), to its total step budget; then evaluate and write its summary. A damaged newest
    checkpoint is skipped for the one before it (the summary says so)."""
    wall0 = time.perf_counter()
    check_positive_int("--eval-episodes", eval_episodes, minimum=0)
    folder = Path(run_dir)
    if max_restarts is not None:
        check_positive_int("--max-restarts", max_restarts, minimum=0)
    setup = _recorded_setup(folder, max_restarts)
    checkpoint, skipped = latest(folder / CHECKPOINTS)
    if checkpoint is None:
        why = f": {'; '.join(skipped)}" if skipped else ""
        raise CheckpointError(f"{folder / CHECKPOINTS}: no readable checkpoint to resume from{why}")
    _check_same_run(checkpoint, setup)
    if checkpoint.steps >= setup.config.total_steps:
        raise ConfigError(f"{folder} finished its {setup.config.total_steps:,} env steps ({describe(checkpoint)}); "
                          "there is nothing to resume")
    check_runs_dir(folder.parent, _disk_needed(setup))
    checkpointer = _checkpointer(setup)
    checkpointer.last_updates = checkpoint.updates
    runner = _runner(setup, checkpoint, checkpointer)
    record = RunRecord.reopen(folder)
    return _execute(setup, runner, record, checkpointer, checkpoint, eval_episodes, progress, max_seconds, wall0,
                    skipped)


def _recorded_setup(folder: Path, max_restarts: int | None = None) -> _Setup:
    """The run recorded in folder, set up again as it was configured (what --resume goes on with)."""
    options = _options_from_record(folder)
    if max_restarts is not None:
        options = options.replace(max_restarts=max_restarts)
    try:
        return _setup(options)
    except PlanError:
        raise
    except ConfigError as exc:
        raise RunDirError(f"{folder / 'config.json'}: {exc}") from None


def _runner(setup: _Setup, checkpoint: "Checkpoint | None", checkpointer: Checkpointer) -> SegmentLauncher:
    cls = _launcher_class(setup.options.launcher)
    o, capabilities = setup.options, cls.capabilities
    extra: dict[str, Any] = {"max_restarts": o.max_restarts} if capabilities.actor_restarts else {}
    if capabilities.replay_shards:
        extra.update(replay_shards=o.replay_shards)
    if capabilities.cluster_plans:
        extra.update(address=o.ray_address)
        if setup.plan is not None and is_cluster_plan(setup.plan):
            nodes = role_nodes(setup.plan)
            # a replay server on a node of its own is a shard actor there (the learner keeps replay otherwise);
            # a sharded one is the plan's shards, each on its node
            shards = max(o.replay_shards, 1) if nodes.replay != nodes.learner else o.replay_shards
            if nodes.shards:
                if o.replay_shards not in (0, len(nodes.shards)):
                    raise ConfigError(f"--replay-shards {o.replay_shards}: the plan shards the replay server over "
                                      f"{len(nodes.shards)} nodes; leave --replay-shards out")
                shards = len(nodes.shards)
            extra.update(role_nodes=nodes, replay_shards=shards)
    try:
        return cls(setup.job, checkpoint, checkpointer, **extra)
    except MemoryError:
        raise ConfigError(f"a replay buffer of {setup.config.buffer_size:,} transitions does not fit in this "
                          "machine's memory; lower buffer_size") from None


def _checkpointer(setup: _Setup) -> Checkpointer:
    meta = {"algo": setup.algo, "env": setup.env_id, "seed": setup.options.seed,
            "hyperparameters": setup.config.to_dict()}
    # the folder is set once runs/<id>/ exists (see _execute)
    return Checkpointer(Path(CHECKPOINTS), setup.options.checkpoint_every, meta, setup.options.checkpoint_replay)


def _execute(setup: _Setup, runner: SegmentLauncher, record: RunRecord, checkpointer: Checkpointer,
             checkpoint: "Checkpoint | None", eval_episodes: int, progress: Callable[[int], None] | None,
             max_seconds: float | None, wall0: float, skipped: list[str] | None = None) -> TrainResult:
    """Run the launcher into the record, evaluate the final and the best policy, and write summary.json."""
    config, o = setup.config, setup.options
    checkpointer.folder = record.dir / CHECKPOINTS
    try:
        stats = runner.run(record, progress, max_seconds)
    except BaseException as exc:  # Ctrl-C, SIGTERM, a failed actor: say so in the summary, keep the metrics
        last = _checkpoint_on_interrupt(runner, exc)
        record.write("summary.json", {"kind": "summary", "status": "interrupted", "algo": setup.algo,
                                      "env": setup.env_id, "seed": o.seed, "reason": f"{type(exc).__name__}: {exc}",
                                      "checkpoints": [str(p) for p in checkpointer.written],
                                      "resume": f"pearl train --resume {record.dir}" if last else None})
        raise
    finally:
        record.close()
    scores = _score(setup, runner, stats, eval_episodes, record)
    learning_steps = max(1, stats.steps - config.learning_starts)
    steps_here, updates_here = stats.steps - stats.start_steps, stats.updates - stats.start_updates
    result = TrainResult(
        algo=setup.algo, env=setup.env_id, steps=stats.steps, seed=o.seed, device=setup.device,
        env_steps_per_s=steps_here / stats.wall_s,
        updates_per_s=updates_here / stats.wall_s,
        learner_samples_per_s=updates_here * config.batch_size / stats.wall_s,
        replay_ratio=stats.updates / learning_steps,
        eval_episodes=eval_episodes, wall_s=time.perf_counter() - wall0, run_dir=str(record.dir),
        updates=stats.updates, train_wall_s=stats.wall_s, preset=has_preset(setup.algo, setup.env_id),
        placement=setup.placement.to_dict(), kernel_seconds=dict(stats.kernel_seconds),
        actors=setup.actors, envs_per_actor=config.n_envs, launcher=o.launcher, learn=o.learn,
        threads=o.threads, dropped_steps=stats.dropped_steps, waits=dict(stats.waits),
        actor_restarts=stats.restarts, lost_steps_max=stats.lost_steps_max, start_steps=stats.start_steps,
        checkpoints=list(stats.checkpoints), checkpoint_s=stats.checkpoint_s,
        resumed_from=str(checkpoint.path) if checkpoint is not None else None,
        skipped_checkpoints=list(skipped or []), schedule=runner.schedule.to_dict(), eval_s=stats.eval_s,
        hyperparameters_note=hyperparameters_note(setup), roles=dict(stats.roles),
        traffic=dict(stats.traffic), **scores)
    if stats.learn_start_s is not None and stats.wall_s > stats.learn_start_s:
        learning_s = stats.wall_s - stats.learn_start_s
        result.learning_env_steps_per_s = (stats.steps - stats.learn_start_steps) / learning_s
        result.learning_updates_per_s = (stats.updates - stats.start_updates) / learning_s
    if setup.plan is not None:
        result.plan_check = plan_check(setup.plan, stats, config, result, o.emulate)
    record.write("summary.json", {"kind": "summary", "status": "finished", **result.to_dict()})
    return result


def hyperparameters_note(setup: _Setup) -> str:
    """Where the run's hyperparameters came from, in a sentence (a run without a preset says how to tune it)."""
    o = setup.options
    changed = [f"--config {o.config_file}"] if o.config_file else []
    changed += [f"--set {k}={v}" for k, v in o.settings.items()]
    extra = f", changed by {' '.join(changed)}" if changed else ""
    if o.config is not None:
        return f"hyperparameters given by the caller{extra}"
    if has_preset(setup.algo, setup.env_id):
        return f"pearl's preset for {setup.algo} on {setup.env_id}{extra}"
    return (f"no preset for {setup.algo} on {setup.env_id}: the algorithm's defaults{extra}; pass hyperparameters "
            "with --set name=value (repeatable) or --config FILE (JSON or TOML)")


def _score(setup: _Setup, runner: SegmentLauncher, stats: LoopStats, episodes: int,
           record: RunRecord) -> dict[str, Any]:
    """The final policy's and the best policy's greedy returns over the same `episodes` seeded episodes, and
    which of them is the headline: when in-training evaluations kept a best policy other than the final one,
    the one that did better on `episodes` fresh confirmation episodes (`evaluate.confirm`; the best on a tie),
    else the final one. The best policy's parameters are saved as runs/<id>/best_policy.npz."""
    adapter = _eval_adapter(runner, setup)
    seeds = Seeds(setup.options.seed)
    seed = seeds.evaluation
    act = adapter.make_act(setup.config, setup.spec, stats.final_params, seeds.learner)

    def score(params: Params) -> dict[str, Any]:
        act.set_params(params)
        returns = evaluate(act, setup.spec, episodes, seed) if episodes else []
        return {"return_mean": float(np.mean(returns)) if returns else float("nan"),
                "return_std": float(np.std(returns)) if returns else float("nan"), "returns": returns}

    final = score(stats.final_params)
    out: dict[str, Any] = {"final": final, "headline": "final"}
    best = stats.best
    if best is not None and best.best is not None and best.best_eval is not None:
        np.savez(record.dir / "best_policy.npz", **best.best)
        picked = best.best_eval
        out["best"] = {**score(best.best), "steps": picked.steps, "updates": picked.updates,
                       "selection_mean": picked.mean, "file": str(record.dir / "best_policy.npz")}
        out["evaluations"] = [{"steps": e.steps, "updates": e.updates, "mean": e.mean} for e in best.history]
        out["headline"] = "best"
        if episodes and not _same_policy(best.best, stats.final_params):
            check = confirm(act, setup.spec, best.best, stats.final_params, episodes, setup.options.seed)
            out["confirmation"] = check.to_dict()
            out["headline"] = check.picked
    head = out["best"] if out["headline"] == "best" else final
    out.update(eval_return_mean=head["return_mean"], eval_return_std=head["return_std"],
               eval_returns=list(head["returns"]))
    return out


def _same_policy(a: Params, b: Params) -> bool:
    """Whether two policies hold equal parameters (the kept best is often the final policy itself)."""
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _checkpoint_on_interrupt(runner: SegmentLauncher, exc: BaseException) -> str | None:
    """Save where an interrupted run stopped, so --resume loses nothing: for Ctrl-C, SIGTERM and a failed actor,
    not for an error of pearl's own (its state may be what went wrong). Best effort: a checkpoint that cannot
    be written must not hide the interruption."""
    if not isinstance(exc, (KeyboardInterrupt, SystemExit, PearlError)):
        return None
    try:
        return runner.checkpoint_now()
    except Exception:  # noqa: BLE001 - the interruption is the error to report
        return None


def _disk_needed(setup: _Setup) -> int:
    """Bytes the run may write: its checkpoints (KEEP of them plus one being written) and a metrics margin."""
    cfg, spec = setup.config, setup.spec
    params = init_params(cfg, spec, setup.options.seed)
    learn_bytes = 3 * sum(v.nbytes for v in params.values())  # parameters and two Adam moments (an upper bound)
    action_bytes = 8 if spec.discrete else 4 * spec.action_dim
    row = 4 * (2 * spec.obs_dim + 2) + action_bytes + (8 if cfg.prioritized else 0)
    return estimate_bytes(learn_bytes, cfg.buffer_size * row, setup.options.checkpoint_replay) + METRICS_MARGIN


METRICS_MARGIN = 16 * 2**20  # metrics lines, config and summary: a few MB even for long runs


def _options_from_record(folder: Path) -> RunOptions:
    """The run options runs/<id>/config.json recorded, checked field by field."""
    path = folder / "config.json"
    if not folder.is_dir():
        raise RunDirError(f"{folder}: no such run folder; pass a runs/<id> folder that `pearl train` wrote")
    data = read_json(path, RunDirError, "no config.json here: not a run folder that `pearl train` wrote")
    field_ = _RecordFields(path, data)
    if data.get("kind") != "config":
        raise RunDirError(f"{path}: field 'kind' must be \"config\", got {data.get('kind')!r}")
    algo, env_id = field_.get("algo", str), field_.get("env", str)
    try:
        config = config_from_dict(algo_config_class(algo), field_.get("hyperparameters", dict))
        config.validate()
    except PearlError as exc:
        raise RunDirError(f"{path}: {exc}") from None
    placement = field_.get("placement", dict)
    if not isinstance(placement.get("act"), str):
        raise RunDirError(f"{path}: field 'placement' lacks the act device")
    launcher = field_.get("launcher", str)
    if LAUNCHER_ALIASES.get(launcher, launcher) not in LAUNCHERS:
        raise RunDirError(f"{path}: field 'launcher' must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")
    descriptor = data.get("descriptor")
    if descriptor is not None and not isinstance(descriptor, str):
        raise RunDirError(f"{path}: field 'descriptor' must be a path or null, got {descriptor!r}")
    emulate = data.get("emulate", {})
    if not isinstance(emulate, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in emulate.items()):
        raise RunDirError(f"{path}: field 'emulate' must map device ids to device ids, got {emulate!r}")
    segment_steps = data.get("segment_steps")
    if segment_steps is not None:
        segment_steps = field_.get("segment_steps", int, 1)
    ray_address = data.get("ray_address")
    if ray_address is not None and not isinstance(ray_address, str):
        raise RunDirError(f"{path}: field 'ray_address' must be a cluster address or null, got {ray_address!r}")
    has_plan = (folder / "plan.json").exists()
    device = field_.get("device", str)
    return RunOptions(
        algo=algo, env=env_id, config=config, seed=field_.get("seed", int), launcher=launcher,
        plan=str(folder / "plan.json") if has_plan else None, device=None if has_plan else device,
        actors=None if has_plan else field_.get("actors", int, 1),
        envs_per_actor=None if has_plan else config.n_envs, learn=field_.get("learn", bool),
        threads=field_.get("threads", int, 1), descriptor=descriptor, emulate=emulate,
        max_restarts=field_.get("max_restarts", int), checkpoint_every=field_.get("checkpoint_every", int),
        checkpoint_replay=field_.get("checkpoint_replay", bool), policy_lag=field_.get("policy_lag", int),
        segment_steps=segment_steps, eval_every=field_.get("eval_every", int),
        eval_every_episodes=field_.get("eval_every_episodes", int, 1), runs_dir=str(folder.parent),
        ray_address=ray_address, replay_shards=field_.get("replay_shards", int) if "replay_shards" in data else 0)


class _RecordFields(FieldChecker):
    """The fields of a run's config.json (pearl.fileio.FieldChecker's checks), each by the kind it must be."""

    def __init__(self, path: Path, data: Any) -> None:
        super().__init__(str(path), RunDirError)
        if not isinstance(data, dict):
            raise RunDirError(f"{path}: must hold a JSON object, got {type(data).__name__}")
        self.data = data

    def get(self, name: str, kind: type, minimum: int = 0) -> Any:
        if kind is int:
            return self.integer(self.data, name, minimum=minimum)
        if kind is bool:
            return self.flag(self.data, name)
        if kind is dict:
            return self.mapping(self.data, name)
        return self.text(self.data, name)


def _check_same_run(checkpoint: Checkpoint, setup: _Setup) -> None:
    """A checkpoint of another run (copied in by hand) would train on under the wrong settings: refuse it."""
    meta = checkpoint.meta
    ours = {"algo": setup.algo, "env": setup.env_id, "seed": setup.options.seed,
            "hyperparameters": setup.config.to_dict()}
    for name, value in ours.items():
        if meta.get(name) != value:
            raise CheckpointError(f"{checkpoint.path}: its {name} differs from the run's config.json; "
                                  "it belongs to another run")


def _eval_adapter(runner: SegmentLauncher, setup: _Setup):
    """The adapter of the act device (the local launcher opened it only in its actor processes)."""
    act = setup.placement.act
    if act in runner.adapters:
        return runner.adapters[act]
    from pearl.adapters import open_adapter
    return open_adapter(act, setup.options.threads, setup.options.descriptor if _is_opencl(act) else None)
