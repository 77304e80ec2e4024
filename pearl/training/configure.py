"""A run's options checked (one error naming the first bad one) and what follows from them: the algorithm and
environment, the hyperparameters (preset, --config, --set), the placement, the actors and the learner's threads."""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pearl._version import __version__
from pearl.adapters.registry import precision_problem
from pearl.backends import kinds_with
from pearl.kernels import PRECISION_CHOICES, Precision
from pearl.algos import OffPolicyConfig, algo_config_class, has_preset, preset
from pearl.device import HOST, HOST_DEVICE, DeviceId
from pearl.envs import check_algo_fits, env_spec
from pearl.errors import ConfigError, DeviceError, PearlError
from pearl.fileio import read_json, read_toml
from pearl.run_options import (
    DEFAULT_LAUNCHER,
    DEFAULT_THREADS,
    EVALUATIONS_PER_RUN,
    MAX_THREADS,
    RunOptions,
    check_positive_int,
    max_actors,
    record_values,
)
from pearl.runtime.job import Job, Placement
from pearl.training.launchers import launcher_capabilities, launcher_name
from pearl.training.plan_checks import (
    check_backends,
    check_implementations,
    check_planned_workload,
    check_slices,
    checked_plan,
    emulated,
    local_devices,
    role_slices,
)
from pearl.types import MAX_ENVS, EnvSpec

if TYPE_CHECKING:
    from pearl.planner.make import Launch
    from pearl.planner.plan import Plan
    from pearl.profile.format import Profile


@dataclass
class RunSetup:
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
    #: --emulate's pairs as device ids (a plan's absent device → the OpenCL device that runs its kernels)
    emulate: dict[DeviceId, DeviceId]

    @property
    def job(self) -> Job:
        return Job(self.config, self.spec, self.placement, self.options, self.actors, self.eval_every)

    def config_record(self) -> dict:
        """config.json: the options as `record_values` writes them (with what the run resolved: the algorithm and
        env a plan names, its device label, actors and in-training evaluations), and what followed from them."""
        resolved = self.options.replace(algo=self.algo, env=self.env_id, device=self.device, actors=self.actors,
                                        eval_every=self.eval_every)
        return {
            "kind": "config", **record_values(resolved), "placement": self.placement.to_dict(),
            "envs_per_actor": self.config.n_envs, "slices": role_slices(self.placement, self.actors),
            "schedule": self.job.schedule().to_dict(), "preset": has_preset(self.algo, self.env_id),
            "hyperparameters": self.config.to_dict(), "env_spec": asdict(self.spec), "pearl_version": __version__,
            "host": {"node": platform.node(), "platform": platform.platform(), "python": sys.version.split()[0]},
        }


def _check_counts(o: RunOptions) -> None:
    """ConfigError for a count that is no integer or out of range, naming its flag."""
    algorithm, place, launch = o.algorithm, o.placement, o.launcher
    for name, value, minimum in (("--seed", algorithm.seed, 0), ("--eval-episodes", o.evaluation.eval_episodes, 0),
                                 ("--checkpoint-every", o.checkpoints.checkpoint_every, 0),
                                 ("--eval-every-episodes", o.evaluation.eval_every_episodes, 1)):
        check_positive_int(name, value, minimum)
    if place.learners is not None:
        check_positive_int("--learners", place.learners)
    for name, value in (("--steps", algorithm.steps), ("--eval-every", o.evaluation.eval_every),
                        ("--threads", place.threads)):
        if value is not None:
            check_positive_int(name, value, minimum=0 if name == "--eval-every" else 1)
    if place.threads is not None and place.threads > MAX_THREADS:
        raise ConfigError(f"--threads must be at most {MAX_THREADS}, got {place.threads}")
    if isinstance(launch.policy_lag, bool) or not isinstance(launch.policy_lag, int) or launch.policy_lag < 0:
        raise ConfigError(f"--policy-lag must be an integer >= 0, got {launch.policy_lag!r}")


def _check_launcher(o: RunOptions) -> None:
    """ConfigError for launcher options the launcher cannot take (its declared capabilities)."""
    launch = o.launcher
    capabilities = launcher_capabilities(launch.name)
    if launch.ray_address is not None:
        if not capabilities.cluster_plans:
            raise ConfigError(f"--ray-address joins a Ray cluster; it needs --launcher ray, not {launch.name}")
        if not isinstance(launch.ray_address, str) or not launch.ray_address.strip():
            raise ConfigError(f"--ray-address must be a cluster address such as 10.0.0.5:6379, got "
                              f"{launch.ray_address!r}")
        from pearl.runtime.ray.session import check_address
        check_address(launch.ray_address)  # before the run folder is made: Ray would retry a dead address for minutes
    check_positive_int("--replay-shards", launch.replay_shards, minimum=0)
    if launch.replay_shards and not capabilities.replay_shards:
        raise ConfigError(f"--replay-shards places replay-server actors on Ray; it needs --launcher ray, "
                          f"not {launch.name}")


def _check_learners(learners: int, given: bool, launcher: str, config: OffPolicyConfig, placement: Placement
                    ) -> None:
    """ConfigError for a learner group that cannot be (`given`: by --learners, else by the plan): a launcher that
    runs one learner, more learners than a batch has rows, or a learn device whose adapter cannot average
    gradients across processes (OpenCL)."""
    if learners == 1:
        return
    if not launcher_capabilities(launcher).learner_group:
        raise ConfigError(f"--learners {learners}: the {launcher} launcher runs one learner; use --launcher local "
                          "or ray for a learner group" if given else f"the plan has {learners} learners; the "
                          f"{launcher} launcher runs one: use --launcher local or ray, or pass --learners 1")
    if learners > config.batch_size:
        raise ConfigError(f"--learners {learners}: each learner takes rows of every batch, and a batch has "
                          f"{config.batch_size}; use at most {config.batch_size} learners or a larger batch_size")
    if not placement.learn.backend.collective:
        raise DeviceError(f"--learners {learners}: learn on {placement.learn} cannot be shared by a learner group "
                          f"(its kind has no collective to average gradients through); learn on "
                          f"{kinds_with('collective')}")


def _hyperparameters(o: RunOptions, algo: str, env_id: str) -> OffPolicyConfig:
    """The caller's config or the preset, changed by --config, --set and --steps in that order."""
    algorithm = o.algorithm
    config = algorithm.config if algorithm.config is not None else preset(algo, env_id)
    if config.algo != algo:
        raise ConfigError(f"a {config.algo} config cannot train {algo}")
    if algorithm.config_file is not None:
        config = _hyperparameters_file(algorithm.config_file, config)
    if algorithm.settings:
        config = config.with_text(algorithm.settings)
    if algorithm.steps is not None:
        config = config.replace(total_steps=algorithm.steps)
    return config


AUTO = PRECISION_CHOICES[-1]  # --precision auto


def setup_run(o: RunOptions) -> RunSetup:
    """Check every option (one ConfigError naming the first bad one) and derive the run's configuration."""
    named = o.launcher.name is not None  # else local, or sequential where the profile predicts it faster
    o = o.replace(launcher=launcher_name(o.launcher.name if named else DEFAULT_LAUNCHER),
                  emulate=dict(o.placement.emulate))
    place, launch = o.placement, o.launcher
    _check_counts(o)
    _check_launcher(o)
    if place.emulate and place.plan is None:
        raise ConfigError("--emulate stands in for an absent device of a plan; it needs --plan")
    if place.plan is not None and (place.actors is not None or place.envs_per_actor is not None):
        raise ConfigError("--plan sets the actors and envs per actor; drop --actors/--envs-per-actor "
                          "(or drop --plan)")
    emulate = emulated(place.emulate)
    loaded = (checked_plan(place.plan, o.algorithm.algo, o.algorithm.env, place.device, emulate, launch.name)
              if place.plan is not None else None)
    check_positive_int("--max-restarts", launch.max_restarts, minimum=0)
    algo, env_id = (loaded.algo, loaded.env) if loaded is not None else (o.algorithm.algo, o.algorithm.env)
    if algo is None or env_id is None:
        raise ConfigError("--algo and --env are required (or --plan PLAN, which names them, or --resume RUN_DIR)")
    algo_config_class(algo)  # an algorithm the registry does not know → ConfigError naming the known ones
    spec = env_spec(env_id)
    check_algo_fits(algo, spec)
    config = _hyperparameters(o, algo, env_id)
    for name, value, most in (("--actors", place.actors, max_actors()),
                              ("--envs-per-actor", place.envs_per_actor, MAX_ENVS)):
        if value is not None:
            check_positive_int(name, value)
            if value > most:  # each actor is a process, each env an env object: a typo must not fork thousands
                raise ConfigError(f"{name} must be at most {most} on this machine, got {value}")
    if loaded is not None:
        check_planned_workload(place.plan, loaded, config, spec)
        where = {k: emulate.get(d, d) for k, d in local_devices(loaded).items()}
        placement = Placement(where["act"], where["replay_insert"], where["learn"], loaded.implementation("act"),
                              loaded.implementation("learn"))
        actors, envs, device = loaded.actors, loaded.envs_per_actor, "plan"
    else:
        device = place.device or HOST
        placement, actors, envs = Placement.single(_device(device)), place.actors or 1, place.envs_per_actor
    if envs is not None:
        config = config.replace(n_envs=envs)
    if not launch.learn:  # collection only: the actors act with the policy from the first step
        config = config.replace(learning_starts=0)
    config.validate()
    check_slices(placement, actors, launch.name)
    check_backends(algo, placement)
    check_implementations(placement)
    learners = place.learners if place.learners is not None else loaded.learners if loaded is not None else 1
    _check_learners(learners, place.learners is not None, launch.name, config, placement)
    precision = _precision(place.precision, loaded, place.plan, placement)
    o = o.replace(learners=learners, precision=precision.value)
    if place.descriptor is not None and not any(d.backend.binaries for d in placement.devices()):
        raise DeviceError(f"--descriptor names a precompiled kernel binary; {device} loads none "
                          f"(drop --descriptor, or train on a {kinds_with('binaries')} device)")
    eval_every = o.evaluation.eval_every
    if eval_every is None:
        eval_every = max(1, config.total_steps // EVALUATIONS_PER_RUN)
    if not named and loaded is None and learners == 1 and launch.learn and not launch.ray_address \
            and not launch.replay_shards:
        chosen = default_launch_for(config, spec, placement, actors, place.threads, o.checkpoints.runs_dir)
        if chosen is not None:
            o = o.replace(launcher=chosen.launcher, threads=place.threads or chosen.threads)
            if chosen.launcher != DEFAULT_LAUNCHER:
                print(f"pearl: the {chosen.launcher} launcher (the roles in turn, one process), "
                      f"{o.placement.threads} learner thread(s): {chosen.why} (--launcher local keeps the roles "
                      "side by side)", file=sys.stderr, flush=True)
    if o.placement.threads is None:  # a learner group's learners are one thread each unless told (its plan's T)
        o = o.replace(threads=loaded.threads if loaded is not None else 1 if learners > 1 else
                      default_threads(config, spec, placement, actors, o.launcher.name, o.checkpoints.runs_dir))
    if place.precision == AUTO and loaded is None:
        chosen, why = auto_precision(config, spec, placement, o.placement.threads, o.checkpoints.runs_dir)
        o = o.replace(precision=chosen.value)
        print(f"pearl: learn in {chosen.value} (--precision auto): {why}", file=sys.stderr, flush=True)
    setup = RunSetup(o, algo, env_id, config, spec, placement, device, actors, eval_every if launch.learn else 0,
                     loaded, emulate)
    setup.job.schedule()  # a lag or segment layout that cannot work → ConfigError, before any work
    return setup


def _precision(asked: str | None, loaded: "Plan | None", path: str | None, placement: Placement) -> Precision:
    """Learn's precision: --precision, else the plan's, else fp32; auto: the plan's, else fp32 until
    `auto_precision` prices the run's layout. ConfigError for one the plan contradicts; DeviceError naming the
    learn device and what it supports when it cannot compute it in hardware."""
    planned = Precision.parse(loaded.precision) if loaded is not None else None
    if asked == AUTO:
        return planned or Precision.FP32
    chosen = Precision.parse(asked) if asked is not None else planned or Precision.FP32
    if planned is not None and chosen is not planned:
        raise ConfigError(f"--precision {chosen.value}: {path} was planned for learn at {planned.value}; drop "
                          f"--precision, or plan again with --precision {chosen.value}")
    why = precision_problem(placement.learn, chosen)
    if why:
        raise DeviceError(f"--precision {chosen.value}: learn on {placement.learn} cannot run it ({why}); "
                          f"use --precision {Precision.FP32.value}")
    return chosen


def auto_precision(config: OffPolicyConfig, spec: EnvSpec, placement: Placement, threads: int | None,
                   runs_dir: str) -> tuple[Precision, str]:
    """--precision auto for a run without a plan: bf16-mixed where this machine's profile at hand
    (`profile_at_hand`) times this workload's learn on the learn device faster at bf16-mixed than at fp32, at the
    run's threads where both are timed there (else at one); fp32 otherwise, ties included. With one sentence
    saying why. Only learn computes at bf16-mixed, so its time decides: the run is no slower where it is faster."""
    from pearl.costmodel import CostModel
    from pearl.profile.format import config_workload

    fp32, bf16, device = Precision.FP32, Precision.BF16_MIXED, placement.learn
    problem = precision_problem(device, bf16)
    if problem:
        return fp32, f"learn on {device} cannot compute {bf16.value} ({problem})"
    profile = profile_at_hand(runs_dir)
    if profile is None:
        return fp32, ("no profile of this machine at hand to compare the two (`pearl profile --quick` makes one; "
                      "`pearl plan --precision auto` plans with one)")
    workload, where = config_workload(config, spec), str(device)
    models = {p: CostModel(profile, p) for p in (fp32, bf16)}
    if not any(k.kernel == "learn" and k.device == where and k.precision == bf16.value for k in profile.kernels):
        return fp32, f"the profile at hand times no learn at {bf16.value} on {device}"
    t = threads or 1
    counts = [set(m.thread_counts("learn", where, workload)) for m in models.values()]
    t = t if all(t in c for c in counts) else 1
    try:
        seconds = {p: m.kernel_time("learn", where, workload, config.batch_size, t).seconds
                   for p, m in models.items()}
    except (KeyError, ValueError, PearlError):  # the profile does not time this workload's learn there
        return fp32, f"the profile at hand times this workload's learn at {bf16.value} on no device it can scale from"
    chosen = bf16 if seconds[bf16] < seconds[fp32] else fp32
    other = fp32 if chosen is bf16 else bf16
    return chosen, (f"this machine's profile times learn on {device} at {seconds[chosen] * 1e6:,.0f} µs an update "
                    f"({t} thread(s)) against {other.value}'s {seconds[other] * 1e6:,.0f} µs")


def _device(text: object) -> DeviceId:
    """--device's id; DeviceError naming the flag when it is no device id."""
    try:
        return DeviceId.parse(text)
    except DeviceError as exc:
        raise DeviceError(f"--device: {exc}") from None


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
        data = read_toml(path, ConfigError, "pass --config with a TOML or JSON file")
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


def hyperparameters_note(setup: RunSetup) -> str:
    """Where the run's hyperparameters came from, in a sentence (a run without a preset says how to tune it)."""
    o = setup.options
    changed = [f"--config {o.algorithm.config_file}"] if o.algorithm.config_file else []
    changed += [f"--set {k}={v}" for k, v in o.algorithm.settings.items()]
    extra = f", changed by {' '.join(changed)}" if changed else ""
    if o.algorithm.config is not None:
        return f"hyperparameters given by the caller{extra}"
    if has_preset(setup.algo, setup.env_id):
        return f"pearl's preset for {setup.algo} on {setup.env_id}{extra}"
    return (f"no preset for {setup.algo} on {setup.env_id}: the algorithm's defaults{extra}; pass hyperparameters "
            "with --set name=value (repeatable) or --config FILE (JSON or TOML)")


def planned_work(o: RunOptions) -> tuple[str, int | None]:
    """A label and the env steps of the run the options describe, for a progress bar (None when unknown:
    the options are checked when training starts, with their proper errors)."""
    try:
        algo, env_id = o.algorithm.algo, o.algorithm.env
        if o.placement.plan is not None and (algo is None or env_id is None):
            from pearl.planner.plan import load_plan
            planned = load_plan(o.placement.plan)
            algo, env_id = algo or planned.algo, env_id or planned.env
        given = o.algorithm.config
        total = o.algorithm.steps or (given.total_steps if given is not None else preset(algo, env_id).total_steps)
        return f"{algo} {env_id}", total
    except (PearlError, TypeError):
        return "train", None


def profile_at_hand(runs_dir: str) -> "Profile | None":
    """This machine's profile where pearl keeps one (PlacementOptions.threads names the files), the first that reads
    and was measured on this CPU with these cores; None when there is none."""
    from pearl.hostinfo import cpu_lanes, cpu_name
    from pearl.profile.format import load_profile

    node = platform.node() or "host"
    for path in (runs_profile_path(runs_dir), Path("profiles") / f"{node}-full.json",
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


def runs_profile_path(runs_dir: str) -> Path:
    """The quick profile of this machine kept in the runs folder (`pearl quickstart`'s, and the one a long run
    takes to choose its threads)."""
    return Path(runs_dir) / "profiles" / f"{platform.node() or 'host'}-quick.json"


def default_threads(config: OffPolicyConfig, spec: EnvSpec, placement: Placement, actors: int, launcher: str,
                    runs_dir: str) -> int:
    """The learner's threads when the run names none and has no plan (PlacementOptions.threads says the rule)."""
    from pearl.hostinfo import cpu_lanes

    lanes = cpu_lanes()
    if placement.learn != HOST_DEVICE or lanes < 2:
        return DEFAULT_THREADS
    profile = _threads_profile(config, spec, runs_dir)
    if profile is None:
        return DEFAULT_THREADS
    from pearl.costmodel import CostModel
    from pearl.planner.accounting import fastest_threads
    from pearl.profile.format import config_workload
    from pearl.planner.make import layout_threads
    from pearl.planner.problem import PLACED, REPLAY

    model, workload = CostModel(profile), config_workload(config, spec)
    try:
        if launcher_capabilities(launcher).concurrent_roles:  # priced beside the actors, as a plan prices it
            where = {k: str(placement.replay if k in REPLAY else getattr(placement, k)) for k in PLACED}
            return layout_threads(profile, config, spec, where, actors)
        counts = [t for t in model.thread_counts("learn", HOST, workload) if t <= lanes]
        return fastest_threads(lanes, {t: model.kernel_time("learn", HOST, workload, config.batch_size, t).seconds
                                       for t in counts})
    except (KeyError, ValueError, PearlError):  # the profile does not time this workload, or its devices
        return DEFAULT_THREADS


def default_launch_for(config: OffPolicyConfig, spec: EnvSpec, placement: Placement, actors: int,
                       threads: int | None, runs_dir: str) -> "Launch | None":
    """The launcher (local or sequential) and learner threads a plan would take for a run that names no launcher
    and has no plan (LauncherOptions.name says the rule): `pearl.planner.make.default_launch` on this machine's
    profile (`_threads_profile`); None (the local launcher, threads as `default_threads` picks them) when a
    kernel is off the host's `cpu`, the host has one lane, or there is no such profile."""
    from pearl.hostinfo import cpu_lanes

    if set(placement.devices()) != {HOST_DEVICE} or cpu_lanes() < 2:
        return None
    profile = _threads_profile(config, spec, runs_dir)
    if profile is None:
        return None
    from pearl.planner.make import default_launch
    from pearl.planner.problem import PLACED

    try:
        return default_launch(profile, config, spec, {k: str(HOST_DEVICE) for k in PLACED}, actors, threads)
    except (KeyError, ValueError, PearlError):  # the profile does not time this workload, or its devices
        return None


def _threads_profile(config: OffPolicyConfig, spec: EnvSpec, runs_dir: str) -> "Profile | None":
    """This machine's profile at hand, or for a long run without one that times this workload's learn at several
    threads, a quick profile of the workload taken now (`profile_for_threads`); None for a short run without one."""
    profile = profile_at_hand(runs_dir)
    if not times_threads(profile, config, spec) and long_run(config):
        profile = profile_for_threads(config, spec, runs_dir, profile)
    return profile


#: A run of at least this many updates that finds no profile of this machine timing its learn at several threads
#: profiles its workload quickly first (seconds, small beside such a run), so its threads are chosen as a plan
#: would choose them; the profile is kept for the next runs (`profile_at_hand`).
PROFILE_FOR_THREADS_UPDATES = 5_000


def long_run(config: OffPolicyConfig) -> bool:
    updates = (config.total_steps - config.learning_starts) * config.replay_ratio
    return updates >= PROFILE_FOR_THREADS_UPDATES


def times_threads(profile: "Profile | None", config: OffPolicyConfig, spec: EnvSpec) -> bool:
    """Whether `profile` times this workload's learn on `cpu` at more than one thread count."""
    from pearl.costmodel import CostModel
    from pearl.profile.format import config_workload

    if profile is None:
        return False
    return len(CostModel(profile).thread_counts("learn", HOST, config_workload(config, spec).key)) > 1


def profile_for_threads(config: OffPolicyConfig, spec: EnvSpec, runs_dir: str,
                        kept: "Profile | None") -> "Profile":
    """A quick profile of this workload on `cpu`, merged into the profile kept at hand and written there
    (<runs_dir>/profiles/<host>-quick.json, where `pearl quickstart` keeps its own)."""
    from pearl.profile.format import merge_profiles, save_profile
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.profiler import run_profile
    from pearl.runtime.local import PROBES

    path = runs_profile_path(runs_dir)
    print(f"pearl: profiling {config.algo} on {spec.env_id} quickly, once, to choose the learner's threads as a plan "
          f"would (kept in {path}; --threads N skips this)", file=sys.stderr, flush=True)
    new = run_profile(ProfileOptions(quick=True, algos=(config.algo,), env=spec.env_id, hidden=tuple(config.hidden),
                                     batch_size=config.batch_size, devices=(HOST,)), probes=PROBES)
    merged = merge_profiles(kept, new, str(path)) if kept is not None else new
    save_profile(merged, path)
    return merged
