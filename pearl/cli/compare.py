"""`pearl compare`: plans and one-device mappings trained, measured against their predictions."""

from __future__ import annotations

import click

from pearl.cli.base import ALGO_CHOICES, cli, print_json, quiet_solver


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
    from pearl.report import run_compare

    quiet_solver()
    report = run_compare(profile_path, algo, env_id, seconds=seconds, runs_dir=runs_dir, seed=seed,
                         say=(lambda _m: None) if as_json else click.echo,
                         warn=lambda line: click.echo(f"warning: {line}", err=True))
    if as_json:
        print_json(report)
        return
    for line in compare_table(report):
        click.echo(line)


def compare_table(report: dict) -> list[str]:
    """`pearl compare`'s table: the mapping column as wide as the longest name, so no name is cut."""
    from pearl.report import figure  # loaded already: the table follows run_compare

    width = max([len("mapping"), *(len(r["label"]) for r in report["rows"])])
    lines = [f"{'mapping':{width}} {'predicted/s':>11} {'measured/s':>10} {'error':>6} {'J/step pred':>11} "
             f"{'J/step meas':>11}"]
    for r in report["rows"]:
        lines.append(f"{r['label']:{width}} {r['predicted_env_steps_per_s']:11,.0f} "
                     f"{figure(r['measured_env_steps_per_s'], ',.0f'):>10} {figure(r['error'], '+.0%'):>6} "
                     f"{figure(r['predicted_j_per_step'], '.3g'):>11} {figure(r['measured_j_per_step'], '.3g'):>11}")
    sources = " / ".join(dict.fromkeys(r["energy_source"] for r in report["rows"]))
    why = next((r["energy_why"] for r in report["rows"] if r.get("energy_why")), None)
    lines.append(f"power: {report['rows'][0]['power_source']}; measured J/step from {sources}"
                 + (f" ({why})" if why else ""))
    lines.append(f"report, plot and runs in {report['dir']}")
    return lines
