"""What every `pearl` command shares: the command group, --algo's choices, JSON output, the solver's banner kept
off stdout, and nearest-choice hints for Choice options."""

from __future__ import annotations

import difflib
import json
import math
import os
import sys
from typing import Any

import click

from pearl._version import __version__
from pearl.algos.registry import algorithm, algorithm_names, broken_plugins

EXIT_USER_ERROR = 2


#: --algo's choices: the algorithm registry's names (pearl/algos/registry.py), so a new entry is offered here too.
ALGO_CHOICES = algorithm_names()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the traceback of any error.")
@click.version_option(__version__, prog_name="pearl")
def cli(debug: bool) -> None:
    """pearl: profile a heterogeneous machine, plan where each deep-RL kernel runs, train DQN/DDPG/TD3/SAC."""


class _Choice(click.Choice):
    """click's Choice, whose error names the nearest choice: `--objective perf_per_watt` → perf-per-watt; an
    --algo naming an installed plugin that did not load is the registry's error, which says why."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            if param is not None and param.name == "algo" and value in broken_plugins():
                algorithm(value)  # raises UnknownAlgorithm: the plugin's name, why it was left out, what to do
            choices = [str(c) for c in self.choices]
            normal = str(value).strip().lower().replace("_", "-")
            close = [normal] if normal in choices else difflib.get_close_matches(normal, choices, n=1, cutoff=0.5)
            if close:
                exc.message = f"{exc.message.rstrip('.')}; did you mean {close[0]!r}?"
            raise


def suggesting_choices(group: click.Group) -> None:
    """Give every command's Choice options the nearest-choice hint (one place, so no option is missed)."""
    for command in group.commands.values():
        for param in command.params:
            if type(param.type) is click.Choice:
                param.type = _Choice(list(param.type.choices), case_sensitive=param.type.case_sensitive)


def quiet_solver() -> None:
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


def print_json(obj: dict) -> None:
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


def warn_left_out(profile_path: str) -> None:
    """One `warning:` line per device the profile left out as unusable, naming it and why."""
    from pearl.profile.cluster import left_out, load_cluster

    for line in left_out(load_cluster(profile_path)):
        click.echo(f"warning: {line}", err=True)
