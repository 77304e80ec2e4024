"""Running the CLI in-process for tests: exit status, stdout and stderr of `pearl ARGS`."""

from __future__ import annotations

import pytest

from pearl.cli import main


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err
