"""`pearl profile` (this machine, a Ray cluster's nodes, or a run folded into a profile) and `pearl profile merge`."""

from __future__ import annotations

import time
from typing import Any

import click

from pearl.cli.base import ALGO_CHOICES, cli, print_json
from pearl.errors import ConfigError
from pearl.progress import Progress


@cli.group(invoke_without_command=True)
@click.option("--quick", is_flag=True, help="A small grid and short timings: about 80 s for cpu and PoCL on 2 cores.")
@click.option("--out", default=None, help="Profile file to write [default: profiles/<host>-<mode>.json].")
@click.option("--algo", "algos", type=click.Choice([*ALGO_CHOICES, "all"]), multiple=True,
              help="Which presets' kernels to measure (repeatable) [default: all].")
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
def profile(ctx: click.Context, quick: bool, out: str | None, algos: tuple[str, ...], devices: tuple[str, ...],
            env_id: str | None, hidden: str | None, batch_size: int | None, n_envs: int | None,
            what_if: tuple[str, ...], ray_address: str | None, from_run: str | None, base_profile: str | None,
            as_json: bool) -> None:
    """Measure every kernel on every device into a profile.

    Times every kernel on every device of this machine over a grid of batch sizes, with power and transfers,
    and writes a profile file. `pearl profile merge` joins such profiles into a cluster profile."""
    if ctx.invoked_subcommand is not None:
        return
    import platform
    from pathlib import Path

    from pearl.fileio import check_writable
    from pearl.profile.format import check_same_machine, load_profile, merge_profiles, save_profile
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.profiler import count_measurements, run_profile

    if from_run is not None:
        _profile_from_run(from_run, base_profile, out, as_json)
        return
    chosen = tuple(ALGO_CHOICES) if not algos or "all" in algos else tuple(dict.fromkeys(algos))
    if env_id is not None and len(set(algos) - {"all"}) > 1:
        raise ConfigError(f"--env profiles one workload: pass one --algo, not {', '.join(dict.fromkeys(algos))}")
    options = ProfileOptions(quick=quick, algos=chosen,
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
    from pearl.runtime.local import PROBES

    t0 = time.perf_counter()
    # one unit per timing block (each kernel point is timed in several rounds; the profile keeps their median)
    with Progress(count_measurements(options, PROBES), enabled=not as_json, label="profile", unit="timing") as bar:
        done = [0]

        def step(_label: str) -> None:
            done[0] += 1
            bar(done[0])

        bar(0)  # the rate counts from here
        slice_warnings: list[str] = []  # GPU slices that could not be measured: shown once the bar is gone
        result = run_profile(options, step, slice_warnings.append, probes=PROBES)
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
        print_json(summary)
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
    for q in result.precision_problems:
        click.echo(f"  learn at {q.precision} not timed on {q.device}: {q.reason}")
    timed16 = sorted({k.device for k in result.kernels if k.precision != "fp32"})
    if timed16:
        click.echo(f"  learn also timed at bf16-mixed on {', '.join(timed16)}")
    click.echo(f"  wrote {written}")


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
        if _is_cluster(base):
            raise ConfigError(f"run {run.run_id} was planned from cluster profile {base}: pass --profile FILE, the "
                              "profile of the node its learner ran on")
    check_writable(out)
    calibrated = calibrate(load_profile(base), run, base)
    written = save_profile(calibrated, out)
    note = calibrated.calibrations[-1]
    if "contended" in note:
        click.echo(f"warning: run {run.run_id} had {note['contended']}: its figures hold the time they lost to each "
                   "other, which the planner charges again; calibrate from a run whose processes fit the lanes",
                   err=True)
    if as_json:
        print_json({"profile": str(written), "from": base, **note})
        return
    click.echo(f"folded run {run.run_id} into {written} (from {base}): {'; '.join(note['entries'])}")


def _is_cluster(path: str) -> bool:
    """Whether the file is a cluster profile (`pearl profile merge`'s), not one machine's."""
    from pearl.fileio import read_json
    from pearl.profile.cluster import SCHEMA as CLUSTER_SCHEMA

    data = read_json(path, ConfigError, "")
    return isinstance(data, dict) and data.get("schema") == CLUSTER_SCHEMA


def _profile_cluster(address: str, options: Any, path: str, as_json: bool) -> None:
    """`pearl profile --ray-address`: every node of the cluster profiled by a Ray task pinned there, one node at
    a time, and the links between every pair measured with Ray object transfers; one cluster profile."""
    import functools

    from pearl._version import __version__
    from pearl.profile.cluster import Cluster, Link, Node, save_cluster
    from pearl.profiler.cluster_nodes import measure_links, run_on_each_node
    from pearl.profiler.profiler import run_profile
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
        print_json(summary)
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
        print_json(summary)
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
