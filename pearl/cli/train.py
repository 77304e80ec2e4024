"""`pearl train` (and `--resume`) and `pearl quickstart`."""

from __future__ import annotations

from typing import Any, Callable

import click

from pearl.cli.base import ALGO_CHOICES, cli, print_json, quiet_solver
from pearl.progress import Progress
from pearl.run_options import RunOptions, cli_values, option_fields


def run_options(command: Callable) -> Callable:
    """The run options' flags (pearl/run_options.py: each option's flag, default and help, declared once), in the
    order of their declaration; each flag's destination is the option's flat name."""
    for o in reversed(list(option_fields())):
        meta = o.meta
        if meta["flag"] is None:
            continue
        settings: dict[str, Any] = {"help": meta["help"]}
        if meta["flag"].startswith("--no-"):  # a true-by-default option the flag turns off
            settings.update(is_flag=True, flag_value=False, default=True)
        elif meta.get("multiple"):
            settings.update(multiple=True)
        else:
            shown = o.default is not None and not isinstance(o.default, bool)
            settings.update(default=o.default, show_default=shown)
            if meta.get("choices"):
                settings["type"] = click.Choice(meta["choices"]())
            elif meta.get("type"):
                settings["type"] = meta["type"]
        if meta.get("metavar"):
            settings["metavar"] = meta["metavar"]
        command = click.option(meta["flag"], o.name, **settings)(command)
    return command


@cli.command()
@run_options
@click.option("--sequential", is_flag=True, help="The same as --launcher sequential.")
@click.option("--resume", "resume_dir", default=None, metavar="RUN_DIR",
              help="Go on with runs/<id> from its newest checkpoint, as it was configured.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the results.")
@click.pass_context
def train(ctx: click.Context, sequential: bool, resume_dir: str | None, as_json: bool, **flags: Any) -> None:
    """Train an algorithm of the registry (DQN, DDPG, TD3, SAC or a plugin's; --algo), evaluate it
    deterministically, and write runs/<id>/ (or go on with one: --resume)."""
    from click.core import ParameterSource

    from pearl.training import resume as resume_training
    from pearl.training import train as run_training
    from pearl.training.configure import planned_work
    from pearl.training.launchers import launcher_name
    from pearl.training.plan_checks import plan_departure

    if resume_dir is not None:
        result = _resume(ctx, resume_dir, flags["eval_episodes"], flags["max_restarts"], flags["learners"], as_json,
                         resume_training)
    else:
        if sequential:
            launcher = flags["launcher"]
            if ctx.get_parameter_source("launcher") != ParameterSource.DEFAULT and launcher_name(launcher) != \
                    "sequential":
                raise click.UsageError(f"--sequential and --launcher {launcher} disagree; give one of them", ctx)
            flags["launcher"] = "sequential"
        options = RunOptions.of(**cli_values(flags))
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
train.short_help = "Train DQN, DDPG, TD3, SAC or a plugin's; write a run record."


def _print_train(result: Any) -> None:
    layout = f"{result.actors} actor(s) × {result.envs_per_actor} env(s), {result.threads} learner thread(s)"
    if result.learners > 1:
        layout += f" in each of {result.learners} learners"
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
    if result.energy.get("power_w") is not None:
        click.echo("  " + _energy_line(result.energy))
    if result.eval_episodes:
        _print_policy(f"final policy over {result.eval_episodes} episodes", result.final, result.headline == "final")
        if result.best:
            _print_policy(f"best policy (kept at {result.best['steps']:,} env steps, {len(result.evaluations)} "
                          "in-training evaluations)", result.best, result.headline == "best")
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
    if result.actor_restarts:
        click.echo(f"  restarts: {result.actor_restarts} ({result.lost_steps_max:,} env steps lost at most with the "
                   f"actors that died, {result.redone_steps:,} collected again after recoveries)")
        for restart in result.restart_log:
            click.echo(f"    {restart}")
    if result.resumed_from:
        skipped = f" (skipped {len(result.skipped_checkpoints)} damaged newer one(s))" if result.skipped_checkpoints \
            else ""
        click.echo(f"  resumed from {result.resumed_from} at {result.start_steps:,} env steps{skipped}")
    click.echo(f"  run record: {result.run_dir}")


def _print_policy(label: str, scores: dict[str, Any], headline: bool) -> None:
    """One evaluated policy's line: its mean return ± std, marked when it is the run's headline."""
    click.echo(f"  {label}: return {scores['return_mean']:.1f} ± {scores['return_std']:.1f}"
               f"{'  (headline)' if headline else ''}")


# What --resume takes beside the run folder: the rest is the recorded run's own configuration.
_RESUME_OPTIONS = {"resume_dir", "eval_episodes", "max_restarts", "learners", "as_json"}


def _resume(ctx: click.Context, resume_dir: str, eval_episodes: int, max_restarts: int, learners: int,
            as_json: bool, resume_training: Any) -> Any:
    from click.core import ParameterSource

    given = sorted(param.opts[0] for param in ctx.command.params if param.name not in _RESUME_OPTIONS
                   and ctx.get_parameter_source(param.name) != ParameterSource.DEFAULT)
    if given:
        raise click.UsageError(f"--resume goes on with the run as it was configured; drop {', '.join(given)}", ctx)
    restarts = max_restarts if ctx.get_parameter_source("max_restarts") != ParameterSource.DEFAULT else None
    group = learners if ctx.get_parameter_source("learners") != ParameterSource.DEFAULT else None
    with Progress(None, enabled=not as_json, label=f"resume {resume_dir}", unit="env step") as bar:
        return resume_training(resume_dir, eval_episodes=eval_episodes, progress=bar, max_restarts=restarts,
                               learners=group)


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


def _energy_line(energy: dict) -> str:
    """What the energy counters read over the learning phase, and what they could not read."""
    line = (f"energy ({energy['source']}, {energy['method']}): {energy['joules']:,.1f} J over "
            f"{energy['seconds']:.1f} s, {energy['power_w']:,.1f} W")
    if energy.get("j_per_env_step"):
        line += f", {energy['j_per_env_step']:.3g} J/env step"
    if energy.get("unmeasured"):
        line += "; not read: " + "; ".join(f"{r} ({why})" for r, why in energy["unmeasured"].items())
    return line
