"""`pearl train` (and `--resume`) and `pearl quickstart`."""

from __future__ import annotations

from typing import Any

import click

from pearl.cli.base import ALGO_CHOICES, cli, print_json, quiet_solver
from pearl.progress import Progress


@cli.command()
@click.option("--algo", type=click.Choice(ALGO_CHOICES), default=None,
              help="Algorithm to train (required unless --plan names it).")
@click.option("--env", "env_id", default=None,
              help="Gymnasium environment id, e.g. CartPole-v1 (required unless --plan names it).")
@click.option("--device", default=None, help="Device of every kernel: cpu (the default), cuda:N or opencl:P:D.")
@click.option("--plan", "plan_path", default=None, help="Plan file from `pearl plan`: run its placement and actors.")
@click.option("--descriptor", default=None, help="Device descriptor (TOML) whose kernel binary an OpenCL device loads.")
@click.option("--emulate", "emulate", multiple=True, metavar="ABSENT=opencl:P:D",
              help="Run the kernels a plan places on an absent (what-if) device on this OpenCL device instead.")
@click.option("--steps", type=int, default=None, help="Env steps to train (default: the preset's).")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="Change one hyperparameter, e.g. --set learning_rate=1e-3 --set hidden=64,64 (repeatable).")
@click.option("--config", "config_file", default=None, metavar="FILE",
              help="A JSON or TOML file of hyperparameters to change (name = value).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of weights, envs and sampling.")
@click.option("--eval-episodes", type=int, default=10, show_default=True,
              help="Greedy episodes the final and the best policy are scored on.")
@click.option("--eval-every", type=int, default=None,
              help="Env steps between in-training evaluations that keep the best policy (0: none) "
                   "[default: ten per run].")
@click.option("--eval-every-episodes", type=int, default=10, show_default=True,
              help="Greedy episodes of each in-training evaluation.")
@click.option("--runs-dir", default="runs", show_default=True, help="Where runs/<id>/ records are written.")
@click.option("--threads", type=int, default=None,
              help="CPU threads the learner's kernels may use [default: the plan's; else as a plan would choose "
                   "from this machine's profile, when one is at hand; else 1].")
@click.option("--actors", type=int, default=None, help="Actor processes (default: the plan's, else 1).")
@click.option("--envs-per-actor", type=int, default=None,
              help="Environments each actor steps, batched into one act call (default: the plan's or preset's).")
@click.option("--launcher", default="local", show_default=True, metavar="local|sequential|ray",
              help="How the roles run: actor processes beside the learner, in turn in one process, or on Ray. "
                   "The learning is the same for a seed; only the speed differs.")
@click.option("--ray-address", default=None, metavar="ADDR",
              help="With --launcher ray: the Ray cluster to join (host:port of its head) [default: start a local "
                   "Ray instance on this machine, loopback only].")
@click.option("--replay-shards", type=int, default=0, show_default=True,
              help="With --launcher ray: replay as S replay-server actors (0: in the learner's process, which keeps "
                   "the other launchers' parameters bit for bit).")
@click.option("--sequential", is_flag=True, help="The same as --launcher sequential.")
@click.option("--policy-lag", type=int, default=1, show_default=True,
              help="Segments the actors' weights trail the learner (0: the presets' strictly sequential schedule).")
@click.option("--segment-steps", type=int, default=None,
              help="Env steps per schedule segment [default: the algorithm's round, grown to fit the actors].")
@click.option("--no-learn", is_flag=True, help="Collect only (act, env step, replay insert): the actor side's speed.")
@click.option("--max-restarts", type=int, default=3, show_default=True,
              help="Times a dead actor process is started again before the run ends with its error.")
@click.option("--checkpoint-every", type=int, default=5_000, show_default=True,
              help="Write a checkpoint every N updates (0: only at the end) into runs/<id>/checkpoints/.")
@click.option("--no-checkpoint-replay", is_flag=True,
              help="Leave the replay contents out of checkpoints (smaller; a resume refills replay first).")
@click.option("--resume", "resume_dir", default=None, metavar="RUN_DIR",
              help="Go on with runs/<id> from its newest checkpoint, as it was configured.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the results.")
@click.pass_context
def train(ctx: click.Context, algo: str | None, env_id: str | None, device: str | None, plan_path: str | None,
          descriptor: str | None, emulate: tuple[str, ...], steps: int | None, settings: tuple[str, ...],
          config_file: str | None, seed: int, eval_episodes: int,
          eval_every: int | None, eval_every_episodes: int, runs_dir: str, threads: int | None, actors: int | None,
          envs_per_actor: int | None, launcher: str, ray_address: str | None, replay_shards: int,
          sequential: bool, policy_lag: int, segment_steps: int | None, no_learn: bool, max_restarts: int,
          checkpoint_every: int, no_checkpoint_replay: bool, resume_dir: str | None, as_json: bool) -> None:
    """Train DQN or DDPG, evaluate it deterministically, and write runs/<id>/ (or go on with one: --resume)."""
    from click.core import ParameterSource

    from pearl.training import resume as resume_training
    from pearl.training import train as run_training
    from pearl.training.configure import planned_work
    from pearl.training.launchers import launcher_name
    from pearl.training.options import RunOptions, parse_emulation, parse_settings
    from pearl.training.plan_checks import plan_departure

    if resume_dir is not None:
        result = _resume(ctx, resume_dir, eval_episodes, max_restarts, as_json, resume_training)
    else:
        if sequential:
            if ctx.get_parameter_source("launcher") != ParameterSource.DEFAULT and launcher_name(launcher) != \
                    "sequential":
                raise click.UsageError(f"--sequential and --launcher {launcher} disagree; give one of them", ctx)
            launcher = "sequential"
        options = RunOptions(algo=algo, env=env_id, device=device, plan=plan_path, steps=steps, seed=seed,
                             eval_episodes=eval_episodes, eval_every=eval_every,
                             eval_every_episodes=eval_every_episodes, runs_dir=runs_dir, threads=threads,
                             descriptor=descriptor, launcher=launcher, actors=actors, envs_per_actor=envs_per_actor,
                             learn=not no_learn, max_restarts=max_restarts, checkpoint_every=checkpoint_every,
                             checkpoint_replay=not no_checkpoint_replay, emulate=parse_emulation(emulate),
                             policy_lag=policy_lag, segment_steps=segment_steps, config_file=config_file,
                             settings=parse_settings(settings), ray_address=ray_address, replay_shards=replay_shards)
        label, total = planned_work(options)
        with Progress(total, enabled=not as_json, label=label, unit="env step") as bar:
            result = run_training(options=options, progress=bar)
    if as_json:
        print_json(result.to_dict())
    else:
        _print_train(result)
    departed = plan_departure(result.plan_check, result.run_dir) if result.plan_check else None
    if departed:
        click.echo(f"warning: {departed}", err=True)


# `pearl --help` shows each command's first sentence; train's docstring belongs to the train command.
train.short_help = "Train DQN or DDPG and write a run record."


def _print_train(result: Any) -> None:
    layout = f"{result.actors} actor(s) × {result.envs_per_actor} env(s), {result.threads} learner thread(s)"
    sched = result.schedule
    click.echo(f"{result.algo} on {result.env}, device {result.device}, seed {result.seed}; "
               f"{result.launcher} launcher, {layout}{'' if result.learn else ', collection only'}; segments of "
               f"{sched['segment_steps']} env steps and {sched['updates_per_segment']} updates, policy lag "
               f"{sched['policy_lag']}")
    click.echo(f"  {result.hyperparameters_note}")
    if result.roles:
        click.echo("  roles: " + ", ".join(f"{role} on {where}" for role, where in result.roles.items()))
    click.echo(f"  trained {result.steps} env steps in {result.train_wall_s:.1f} s: "
               f"{result.env_steps_per_s:,.0f} env steps/s, {result.updates_per_s:,.0f} updates/s, "
               f"{result.learner_samples_per_s:,.0f} learner samples/s (replay ratio {result.replay_ratio:.3f})")
    if result.learning_env_steps_per_s is not None:
        click.echo(f"  learning phase (after learning_starts, what a plan predicts): "
                   f"{result.learning_env_steps_per_s:,.0f} env steps/s, "
                   f"{result.learning_updates_per_s:,.0f} updates/s")
    if result.eval_episodes:
        final = result.final
        click.echo(f"  final policy over {result.eval_episodes} episodes: return "
                   f"{final['return_mean']:.1f} ± {final['return_std']:.1f}"
                   f"{'  (headline)' if result.headline == 'final' else ''}")
        if result.best:
            best = result.best
            click.echo(f"  best policy (kept at {best['steps']:,} env steps, {len(result.evaluations)} in-training "
                       f"evaluations): return {best['return_mean']:.1f} ± {best['return_std']:.1f}"
                       f"{'  (headline)' if result.headline == 'best' else ''}")
        if result.confirmation:
            c = result.confirmation
            click.echo(f"  headline chosen on {c['episodes']} other episodes: best {c['best_mean']:.1f}, final "
                       f"{c['final_mean']:.1f}")
    if result.plan_check:
        check = result.plan_check
        click.echo(f"  plan: {result.actors} actor(s); predicted {check['predicted']['env_steps_per_s']:,.0f} env "
                   f"steps/s, measured {check['measured']['env_steps_per_s']:,.0f} over the "
                   f"{check['measured']['phase']} phase ({check['note']})")
        for kernel, k in check["kernels"].items():
            ratio = f"{k['ratio']:.2f}×" if k["ratio"] is not None else "n/a"
            where = f"{k['device']} (ran on {k['emulated_on']})" if "emulated_on" in k else k["device"]
            click.echo(f"    {kernel:16} on {where:11} predicted {k['predicted_s'] * 1e6:9.1f} µs/iteration, "
                       f"measured {k['measured_s'] * 1e6:9.1f} ({ratio})")
    if result.resumed_from:
        skipped = f" (skipped {len(result.skipped_checkpoints)} damaged newer one(s))" if result.skipped_checkpoints \
            else ""
        click.echo(f"  resumed from {result.resumed_from} at {result.start_steps:,} env steps{skipped}")
    click.echo(f"  run record: {result.run_dir}")


# What --resume takes beside the run folder: the rest is the recorded run's own configuration.
_RESUME_OPTIONS = {"resume_dir", "eval_episodes", "max_restarts", "as_json"}


def _resume(ctx: click.Context, resume_dir: str, eval_episodes: int, max_restarts: int, as_json: bool,
            resume_training: Any) -> Any:
    from click.core import ParameterSource

    given = sorted(f"--{name.replace('_', '-')}" for name in ctx.params
                   if name not in _RESUME_OPTIONS and ctx.get_parameter_source(name) != ParameterSource.DEFAULT)
    if given:
        raise click.UsageError(f"--resume goes on with the run as it was configured; drop {', '.join(given)}", ctx)
    restarts = max_restarts if ctx.get_parameter_source("max_restarts") != ParameterSource.DEFAULT else None
    with Progress(None, enabled=not as_json, label=f"resume {resume_dir}", unit="env step") as bar:
        return resume_training(resume_dir, eval_episodes=eval_episodes, progress=bar, max_restarts=restarts)


@cli.command()
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the training run.")
@click.option("--runs-dir", default="runs", show_default=True, help="Where the run record is written.")
@click.option("--reprofile", is_flag=True, help="Profile again even when a fresh profile of this machine exists.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the profile, plan and run.")
@click.option("--algo", type=click.Choice(ALGO_CHOICES), default="dqn", show_default=True,
              help="Algorithm to run, on CartPole-v1 for dqn, else on the env its preset is for (Pendulum-v1).")
def quickstart(seed: int, runs_dir: str, reprofile: bool, as_json: bool, algo: str) -> None:
    """Profile, plan and train DQN CartPole (or --algo) in one go.

    Profiles this machine quickly (or reuses a fresh profile), plans DQN on CartPole-v1 (or --algo on its
    registry entry's profile env) for throughput, trains it with that plan, and prints the report."""
    from pearl.quickstart import run_quickstart

    quiet_solver()
    report = run_quickstart(seed=seed, runs_dir=runs_dir, reprofile=reprofile, algo=algo,
                            say=(lambda _m: None) if as_json else click.echo,
                            progress=lambda total, label, unit: Progress(total, not as_json, label, unit))
    if as_json:
        print_json(report)
