"""`pearl.train`: train one algorithm on one environment with each role on a chosen device, then evaluate; and
`resume`, which goes on with a recorded run from its newest checkpoint.

Rates are measured over the training loop only (evaluation excluded):
    env_steps_per_s        = env steps / training wall time
    updates_per_s          = gradient updates / training wall time
    learner_samples_per_s  = updates_per_s × batch size
    replay_ratio           = updates / env steps collected after learning_starts

The package's modules: `launchers` (the launcher registry), `configure` (the options, pearl/run_options.py,
checked and the run derived from them), `plan_checks` (placement checks; predicted against measured),
`recorded` (config.json read back for resume), `scoring` (final and best policy), `result` (TrainResult).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

from pearl.algos import has_preset
from pearl.algos.params import init_params
from pearl.errors import CheckpointError, ConfigError, PearlError
from pearl.run_options import RunOptions, check_positive_int
from pearl.runtime.checkpoint import FOLDER as CHECKPOINTS
from pearl.runtime.checkpoint import Checkpoint, Checkpointer, describe, estimate_bytes, latest
from pearl.runtime.energy import open_meter, unmeasured
from pearl.runtime.launcher import SegmentLauncher
from pearl.runtime.record import RunRecord, check_runs_dir
from pearl.training.configure import RunSetup, hyperparameters_note, setup_run
from pearl.training.launchers import launcher_class
from pearl.training.plan_checks import plan_check, role_nodes
from pearl.training.recorded import check_same_run, recorded_setup
from pearl.training.result import TrainResult
from pearl.training.scoring import score_run


def train(algo: str | None = None, env_id: str | None = None, *, options: RunOptions | None = None,
          progress: Callable[[int], None] | None = None, **fields: Any) -> TrainResult:
    """Train `algo` on `env_id` as `options` say, changed by the run options given as keywords (their flat names:
    `steps=`, `launcher=`, `eval_every=`, ...), evaluate the final policy and the best one the in-training
    evaluations kept, and write runs/<id>/.

    See pearl/run_options.py for every option. The runs folder is checked first (creatable, writable, room for
    the checkpoints), and so is everything else a user can get wrong, before any work is done.
    """
    base = options if options is not None else RunOptions()
    if algo is not None or env_id is not None:
        fields = {"algo": algo if algo is not None else base.algorithm.algo,
                  "env": env_id if env_id is not None else base.algorithm.env, **fields}
    return _train(base.replace(**fields), progress)


def _train(o: RunOptions, progress: Callable[[int], None] | None) -> TrainResult:
    wall0 = time.perf_counter()
    setup = setup_run(o)
    check_runs_dir(o.checkpoints.runs_dir, _disk_needed(setup))
    checkpointer = _checkpointer(setup)
    runner = _runner(setup, None, checkpointer)  # a bad or absent device fails here, before runs/<id>/ exists
    record = RunRecord(o.checkpoints.runs_dir, setup.algo, setup.env_id, o.algorithm.seed)
    if setup.plan is not None:
        record.write("plan.json", setup.plan.to_dict())
    record.write("config.json", setup.config_record())
    return _execute(setup, runner, record, checkpointer, None, o.evaluation.eval_episodes, progress,
                    o.launcher.max_seconds, wall0)


def resume(run_dir: str, *, eval_episodes: int = 10, progress: Callable[[int], None] | None = None,
           max_seconds: float | None = None, max_restarts: int | None = None,
           learners: int | None = None) -> TrainResult:
    """Go on with the run recorded in run_dir from its newest readable checkpoint, as it was configured
    (config.json), to its total step budget; then evaluate and write its summary. A damaged newest
    checkpoint is skipped for the one before it (the summary says so). `learners`: go on with another learner
    group size (a checkpoint is one learner's state): the same parameters, but not the bits of the run
    uninterrupted, which one stderr line says."""
    wall0 = time.perf_counter()
    check_positive_int("--eval-episodes", eval_episodes, minimum=0)
    folder = Path(run_dir)
    if max_restarts is not None:
        check_positive_int("--max-restarts", max_restarts, minimum=0)
    setup = recorded_setup(folder, max_restarts, learners)
    checkpoint, skipped = latest(folder / CHECKPOINTS)
    if checkpoint is None:
        why = f": {'; '.join(skipped)}" if skipped else ""
        raise CheckpointError(f"{folder / CHECKPOINTS}: no readable checkpoint to resume from{why}")
    check_same_run(checkpoint, setup)
    _say_group_change(checkpoint, setup)
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


def _say_group_change(checkpoint: Checkpoint, setup: RunSetup) -> None:
    """One stderr line when a run goes on with another learner group size than its checkpoint was taken with."""
    was, now = int(checkpoint.meta.get("learners", 1)), setup.options.placement.learners
    if was != now:
        print(f"pearl: going on with {now} learner(s) from a checkpoint of {was}: the same parameters, but not the "
              "bits the run would have had with its own group size", file=sys.stderr)


def _runner(setup: RunSetup, checkpoint: "Checkpoint | None", checkpointer: Checkpointer) -> SegmentLauncher:
    cls = launcher_class(setup.options.launcher.name)
    launch, capabilities = setup.options.launcher, cls.capabilities
    extra: dict[str, Any] = {"max_restarts": launch.max_restarts} if capabilities.actor_restarts else {}
    if capabilities.replay_shards:
        extra.update(replay_shards=launch.replay_shards)
    if capabilities.cluster_plans:
        extra.update(address=launch.ray_address)
        if setup.plan is not None and setup.plan.is_cluster:
            nodes = role_nodes(setup.plan)
            # a replay server on a node of its own is a shard actor there (the learner keeps replay otherwise);
            # a sharded one is the plan's shards, each on its node
            shards = max(launch.replay_shards, 1) if nodes.replay != nodes.learner else launch.replay_shards
            if nodes.shards:
                if launch.replay_shards not in (0, len(nodes.shards)):
                    raise ConfigError(f"--replay-shards {launch.replay_shards}: the plan shards the replay server over "
                                      f"{len(nodes.shards)} nodes; leave --replay-shards out")
                shards = len(nodes.shards)
            extra.update(role_nodes=nodes, replay_shards=shards)
    try:
        return cls(setup.job, checkpoint, checkpointer, **extra)
    except MemoryError:
        raise ConfigError(f"a replay buffer of {setup.config.buffer_size:,} transitions does not fit in this "
                          "machine's memory; lower buffer_size") from None


def _checkpointer(setup: RunSetup) -> Checkpointer:
    meta = {"algo": setup.algo, "env": setup.env_id, "seed": setup.options.algorithm.seed,
            "hyperparameters": setup.config.to_dict(), "learners": setup.options.placement.learners}
    # the folder is set once runs/<id>/ exists (see _execute)
    kept = setup.options.checkpoints
    return Checkpointer(Path(CHECKPOINTS), kept.checkpoint_every, meta, kept.checkpoint_replay)


def _execute(setup: RunSetup, runner: SegmentLauncher, record: RunRecord, checkpointer: Checkpointer,
             checkpoint: "Checkpoint | None", eval_episodes: int, progress: Callable[[int], None] | None,
             max_seconds: float | None, wall0: float, skipped: list[str] | None = None) -> TrainResult:
    """Run the launcher into the record, evaluate the final and the best policy, and write summary.json."""
    config, o = setup.config, setup.options
    checkpointer.folder = record.dir / CHECKPOINTS
    runner.energy = open_meter(runner.placement.devices()) if runner.capabilities.on_this_host else \
        unmeasured(f"the {o.launcher.name} launcher's roles may run on other nodes, whose energy counters this "
                   "process does not read")
    try:
        stats = runner.run(record, progress, max_seconds)
    except BaseException as exc:  # Ctrl-C, SIGTERM, a failed actor: say so in the summary, keep the metrics
        last = _checkpoint_on_interrupt(runner, exc)
        record.write("summary.json", {"kind": "summary", "status": "interrupted", "algo": setup.algo,
                                      "env": setup.env_id, "seed": o.algorithm.seed,
                                      "reason": f"{type(exc).__name__}: {exc}",
                                      "checkpoints": [str(p) for p in checkpointer.written],
                                      "resume": f"pearl train --resume {record.dir}"
                                      if last or checkpointer.written else None})
        raise
    finally:
        runner.energy.stop()  # ends its poll thread whatever ended the run
        record.close()
    scores = score_run(setup, runner, stats, eval_episodes, record)
    learning_steps = max(1, stats.steps - config.learning_starts)
    steps_here, updates_here = stats.steps - stats.start_steps, stats.updates - stats.start_updates
    result = TrainResult(
        algo=setup.algo, env=setup.env_id, steps=stats.steps, seed=o.algorithm.seed, device=setup.device,
        env_steps_per_s=steps_here / stats.wall_s,
        updates_per_s=updates_here / stats.wall_s,
        learner_samples_per_s=updates_here * config.batch_size / stats.wall_s,
        replay_ratio=stats.updates / learning_steps,
        eval_episodes=eval_episodes, wall_s=time.perf_counter() - wall0, run_dir=str(record.dir),
        updates=stats.updates, train_wall_s=stats.wall_s, preset=has_preset(setup.algo, setup.env_id),
        placement=setup.placement.to_dict(), kernel_seconds=dict(stats.kernel_seconds),
        actors=setup.actors, envs_per_actor=config.n_envs, launcher=o.launcher.name, learn=o.launcher.learn,
        threads=o.placement.threads, learners=o.placement.learners, precision=o.placement.precision,
        implementations=setup.placement.ways(),
        dropped_steps=stats.dropped_steps,
        waits=dict(stats.waits),
        actor_restarts=stats.restarts, lost_steps_max=stats.lost_steps_max, start_steps=stats.start_steps,
        recoveries=list(stats.recoveries), redone_steps=stats.redone_steps, restart_log=list(runner.restart_log),
        checkpoints=list(stats.checkpoints), checkpoint_s=stats.checkpoint_s,
        resumed_from=str(checkpoint.path) if checkpoint is not None else None,
        skipped_checkpoints=list(skipped or []), schedule=runner.schedule.to_dict(), eval_s=stats.eval_s,
        learning_paused_s=stats.paused_s,
        hyperparameters_note=hyperparameters_note(setup), roles=dict(stats.roles),
        traffic=dict(stats.traffic), **scores)
    if stats.learn_start_s is not None and stats.wall_s - stats.paused_s > stats.learn_start_s:
        learning_s = stats.wall_s - stats.learn_start_s - stats.paused_s  # evaluations and checkpoints left out
        result.learning_env_steps_per_s = (stats.steps - stats.learn_start_steps) / learning_s
        result.learning_updates_per_s = (stats.updates - stats.start_updates) / learning_s
    result.energy = dict(stats.energy)
    if result.energy.get("source") == "measured" and result.energy["power_w"] and result.learning_env_steps_per_s:
        result.energy["j_per_env_step"] = result.energy["power_w"] / result.learning_env_steps_per_s
    if setup.plan is not None:
        result.plan_check = plan_check(setup.plan, stats, config, result, setup.emulate)
    record.write("summary.json", {"kind": "summary", "status": "finished", **result.to_dict()})
    return result


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


def _disk_needed(setup: RunSetup) -> int:
    """Bytes the run may write: its checkpoints (KEEP of them plus one being written) and a metrics margin."""
    cfg, spec = setup.config, setup.spec
    params = init_params(cfg, spec, setup.options.algorithm.seed)
    learn_bytes = 3 * sum(v.nbytes for v in params.values())  # parameters and two Adam moments (an upper bound)
    action_bytes = 8 if spec.discrete else 4 * spec.action_dim
    row = 4 * (2 * spec.obs_dim + 2) + action_bytes + (8 if cfg.prioritized else 0)
    replay = setup.options.checkpoints.checkpoint_replay
    return estimate_bytes(learn_bytes, cfg.buffer_size * row, replay) + METRICS_MARGIN


METRICS_MARGIN = 16 * 2**20  # metrics lines, config and summary: a few MB even for long runs
