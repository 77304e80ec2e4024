"""A run as its runs/<id>/config.json recorded it: the options read back field by field, set up again for
`--resume`, and the check that a checkpoint belongs to that run."""

from __future__ import annotations

from pathlib import Path

from pearl.algos import algo_config_class, config_from_dict
from pearl.errors import CheckpointError, ConfigError, PearlError, PlanError, RunDirError
from pearl.fileio import FieldChecker, read_json
from pearl.run_options import RunOptions, read_record_values
from pearl.runtime.checkpoint import Checkpoint
from pearl.runtime.record import SCHEMA
from pearl.training.configure import RunSetup, setup_run
from pearl.training.launchers import LAUNCHER_ALIASES, LAUNCHERS


def recorded_setup(folder: Path, max_restarts: int | None = None, learners: int | None = None) -> RunSetup:
    """The run recorded in folder, set up again as it was configured (what --resume goes on with); `learners`:
    another learner group size than the run's."""
    options = _options_from_record(folder)
    if max_restarts is not None:
        options = options.replace(max_restarts=max_restarts)
    if learners is not None:
        options = options.replace(learners=learners)
    try:
        return setup_run(options)
    except PlanError:
        raise
    except ConfigError as exc:
        raise RunDirError(f"{folder / 'config.json'}: {exc}") from None


def _options_from_record(folder: Path) -> RunOptions:
    """The run options runs/<id>/config.json recorded, each checked against its declaration
    (`read_record_values`, the reader of what `record_values` wrote), and the run's plan and hyperparameters."""
    path = folder / "config.json"
    if not folder.is_dir():
        raise RunDirError(f"{folder}: no such run folder; pass a runs/<id> folder that `pearl train` wrote")
    data = read_json(path, RunDirError, "no config.json here: not a run folder that `pearl train` wrote")
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: must hold a JSON object, got {type(data).__name__}")
    checker = FieldChecker(str(path), RunDirError)
    if data.get("schema") != SCHEMA:
        checker.fail("schema", f'"{SCHEMA}" (a run record of this pearl)', data.get("schema"))
    if data.get("kind") != "config":
        raise RunDirError(f"{path}: field 'kind' must be \"config\", got {data.get('kind')!r}")
    values = read_record_values(data, checker)
    try:
        config = config_from_dict(algo_config_class(values["algo"]), checker.mapping(data, "hyperparameters"))
        config.validate()
    except PearlError as exc:
        raise RunDirError(f"{path}: {exc}") from None
    if not isinstance(checker.mapping(data, "placement").get("act"), str):
        raise RunDirError(f"{path}: field 'placement' lacks the act device")
    launcher = values["launcher"]
    if LAUNCHER_ALIASES.get(launcher, launcher) not in LAUNCHERS:
        raise RunDirError(f"{path}: field 'launcher' must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")
    # a planned run is set up from its plan again (which names the device, actors and envs); else as recorded
    planned = (folder / "plan.json").exists()
    if planned:
        values.update(device=None, actors=None)
    return RunOptions.of(**values, config=config, plan=str(folder / "plan.json") if planned else None,
                         envs_per_actor=None if planned else config.n_envs, runs_dir=str(folder.parent))


def check_same_run(checkpoint: Checkpoint, setup: RunSetup) -> None:
    """A checkpoint of another run (copied in by hand) would train on under the wrong settings: refuse it."""
    meta = checkpoint.meta
    ours = {"algo": setup.algo, "env": setup.env_id, "seed": setup.options.algorithm.seed,
            "hyperparameters": setup.config.to_dict()}
    for name, value in ours.items():
        if meta.get(name) != value:
            raise CheckpointError(f"{checkpoint.path}: its {name} differs from the run's config.json; "
                                  "it belongs to another run")
