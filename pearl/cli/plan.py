"""`pearl plan` (a placement by integer program, with a cluster plan's nodes explained) and `pearl ratio`."""

from __future__ import annotations

from typing import Any

import click

from pearl.cli.base import ALGO_CHOICES, cli, print_json, quiet_solver, warn_left_out
from pearl.errors import ConfigError
from pearl.kernels import PRECISION_CHOICES


@cli.command()
@click.option("--profile", "profile_path", required=True, help="Profile file written by `pearl profile`.")
@click.option("--algo", type=click.Choice(ALGO_CHOICES), default=None, help="Algorithm to plan for (required).")
@click.option("--env", "env_id", default=None, help="Gymnasium environment id (the preset's shapes; required).")
@click.option("--objective", type=click.Choice(["throughput", "perf-per-watt"]), default="throughput",
              show_default=True, help="Maximise env steps per second, or env steps per joule.")
@click.option("--envs-per-actor", "envs", default=None, metavar="N|auto",
              help="Environments each actor steps: N, or auto (the planner chooses) [default: the preset's].")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="Plan with this hyperparameter changed, as `pearl train --set` (repeatable).")
@click.option("--config", "config_file", default=None, metavar="FILE",
              help="Plan with the hyperparameters of this JSON or TOML file, as `pearl train --config`.")
@click.option("--learners", type=int, default=None, metavar="N",
              help="Plan a learner group of N learners (1: one learner) instead of choosing N [default: chosen].")
@click.option("--out", default="plan.json", show_default=True, help="Plan file to write.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object.")
@click.option("--serve", is_flag=True,
              help="Instead: where a trained policy (--run) should act, per device, at --batch observations a call.")
@click.option("--run", "run_path", default=None, metavar="RUN",
              help="With --serve: the runs/<id> folder (or policy file).")
@click.option("--batch", type=int, default=1, show_default=True, help="With --serve: observations answered per call.")
@click.option("--precision", type=click.Choice(PRECISION_CHOICES), default="fp32", show_default=True,
              help="Learn's arithmetic: fp32, bf16-mixed (products in bfloat16, float32 accumulation and master "
                   "weights; where the profile timed it), or auto (the better of the two, ties keeping fp32).")
def plan(profile_path: str, algo: str | None, env_id: str | None, objective: str, envs: str | None,
         settings: tuple[str, ...], config_file: str | None, learners: int | None, out: str,
         as_json: bool, serve: bool, run_path: str | None, batch: int, precision: str) -> None:
    """Place every kernel by integer program: write a plan.

    Solves the placement integer program on a profile and writes a deployment plan. A workload shape the
    profile has not measured is planned from the nearest measured one, scaled by its work (labelled scaled).
    With --serve, says instead which device a trained policy should act on."""
    from pearl.planner.make import make_plan
    from pearl.planner.plan import save_plan
    from pearl.run_options import parse_settings
    from pearl.training.configure import configured

    if serve:
        _serve(profile_path, run_path, batch, objective, as_json)
        return
    if algo is None or env_id is None:
        raise click.UsageError(f"Missing option '{'--algo' if algo is None else '--env'}'.")
    quiet_solver()
    if envs is not None and envs != "auto":
        try:
            envs = int(envs)
        except ValueError:
            raise ConfigError(f"--envs-per-actor takes a number of environments or auto, got {envs!r}") from None
    config = configured(algo, env_id, config_file, parse_settings(settings)) if settings or config_file else None
    result = make_plan(profile_path, algo, env_id, objective, envs=envs, config=config, learners=learners,
                       precision=precision)
    warn_left_out(profile_path)
    written = save_plan(result, out)
    if as_json:
        print_json({"plan": str(written), **result.to_dict()})
        return
    p = result.predicted
    joules = f"{p['env_steps_per_joule']:.1f} env steps/J" if p.get("env_steps_per_joule") else "energy unknown"
    click.echo(f"{algo} on {env_id}, objective {objective}: plan written to {written}")
    spread = ""
    if len(result.actor_devices) > 1:  # a cluster plan's actors on several nodes
        spread = " (" + ", ".join(f"{n} on {d}" for d, n in result.actor_devices.items()) + ")"
    click.echo("  " + ", ".join(f"{k} → {v}" for k, v in result.mapping.items()) +
               f"; {result.actors} actor(s){spread} × {result.envs_per_actor} env(s); "
               f"{result.learners} learner(s) × {result.threads} thread(s)")
    if result.learners_why:
        click.echo(f"  learners: {result.learners_why}")
    if result.precision_why:
        click.echo(f"  precision: {result.precision_why}")
    if result.implementations:  # a device the profile timed both ways: the plan runs the faster
        click.echo("  implementations: " + ", ".join(f"{k} {w} on {result.mapping[k]}"
                                                      for k, w in result.implementations.items())
                   + " (the faster of eager and captured as CUDA graphs, as the profile timed them)")
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
        shared = "actors" in s["roles"] and s["processes"] == 1 and result.actors > 1
        holders = f"{result.actors} process(es) sharing one slice of" if shared else f"{s['processes']} process(es) ×"
        click.echo(f"  {s['gpu']} split: {' and '.join(s['roles'])} on {s['device']}, {holders} {s['share']:.0%} of "
                   "its SMs")
    for b in result.baselines:
        if b["feasible"]:
            click.echo(f"  all on {b['device']}: {b['env_steps_per_s']:,.0f} env steps/s "
                       f"(the plan is {b['speedup']:.2f}× that)")
        else:
            click.echo(f"  all on {b['device']}: not feasible")


def _serve(profile_path: str, run_path: str | None, batch: int, objective: str, as_json: bool) -> None:
    """`pearl plan --serve`: each device's act latency, actions/s and energy per action for the run's policy, and
    the device the objective picks."""
    from pearl.costmodel import CostModel
    from pearl.planner.serve import pick, serve_options
    from pearl.policy import read_policy
    from pearl.profile.format import load_profile

    if run_path is None:
        raise ConfigError("--serve plans where a trained policy acts: pass --run runs/<id>")
    loaded = read_policy(run_path)
    options = serve_options(CostModel(load_profile(profile_path)), loaded.config, loaded.env_spec, batch)
    chosen = pick(options, objective)
    if as_json:
        print_json({"chosen": chosen.to_dict(), "options": [o.to_dict() for o in options]})
        return
    click.echo(f"serving {loaded.spec.algo} on {loaded.spec.env} ({loaded.spec.policy} policy) at batch {batch}, "
               f"objective {objective}:")
    for o in options:
        energy = f"{o.joules_per_action * 1e3:.3g} mJ/action (power {o.power_source})" \
            if o.joules_per_action is not None else "energy unknown"
        mark = "  <- chosen" if o.device == chosen.device else ""
        click.echo(f"  {o.device:<12} {o.latency_s * 1e6:>9,.1f} µs a call, {o.actions_per_s:>11,.0f} actions/s, "
                   f"{energy}, timings {o.source}{mark}")
    click.echo(f"  {chosen.explain()}")


def _cluster_lines(result: Any) -> list[str]:
    """A cluster plan's nodes (actors, kernels, CPU/accelerator lanes) and why each role sits where it does."""
    nodes = result.lanes.get("nodes")
    if not nodes:
        return []
    lines = []
    spread = result.actor_spread
    for name, n in nodes.items():
        ratio = f", {n['ratio']:.3g} CPU lanes per accelerator" if n.get("ratio") else ""
        acting = next((f" acting on {at}" for at in spread if at.node == name), "")
        acting += next((f", {k} replay shard(s) on {at}" for at, k in result.shard_devices.items()
                        if at.node == name), "")
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

    quiet_solver()
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
        print_json({"plot": str(written), **result.to_dict()})
        return
    for line in table(result):
        click.echo(line)
    click.echo(f"plot written to {written}")
