"""What one training run is given: `RunOptions`, five groups of options (algorithm, placement, launcher,
evaluation, checkpoints), each field declared once with its default and its help text. From these declarations
`pearl train`'s options are made (pearl/cli/train.py), config.json's options are written and read back
(`record_values`, `read_record_values`), and the Python API takes them (`pearl.train(..., name=value)` with the
flat names below, or `RunOptions` built from its groups).

Every option has one flat name, unique across the groups: the keyword of `pearl.train` and `RunOptions.of`,
the key of config.json, and the flag's destination (`--eval-every` is `eval_every`; the launcher's `name` is
`launcher`). Also here: the parsers of `--set name=value` and `--emulate ABSENT=opencl:P:D`, and the check of
counts that must be positive."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from pearl.algos import OffPolicyConfig, algorithm_names
from pearl.errors import ConfigError
from pearl.fileio import FieldChecker
from pearl.kernels import PRECISION_CHOICES
from pearl.schedule import DEFAULT_LAG

# The learner's threads when neither --threads nor a plan nor a profile of this machine says otherwise: a plan
# whose profile times learn at 1 thread only prices T threads as 1 and keeps 1 (ties keep fewer threads). One
# thread suits the presets' small MLPs when nothing is known: their layers are too small to pay for a second
# thread's barrier, which an actor process beside the learner also displaces.
DEFAULT_THREADS = 1
DEFAULT_LAUNCHER = "local"  # a run that names no launcher and has no plan may run sequential (LauncherOptions.name)
MAX_THREADS = 4096  # a typo must not ask torch for millions of threads
DEFAULT_CHECKPOINT_EVERY = 5_000  # updates; DQN CartPole's 50,000 steps make ~24,500 updates
EVALUATIONS_PER_RUN = 10  # in-training evaluations when eval_every is left to pearl


def precision_names() -> list[str]:
    """`--precision`'s choices: the precisions learn computes in, and auto."""
    return list(PRECISION_CHOICES)


def option(default: Any = None, help: str = "", *, flag: str | None = None, record: str | None = None,
           kind: type | None = None, minimum: int = 0, **cli: Any) -> Any:
    """One field of a group of run options: its default, its help text, and how it travels.

    flag: `pearl train`'s flag (None: none; "--no-x" sets a true-by-default field to false); record: how
    config.json keeps it ("required", "optional": a missing key takes the default; None: not as itself);
    kind and minimum: what config.json's value must be (None allowed when the default is None); cli: more
    click settings (metavar, multiple with `parse`, `choices`: a function giving them); `rename` gives the
    flat name (the launcher's `name` is `launcher`)."""
    metadata = {"help": help, "flag": flag, "record": record, "kind": kind, "minimum": minimum, **cli}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class AlgorithmOptions:
    """What is learnt: the algorithm, the environment, the hyperparameters, the budget and the seed."""

    algo: str | None = option(None, "Algorithm to train (required unless --plan names it).", flag="--algo",
                              record="required", kind=str, choices=algorithm_names)
    env: str | None = option(None, "Gymnasium environment id, e.g. CartPole-v1 (required unless --plan names it).",
                             flag="--env", record="required", kind=str)
    config: OffPolicyConfig | None = option(
        None, "Hyperparameters; None takes pearl's preset for (algo, env), else the algorithm's defaults "
        "(config.json keeps them as 'hyperparameters').")
    config_file: str | None = option(None, "A JSON or TOML file of hyperparameters to change (name = value).",
                                     flag="--config", metavar="FILE")
    settings: dict[str, str] = option(
        {}, "Change one hyperparameter, e.g. --set learning_rate=1e-3 --set hidden=64,64 (repeatable).",
        flag="--set", metavar="NAME=VALUE", multiple=True, parse="parse_settings")
    steps: int | None = option(None, "Env steps to train (default: the preset's).", flag="--steps", type=int)
    seed: int = option(0, "Seed of weights, envs, exploration and sampling: with it a run repeats bit for bit.",
                       flag="--seed", record="required", kind=int, type=int)


@dataclass
class PlacementOptions:
    """Where each role runs and with how many processes, envs and threads.

    The learner's threads, when none are given, are picked as a plan would on this machine: a plan's `threads`;
    else, with the learner on `cpu` and a profile of this machine at hand (`profile_at_hand`:
    <runs_dir>/profiles/<host>-quick.json, which `pearl quickstart` keeps, or profiles/<host>-full.json /
    -quick.json, which `pearl profile` writes; same CPU and cores) that times this workload's learn at more than
    one thread, the T in {1, ..., lanes} a plan would take for this layout: the planner's own prediction of it
    at each T, contention beside the actor processes included (pearl.planner.make.layout_threads), or with the
    sequential launcher, whose roles run in turn, the T whose learn is fastest
    (pearl.planner.accounting.fastest_threads); ties to fewer threads; a run of 5,000 updates or more with no
    such profile at hand profiles its workload on cpu quickly first and keeps that profile there
    (training.configure.profile_for_threads); else 1 (DEFAULT_THREADS). On the 2-core
    EPYC the presets' learn gave the same bits at 1 and 2 threads; the thread count changes speed only there."""

    device: str | None = option(None, "Device of every kernel: cpu (the default), cuda:N or opencl:P:D.",
                                flag="--device", record="required", kind=str)
    plan: str | None = option(None, "Plan file from `pearl plan`: run its placement and actors.", flag="--plan")
    actors: int | None = option(None, "Actor processes (default: the plan's, else 1).", flag="--actors",
                                record="required", kind=int, minimum=1, type=int)
    envs_per_actor: int | None = option(
        None, "Environments each actor steps, batched into one act call (default: the plan's or preset's).",
        flag="--envs-per-actor", type=int)
    threads: int | None = option(
        None, "CPU threads the learner's kernels may use [default: the plan's; else as a plan would choose "
        "from this machine's profile, when one is at hand; else 1].", flag="--threads", record="required",
        kind=int, minimum=1, type=int)
    learners: int | None = option(
        None, "Learner processes training one policy together: each computes the gradients of its rows of every "
        "batch, and they apply the same averaged step (local and ray launchers; learn on cpu or cuda:N) "
        "[default: the plan's, else 1].", flag="--learners", record="optional", kind=int, minimum=1, type=int)
    precision: str | None = option(
        None, "Learn's arithmetic: fp32, bf16-mixed (products in bfloat16 with float32 accumulation, master "
        "weights and optimiser state; on a device with bf16 units), or auto (the plan's; without a plan, "
        "bf16-mixed where this machine's profile times this workload's learn faster at it, else fp32) "
        "[default: the plan's, else fp32].",
        flag="--precision", record="optional", kind=str, choices=precision_names)
    descriptor: str | None = option(None, "Device descriptor (TOML) whose kernel binary an OpenCL device loads.",
                                    flag="--descriptor", record="optional", kind=str)
    emulate: dict[str, str] = option(
        {}, "Run the kernels a plan places on an absent (what-if) device on this OpenCL device instead.",
        flag="--emulate", metavar="ABSENT=opencl:P:D", multiple=True, parse="parse_emulation", record="optional",
        kind=dict)


@dataclass
class LauncherOptions:
    """How the roles run and for how long: the launcher, the schedule's shape, restarts, the Ray cluster.

    The launcher, when none is named: local, unless the run has no plan, one learner, every kernel on `cpu`, no
    Ray option, and a profile of this machine at hand (as for the learner's threads, PlacementOptions.threads);
    then local or sequential, with the learner's threads, whichever the planner predicts faster for the layout
    (pearl.planner.make.default_launch: the local launcher's rows, contention included, against the sequential
    launcher's roles in turn, accounting.in_turn; ties to local), said in one stderr line when it is sequential.
    A one-env actor beside a learner of as many threads as lanes (DDPG Pendulum-v1 on 2 cores) displaces one of
    them at every step, and then the roles run faster in turn."""

    name: str | None = option(
        None, "How the roles run: actor processes beside the learner, in turn in one process, or on Ray. The "
        "learning is the same for a seed; only the speed differs. [default: local; without a plan, with every "
        "kernel on cpu and a profile of this machine at hand, local or sequential, whichever it predicts faster]",
        flag="--launcher", record="required", kind=str, metavar="local|sequential|ray", rename="launcher")
    ray_address: str | None = option(
        None, "With --launcher ray: the Ray cluster to join (host:port of its head) [default: start a local Ray "
        "instance on this machine, loopback only].", flag="--ray-address", metavar="ADDR", record="optional",
        kind=str)
    replay_shards: int = option(
        0, "With --launcher ray: replay as S replay-server actors (0: in the learner's process, which keeps the "
        "other launchers' parameters bit for bit).", flag="--replay-shards", record="optional", kind=int, type=int)
    policy_lag: int = option(DEFAULT_LAG, "Segments the actors' weights trail the learner (0: the presets' strictly "
                             "sequential schedule).", flag="--policy-lag", record="required", kind=int, type=int)
    segment_steps: int | None = option(
        None, "Env steps per schedule segment [default: the algorithm's round, grown to fit the actors].",
        flag="--segment-steps", record="optional", kind=int, minimum=1, type=int)
    learn: bool = option(True, "Collect only (act, env step, replay insert): the actor side's speed.",
                         flag="--no-learn", record="required", kind=bool)
    max_restarts: int = option(3, "Times a dead actor process is started again before the run ends with its error.",
                               flag="--max-restarts", record="required", kind=int, type=int)
    max_seconds: float | None = option(None, "Stop training after this much wall time (at the next segment "
                                       "boundary).")


@dataclass
class EvaluationOptions:
    """How the policies are scored: in training (to keep the best) and after it."""

    eval_episodes: int = option(10, "Greedy episodes the final and the best policy are scored on.",
                                flag="--eval-episodes", type=int)
    eval_every: int | None = option(
        None, "Env steps between in-training evaluations that keep the best policy (0: none) [default: ten per "
        "run].", flag="--eval-every", record="required", kind=int, type=int)
    eval_every_episodes: int = option(10, "Greedy episodes of each in-training evaluation.",
                                      flag="--eval-every-episodes", record="required", kind=int, minimum=1,
                                      type=int)


@dataclass
class CheckpointOptions:
    """Where the run is recorded and how often its state is saved."""

    runs_dir: str = option("runs", "Where runs/<id>/ records are written.", flag="--runs-dir")
    checkpoint_every: int = option(
        DEFAULT_CHECKPOINT_EVERY, "Write a checkpoint every N updates (0: only at the end) into "
        "runs/<id>/checkpoints/.", flag="--checkpoint-every", record="required", kind=int, type=int)
    checkpoint_replay: bool = option(
        True, "Leave the replay contents out of checkpoints (smaller; a resume refills replay first).",
        flag="--no-checkpoint-replay", record="required", kind=bool)


GROUPS: dict[str, type] = {"algorithm": AlgorithmOptions, "placement": PlacementOptions, "launcher": LauncherOptions,
                           "evaluation": EvaluationOptions, "checkpoints": CheckpointOptions}


@dataclass(frozen=True)
class OptionField:
    """One option as the CLI, config.json and the Python API see it: its flat name, group and declaration."""

    name: str  # the flat name
    group: str
    field: dataclasses.Field

    @property
    def meta(self) -> Any:
        return self.field.metadata

    @property
    def default(self) -> Any:
        f = self.field
        return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def option_fields() -> Iterator[OptionField]:
    """Every run option, in the order of the groups and of their fields."""
    for group, cls in GROUPS.items():
        for f in dataclasses.fields(cls):
            yield OptionField(f.metadata.get("rename", f.name), group, f)


def _by_name() -> dict[str, OptionField]:
    return {o.name: o for o in option_fields()}


@dataclass
class RunOptions:
    """Everything one training run is given, in five groups: the CLI, the Python API, config.json and resume all
    use this. `RunOptions.of(algo="dqn", env="CartPole-v1", launcher="sequential")` builds one by flat names."""

    algorithm: AlgorithmOptions = field(default_factory=AlgorithmOptions)
    placement: PlacementOptions = field(default_factory=PlacementOptions)
    launcher: LauncherOptions = field(default_factory=LauncherOptions)
    evaluation: EvaluationOptions = field(default_factory=EvaluationOptions)
    checkpoints: CheckpointOptions = field(default_factory=CheckpointOptions)

    @classmethod
    def of(cls, **values: Any) -> "RunOptions":
        """Options by flat name (each option's keyword, config.json key and flag destination); the rest default."""
        return cls().replace(**values)

    def replace(self, **changes: Any) -> "RunOptions":
        """A copy with options changed by flat name (`launcher` is the launcher's name, not its group)."""
        by_name = _by_name()
        unknown = sorted(set(changes) - set(by_name))
        if unknown:
            raise ConfigError(f"unknown run option(s): {', '.join(unknown)}")
        groups: dict[str, Any] = {}
        for name, value in changes.items():
            o = by_name[name]
            current = groups.get(o.group, getattr(self, o.group))
            groups[o.group] = dataclasses.replace(current, **{o.field.name: value})
        return dataclasses.replace(self, **groups)

    def value(self, name: str) -> Any:
        """The option of this flat name."""
        o = _by_name()[name]
        return getattr(getattr(self, o.group), o.field.name)


def record_values(options: RunOptions) -> dict[str, Any]:
    """The options config.json keeps as themselves, by flat name (`read_record_values` reads them back)."""
    return {o.name: _plain(options.value(o.name)) for o in option_fields() if o.meta["record"]}


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


def read_record_values(data: dict, checker: FieldChecker) -> dict[str, Any]:
    """The options `record_values` wrote, each checked against its declaration (a missing optional one takes
    its default, null stands for an option whose default is None); `checker` raises its error naming the file
    and the field."""
    out: dict[str, Any] = {}
    for o in option_fields():
        how, kind, minimum = o.meta["record"], o.meta["kind"], o.meta["minimum"]
        if how is None:
            continue
        if o.name not in data and how == "optional":
            out[o.name] = o.default
            continue
        value = data.get(o.name)
        if value is None and o.default is None and o.name in data:
            out[o.name] = None
            continue
        if kind is int:  # FieldChecker's checks, with their bounds (a huge count is refused here, not later)
            value = checker.integer(data, o.name, minimum=minimum)
        elif kind is bool:
            value = checker.flag(data, o.name)
        elif kind is dict:
            value = checker.mapping(data, o.name)
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                checker.fail(o.name, "an object of strings", value)
        else:
            value = checker.text(data, o.name)
        out[o.name] = value
    return out


def cli_values(params: dict[str, Any]) -> dict[str, Any]:
    """`pearl train`'s parsed flags as option values by flat name: repeated flags parsed (`--set`, `--emulate`)."""
    parsers: dict[str, Callable[[Sequence[str]], dict[str, str]]] = {
        "parse_settings": parse_settings, "parse_emulation": parse_emulation}
    by_name = _by_name()
    return {name: parsers[by_name[name].meta["parse"]](value) if by_name[name].meta.get("parse") else value
            for name, value in params.items() if name in by_name}


def parse_settings(specs: Sequence[str]) -> dict[str, str]:
    """`--set name=value` options as {name: text}; ConfigError for a malformed one."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ConfigError(f"--set takes name=value (e.g. learning_rate=1e-3 or hidden=64,64), got {spec!r}")
        out[name.strip()] = value.strip()
    return out


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


def check_positive_int(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


def max_actors() -> int:
    """Actor processes allowed: four per core (an actor beyond one per core only waits its turn)."""
    return 4 * (os.cpu_count() or 1)
