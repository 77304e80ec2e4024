"""`pearl.train`: train one algorithm on one environment with each role on a chosen device, then evaluate.

Rates are measured over the training loop only (evaluation excluded):
    env_steps_per_s        = env steps / training wall time
    updates_per_s          = gradient updates / training wall time
    learner_samples_per_s  = updates_per_s × batch size
    replay_ratio           = updates / env steps collected after learning_starts
"""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from pearl import __version__
from pearl.algos import OffPolicyConfig, algo_config_class, has_preset, preset
from pearl.envs import check_algo_fits, env_spec
from pearl.errors import ConfigError, DeviceError, PlanError
from pearl.runtime.evaluate import evaluate
from pearl.runtime.local import LocalLauncher, Placement
from pearl.runtime.parallel import ParallelLauncher
from pearl.runtime.record import RunRecord

if TYPE_CHECKING:
    from pearl.planner.plan import Plan

EVAL_SEED_OFFSET = 100_000  # evaluation envs never share seeds with training envs
# One intra-op thread: the presets' small MLPs run faster single-threaded (DQN CartPole on a 2-core EPYC:
# about 1,190 env steps/s with 1 thread against 850 with 2, same results), and a seed then gives the same run
# whatever the core count.
DEFAULT_THREADS = 1


@dataclass
class TrainResult:
    algo: str
    env: str
    steps: int
    seed: int
    device: str
    env_steps_per_s: float
    updates_per_s: float
    learner_samples_per_s: float
    replay_ratio: float
    eval_return_mean: float
    eval_return_std: float
    eval_episodes: int
    wall_s: float
    run_dir: str
    updates: int = 0
    train_wall_s: float = 0.0
    preset: bool = False
    placement: dict[str, str] = field(default_factory=dict)
    actors: int = 1
    plan_check: dict = field(default_factory=dict)
    learning_env_steps_per_s: float | None = None  # over the learning phase only (after learning_starts)
    learning_updates_per_s: float | None = None
    launcher: str = "parallel"
    envs_per_actor: int = 1
    learn: bool = True
    threads: int = DEFAULT_THREADS
    dropped_steps: int = 0
    actor_restarts: int = 0
    lost_steps_max: int = 0
    waits: dict[str, float] = field(default_factory=dict)
    eval_returns: list[float] = field(default_factory=list)
    kernel_seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _checked_plan(path: str, algo: str, env_id: str, device: str | None) -> "Plan":
    """The plan, refused with the reason when it is for other work, another machine or absent devices."""
    from pearl.hostinfo import cpu_lanes, cpu_name
    from pearl.planner.plan import load_plan

    if device is not None:
        raise ConfigError("--plan places every kernel itself; drop --device (or drop --plan)")
    plan = load_plan(path)
    if (plan.algo, plan.env) != (algo, env_id):
        raise ConfigError(f"{path} is a plan for {plan.algo} on {plan.env}, not {algo} on {env_id}; "
                          f"make one with `pearl plan --algo {algo} --env {env_id}`")
    here = (cpu_name(), cpu_lanes())
    there = (plan.profile.get("cpu"), plan.profile.get("cores"))
    if here != there:
        raise PlanError(f"{path} was planned from a profile of another machine ({there[0]}, {there[1]} cores); "
                        f"this one is {here[0]}, {here[1]} cores: run `pearl profile` here and plan again")
    absent = sorted(d for d in set(plan.mapping.values()) if d.startswith("whatif:"))
    if absent:
        raise PlanError(f"{path} places kernels on {', '.join(absent)}, a device modelled from its descriptor "
                        "that this machine does not have; plan without --what-if devices to train")
    return plan


def plan_check(plan: "Plan", stats, config: OffPolicyConfig, result: TrainResult) -> dict:
    """Predicted against measured, overall and per kernel (seconds per iteration = one update)."""
    steps_per_iteration = 1.0 / config.replay_ratio
    measured = {}
    for kernel, predicted in plan.kernels.items():
        seconds = stats.kernel_seconds.get(kernel, 0.0)
        actor_side = kernel in ("env_step", "act", "replay_insert")
        per_iteration = (seconds / max(stats.steps, 1) * steps_per_iteration if actor_side
                         else seconds / max(stats.updates, 1))
        measured[kernel] = {"device": plan.mapping[kernel], "predicted_s": predicted, "measured_s": per_iteration,
                            "ratio": per_iteration / predicted if predicted > 0 else None}
    figures = ("env_steps_per_s", "updates_per_s", "learner_samples_per_s")
    return {"predicted": {k: plan.predicted[k] for k in figures},
            "measured": {k: getattr(result, k) for k in figures},
            "kernels": measured,
            "note": ("the parallel launcher runs actors, replay and learner concurrently, as the plan assumes"
                     if result.launcher == "parallel" else
                     "the sequential launcher runs the roles in turn; the plan predicts them running concurrently")}


def check_positive_int(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


def train(algo: str, env_id: str, *, device: str | None = None, plan: str | None = None, steps: int | None = None,
          seed: int = 0,
          eval_episodes: int = 10, config: OffPolicyConfig | None = None, runs_dir: str = "runs",
          threads: int = DEFAULT_THREADS, descriptor: str | None = None, max_seconds: float | None = None,
          progress: Callable[[int], None] | None = None, launcher: str = "parallel", actors: int | None = None,
          envs_per_actor: int | None = None, learn: bool = True, max_restarts: int = 3) -> TrainResult:
    """Train `algo` on `env_id` with every kernel on `device`, evaluate greedily, and write runs/<id>/.

    config defaults to pearl's preset for (algo, env_id) when there is one, else the algorithm's defaults;
    steps, when given, overrides config.total_steps. threads is the CPU threads one kernel may use;
    descriptor names a device descriptor whose precompiled kernel binary an OpenCL device loads. plan names a
    plan file (`pearl plan`): each kernel then runs on its planned device with the planned actor count, and
    the result holds predicted against measured figures (plan_check); device must then be None.

    launcher "parallel" (the default) runs each actor in its own process beside the learner, with the
    replay ratio held by a rate limiter; "sequential" runs the roles in turn in this process, the published
    presets' exact schedule (and bit-for-bit repeatable for a seed). actors and envs_per_actor default to
    the plan's, else 1 and the config's n_envs. learn=False collects only (acting, env steps, replay
    inserts): the actor side's speed. max_restarts: how many times the parallel launcher starts a dead
    actor again before it ends the run with that actor's error.
    """
    wall0 = time.perf_counter()
    algo_config_class(algo)  # unknown algo → ConfigError
    if steps is not None:
        check_positive_int("--steps", steps)
    check_positive_int("--seed", seed, minimum=0)
    check_positive_int("--eval-episodes", eval_episodes, minimum=0)
    check_positive_int("--threads", threads)
    spec = env_spec(env_id)
    check_algo_fits(algo, spec)
    config = config if config is not None else preset(algo, env_id)
    if config.algo != algo:
        raise ConfigError(f"a {config.algo} config cannot train {algo}")
    if steps is not None:
        config = config.replace(total_steps=steps)
    config.validate()

    if launcher not in LAUNCHERS:
        raise ConfigError(f"unknown launcher {launcher!r}; choose one of: {', '.join(LAUNCHERS)}")
    for name, value in (("--actors", actors), ("--envs-per-actor", envs_per_actor)):
        if value is not None:
            check_positive_int(name, value)
    if plan is not None and (actors is not None or envs_per_actor is not None):
        raise ConfigError("--plan sets the actors and envs per actor; drop --actors/--envs-per-actor "
                          "(or drop --plan)")
    loaded = _checked_plan(plan, algo, env_id, device) if plan is not None else None
    device = device or "cpu"
    if loaded is not None:
        placement = Placement(loaded.mapping["act"], loaded.mapping["replay_insert"], loaded.mapping["learn"])
        actors, envs_per_actor = loaded.actors, loaded.envs_per_actor
        device = "plan"
    else:
        placement = Placement.single(device)
    actors = actors or 1
    if envs_per_actor is not None:
        config = config.replace(n_envs=envs_per_actor)
    if not learn:  # collection only: the actors act with the policy from the first step
        config = config.replace(learning_starts=0)
    if descriptor is not None and not any(d.startswith("opencl") for d in placement.devices()):
        raise DeviceError(f"--descriptor names a kernel binary for an OpenCL device; {device} loads none "
                          "(drop --descriptor, or train on an opencl:P:D device)")
    check_positive_int("--max-restarts", max_restarts, minimum=0)
    if launcher == "parallel":
        runner: LocalLauncher | ParallelLauncher = ParallelLauncher(
            config, spec, placement, seed, threads, descriptor, actors=actors, learn=learn,
            max_restarts=max_restarts)  # a bad or absent device fails here
    else:
        runner = LocalLauncher(config, spec, placement, seed, threads, descriptor, actors=actors, learn=learn)
    record = RunRecord(runs_dir, algo, env_id, seed)
    if loaded is not None:
        record.write("plan.json", loaded.to_dict())
    record.write("config.json", {
        "kind": "config", "algo": algo, "env": env_id, "seed": seed, "device": device,
        "placement": placement.to_dict(), "threads": threads, "descriptor": descriptor, "launcher": launcher,
        "actors": actors, "envs_per_actor": config.n_envs, "learn": learn,
        "preset": has_preset(algo, env_id),
        "hyperparameters": config.to_dict(),
        "env_spec": asdict(spec), "pearl_version": __version__,
        "host": {"node": platform.node(), "platform": platform.platform(), "python": sys.version.split()[0]},
    })
    try:
        stats = runner.run(record, progress, max_seconds)
    except BaseException as exc:  # Ctrl-C, SIGTERM, a failed actor: say so in the summary, keep the metrics
        record.write("summary.json", {"kind": "summary", "status": "interrupted", "algo": algo, "env": env_id,
                                      "seed": seed, "reason": f"{type(exc).__name__}: {exc}"})
        raise
    finally:
        record.close()
    act = _eval_adapter(runner, placement, threads, descriptor).make_act(config, spec, stats.final_params, seed)
    returns = evaluate(act, spec, eval_episodes, seed + EVAL_SEED_OFFSET) if eval_episodes else []

    learning_steps = max(1, stats.steps - config.learning_starts)
    result = TrainResult(
        algo=algo, env=env_id, steps=stats.steps, seed=seed, device=device,
        env_steps_per_s=stats.steps / stats.wall_s,
        updates_per_s=stats.updates / stats.wall_s,
        learner_samples_per_s=stats.updates * config.batch_size / stats.wall_s,
        replay_ratio=stats.updates / learning_steps,
        eval_return_mean=float(np.mean(returns)) if returns else float("nan"),
        eval_return_std=float(np.std(returns)) if returns else float("nan"),
        eval_episodes=eval_episodes, wall_s=time.perf_counter() - wall0, run_dir=str(record.dir),
        updates=stats.updates, train_wall_s=stats.wall_s, preset=has_preset(algo, env_id),
        placement=placement.to_dict(), eval_returns=returns, kernel_seconds=dict(stats.kernel_seconds),
        actors=actors, envs_per_actor=config.n_envs, launcher=launcher, learn=learn, threads=threads,
        dropped_steps=stats.dropped_steps, waits=dict(stats.waits), actor_restarts=stats.restarts,
        lost_steps_max=stats.lost_steps_max,
    )
    if stats.learn_start_s is not None and stats.wall_s > stats.learn_start_s:
        learning_s = stats.wall_s - stats.learn_start_s
        result.learning_env_steps_per_s = (stats.steps - stats.learn_start_steps) / learning_s
        result.learning_updates_per_s = stats.updates / learning_s
    if loaded is not None:
        result.plan_check = plan_check(loaded, stats, config, result)
    record.write("summary.json", {"kind": "summary", "status": "finished", **result.to_dict()})
    return result


LAUNCHERS = ("parallel", "sequential")


def _eval_adapter(runner: LocalLauncher | ParallelLauncher, placement: Placement, threads: int,
                  descriptor: str | None):
    """The adapter of the act device (the parallel launcher opened it only in its actor processes)."""
    if placement.act in runner.adapters:
        return runner.adapters[placement.act]
    from pearl.adapters import open_adapter
    return open_adapter(placement.act, threads, descriptor if placement.act.startswith("opencl") else None)
