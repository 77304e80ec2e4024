"""`TrainResult`: what `pearl.train` returns and summary.json holds of a finished run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pearl.run_options import DEFAULT_THREADS


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
    #: over the learning phase only: after learning_starts, in-training evaluations and checkpoints left out
    learning_env_steps_per_s: float | None = None
    learning_updates_per_s: float | None = None
    launcher: str = "local"
    envs_per_actor: int = 1
    learn: bool = True
    threads: int = DEFAULT_THREADS  # the learner's threads the run used (PlacementOptions.threads, resolved)
    learners: int = 1  # the learner group's size (PlacementOptions.learners, resolved)
    precision: str = "fp32"  # learn's arithmetic the run used (PlacementOptions.precision, auto resolved)
    #: how act and learn ran ("eager", "captured": CUDA graphs), the plan's way or each device's own
    #: (Placement.ways); {} in older records: eager
    implementations: dict[str, str] = field(default_factory=dict)
    dropped_steps: int = 0
    actor_restarts: int = 0  # restarts of every kind: actors started again, and recoveries below
    lost_steps_max: int = 0  # env steps lost at most with the actors that died (one step of their envs each)
    restart_log: list[str] = field(default_factory=list)  # why each restart happened, in order (recoveries too)
    #: each time a role that holds the run's state died (the learner, a learner of its group, a replay shard)
    #: and the roles were placed again from the newest checkpoint: what was lost and where the run went on from
    recoveries: list[str] = field(default_factory=list)
    redone_steps: int = 0  # env steps collected again after those recoveries
    waits: dict[str, float] = field(default_factory=dict)
    eval_returns: list[float] = field(default_factory=list)  # the headline policy's
    kernel_seconds: dict[str, float] = field(default_factory=dict)
    start_steps: int = 0  # env steps a resumed run started from (rates count this run's share only)
    resumed_from: str | None = None  # the checkpoint it went on from
    skipped_checkpoints: list[str] = field(default_factory=list)  # newer ones that were damaged, and why
    checkpoints: list[str] = field(default_factory=list)  # files written by this run, oldest first
    checkpoint_s: float = 0.0  # seconds spent writing them (inside train_wall_s)
    #: in-training evaluations and checkpoints once learning had started: left out of the learning phase's rates
    learning_paused_s: float = 0.0
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
    #: the learning phase's energy (`pearl.runtime.energy`): `source` measured, partly measured or modelled, the
    #: counters' joules, seconds, power_w and (all read) j_per_env_step, and `unmeasured` (resource → why)
    energy: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)
