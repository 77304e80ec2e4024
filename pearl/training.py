"""`pearl.train`: train one algorithm on one environment with each role on a chosen device, then evaluate.

Rates are measured over the training loop only (evaluation excluded):
    env_steps_per_s        = env steps / training wall time
    updates_per_s          = gradient updates / training wall time
    learner_samples_per_s  = updates_per_s × batch size
    replay_ratio           = updates / env steps collected after learning_starts
"""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from pearl import __version__
from pearl.algos import OffPolicyConfig, algo_config_class, config_from_dict, has_preset, preset
from pearl.algos.params import init_params
from pearl.envs import check_algo_fits, env_spec
from pearl.errors import CheckpointError, ConfigError, DeviceError, PearlError, PlanError, RunDirError
from pearl.fileio import FieldChecker, read_json
from pearl.runtime.checkpoint import FOLDER as CHECKPOINTS
from pearl.runtime.checkpoint import Checkpoint, Checkpointer, describe, estimate_bytes, latest
from pearl.runtime.evaluate import evaluate
from pearl.runtime.local import LocalLauncher, Placement
from pearl.runtime.parallel import ParallelLauncher
from pearl.runtime.record import RunRecord, check_runs_dir
from pearl.types import MAX_ENVS, EnvSpec

if TYPE_CHECKING:
    from pearl.planner.plan import Plan

EVAL_SEED_OFFSET = 100_000  # evaluation envs never share seeds with training envs
# One intra-op thread: the presets' small MLPs run faster single-threaded (DQN CartPole on a 2-core EPYC:
# about 1,190 env steps/s with 1 thread against 850 with 2, same results), and a seed then gives the same run
# whatever the core count.
DEFAULT_THREADS = 1


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
    eval_return_mean: float
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
    launcher: str = "parallel"
    envs_per_actor: int = 1
    learn: bool = True
    threads: int = DEFAULT_THREADS
    dropped_steps: int = 0
    actor_restarts: int = 0
    lost_steps_max: int = 0
    waits: dict[str, float] = field(default_factory=dict)
    eval_returns: list[float] = field(default_factory=list)
    kernel_seconds: dict[str, float] = field(default_factory=dict)
    start_steps: int = 0  # env steps a resumed run started from (rates count this run's share only)
    resumed_from: str | None = None  # the checkpoint it went on from
    skipped_checkpoints: list[str] = field(default_factory=list)  # newer ones that were damaged, and why
    checkpoints: list[str] = field(default_factory=list)  # files written by this run, oldest first
    checkpoint_s: float = 0.0  # seconds spent writing them (inside train_wall_s)

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


def _checked_plan(path: str, algo: str, env_id: str, device: str | None,
                  emulate: dict[str, str] | None = None) -> "Plan":
    """The plan, refused with the reason when it is for other work, another machine or absent devices that
    `emulate` does not map to an OpenCL device of this machine."""
    from pearl.hostinfo import cpu_lanes, cpu_name
    from pearl.planner.plan import load_plan

    if device is not None:
        raise ConfigError("--plan places every kernel itself; drop --device (or drop --plan)")
    plan = load_plan(path)
    if (plan.algo, plan.env) != (algo, env_id):
        raise ConfigError(f"{path} is a plan for {plan.algo} on {plan.env}, not {algo} on {env_id}; "
                          f"make one with `pearl plan --algo {algo} --env {env_id}`")
    here = (cpu_name(), cpu_lanes())
    there = (plan.profile.get("cpu"), plan.profile.get("cores"))
    if here != there:
        raise PlanError(f"{path} was planned from a profile of another machine ({there[0]}, {there[1]} cores); "
                        f"this one is {here[0]}, {here[1]} cores: run `pearl profile` here and plan again")
    emulate = emulate or {}
    _check_emulation(path, plan, emulate)
    absent = sorted(d for d in set(plan.mapping.values()) if d.startswith("whatif:") and d not in emulate)
    if absent:
        raise PlanError(f"{path} places kernels on {', '.join(absent)}, a device modelled from its descriptor "
                        "that this machine does not have; plan without --what-if devices to train, or run those "
                        f"kernels on an OpenCL device of this machine with --emulate {absent[0]}=opencl:0:0")
    return plan


def _check_emulation(path: str, plan: "Plan", emulate: dict[str, str]) -> None:
    planned = set(plan.mapping.values())
    for absent, emulator in sorted(emulate.items()):
        if absent not in planned:
            raise ConfigError(f"--emulate names {absent}, which {path} places no kernel on (it uses "
                              f"{', '.join(sorted(planned))})")
        if not absent.startswith("whatif:"):
            raise ConfigError(f"--emulate stands in for a device this machine lacks (a whatif: device of the plan); "
                              f"{absent} is one of this machine's own")
        if not emulator.startswith("opencl:"):
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
            "measured": {k: getattr(result, k) for k in figures},
            "kernels": measured,
            "note": ("the parallel launcher runs actors, replay and learner concurrently, as the plan assumes"
                     if result.launcher == "parallel" else
                     "the sequential launcher runs the roles in turn; the plan predicts them running concurrently")
            + "".join(f"; {a}'s kernels ran on {e} (emulated: measured is {e}, predicted is {a})"
                      for a, e in sorted(emulate.items()) if a in plan.mapping.values())}


def max_actors() -> int:
    """Actor processes allowed: four per core (an actor beyond one per core only waits its turn)."""
    return 4 * (os.cpu_count() or 1)


def check_positive_int(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


@dataclass
class _Setup:
    """A run's configuration, checked: what `train` builds from its arguments and `resume` from config.json."""

    algo: str
    env_id: str
    seed: int
    config: OffPolicyConfig
    spec: EnvSpec
    placement: Placement
    device: str  # the label of the run: the device of every kernel, or "plan"
    launcher: str
    actors: int
    learn: bool
    threads: int
    descriptor: str | None
    plan: "Plan | None"
    max_restarts: int
    checkpoint_every: int
    checkpoint_replay: bool
    emulate: dict[str, str] = field(default_factory=dict)  # planned absent device -> the OpenCL device running it

    def config_record(self) -> dict:
        return {
            "kind": "config", "algo": self.algo, "env": self.env_id, "seed": self.seed, "device": self.device,
            "placement": self.placement.to_dict(), "threads": self.threads, "descriptor": self.descriptor,
            "launcher": self.launcher, "actors": self.actors, "envs_per_actor": self.config.n_envs,
            "learn": self.learn, "max_restarts": self.max_restarts, "checkpoint_every": self.checkpoint_every,
            "checkpoint_replay": self.checkpoint_replay, "emulate": dict(self.emulate),
            "preset": has_preset(self.algo, self.env_id),
            "hyperparameters": self.config.to_dict(), "env_spec": asdict(self.spec), "pearl_version": __version__,
            "host": {"node": platform.node(), "platform": platform.platform(), "python": sys.version.split()[0]},
        }


DEFAULT_CHECKPOINT_EVERY = 5_000  # updates; DQN CartPole's 50,000 steps make ~24,500 updates


def train(algo: str, env_id: str, *, device: str | None = None, plan: str | None = None, steps: int | None = None,
          seed: int = 0,
          eval_episodes: int = 10, config: OffPolicyConfig | None = None, runs_dir: str = "runs",
          threads: int = DEFAULT_THREADS, descriptor: str | None = None, max_seconds: float | None = None,
          progress: Callable[[int], None] | None = None, launcher: str = "parallel", actors: int | None = None,
          envs_per_actor: int | None = None, learn: bool = True, max_restarts: int = 3,
          checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY, checkpoint_replay: bool = True,
          emulate: dict[str, str] | None = None) -> TrainResult:
    """Train `algo` on `env_id` with every kernel on `device`, evaluate greedily, and write runs/<id>/.

    config defaults to pearl's preset for (algo, env_id) when there is one, else the algorithm's defaults;
    steps, when given, overrides config.total_steps. threads is the CPU threads one kernel may use;
    descriptor names a device descriptor whose precompiled kernel binary an OpenCL device loads. plan names a
    plan file (`pearl plan`): each kernel then runs on its planned device with the planned actor count, and
    the result holds predicted against measured figures (plan_check); device must then be None. emulate maps
    an absent (what-if) device of the plan to an OpenCL device of this machine that runs its kernels instead.

    launcher "parallel" (the default) runs each actor in its own process beside the learner, with the
    replay ratio held by a rate limiter; "sequential" runs the roles in turn in this process, the published
    presets' exact schedule (and bit-for-bit repeatable for a seed). actors and envs_per_actor default to
    the plan's, else 1 and the config's n_envs. learn=False collects only (acting, env steps, replay
    inserts): the actor side's speed. max_restarts: how many times the parallel launcher starts a dead
    actor again before it ends the run with that actor's error.

    Checkpoints go to runs/<id>/checkpoints/ every checkpoint_every updates (0: only at the end) and at the
    end, with the replay contents when checkpoint_replay; `resume` goes on from the newest. The runs folder
    is checked first (creatable, writable, room for the checkpoints), before any work is done.
    """
    wall0 = time.perf_counter()
    algo_config_class(algo)  # unknown algo → ConfigError
    if steps is not None:
        check_positive_int("--steps", steps)
    check_positive_int("--seed", seed, minimum=0)
    check_positive_int("--eval-episodes", eval_episodes, minimum=0)
    check_positive_int("--threads", threads)
    check_positive_int("--checkpoint-every", checkpoint_every, minimum=0)
    spec = env_spec(env_id)
    check_algo_fits(algo, spec)
    config = config if config is not None else preset(algo, env_id)
    if config.algo != algo:
        raise ConfigError(f"a {config.algo} config cannot train {algo}")
    if steps is not None:
        config = config.replace(total_steps=steps)
    config.validate()

    if launcher not in LAUNCHERS:
        raise ConfigError(f"unknown launcher {launcher!r}; choose one of: {', '.join(LAUNCHERS)}")
    for name, value, most in (("--actors", actors, max_actors()), ("--envs-per-actor", envs_per_actor, MAX_ENVS)):
        if value is not None:
            check_positive_int(name, value)
            if value > most:  # each actor is a process, each env an env object: a typo must not fork thousands
                raise ConfigError(f"{name} must be at most {most} on this machine, got {value}")
    if plan is not None and (actors is not None or envs_per_actor is not None):
        raise ConfigError("--plan sets the actors and envs per actor; drop --actors/--envs-per-actor "
                          "(or drop --plan)")
    emulate = dict(emulate or {})
    if emulate and plan is None:
        raise ConfigError("--emulate stands in for an absent device of a plan; it needs --plan")
    loaded = _checked_plan(plan, algo, env_id, device, emulate) if plan is not None else None
    device = device or "cpu"
    if loaded is not None:
        where = {k: emulate.get(d, d) for k, d in loaded.mapping.items()}
        placement = Placement(where["act"], where["replay_insert"], where["learn"])
        actors, envs_per_actor = loaded.actors, loaded.envs_per_actor
        device = "plan"
    else:
        placement = Placement.single(device)
    actors = actors or 1
    if envs_per_actor is not None:
        config = config.replace(n_envs=envs_per_actor)
    if not learn:  # collection only: the actors act with the policy from the first step
        config = config.replace(learning_starts=0)
    if descriptor is not None and not any(d.startswith("opencl") for d in placement.devices()):
        raise DeviceError(f"--descriptor names a kernel binary for an OpenCL device; {device} loads none "
                          "(drop --descriptor, or train on an opencl:P:D device)")
    check_positive_int("--max-restarts", max_restarts, minimum=0)
    setup = _Setup(algo, env_id, seed, config, spec, placement, device, launcher, actors, learn, threads,
                   descriptor, loaded, max_restarts, checkpoint_every, checkpoint_replay, emulate)
    check_runs_dir(runs_dir, _disk_needed(setup))
    checkpointer = _checkpointer(setup)
    runner = _runner(setup, None, checkpointer)  # a bad or absent device fails here, before runs/<id>/ exists
    record = RunRecord(runs_dir, algo, env_id, seed)
    if loaded is not None:
        record.write("plan.json", loaded.to_dict())
    record.write("config.json", setup.config_record())
    return _execute(setup, runner, record, checkpointer, None, eval_episodes, progress, max_seconds, wall0)


def resume(run_dir: str, *, eval_episodes: int = 10, progress: Callable[[int], None] | None = None,
           max_seconds: float | None = None, max_restarts: int | None = None) -> TrainResult:
    """Go on with the run recorded in run_dir from its newest readable checkpoint, as it was configured
    (config.json), to its total step budget; then evaluate and write its summary. A damaged newest
    checkpoint is skipped for the one before it (the summary says so)."""
    wall0 = time.perf_counter()
    check_positive_int("--eval-episodes", eval_episodes, minimum=0)
    folder = Path(run_dir)
    setup = _setup_from_record(folder)
    if max_restarts is not None:
        check_positive_int("--max-restarts", max_restarts, minimum=0)
        setup.max_restarts = max_restarts
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
    result = _execute(setup, runner, record, checkpointer, checkpoint, eval_episodes, progress, max_seconds,
                      wall0, skipped)
    return result


def _runner(setup: _Setup, checkpoint: "Checkpoint | None",
            checkpointer: Checkpointer) -> LocalLauncher | ParallelLauncher:
    s = setup
    try:
        if s.launcher == "parallel":
            return ParallelLauncher(s.config, s.spec, s.placement, s.seed, s.threads, s.descriptor, actors=s.actors,
                                    learn=s.learn, max_restarts=s.max_restarts, resume=checkpoint,
                                    checkpointer=checkpointer)
        return LocalLauncher(s.config, s.spec, s.placement, s.seed, s.threads, s.descriptor, actors=s.actors,
                             learn=s.learn, resume=checkpoint, checkpointer=checkpointer)
    except MemoryError:
        raise ConfigError(f"a replay buffer of {s.config.buffer_size:,} transitions does not fit in this machine's "
                          "memory; lower buffer_size") from None


def _checkpointer(setup: _Setup) -> Checkpointer:
    meta = {"algo": setup.algo, "env": setup.env_id, "seed": setup.seed,
            "hyperparameters": setup.config.to_dict()}
    # the folder is set once runs/<id>/ exists (see _execute)
    return Checkpointer(Path(CHECKPOINTS), setup.checkpoint_every, meta, setup.checkpoint_replay)


def _execute(setup: _Setup, runner: LocalLauncher | ParallelLauncher, record: RunRecord, checkpointer: Checkpointer,
             checkpoint: "Checkpoint | None", eval_episodes: int, progress: Callable[[int], None] | None,
             max_seconds: float | None, wall0: float, skipped: list[str] | None = None) -> TrainResult:
    """Run the launcher into the record, evaluate, and write summary.json."""
    config, spec, placement = setup.config, setup.spec, setup.placement
    algo, env_id, seed = setup.algo, setup.env_id, setup.seed
    checkpointer.folder = record.dir / CHECKPOINTS
    try:
        stats = runner.run(record, progress, max_seconds)
    except BaseException as exc:  # Ctrl-C, SIGTERM, a failed actor: say so in the summary, keep the metrics
        last = _checkpoint_on_interrupt(runner, exc)
        record.write("summary.json", {"kind": "summary", "status": "interrupted", "algo": algo, "env": env_id,
                                      "seed": seed, "reason": f"{type(exc).__name__}: {exc}",
                                      "checkpoints": [str(p) for p in checkpointer.written],
                                      "resume": f"pearl train --resume {record.dir}" if last else None})
        raise
    finally:
        record.close()
    act = _eval_adapter(runner, placement, setup.threads, setup.descriptor).make_act(config, spec,
                                                                                     stats.final_params, seed)
    returns = evaluate(act, spec, eval_episodes, seed + EVAL_SEED_OFFSET) if eval_episodes else []

    learning_steps = max(1, stats.steps - config.learning_starts)
    steps_here, updates_here = stats.steps - stats.start_steps, stats.updates - stats.start_updates
    result = TrainResult(
        algo=algo, env=env_id, steps=stats.steps, seed=seed, device=setup.device,
        env_steps_per_s=steps_here / stats.wall_s,
        updates_per_s=updates_here / stats.wall_s,
        learner_samples_per_s=updates_here * config.batch_size / stats.wall_s,
        replay_ratio=stats.updates / learning_steps,
        eval_return_mean=float(np.mean(returns)) if returns else float("nan"),
        eval_return_std=float(np.std(returns)) if returns else float("nan"),
        eval_episodes=eval_episodes, wall_s=time.perf_counter() - wall0, run_dir=str(record.dir),
        updates=stats.updates, train_wall_s=stats.wall_s, preset=has_preset(algo, env_id),
        placement=placement.to_dict(), eval_returns=returns, kernel_seconds=dict(stats.kernel_seconds),
        actors=setup.actors, envs_per_actor=config.n_envs, launcher=setup.launcher, learn=setup.learn,
        threads=setup.threads, dropped_steps=stats.dropped_steps, waits=dict(stats.waits),
        actor_restarts=stats.restarts, lost_steps_max=stats.lost_steps_max, start_steps=stats.start_steps,
        checkpoints=list(stats.checkpoints), checkpoint_s=stats.checkpoint_s,
        resumed_from=str(checkpoint.path) if checkpoint is not None else None,
        skipped_checkpoints=list(skipped or []),
    )
    if stats.learn_start_s is not None and stats.wall_s > stats.learn_start_s:
        learning_s = stats.wall_s - stats.learn_start_s
        result.learning_env_steps_per_s = (stats.steps - stats.learn_start_steps) / learning_s
        result.learning_updates_per_s = (stats.updates - stats.start_updates) / learning_s
    if setup.plan is not None:
        result.plan_check = plan_check(setup.plan, stats, config, result, setup.emulate)
    record.write("summary.json", {"kind": "summary", "status": "finished", **result.to_dict()})
    return result


def _checkpoint_on_interrupt(runner: LocalLauncher | ParallelLauncher, exc: BaseException) -> str | None:
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
    params = init_params(cfg, spec, setup.seed)
    learn_bytes = 3 * sum(v.nbytes for v in params.values())  # parameters and two Adam moments (an upper bound)
    action_bytes = 8 if spec.discrete else 4 * spec.action_dim
    row = 4 * (2 * spec.obs_dim + 2) + action_bytes + (8 if cfg.prioritized else 0)
    return estimate_bytes(learn_bytes, cfg.buffer_size * row, setup.checkpoint_replay) + METRICS_MARGIN


METRICS_MARGIN = 16 * 2**20  # metrics lines, config and summary: a few MB even for long runs


LAUNCHERS = ("parallel", "sequential")


def _setup_from_record(folder: Path) -> _Setup:
    """The configuration runs/<id>/config.json recorded, checked field by field."""
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
        spec = env_spec(env_id)
    except PearlError as exc:
        raise RunDirError(f"{path}: {exc}") from None
    placement_data = field_.get("placement", dict)
    try:
        placement = Placement(str(placement_data["act"]), str(placement_data["replay_insert"]),
                              str(placement_data["learn"]))
    except KeyError as exc:
        raise RunDirError(f"{path}: field 'placement' lacks {exc}") from None
    launcher = field_.get("launcher", str)
    if launcher not in LAUNCHERS:
        raise RunDirError(f"{path}: field 'launcher' must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")
    descriptor = data.get("descriptor")
    if descriptor is not None and not isinstance(descriptor, str):
        raise RunDirError(f"{path}: field 'descriptor' must be a path or null, got {descriptor!r}")
    emulate = data.get("emulate", {})  # runs recorded before emulation existed lack it
    if not isinstance(emulate, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in emulate.items()):
        raise RunDirError(f"{path}: field 'emulate' must map device ids to device ids, got {emulate!r}")
    plan = (_checked_plan(str(folder / "plan.json"), algo, env_id, None, emulate)
            if (folder / "plan.json").exists() else None)
    return _Setup(algo, env_id, field_.get("seed", int), config, spec, placement, field_.get("device", str),
                  launcher, field_.get("actors", int, 1), field_.get("learn", bool), field_.get("threads", int, 1),
                  descriptor, plan, field_.get("max_restarts", int), field_.get("checkpoint_every", int),
                  field_.get("checkpoint_replay", bool), emulate)


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
    ours = {"algo": setup.algo, "env": setup.env_id, "seed": setup.seed,
            "hyperparameters": setup.config.to_dict()}
    for name, value in ours.items():
        if meta.get(name) != value:
            raise CheckpointError(f"{checkpoint.path}: its {name} differs from the run's config.json; "
                                  "it belongs to another run")


def _eval_adapter(runner: LocalLauncher | ParallelLauncher, placement: Placement, threads: int,
                  descriptor: str | None):
    """The adapter of the act device (the parallel launcher opened it only in its actor processes)."""
    if placement.act in runner.adapters:
        return runner.adapters[placement.act]
    from pearl.adapters import open_adapter
    return open_adapter(placement.act, threads, descriptor if placement.act.startswith("opencl") else None)
