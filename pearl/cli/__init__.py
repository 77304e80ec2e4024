"""The `pearl` command line.

User errors (bad option, unknown env or device, missing backend) print one `error:` line and exit 2; a
traceback appears only with `pearl --debug ...`. `--json` prints exactly one JSON object on stdout.

The group and what the commands share are in `base`; each module registers its commands on the group when it is
imported, as this one does below: `train` (train, quickstart), `profile` (profile, profile merge), `plan` (plan,
ratio), `compare`, `devices` (devices, build-binary), `policy` (evaluate, export).
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import traceback

import click

from pearl.cli import compare, devices, plan, policy, profile, train  # noqa: F401 - each registers its commands
from pearl.cli.base import EXIT_USER_ERROR, cli, suggesting_choices
from pearl.errors import PearlError

# click >= 8.2 raises this for a bare `pearl`; older clicks print the help themselves.
_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())

# every command is registered by now (the imports above): each Choice option gets the nearest-choice hint
suggesting_choices(cli)


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
    if debug:  # the runtime's own checks too (a learner group compares its learners' state every 100 updates)
        os.environ["PEARL_DEBUG"] = "1"
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
