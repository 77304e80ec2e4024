"""Run options declared once (pearl/run_options.py): `pearl train`'s flags are made from the declarations,
config.json's options are written and read back by the same code, and a config.json an earlier pearl wrote
still sets up its run for --resume."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import click
import pytest

from pearl.cli.train import train as train_command
from pearl.errors import ConfigError, RunDirError
from pearl.fileio import FieldChecker
from pearl.run_options import RunOptions, option_fields, read_record_values, record_values
from pearl.training.recorded import recorded_setup

#: config.json as pearl wrote it before the options were declared once (a sequential DQN CartPole run)
EARLIER_CONFIG = {
    "schema": "pearl.run/1", "kind": "config", "algo": "dqn", "env": "CartPole-v1", "seed": 3, "device": "cpu",
    "placement": {"act": "cpu", "replay_insert": "cpu", "replay_sample": "cpu", "priority_update": "cpu",
                  "learn": "cpu", "env_step": "cpu"},
    "threads": 1, "descriptor": None, "launcher": "sequential", "actors": 1, "envs_per_actor": 1, "learn": True,
    "max_restarts": 3, "checkpoint_every": 256, "checkpoint_replay": True, "emulate": {}, "policy_lag": 1,
    "segment_steps": None, "eval_every": 60, "ray_address": None, "replay_shards": 0, "slices": {},
    "eval_every_episodes": 10,
    "schedule": {"segment_steps": 256, "updates_per_segment": 128, "policy_lag": 1, "actors": 1, "segments": 3},
    "preset": True,
    "hyperparameters": {"total_steps": 600, "learning_rate": 0.0023, "gamma": 0.99, "batch_size": 64,
                        "buffer_size": 100000, "learning_starts": 1000, "train_freq": 256, "gradient_steps": 128,
                        "hidden": [256, 256], "n_envs": 1, "weight_sync_interval": 1, "prioritized": False,
                        "alpha": 0.6, "beta0": 0.4, "priority_eps": 1e-06, "target_update_interval": 128,
                        "exploration_fraction": 0.16, "exploration_initial_eps": 1.0, "exploration_final_eps": 0.04,
                        "huber": True, "max_grad_norm": 10.0, "algo": "dqn"},
    "env_spec": {"env_id": "CartPole-v1", "obs_dim": 4, "action_kind": "discrete", "action_dim": 2,
                 "action_low": [], "action_high": []},
    "pearl_version": "0.1.0", "host": {"node": "vm", "platform": "Linux", "python": "3.11.7"},
}

#: every flag `pearl train` took before its options were made from the declarations
FLAGS = {"--algo", "--env", "--device", "--plan", "--descriptor", "--emulate", "--steps", "--set", "--config", "--seed",
         "--eval-episodes", "--eval-every", "--eval-every-episodes", "--runs-dir", "--threads", "--actors",
         "--learners", "--precision", "--envs-per-actor", "--launcher", "--ray-address", "--replay-shards", "--sequential",
         "--policy-lag", "--segment-steps", "--no-learn", "--max-restarts", "--checkpoint-every",
         "--no-checkpoint-replay", "--resume", "--json"}


def _run_folder(tmp_path: Path, config: dict) -> Path:
    folder = tmp_path / "runs" / "20260101-000000-dqn-CartPole-v1-s3"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_config_json_of_an_earlier_pearl_sets_up_its_run_again(tmp_path: Path) -> None:
    folder = _run_folder(tmp_path, EARLIER_CONFIG)
    setup = recorded_setup(folder)
    o = setup.options
    assert (o.algorithm.algo, o.algorithm.env, o.algorithm.seed) == ("dqn", "CartPole-v1", 3)
    assert (o.launcher.name, o.launcher.policy_lag, o.launcher.replay_shards) == ("sequential", 1, 0)
    assert (o.checkpoints.checkpoint_every, o.evaluation.eval_every, o.placement.threads) == (256, 60, 1)
    assert o.checkpoints.runs_dir == str(folder.parent) and o.algorithm.config.total_steps == 600
    # written again, the record is the one it was read from (same keys, same values)
    again = json.loads(json.dumps(setup.config_record()))
    this_host = {"host": again["host"], "pearl_version": again["pearl_version"]}
    added = {"learners": 1, "precision": "fp32"}  # what this pearl records that the earlier one did not: resolved
    assert again == {k: v for k, v in EARLIER_CONFIG.items() if k != "schema"} | this_host | added


def test_a_config_json_older_than_the_optional_options_takes_their_defaults(tmp_path: Path) -> None:
    older = {k: v for k, v in EARLIER_CONFIG.items()
             if k not in ("descriptor", "emulate", "segment_steps", "ray_address", "replay_shards")}
    o = recorded_setup(_run_folder(tmp_path, older)).options
    assert (o.placement.descriptor, o.placement.emulate, o.launcher.segment_steps) == (None, {}, None)
    assert (o.launcher.ray_address, o.launcher.replay_shards) == (None, 0)


@pytest.mark.parametrize(("key", "value", "says"), [
    ("threads", 0, "field 'threads' must be an integer from 1"),
    ("learn", "yes", "field 'learn' must be true or false"),
    ("emulate", {"a": 1}, "field 'emulate' must be an object of strings"), ("seed", None, "field 'seed'"),
    ("launcher", "parallel-ish", "field 'launcher' must be one of"), ("schema", "pearl.run/0", "field 'schema'")])
def test_a_bad_option_in_config_json_is_one_error_naming_it(tmp_path: Path, key: str, value: object,
                                                            says: str) -> None:
    config = copy.deepcopy(EARLIER_CONFIG) | {key: value}
    with pytest.raises(RunDirError, match=says):
        recorded_setup(_run_folder(tmp_path, config))


def test_the_record_is_read_back_by_the_code_that_wrote_it() -> None:
    options = RunOptions.of(algo="sac", env="Pendulum-v1", seed=7, device="cpu", actors=2, threads=3,
                            emulate={"whatif:x": "opencl:0:0"}, launcher="ray", ray_address="10.0.0.5:6379",
                            replay_shards=2, policy_lag=0, segment_steps=512, learn=False, max_restarts=1,
                            eval_every=0, eval_every_episodes=4, checkpoint_every=0, checkpoint_replay=False)
    written = json.loads(json.dumps(record_values(options)))
    assert read_record_values(written, FieldChecker("config.json", RunDirError)) == written
    assert {o.name for o in option_fields() if o.meta["record"]} == set(written)


def test_pearl_train_keeps_every_flag_with_the_declared_default() -> None:
    flags = {opt for param in train_command.params for opt in param.opts}
    assert flags == FLAGS
    by_name = {o.name: o for o in option_fields()}
    for param in train_command.params:
        if param.name in by_name and not param.multiple:
            assert param.default == by_name[param.name].default, param.name
    assert isinstance(next(p for p in train_command.params if p.name == "algo").type, click.Choice)


def test_options_are_named_flat_and_an_unknown_name_is_refused() -> None:
    names = [o.name for o in option_fields()]
    assert len(names) == len(set(names))  # one flat name per option, across the groups
    o = RunOptions.of(algo="dqn", launcher="sequential", eval_every=5)
    assert (o.algorithm.algo, o.launcher.name, o.evaluation.eval_every) == ("dqn", "sequential", 5)
    assert o.replace(launcher="ray").launcher.name == "ray" and o.launcher.name == "sequential"
    with pytest.raises(ConfigError, match="unknown run option\\(s\\): lancher"):
        o.replace(lancher="ray")
