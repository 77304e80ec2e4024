"""The `pearl` command line.

User errors (bad option, unknown env or device, missing backend) print one `error:` line and exit 2; a
traceback appears only with `pearl --debug ...`. `--json` prints exactly one JSON object on stdout.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import os
import signal
import sys
import time
import traceback
from typing import Any

import click

from pearl._version import __version__
from pearl.algos.registry import algorithm_names
from pearl.device import NodeDevice
from pearl.errors import ConfigError, PearlError
from pearl.progress import Progress

EXIT_USER_ERROR = 2
#: --algo's choices: the algorithm registry's names (pearl/algos/registry.py), so a new entry is offered here too.
ALGO_CHOICES = algorithm_names()
# click >= 8.2 raises this for a bare `pearl`; older clicks print the help themselves.
_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the traceback of any error.")
@click.version_option(__version__, prog_name="pearl")
def cli(debug: bool) -> None:
    """pearl: profile a heterogeneous machine, plan where each deep-RL kernel runs, train DQN/DDPG/TD3/SAC."""


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def devices(as_json: bool) -> None:
    """List this machine's devices and the missing backends.

    Every device pearl can run kernels on, and why each missing backend is missing."""
    from dataclasses import asdict

    from pearl.adapters import discover

    found = discover()
    if as_json:
        _print_json({"devices": [asdict(d) for d in found.devices],
                     "missing": [{"backend": b, "reason": r} for b, r in found.missing]})
        return
    click.echo("found:")
    for d in found.devices:
        memory = f"{d.memory_bytes / 2**30:.1f} GiB" if d.memory_bytes else "?"
        usable = "" if d.usable else "  [not usable yet]"
        lanes = f"{d.lanes} lane{'s' if d.lanes != 1 else ''}"
        click.echo(f"  {d.id:<12} {d.adapter:<7} {d.name}  ({lanes}, {memory}){usable}")
        if d.note:
            click.echo(f"  {'':<12} {'':<7} {d.note}")
    if found.missing:
        click.echo("missing:")
        for backend, reason in found.missing:
            click.echo(f"  {backend:<12} {reason}")


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
        with _progress(total, enabled=not as_json, label=label, unit="env step") as bar:
            result = run_training(options=options, progress=bar)
    if as_json:
        _print_json(result.to_dict())
    else:
        _print_train(result)
    departed = plan_departure(result.plan_check, result.run_dir) if result.plan_check else None
    if departed:
        click.echo(f"warning: {departed}", err=True)


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
    with _progress(None, enabled=not as_json, label=f"resume {resume_dir}", unit="env step") as bar:
        return resume_training(resume_dir, eval_episodes=eval_episodes, progress=bar, max_restarts=restarts)


def _profile_from_run(run_dir: str, base: str | None, out: str | None, as_json: bool) -> None:
    """`pearl profile --from-run`: the run's in-situ figures folded into a profile (pearl/profile/calibrate.py)."""
    from pathlib import Path

    from pearl.fileio import check_writable, read_json
    from pearl.profile.calibrate import calibrate, read_run
    from pearl.profile.format import load_profile, save_profile

    if out is None:
        raise ConfigError("--from-run writes a new profile: pass --out FILE (the next `pearl plan --profile FILE` "
                          "uses it)")
    run = read_run(run_dir)
    if base is None:
        plan_file = Path(run_dir) / "plan.json"
        if not plan_file.exists():
            raise ConfigError(f"run {run.run_id} was not trained with a plan; pass --profile FILE, a profile of "
                              "this machine to calibrate")
        recorded = read_json(plan_file, ConfigError, "")
        base = str(recorded.get("profile", {}).get("path", "")) if isinstance(recorded, dict) else ""
        if not base or not Path(base).exists():
            raise ConfigError(f"{plan_file} names profile {base!r}, which is not here; pass --profile FILE")
    check_writable(out)
    calibrated = calibrate(load_profile(base), run, base)
    written = save_profile(calibrated, out)
    note = calibrated.calibrations[-1]
    if as_json:
        _print_json({"profile": str(written), "from": base, **note})
        return
    click.echo(f"folded run {run.run_id} into {written} (from {base}): {'; '.join(note['entries'])}")


@cli.group(invoke_without_command=True)
@click.option("--quick", is_flag=True, help="A small grid and short timings: under a minute on 2 cores.")
@click.option("--out", default=None, help="Profile file to write [default: profiles/<host>-<mode>.json].")
@click.option("--algo", type=click.Choice([*ALGO_CHOICES, "all"]), default="all", show_default=True,
              help="Which presets' kernels to measure.")
@click.option("--device", "devices", multiple=True, help="Profile only this device (repeatable).")
@click.option("--env", "env_id", default=None,
              help="Profile one workload of yours: --algo on this gymnasium env (module:Env-v0 for your own), next "
                   "to what --out already holds [default: the presets' envs].")
@click.option("--hidden", default=None, metavar="W,W,...", help="The workload's hidden layer widths (with --env).")
@click.option("--batch-size", type=int, default=None, help="The workload's batch size (with --env).")
@click.option("--n-envs", type=int, default=None, help="Environments each actor steps (with --env).")
@click.option("--what-if", "what_if", multiple=True,
              help="Add a device that is absent, costed by a roofline model from this descriptor (repeatable).")
@click.option("--ray-address", default=None, metavar="HOST:PORT",
              help="Profile every node of this running Ray cluster (each on its node; links by object transfers) "
                   "into one cluster profile.")
@click.option("--from-run", "from_run", default=None, metavar="RUN_DIR",
              help="Measure nothing: fold this finished run's in-situ kernel and learner times into a profile "
                   "(--profile, else the one its plan was made from) and write it to --out.")
@click.option("--profile", "base_profile", default=None, metavar="FILE",
              help="With --from-run: the profile of this machine to calibrate [default: the run's plan's].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with a summary.")
@click.pass_context
def profile(ctx: click.Context, quick: bool, out: str | None, algo: str, devices: tuple[str, ...],
            env_id: str | None, hidden: str | None, batch_size: int | None, n_envs: int | None,
            what_if: tuple[str, ...], ray_address: str | None, from_run: str | None, base_profile: str | None,
            as_json: bool) -> None:
    """Measure every kernel on every device into a profile.

    Times every kernel on every device of this machine over a grid of batch sizes, with power and transfers,
    and writes a profile file. `pearl profile merge` joins such profiles into a cluster profile."""
    if ctx.invoked_subcommand is not None:
        return
    import platform

    from pearl.fileio import check_writable
    from pathlib import Path

    from pearl.profile.format import check_same_machine, load_profile, merge_profiles, save_profile
    from pearl.profiling.options import ProfileOptions
    from pearl.profiling.profiler import count_measurements, run_profile

    if from_run is not None:
        _profile_from_run(from_run, base_profile, out, as_json)
        return
    options = ProfileOptions(quick=quick, algos=ALGO_CHOICES if algo == "all" else (algo,),
                             devices=devices or None, what_if=what_if, env=env_id, hidden=_widths(hidden),
                             batch_size=batch_size, n_envs=n_envs)
    path = out or f"profiles/{platform.node() or 'host'}-{'quick' if quick else 'full'}.json"
    check_writable(path)  # before the sweep, not after it
    if ray_address is not None:
        _profile_cluster(ray_address, options, path, as_json)
        return
    kept = None
    if env_id is not None and Path(path).exists():  # a workload of the user's joins what the file holds
        from pearl.hostinfo import cpu_lanes, cpu_name

        kept = load_profile(path)
        check_same_machine(kept, {"cpu": cpu_name(), "cores": cpu_lanes()}, path)
    t0 = time.perf_counter()
    # one unit per timing block (each kernel point is timed in several rounds; the profile keeps their median)
    with _progress(count_measurements(options), enabled=not as_json, label="profile", unit="timing") as bar:
        done = [0]

        def step(_label: str) -> None:
            done[0] += 1
            bar(done[0])

        bar(0)  # the rate counts from here
        slice_warnings: list[str] = []  # GPU slices that could not be measured: shown once the bar is gone
        result = run_profile(options, step, slice_warnings.append)
    for message in slice_warnings:
        click.echo(f"warning: {message}", err=True)
    if kept is not None:
        result = merge_profiles(kept, result, path)
    written = save_profile(result, path)
    summary = {"profile": str(written), "mode": result.mode, "devices": [d.id for d in result.devices],
               "workloads": [w.key for w in result.workloads], "timings": done[0],
               # the grid at 1 thread; learn at the host's lanes (the learner's threads a plan chooses) apart
               "kernel_measurements": sum(k.threads == 1 for k in result.kernels),
               "multi_thread_measurements": sum(k.threads != 1 for k in result.kernels), "warnings": slice_warnings,
               "power": {p.device: {"idle_w": p.idle_w, "busy_w": p.busy_w, "source": p.source,
                                    "descriptor": p.descriptor, "scale": p.scale} for p in result.power},
               "wall_s": time.perf_counter() - t0}
    if as_json:
        _print_json(summary)
        return
    click.echo(f"profiled {', '.join(summary['devices'])} in {summary['wall_s']:.1f} s: {done[0]} timings, "
               f"{summary['kernel_measurements']} kernel measurements (each the median of its rounds) and "
               f"{summary['multi_thread_measurements']} of learn at the host's lanes as threads, {result.mode} mode")
    for d in result.devices:
        if d.process_env:  # a GPU slice, measured in a process of its own started with its environment
            started = " ".join(f"{k}={v}" for k, v in d.process_env)
            click.echo(f"  slice {d.id}: measured in a process started with {started}")
    for p in result.power:
        origin = f" {p.descriptor}" + (f" × {p.scale:.3g}" if p.scale != 1 else "") if p.descriptor else ""
        click.echo(f"  power {p.device}: idle {p.idle_w:.0f} W, busy {p.busy_w:.0f} W ({p.source}, {p.method}{origin})")
    click.echo(f"  wrote {written}")


def _profile_cluster(address: str, options: Any, path: str, as_json: bool) -> None:
    """`pearl profile --ray-address`: every node of the cluster profiled by a Ray task pinned there, one node at
    a time, and the links between every pair measured with Ray object transfers; one cluster profile."""
    import functools

    from pearl._version import __version__
    from pearl.profile.cluster import Cluster, Link, Node, save_cluster
    from pearl.profiling.profiler import run_profile
    from pearl.profiling.cluster_nodes import measure_links, run_on_each_node
    from pearl.runtime.ray.session import check_installed, connect, shutdown

    check_installed()
    connect(address)
    try:
        t0 = time.perf_counter()
        profiles = run_on_each_node(functools.partial(run_profile, options))
        links = [Link(a, b, latency, bandwidth, "measured") for a, b, latency, bandwidth in measure_links()]
        wall = time.perf_counter() - t0
    finally:
        shutdown()
    nodes = [Node(name, p, f"ray {address}") for name, p in profiles.items()]
    created = min(p.created for p in profiles.values())
    written = save_cluster(Cluster(__version__, created, nodes, links), path)
    summary = {"profile": str(written), "nodes": {n.name: [d.id for d in n.profile.devices] for n in nodes},
               "links": [{"nodes": [k.a, k.b], "latency_s": k.latency_s, "bandwidth_bytes_per_s":
                          k.bandwidth_bytes_per_s, "source": k.source} for k in links], "wall_s": wall}
    if as_json:
        _print_json(summary)
        return
    for n in nodes:
        click.echo(f"node {n.name}: {', '.join(d.id for d in n.profile.devices)} (profiled on that node)")
    for k in links:
        click.echo(f"link {k.a} - {k.b}: {k.latency_s * 1e6:.3g} µs, {k.bandwidth_bytes_per_s / 1e9:.3g} GB/s "
                   "(measured: Ray object transfers)")
    click.echo(f"wrote {written} in {wall:.0f} s")


@profile.command("merge")
@click.argument("nodes", nargs=-1, required=True, metavar="NAME=FILE...")
@click.option("--network", default=None, metavar="DESCRIPTOR",
              help="Network descriptor the links are modelled from (networks/40gbe.toml, or a name: 40gbe).")
@click.option("--call-s", "call_s", type=float, default=0.0, show_default=True, metavar="SECONDS",
              help="The transport's own cost per message, on top of the network's latency (a Ray actor call, one "
                   "way; benchmarks/ray_calls.py measures it).")
@click.option("--out", required=True, help="Cluster profile file to write.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with a summary.")
def profile_merge(nodes: tuple[str, ...], network: str | None, call_s: float, out: str, as_json: bool) -> None:
    """Join host profiles into a cluster profile.

    Each NAME=FILE is a node and the profile of it (one file may stand for several nodes, a what-if); every
    pair of nodes is joined by a link modelled from the network descriptor, each message also paying the
    transport's call (--call-s)."""
    from pearl.profile.cluster import merge_profiles_into_cluster, parse_node_args, save_cluster

    cluster = merge_profiles_into_cluster(parse_node_args(nodes), network, call_s)
    written = save_cluster(cluster, out)
    summary = {"profile": str(written), "nodes": {n.name: [d.id for d in n.profile.devices] for n in cluster.nodes},
               "links": [{"nodes": [k.a, k.b], "latency_s": k.latency_s, "bandwidth_bytes_per_s":
                          k.bandwidth_bytes_per_s, "call_s": k.call_s, "source": k.source, "network": k.network}
                         for k in cluster.links]}
    if as_json:
        _print_json(summary)
        return
    for n in cluster.nodes:
        click.echo(f"node {n.name}: {', '.join(summary['nodes'][n.name])} (from {n.origin})")
    for k in cluster.links:
        click.echo(f"link {k.a} - {k.b}: {k.latency_s * 1e6:.3g} µs + {k.call_s * 1e6:.3g} µs a call, "
                   f"{k.bandwidth_bytes_per_s / 1e9:.3g} GB/s ({k.source}, {k.network})")
    if cluster.links and call_s == 0:
        click.echo("note: the links charge no transport call (--call-s 0): the plan counts the messages the Ray "
                   "launcher sends at the network's latency alone; benchmarks/ray_calls.py measures a call")
    click.echo(f"wrote {written}")


@cli.command()
@click.option("--profile", "profile_path", required=True, help="Profile file written by `pearl profile`.")
@click.option("--algo", type=click.Choice(ALGO_CHOICES), required=True, help="Algorithm to plan for.")
@click.option("--env", "env_id", required=True, help="Gymnasium environment id (the preset's shapes).")
@click.option("--objective", type=click.Choice(["throughput", "perf-per-watt"]), default="throughput",
              show_default=True, help="Maximise env steps per second, or env steps per joule.")
@click.option("--envs-per-actor", "envs", default=None, metavar="N|auto",
              help="Environments each actor steps: N, or auto (the planner chooses) [default: the preset's].")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="Plan with this hyperparameter changed, as `pearl train --set` (repeatable).")
@click.option("--config", "config_file", default=None, metavar="FILE",
              help="Plan with the hyperparameters of this JSON or TOML file, as `pearl train --config`.")
@click.option("--out", default="plan.json", show_default=True, help="Plan file to write.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object.")
def plan(profile_path: str, algo: str, env_id: str, objective: str, envs: str | None,
         settings: tuple[str, ...], config_file: str | None, out: str, as_json: bool) -> None:
    """Place every kernel by integer program: write a plan.

    Solves the placement integer program on a profile and writes a deployment plan. A workload shape the
    profile has not measured is planned from the nearest measured one, scaled by its work (labelled scaled)."""
    from pearl.planner.make import make_plan
    from pearl.planner.plan import save_plan
    from pearl.training.configure import configured
    from pearl.training.options import parse_settings

    _quiet_solver()
    if envs is not None and envs != "auto":
        try:
            envs = int(envs)
        except ValueError:
            raise ConfigError(f"--envs-per-actor takes a number of environments or auto, got {envs!r}") from None
    config = configured(algo, env_id, config_file, parse_settings(settings)) if settings or config_file else None
    result = make_plan(profile_path, algo, env_id, objective, envs=envs, config=config)
    written = save_plan(result, out)
    if as_json:
        _print_json({"plan": str(written), **result.to_dict()})
        return
    p = result.predicted
    joules = f"{p['env_steps_per_joule']:.1f} env steps/J" if p.get("env_steps_per_joule") else "energy unknown"
    click.echo(f"{algo} on {env_id}, objective {objective}: plan written to {written}")
    spread = ""
    if len(result.actor_devices) > 1:  # a cluster plan's actors on several nodes
        spread = " (" + ", ".join(f"{n} on {d}" for d, n in result.actor_devices.items()) + ")"
    click.echo("  " + ", ".join(f"{k} → {v}" for k, v in result.mapping.items()) +
               f"; {result.actors} actor(s){spread} × {result.envs_per_actor} env(s); "
               f"{result.threads} learner thread(s)")
    if result.replay_shards:  # a cluster plan's replay server sharded over nodes
        click.echo(f"  replay server: {sum(result.replay_shards.values())} shards, "
                   + ", ".join(f"{n} on {d}" for d, n in result.replay_shards.items())
                   + " (each an equal part of the buffer, the inserts and the samples)")
    click.echo(f"  predicted {p['env_steps_per_s']:,.0f} env steps/s, {p['updates_per_s']:,.0f} updates/s, "
               f"{p['power_w']:.0f} W, {joules} (timings {p['source']}, power {p['power_source']})")
    if p.get("scaled"):
        sources: dict[str, list[str]] = {}
        for kernel, source in p["scaled"].items():
            sources.setdefault(source, []).append(kernel)
        click.echo(f"  scaled: the profile has not measured {p['workload']}; "
                   + "; ".join(f"{', '.join(ks)} from {w}" for w, ks in sources.items())
                   + ", scaled by their work (roofline flops and bytes)")
    ties = " (ties go to the fewest actor processes, then replay shards, then devices)" \
        if result.solver.get("ties") else ""
    click.echo(f"  bottleneck: {result.bottleneck}{ties}")
    for line in _cluster_lines(result):
        click.echo(line)
    for s in result.slices:
        click.echo(f"  {s['gpu']} split: {' and '.join(s['roles'])} on {s['device']}, {s['processes']} process(es) "
                   f"× {s['share']:.0%} of its SMs")
    for b in result.baselines:
        if b["feasible"]:
            click.echo(f"  all on {b['device']}: {b['env_steps_per_s']:,.0f} env steps/s "
                       f"(the plan is {b['speedup']:.2f}× that)")
        else:
            click.echo(f"  all on {b['device']}: not feasible")


@cli.command()
@click.option("--profile", "profile_path", required=True, help="Host profile file written by `pearl profile`.")
@click.option("--algo", type=click.Choice(["dqn", "ddpg"]), required=True, help="Algorithm to plan for.")
@click.option("--env", "env_id", required=True, help="Gymnasium environment id (the preset's shapes).")
@click.option("--accelerator", required=True, metavar="DESCRIPTOR",
              help="The accelerator, a device descriptor (devices/nvidia-a100-sxm4-80gb.toml or its name).")
@click.option("--lanes", default=None, metavar="N,N,...", help="CPU lane counts to sweep [default: 1-32].")
@click.option("--out", default="ratio.png", show_default=True, help="The plot to write.")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep as one JSON object.")
def ratio(profile_path: str, algo: str, env_id: str, accelerator: str, lanes: str | None, out: str,
          as_json: bool) -> None:
    """Sweep the CPU lanes per accelerator (what-if) and plan each.

    Prints and plots throughput and env steps per joule against the CPU/GPU ratio, marking the knee (fewest
    lanes within 5 % of the best throughput) and the perf-per-watt optimum."""
    from pearl.fileio import check_writable
    from pearl.planner.ratio import DEFAULT_LANES, plot, sweep, table

    _quiet_solver()
    check_writable(out)
    counts = DEFAULT_LANES
    if lanes is not None:
        try:
            counts = tuple(int(x) for x in lanes.split(","))
        except ValueError:
            raise ConfigError(f"--lanes takes comma-separated positive lane counts, e.g. 1,2,4,8; got {lanes!r}") \
                from None
    result = sweep(profile_path, algo, env_id, accelerator, counts)
    written = plot(result, out, f"{algo} {env_id}: CPU lanes per {result.accelerator}")
    if as_json:
        _print_json({"plot": str(written), **result.to_dict()})
        return
    for line in table(result):
        click.echo(line)
    click.echo(f"plot written to {written}")


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

    _quiet_solver()
    report = run_quickstart(seed=seed, runs_dir=runs_dir, reprofile=reprofile, algo=algo,
                            say=(lambda _m: None) if as_json else click.echo,
                            progress=lambda total, label, unit: _progress(total, not as_json, label, unit))
    if as_json:
        _print_json(report)


@cli.command()
@click.option("--profile", "profile_path", required=True, help="Profile file written by `pearl profile`.")
@click.option("--algo", type=click.Choice(ALGO_CHOICES), required=True, help="Algorithm to compare.")
@click.option("--env", "env_id", required=True, help="Gymnasium environment id (the preset's shapes).")
@click.option("--seconds", type=float, default=20.0, show_default=True, help="Wall time each mapping trains for.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every run.")
@click.option("--runs-dir", default="runs", show_default=True, help="Where runs/compare-<time>/ is written.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as one JSON object.")
def compare(profile_path: str, algo: str, env_id: str, seconds: float, seed: int, runs_dir: str,
            as_json: bool) -> None:
    """Measure plans and one-device mappings against predictions.

    Runs both objectives' plans, the Pareto ends and the all-on-one-device mappings; shows predicted against
    measured throughput and energy per step, with a plot and a markdown report."""
    from pearl.compare import run_compare

    _quiet_solver()
    report = run_compare(profile_path, algo, env_id, seconds=seconds, runs_dir=runs_dir, seed=seed,
                         say=(lambda _m: None) if as_json else click.echo)
    if as_json:
        _print_json(report)
        return
    for line in compare_table(report):
        click.echo(line)


def compare_table(report: dict) -> list[str]:
    """`pearl compare`'s table: the mapping column as wide as the longest name, so no name is cut."""
    width = max([len("mapping"), *(len(r["label"]) for r in report["rows"])])
    lines = [f"{'mapping':{width}} {'predicted/s':>11} {'measured/s':>10} {'error':>6} {'J/step pred':>11} "
             f"{'J/step meas':>11}"]
    for r in report["rows"]:
        predicted = f"{r['predicted_j_per_step']:.3g}" if r["predicted_j_per_step"] else "n/a"
        measured = f"{r['measured_j_per_step']:.3g}" if r["measured_j_per_step"] else "n/a"
        lines.append(f"{r['label']:{width}} {r['predicted_env_steps_per_s']:11,.0f} "
                     f"{r['measured_env_steps_per_s']:10,.0f} {r['error']:+6.0%} {predicted:>11} {measured:>11}")
    lines.append(f"power: {report['rows'][0]['power_source']}; report, plot and runs in {report['dir']}")
    return lines


@cli.command("build-binary")
@click.option("--device", required=True, help="OpenCL device to compile for, e.g. opencl:0:0.")
@click.option("--descriptor", required=True, help="Descriptor of the device model (its [device] and [figures]).")
@click.option("--out", required=True, help="Where to write the binary; the new descriptor goes to OUT.toml.")
def build_binary(device: str, descriptor: str, out: str) -> None:
    """Compile the OpenCL kernels into a binary for a device.

    Compiles pearl's OpenCL program for a device and writes the binary plus a descriptor naming it."""
    from pearl.adapters.registry import require_opencl

    require_opencl(device)
    from pearl.adapters.opencl.binary import build_binary as build

    binary, written = build(device, descriptor, out)
    click.echo(f"binary: {binary}\ndescriptor: {written}")
    click.echo(f"train with: pearl train --device {device} --descriptor {written} ...")


def _widths(text: str | None) -> tuple[int, ...] | None:
    """`--hidden 256,256` as (256, 256); ConfigError unless it is a list of positive integers."""
    if text is None:
        return None
    try:
        widths = tuple(int(x) for x in text.split(","))
    except ValueError:
        widths = ()
    if not widths or any(w < 1 for w in widths):
        raise ConfigError(f"--hidden takes comma-separated positive layer widths, e.g. 256,256; got {text!r}")
    return widths


# `pearl --help` shows each command's first sentence; train's docstring belongs to the train command.
train.short_help = "Train DQN or DDPG and write a run record."


class _Choice(click.Choice):
    """click's Choice, whose error names the nearest choice: `--objective perf_per_watt` → perf-per-watt."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            choices = [str(c) for c in self.choices]
            normal = str(value).strip().lower().replace("_", "-")
            close = [normal] if normal in choices else difflib.get_close_matches(normal, choices, n=1, cutoff=0.5)
            if close:
                exc.message = f"{exc.message.rstrip('.')}; did you mean {close[0]!r}?"
            raise


def _suggesting_choices(group: click.Group) -> None:
    """Give every command's Choice options the nearest-choice hint (one place, so no option is missed)."""
    for command in group.commands.values():
        for param in command.params:
            if type(param.type) is click.Choice:
                param.type = _Choice(list(param.type.choices), case_sensitive=param.type.case_sensitive)


_suggesting_choices(cli)


# Progress on stderr: a tqdm bar on a terminal, a line now and then in a pipe (pearl/progress.py).
_progress = Progress


def _cluster_lines(result: Any) -> list[str]:
    """A cluster plan's nodes (actors, kernels, CPU/accelerator lanes) and why each role sits where it does."""
    nodes = result.lanes.get("nodes")
    if not nodes:
        return []
    lines = []
    spread = result.actor_devices or {result.mapping["act"]: result.actors}
    for name, n in nodes.items():
        ratio = f", {n['ratio']:.3g} CPU lanes per accelerator" if n.get("ratio") else ""
        acting = next((f" acting on {d}" for d in spread if NodeDevice.parse(d).node == name), "")
        acting += next((f", {k} replay shard(s) on {d}" for d, k in result.replay_shards.items()
                        if NodeDevice.parse(d).node == name), "")
        lines.append(f"  node {name}: {n['actors']} actor process(es){acting}, kernels "
                     f"{', '.join(n['kernels']) or 'none'}; {n['cpu']} CPU lane(s) busy, {n['accelerator']} "
                     f"accelerator(s){ratio}")
    if len(spread) > 1:
        lines.append(f"  the {result.actors} actor processes spread over {len(spread)} nodes, each stepping an equal "
                     "share of the env steps")
    period = result.predicted["period_s"]
    for move in result.why:
        if move["period_s"] is None:
            lines.append(f"  {move['role']} on node {move['node']} instead: not feasible")
        else:
            lines.append(f"  {move['role']} on node {move['node']} instead: {move['period_s'] * 1e3:.4g} ms an "
                         f"update against {period * 1e3:.4g} ms ({move['period_s'] / period:.3g}×), bound by "
                         f"{move['bottleneck']}")
    return lines


def _quiet_solver() -> None:
    """highspy 1.16 writes a two-line banner to the process's standard output (fd 1, from C++, so neither
    sys.stdout nor PuLP's msg=False catches it) when the process makes its first Highs object. `--json`
    promises one JSON object on stdout: the commands that solve make that first object here, with fd 1 pointed
    at /dev/null, so the planner itself stays a function from numbers to a plan."""
    try:
        import highspy
    except ImportError:  # CBC alone: no banner
        return
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no fd 1 to protect
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
            _flush_c_stdout()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _flush_c_stdout() -> None:
    """Anything C stdio still buffers for fd 1 goes to where fd 1 points now."""
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to ask (not a POSIX platform): nothing buffered there
        pass


def _print_json(obj: dict) -> None:
    # NaN is not JSON: print null for a figure that does not exist (e.g. no evaluation episodes).
    clean = json.loads(json.dumps(obj, default=str), parse_constant=lambda _: None)
    click.echo(json.dumps(_nan_to_none(clean)))


def _nan_to_none(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_nan_to_none(v) for v in x]
    return x


def _fail(message: str, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    # One line, whatever the message: click words some usage errors over several (its choices, for one).
    click.echo(f"error: {' '.join(message.split())}", err=True)
    sys.exit(EXIT_USER_ERROR)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and turn user errors into one `error:` line and exit status 2."""
    args = sys.argv[1:] if argv is None else argv
    # --debug is the group's option: it counts before the command (the group's options take no values),
    # not as a value or a misplaced option after it (click refuses that one)
    debug = "--debug" in itertools.takewhile(lambda a: a.startswith("-"), args)
    try:
        code = cli.main(args=args, prog_name="pearl", standalone_mode=False)
    except _NO_ARGS as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(0)
    except click.ClickException as exc:  # usage errors: bad or missing option, wrong type
        hint = f" (see `{exc.ctx.command_path} --help`)" if getattr(exc, "ctx", None) is not None else ""
        _fail(exc.format_message() + hint, debug)
    except PearlError as exc:
        _fail(str(exc), debug)
    except click.Abort:
        click.echo("error: interrupted", err=True)
        sys.exit(130)
    except SystemExit as exc:
        if exc.code == 128 + signal.SIGTERM:  # raised by the parallel launcher's SIGTERM handler
            click.echo("error: terminated (SIGTERM); the run record keeps what was written", err=True)
        raise
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
