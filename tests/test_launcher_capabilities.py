"""What each launcher declares it can do, the one restart policy, and the learner handle every launcher drives."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from pearl.errors import ConfigError, PearlError
from pearl.run_options import RunOptions
from pearl.runtime.actors import ActorFailed, RestartPolicy
from pearl.runtime.job import LauncherCapabilities
from pearl.runtime.launcher import LearnerHandle
from pearl.runtime.learner_role import LearnerRole
from pearl.runtime.sequential import SequentialLauncher
from pearl.training.configure import setup_run
from pearl.training.launchers import LAUNCHERS, launcher_capabilities


def test_each_launcher_declares_what_it_can_do() -> None:
    assert launcher_capabilities("sequential") == LauncherCapabilities()
    assert launcher_capabilities("local") == LauncherCapabilities(concurrent_roles=True, actor_restarts=True,
                                                                  learner_group=True)
    assert launcher_capabilities("parallel") == launcher_capabilities("local")  # the alias
    assert launcher_capabilities("ray") == LauncherCapabilities(concurrent_roles=True, replay_shards=True,
                                                                cluster_plans=True, actor_restarts=True,
                                                                learner_group=True, on_this_host=False)
    assert [name for name in LAUNCHERS if launcher_capabilities(name).learner_group] == ["local", "ray"]


def test_an_unknown_launcher_has_no_capabilities_but_the_usual_error() -> None:
    with pytest.raises(ConfigError, match="unknown launcher 'rey' \\(did you mean ray\\?\\)"):
        launcher_capabilities("rey")


def test_asking_the_ray_launcher_what_it_can_do_does_not_import_ray() -> None:
    code = ("import sys; from pearl.training.launchers import launcher_capabilities; "
            "assert launcher_capabilities('ray').cluster_plans; assert 'ray' not in sys.modules, 'ray imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_options_follow_the_declaration_not_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    options = RunOptions.of(algo="dqn", env="CartPole-v1", launcher="sequential", replay_shards=2, steps=1000)
    with pytest.raises(ConfigError, match="--replay-shards places replay-server actors on Ray; it needs --launcher "
                                          "ray, not sequential"):
        setup_run(options)
    monkeypatch.setattr(SequentialLauncher, "capabilities", LauncherCapabilities(replay_shards=True))
    assert setup_run(options).options.launcher.replay_shards == 2


def test_the_restart_policy_counts_restarts_up_to_its_limit() -> None:
    policy = RestartPolicy(2)
    assert policy.admit(1, "exited with code -9 before finishing") == 1
    assert policy.admit(0, "failed: RuntimeError: boom") == 2
    assert policy.log == ["actor 1 exited with code -9 before finishing", "actor 0 failed: RuntimeError: boom"]
    with pytest.raises(ActorFailed, match=r"^actor 1 died \(after 2 restart\(s\); the limit is 2\)$"):
        policy.admit(1, "died")
    assert policy.count == 2 and len(policy.log) == 2  # a refused restart is not counted
    assert issubclass(ActorFailed, PearlError)
    with pytest.raises(ActorFailed, match="after 0 restart"):
        RestartPolicy(0).check(0, "died")


def _handle_methods() -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in vars(LearnerHandle).items()
            if inspect.isfunction(fn) and not name.startswith("_")}


def test_the_learner_handle_names_every_call_the_segment_loop_makes() -> None:
    assert set(_handle_methods()) == {"insert", "train", "policy", "evaluate", "status", "state", "best_policy",
                                      "clocks"}


@pytest.mark.parametrize("implementation", ["in process", "ray"])
def test_both_learner_handles_implement_every_method(implementation: str) -> None:
    if implementation == "ray":
        from pearl.runtime.ray.learner import RayLearnerHandle  # no Ray is started: the class is inspected

        cls = RayLearnerHandle
    else:
        cls = LearnerRole
    for name, wanted in _handle_methods().items():
        method = getattr(cls, name, None)
        assert callable(method), f"{cls.__name__} lacks {name}"
        got = inspect.signature(method)
        wanted_params = [p for p in wanted.parameters.values() if p.name != "self"]
        got_params = {p.name: p for p in got.parameters.values() if p.name != "self"}
        for param in wanted_params:  # the handle's parameters, by name and kind; extras must have defaults
            assert param.name in got_params and got_params[param.name].kind == param.kind, (cls.__name__, name)
        extra = [p for n, p in got_params.items() if n not in wanted.parameters]
        assert all(p.default is not inspect.Parameter.empty for p in extra), (cls.__name__, name)
