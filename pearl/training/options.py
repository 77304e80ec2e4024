"""What one training run is given (`RunOptions`, with the defaults pearl fills in) and the checks and parsers of
the options a user types: `--set name=value`, `--emulate ABSENT=opencl:P:D`, counts that must be positive."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from pearl.algos import OffPolicyConfig
from pearl.errors import ConfigError
from pearl.schedule import DEFAULT_LAG

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
