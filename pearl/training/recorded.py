"""A run as its runs/<id>/config.json recorded it: the options read back field by field, set up again for
`--resume`, and the check that a checkpoint belongs to that run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pearl.algos import algo_config_class, config_from_dict
from pearl.errors import CheckpointError, ConfigError, PearlError, PlanError, RunDirError
from pearl.fileio import FieldChecker, read_json
from pearl.runtime.checkpoint import Checkpoint
from pearl.training.configure import RunSetup, setup_run
from pearl.training.launchers import LAUNCHER_ALIASES, LAUNCHERS
from pearl.training.options import RunOptions


def recorded_setup(folder: Path, max_restarts: int | None = None) -> RunSetup:
    """The run recorded in folder, set up again as it was configured (what --resume goes on with)."""
    options = _options_from_record(folder)
    if max_restarts is not None:
        options = options.replace(max_restarts=max_restarts)
    try:
        return setup_run(options)
    except PlanError:
        raise
    except ConfigError as exc:
        raise RunDirError(f"{folder / 'config.json'}: {exc}") from None


def _options_from_record(folder: Path) -> RunOptions:
    """The run options runs/<id>/config.json recorded, checked field by field."""
    path = folder / "config.json"
    if not folder.is_dir():
        raise RunDirError(f"{folder}: no such run folder; pass a runs/<id> folder that `pearl train` wrote")
    data = read_json(path, RunDirError, "no config.json here: not a run folder that `pearl train` wrote")
    field_ = _RecordFields(path, data)
    if data.get("kind") != "config":
        raise RunDirError(f"{path}: field 'kind' must be \"config\", got {data.get('kind')!r}")
    algo, env_id = field_.get("algo", str), field_.get("env", str)
    try:
        config = config_from_dict(algo_config_class(algo), field_.get("hyperparameters", dict))
        config.validate()
    except PearlError as exc:
        raise RunDirError(f"{path}: {exc}") from None
    placement = field_.get("placement", dict)
    if not isinstance(placement.get("act"), str):
        raise RunDirError(f"{path}: field 'placement' lacks the act device")
    launcher = field_.get("launcher", str)
    if LAUNCHER_ALIASES.get(launcher, launcher) not in LAUNCHERS:
        raise RunDirError(f"{path}: field 'launcher' must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")
    descriptor = data.get("descriptor")
    if descriptor is not None and not isinstance(descriptor, str):
        raise RunDirError(f"{path}: field 'descriptor' must be a path or null, got {descriptor!r}")
    emulate = data.get("emulate", {})
    if not isinstance(emulate, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in emulate.items()):
        raise RunDirError(f"{path}: field 'emulate' must map device ids to device ids, got {emulate!r}")
    segment_steps = data.get("segment_steps")
    if segment_steps is not None:
        segment_steps = field_.get("segment_steps", int, 1)
    ray_address = data.get("ray_address")
    if ray_address is not None and not isinstance(ray_address, str):
        raise RunDirError(f"{path}: field 'ray_address' must be a cluster address or null, got {ray_address!r}")
    has_plan = (folder / "plan.json").exists()
    device = field_.get("device", str)
    return RunOptions(
        algo=algo, env=env_id, config=config, seed=field_.get("seed", int), launcher=launcher,
        plan=str(folder / "plan.json") if has_plan else None, device=None if has_plan else device,
        actors=None if has_plan else field_.get("actors", int, 1),
        envs_per_actor=None if has_plan else config.n_envs, learn=field_.get("learn", bool),
        threads=field_.get("threads", int, 1), descriptor=descriptor, emulate=emulate,
        max_restarts=field_.get("max_restarts", int), checkpoint_every=field_.get("checkpoint_every", int),
        checkpoint_replay=field_.get("checkpoint_replay", bool), policy_lag=field_.get("policy_lag", int),
        segment_steps=segment_steps, eval_every=field_.get("eval_every", int),
        eval_every_episodes=field_.get("eval_every_episodes", int, 1), runs_dir=str(folder.parent),
        ray_address=ray_address, replay_shards=field_.get("replay_shards", int) if "replay_shards" in data else 0)


class _RecordFields(FieldChecker):
    """The fields of a run's config.json (pearl.fileio.FieldChecker's checks), each by the kind it must be."""

    def __init__(self, path: Path, data: Any) -> None:
        super().__init__(str(path), RunDirError)
        if not isinstance(data, dict):
            raise RunDirError(f"{path}: must hold a JSON object, got {type(data).__name__}")
        self.data = data

    def get(self, name: str, kind: type, minimum: int = 0) -> Any:
        if kind is int:
            return self.integer(self.data, name, minimum=minimum)
        if kind is bool:
            return self.flag(self.data, name)
        if kind is dict:
            return self.mapping(self.data, name)
        return self.text(self.data, name)


def check_same_run(checkpoint: Checkpoint, setup: RunSetup) -> None:
    """A checkpoint of another run (copied in by hand) would train on under the wrong settings: refuse it."""
    meta = checkpoint.meta
    ours = {"algo": setup.algo, "env": setup.env_id, "seed": setup.options.seed,
            "hyperparameters": setup.config.to_dict()}
    for name, value in ours.items():
        if meta.get(name) != value:
            raise CheckpointError(f"{checkpoint.path}: its {name} differs from the run's config.json; "
                                  "it belongs to another run")
