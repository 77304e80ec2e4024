"""pearl against Stable-Baselines3 on the same presets, side by side in one invocation.

    pip install -e ".[bench]"          # stable-baselines3, for benchmarks only
    python benchmarks/vs_sb3.py [--what dqn ddpg td3 sac collect seeds preset defaults] [--seed 0] [--seeds 0-7]
                                [--rounds 1] [--threads 1] [--ddpg-threads 2] [--actors 1] [--envs-per-actor 8]
                                [--ddpg-envs-per-actor 1] [--collect-actors 2] [--collect-envs 256]
                                [--collect-steps 1000000] [--env LunarLanderContinuous-v3] [--sides sb3 pearl]
                                [--defaults-steps 0] [--steps 0] [--pearl-launcher pearl|local|sequential]
                                [--precisions fp32 bf16-mixed auto] [--sb3-devices auto cpu cuda]
                                [--pearl-plan PROFILE]

Cases (each run alone in a fresh interpreter, SB3 and pearl in turn, --rounds times):

- dqn: DQN CartPole-v1, 50,000 steps, the rl-baselines3-zoo settings on both sides (256-256 MLP, batch 64,
  lr 2.3e-3, 128 updates per 256 steps, learning starts 1,000, target copy every 10 env steps in SB3 = every
  128 updates in pearl, ε 1 → 0.04 over 16 % of the run, Huber loss, gradient norm 10).
- ddpg: DDPG Pendulum-v1, 20,000 steps, pearl's preset on both sides (SB3's built from it as in the preset
  case): the zoo settings (400-300, batch 256, lr 1e-3, γ 0.98, τ 0.005, N(0, 0.1) action noise, learning
  starts 10,000, one update per step).
- td3: TD3 Pendulum-v1, 20,000 steps, pearl's preset on both sides, SB3's `TD3` built from it field by field:
  400-300 actor and critics, batch 256, lr 1e-3 (actor and both critics), buffer 200,000, learning starts 10,000,
  γ 0.98, τ 0.005, train_freq 1 and gradient_steps 1, N(0, 0.1) action noise, policy_delay 2 (counted in updates
  on both sides), target policy noise 0.2 clipped at 0.5. Not matched: SB3 adds its action noise to the uniform
  warm-up actions too, pearl's warm-up actions are uniform without noise (as in DDPG); SB3's n_critics is pearl's
  fixed two, and its one Adam over both critics is pearl's Adam per critic (the same per-parameter step).
- sac: SAC Pendulum-v1, 20,000 steps, pearl's preset on both sides, SB3's `SAC` built from it field by field: 256-256
  actor and critics, batch 256, lr 1e-3 (actor, critics and the temperature), buffer 1,000,000, learning starts 100, γ
  0.99, τ 0.005, train_freq 1 and gradient_steps 1, ent_coef "auto_<initial_alpha>" (α learned from pearl's
  initial_alpha, 1; the number initial_alpha where pearl's tune_alpha is false), target_entropy pearl's (its 0 is
  SB3's "auto", −action_dim). Settings of SB3 pearl has no field for, at the value that is pearl's behaviour:
  target_update_interval 1 (pearl's critic targets move every update), use_sde False (pearl has no gSDE), no
  action_noise (pearl's SAC explores by sampling its policy only). Not matched: SB3's critic loss is ½ (MSE₁ + MSE₂),
  pearl's mean (δ₁² + δ₂²), twice it; Adam's step does not depend on the loss's scale but through its ε.
  In both cases, as in ddpg, pearl's own fields have no SB3 counterpart: prioritized replay (off in the presets),
  n_envs and weight_sync_interval (pearl's actors and schedule), and pearl's default policy lag of one round
  (its actors act with weights one round older while the learner trains; SB3 steps and trains in turn).
  --steps N trains N steps a side instead of the preset's (dqn, ddpg, td3, sac; a check that a case runs: the
  updates begin after the preset's learning_starts, 10,000 for TD3, 100 for SAC).
- defaults: DDPG Pendulum-v1 with each side's defaults, as a user runs it with no flags: pearl's
  `pearl.train("ddpg", "Pendulum-v1")` (no threads, actors or launcher given: the learner's threads are
  pearl's choice, PlacementOptions.threads; in-training evaluations as by default) against SB3's `DDPG` built from
  the same preset (as the ddpg case builds it) with torch's default threads. Env steps/s of each over its
  training loop, pearl's also without its in-training evaluations (SB3 runs none), and pearl ÷ SB3 of both.
  --defaults-steps N trains N steps a side instead of the preset's 20,000 (a check that the case runs).
- collect: collection only, 50,000 steps: SB3 DQN with learning_starts above the total (it steps and
  stores, with random actions) against `pearl train --no-learn` (it acts with the policy, steps, stores),
  with --collect-actors × --collect-envs for --collect-steps, and with 1 actor × 1 env for 50,000.

- seeds: learning across seeds, DQN CartPole-v1 on --seeds (0-7 by default) with each side's defaults (pearl:
  1 actor × 1 env on the default launcher, keeping the best policy of in-training greedy evaluations every
  5,000 env steps, 10 episodes; SB3: the zoo settings, as its users run them), scored on the same 20
  evaluation episodes: pearl's final and best policy, SB3's final one, and the count of seeds at >= 475 for
  each. --sb3-best also trains SB3 with its EvalCallback (the same evaluations) and scores its best model too.
  Not part of the default --what: it takes about 20 minutes on 2 cores.
- preset: learning across seeds on one of pearl's DDPG presets (--env; pearl/algos/presets.py), both sides
  with that preset's hyperparameters and budget (SB3's DDPG built field by field from pearl's config: network,
  batch, learning rate, replay size, learning starts, γ, τ, train_freq and gradient_steps, Gaussian or
  Ornstein-Uhlenbeck noise of the same σ). Each seed of --seeds: SB3's final policy, and pearl's final, best and
  headline (what the preset test asserts), scored on the same 20 evaluation episodes. --sides picks who runs:
  a pearl seed gives the same result every time (its schedule), so a seed measured before need not run again.
  A zoo preset of 300k steps takes 20 to 60 minutes a side and seed on 2 cores.

The speed cases (dqn, ddpg, td3, sac, collect) run pearl without in-training evaluations, as SB3 runs without them.
In the dqn, ddpg, td3 and sac cases pearl's launcher is its own choice by default (--pearl-launcher pearl: none
named, so `pearl.train` takes local or sequential, whichever this machine's profile predicts faster for the layout,
profiling the workload quickly first where no profile at hand times it), as SB3 runs with its own defaults; the
line says which it took. The layout (actors, envs, learner threads) is the benchmark's, on both sides alike.
Each round runs SB3 first in odd rounds and last in even ones, and each case ends with the median over the rounds
of pearl ÷ SB3 within a round.

What is printed: env steps/s over the training loop (SB3: `model.learn` wall time; pearl: its training
loop, from the result's train_wall_s, both excluding process start, model construction and evaluation),
pearl ÷ SB3, the final greedy evaluation return of each (20 episodes, the same seeds, deterministic actions)
and, for pearl, the replay ratio measured and the learner efficiency: updates/s over the learning phase
÷ the rate of bare `learn` calls on a sampled batch, timed in the same process right after training, on
the same device and threads. SB3 runs with torch's default threads (all cores), as its users run it.
On a GPU machine, `--sb3-devices cpu cuda` runs SB3 on each (both reported; pearl's ratio is to the faster in each
round) and `--pearl-plan PROFILE` trains pearl on the throughput plan it makes from that machine's profile for
each case's preset, as `pearl plan` then `pearl train --plan` would.
Timing decides nothing here: it is a measurement, run on purpose.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

EVAL_EPISODES = 20
EVAL_SEED = 100_000  # pearl's EVALUATION_OFFSET (pearl.runtime.seeds); + seed in the seeds case
SELECT_EVERY, SELECT_EPISODES = 5_000, 10  # in-training evaluations that keep the best policy (seeds case)
CONTINUOUS = ("ddpg", "td3", "sac")  # the speed cases on Pendulum-v1, each algorithm's preset on both sides
BUDGET_CASES = ("dqn", *CONTINUOUS)  # the cases --steps shortens


def sb3_case(case: str, seed: int, budget: int = 0, device: str = "auto") -> dict:
    """Train SB3 on the case's preset on `device` (SB3's own: auto, cpu, cuda); return rates and the evaluation
    (runs in a child interpreter)."""
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import DQN

    if case in ("dqn", "collect", "seeds", "seeds-best"):
        steps = 50_000
        model = DQN("MlpPolicy", "CartPole-v1", learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
                    learning_starts=steps + 1 if case == "collect" else 1_000, gamma=0.99, target_update_interval=10,
                    train_freq=256, gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04,
                    policy_kwargs=dict(net_arch=[256, 256]), seed=seed, verbose=0, device=device)
    else:
        builder = {"td3": sb3_td3, "sac": sb3_sac}.get(case, sb3_ddpg)  # ddpg and defaults: DDPG
        model, steps = builder("Pendulum-v1", seed, device)
    if case in (*BUDGET_CASES, "defaults"):
        steps = budget or steps
    callback, best_dir = None, None
    if case == "seeds-best":
        import tempfile

        from stable_baselines3.common.callbacks import EvalCallback

        best_dir = tempfile.mkdtemp(prefix="sb3-best-")
        callback = EvalCallback(gym.make("CartPole-v1"), n_eval_episodes=SELECT_EPISODES, eval_freq=SELECT_EVERY,
                                best_model_save_path=best_dir, deterministic=True, verbose=0)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps, callback=callback)
    wall = time.perf_counter() - t0
    returns = [] if case == "collect" else _sb3_eval(model, "Pendulum-v1" if case in (*CONTINUOUS, "defaults")
                                                     else "CartPole-v1",
                                                     seed if case.startswith("seeds") else 0)
    out = {"side": "sb3", "case": case, "steps": steps, "wall_s": wall, "env_steps_per_s": steps / wall,
           "eval_mean": float(np.mean(returns)) if returns else None, "threads": torch.get_num_threads(),
           "device": str(model.device)}
    out["final_mean"] = out["eval_mean"]
    if best_dir is not None:
        best = DQN.load(f"{best_dir}/best_model.zip")
        out["best_mean"] = float(np.mean(_sb3_eval(best, "CartPole-v1", seed)))
    return out


def sb3_ddpg(env_id: str, seed: int, device: str = "auto") -> tuple[Any, int]:
    """(SB3's DDPG built field by field from pearl's preset for env_id, the preset's total steps)."""
    import gymnasium as gym
    from stable_baselines3 import DDPG

    cfg = ddpg_preset(env_id)
    env = gym.make(env_id)
    noise = _sb3_noise(env, cfg.action_noise, cfg.noise_type)
    return _sb3_off_policy(DDPG, cfg, env, seed, action_noise=noise, device=device), cfg.total_steps


def sb3_td3(env_id: str, seed: int, device: str = "auto") -> tuple[Any, int]:
    """(SB3's TD3 built field by field from pearl's TD3 preset for env_id, the preset's total steps): the
    shared fields, action noise of pearl's kind and σ, and the delay and target smoothing of pearl's config."""
    import gymnasium as gym
    from stable_baselines3 import TD3

    cfg = pearl_preset("td3", env_id)
    env = gym.make(env_id)
    model = _sb3_off_policy(TD3, cfg, env, seed, action_noise=_sb3_noise(env, cfg.action_noise, cfg.noise_type),
                            policy_delay=cfg.policy_delay, target_policy_noise=cfg.target_policy_noise,
                            target_noise_clip=cfg.target_noise_clip, device=device)
    return model, cfg.total_steps


def sb3_sac(env_id: str, seed: int, device: str = "auto") -> tuple[Any, int]:
    """(SB3's SAC built field by field from pearl's SAC preset for env_id, the preset's total steps): the shared
    fields and a learned temperature from pearl's initial α towards pearl's target entropy (its 0 is SB3's
    "auto", −action_dim), or α fixed at initial_alpha where pearl's tune_alpha is false; the critics' targets move
    every update, as pearl's do."""
    import gymnasium as gym
    from stable_baselines3 import SAC

    cfg = pearl_preset("sac", env_id)
    ent_coef = f"auto_{cfg.initial_alpha}" if cfg.tune_alpha else cfg.initial_alpha
    model = _sb3_off_policy(SAC, cfg, gym.make(env_id), seed, ent_coef=ent_coef,
                            target_entropy=cfg.target_entropy if cfg.target_entropy != 0 else "auto",
                            target_update_interval=1, device=device)
    return model, cfg.total_steps


def _sb3_off_policy(cls: Any, cfg: Any, env: Any, seed: int, **extra: Any) -> Any:
    """An SB3 off-policy model with the fields every pearl config has: network widths (actor and critics),
    learning rate, batch, replay size, learning starts, γ, τ, train_freq and gradient_steps."""
    return cls("MlpPolicy", env, learning_rate=cfg.learning_rate, batch_size=cfg.batch_size,
               buffer_size=cfg.buffer_size, learning_starts=cfg.learning_starts, gamma=cfg.gamma, tau=cfg.tau,
               train_freq=cfg.train_freq, gradient_steps=cfg.gradient_steps,
               policy_kwargs=dict(net_arch=list(cfg.hidden)), seed=seed, verbose=0, **extra)


def _sb3_noise(env: Any, sigma: float, noise_type: str) -> Any:
    """SB3's action noise of pearl's kind and σ, one process per action dimension."""
    import numpy as np
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    mean, sigmas = np.zeros(env.action_space.shape), sigma * np.ones(env.action_space.shape)
    return (OrnsteinUhlenbeckActionNoise(mean, sigmas) if noise_type == "ornstein-uhlenbeck"
            else NormalActionNoise(mean, sigmas))


def sb3_ddpg_preset(env_id: str, seed: int) -> dict:
    """SB3's DDPG on pearl's preset for env_id; its final policy scored on the 20 episodes pearl's final
    evaluation of that seed plays."""
    import numpy as np
    import torch

    model, steps = sb3_ddpg(env_id, seed)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - t0
    returns = _sb3_eval(model, env_id, seed)
    return {"side": "sb3", "case": "preset", "steps": steps, "wall_s": wall, "env_steps_per_s": steps / wall,
            "final_mean": float(np.mean(returns)), "final_std": float(np.std(returns)),
            "threads": torch.get_num_threads()}


def ddpg_preset(env_id: str) -> Any:
    """pearl's DDPG preset for env_id; an error line and exit 2 when pearl has none."""
    return pearl_preset("ddpg", env_id, "preset")


def pearl_preset(algo: str, env_id: str, case: str = "") -> Any:
    """pearl's preset of algo for env_id; an error line and exit 2 when pearl has none (a case built on
    another algorithm's defaults would compare nothing published)."""
    from pearl.algos import preset
    from pearl.algos.presets import has_preset

    if not has_preset(algo, env_id):
        print(f"error: pearl has no {algo.upper()} preset for {env_id!r}; the {case or algo} case needs one "
              "(pearl/algos/presets.py lists them)", file=sys.stderr)
        raise SystemExit(2)
    return preset(algo, env_id)


def _sb3_eval(model, env_id: str, seed: int = 0) -> list[float]:
    import gymnasium as gym

    env, returns = gym.make(env_id), []
    for episode in range(EVAL_EPISODES):
        obs, _ = env.reset(seed=EVAL_SEED + seed + episode)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns


def pearl_case(case: str, seed: int, threads: int, actors: int, envs: int, steps: int,
               launcher: str = "pearl", precision: str = "fp32", profile: str = "") -> dict:
    """Train with pearl's `launcher` (local: actor processes beside the learner's; sequential: acting and
    learning in turn in one process, as SB3 runs; pearl: none named, so pearl takes the one its profile of this
    machine predicts faster, as `pearl train` does); add the bare learn rate measured right after, same threads.
    Learn at `precision` (auto: the one pearl picks from this machine's profile, as `pearl train --precision auto`
    does; "precision" is what it picked); a machine that cannot compute it gives {"error": why} instead of a run.
    With a `profile`: train on the throughput plan pearl makes from it for the case's preset (its placement,
    actors, envs, threads and precision; the layout arguments are then unused)."""
    from pearl.errors import PearlError
    from pearl.training import train

    algo, env_id = (case, "Pendulum-v1") if case in CONTINUOUS else ("dqn", "CartPole-v1")
    runs_dir = os.environ.get("PEARL_BENCH_RUNS", "runs/bench")
    if case == "seeds":
        result = train(algo, env_id, seed=seed, eval_episodes=EVAL_EPISODES, runs_dir=runs_dir,
                       eval_every=SELECT_EVERY, eval_every_episodes=SELECT_EPISODES)
        return {"side": "pearl", "case": case, "steps": result.steps, "wall_s": result.train_wall_s,
                "env_steps_per_s": result.env_steps_per_s, "final_mean": result.final["return_mean"],
                "best_mean": result.best.get("return_mean"), "headline": result.headline}
    try:
        if profile:
            result = _train_on_plan(profile, algo, env_id, seed, steps, runs_dir, precision)
            threads, actors, envs = result.threads, result.actors, result.envs_per_actor
        else:
            result = train(algo, env_id, seed=seed, eval_episodes=0 if case == "collect" else EVAL_EPISODES,
                           steps=steps or None, runs_dir=runs_dir, threads=threads, actors=actors,
                           envs_per_actor=envs, learn=case != "collect", eval_every=0,
                           launcher=None if launcher == "pearl" else launcher, precision=precision)
    except PearlError as exc:
        return {"side": "pearl", "case": case, "precision": precision, "error": str(exc)}
    out = {"side": "pearl", "case": case, "steps": result.steps, "wall_s": result.train_wall_s,
           "env_steps_per_s": result.env_steps_per_s, "eval_mean": None if case == "collect" else
           result.eval_return_mean, "threads": threads, "actors": actors, "envs_per_actor": envs,
           "replay_ratio": result.replay_ratio, "learning_updates_per_s": result.learning_updates_per_s,
           "waits": result.waits, "launcher": result.launcher, "precision": result.precision,
           "placement": result.placement, "planned": bool(profile)}
    if case != "collect":
        bare = bare_learn_rate(algo, env_id, threads, seed, precision=result.precision,
                               device=result.placement.get("learn", "cpu"))
        out["bare_updates_per_s"] = bare
        out["learner_efficiency"] = (result.learning_updates_per_s or 0.0) / bare
    return out


def _train_on_plan(profile: str, algo: str, env_id: str, seed: int, steps: int, runs_dir: str, precision: str):
    """pearl's throughput plan from `profile` for the case's preset, saved in runs_dir, and a run on it."""
    from pearl.planner.make import make_plan
    from pearl.planner.plan import save_plan
    from pearl.training import train

    plan = make_plan(profile, algo, env_id, "throughput", precision=precision)
    path = save_plan(plan, os.path.join(runs_dir, f"vs-sb3-{algo}-{env_id}.plan.json"))
    return train(plan=str(path), seed=seed, eval_episodes=EVAL_EPISODES, steps=steps or None, runs_dir=runs_dir,
                 eval_every=0)


def pearl_defaults(seed: int, budget: int) -> dict:
    """`pearl train --algo ddpg --env Pendulum-v1` as a user runs it: nothing but the seed, the final
    evaluation's episodes and (for a check) the step budget given."""
    from pearl.training import train

    result = train("ddpg", "Pendulum-v1", seed=seed, eval_episodes=EVAL_EPISODES, steps=budget or None,
                   runs_dir=os.environ.get("PEARL_BENCH_RUNS", "runs/bench"))
    return {"side": "pearl", "case": "defaults", "steps": result.steps, "wall_s": result.train_wall_s,
            "eval_s": result.eval_s, "env_steps_per_s": result.env_steps_per_s,
            "env_steps_per_s_no_eval": result.steps / max(result.train_wall_s - result.eval_s, 1e-9),
            "eval_mean": result.eval_return_mean, "threads": result.threads, "actors": result.actors,
            "launcher": result.launcher}


def defaults_case(seed: int, rounds: int, budget: int) -> None:
    """SB3 then pearl, --rounds times, each with its defaults (the module docstring's defaults case)."""
    for r in range(rounds):
        sb3 = run_child(["--seed", str(seed), "--defaults-steps", str(budget), "--child", "sb3", "defaults"])
        print(f"[defaults round {r + 1}] SB3   {sb3['env_steps_per_s']:9,.0f} env steps/s  ({sb3['steps']:,} steps "
              f"in {sb3['wall_s']:.1f} s, {sb3['threads']} torch threads)  eval {sb3['eval_mean']:.1f}", flush=True)
        p = run_child(["--seed", str(seed), "--defaults-steps", str(budget), "--child", "pearl", "defaults"])
        print(f"[defaults round {r + 1}] pearl {p['env_steps_per_s']:9,.0f} env steps/s  ({p['steps']:,} steps in "
              f"{p['wall_s']:.1f} s, {p['launcher']} launcher, {p['actors']} actor(s), {p['threads']} learner "
              f"thread(s))  ratio pearl/SB3 {p['env_steps_per_s'] / sb3['env_steps_per_s']:.2f}; without its "
              f"in-training evaluations ({p['eval_s']:.1f} s) {p['env_steps_per_s_no_eval']:,.0f} env steps/s, "
              f"ratio {p['env_steps_per_s_no_eval'] / sb3['env_steps_per_s']:.2f}  eval {p['eval_mean']:.1f}",
              flush=True)


def pearl_ddpg_preset(env_id: str, seed: int) -> dict:
    """pearl's preset run as its test makes it: default launcher and budget, 20 evaluation episodes."""
    from pearl.training import train

    result = train("ddpg", env_id, seed=seed, eval_episodes=EVAL_EPISODES,
                   runs_dir=os.environ.get("PEARL_BENCH_RUNS", "runs/bench"))
    return {"side": "pearl", "case": "preset", "steps": result.steps, "wall_s": result.train_wall_s,
            "env_steps_per_s": result.env_steps_per_s, "final_mean": result.final["return_mean"],
            "best_mean": result.best.get("return_mean"), "headline": result.headline,
            "headline_mean": result.eval_return_mean}


def bare_learn_rate(algo: str, env_id: str, threads: int, seed: int, seconds: float = 5.0,
                    precision: str = "fp32", device: str = "cpu") -> float:
    """Bare update steps per second on `device` (the run's learn device): sample a batch, learn on it, hand back
    its priorities, in a tight loop on a replay holding the preset's total steps (the state at the end of
    training), nothing else running. The run's learner does exactly this per update, plus draining the actors'
    rings and publishing weights, beside the actor processes: the efficiency is what that costs it."""
    import numpy as np

    from pearl.adapters import open_adapter
    from pearl.algos import preset
    from pearl.algos.params import init_params
    from pearl.envs import env_spec
    from pearl.kernels import Precision
    from pearl.types import PriorityUpdate, TransitionBatch

    cfg, spec = preset(algo, env_id), env_spec(env_id)
    adapter = open_adapter(device, threads)
    learn = adapter.make_learn(cfg, spec, init_params(cfg, spec, seed), precision=Precision.parse(precision))
    replay = adapter.make_replay(cfg, spec, seed)
    rng, n = np.random.default_rng(seed), cfg.total_steps
    action = (rng.integers(0, spec.action_dim, n) if spec.discrete
              else rng.uniform(-1, 1, (n, spec.action_dim)).astype(np.float32))
    replay.insert(TransitionBatch(rng.normal(size=(n, spec.obs_dim)).astype(np.float32), action,
                                  rng.normal(size=n).astype(np.float32),
                                  rng.normal(size=(n, spec.obs_dim)).astype(np.float32), np.zeros(n, np.float32)))
    for _ in range(20):
        learn.learn(replay.sample(cfg.batch_size, 1.0))
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        batch = replay.sample(cfg.batch_size, 1.0)
        replay.update_priorities(PriorityUpdate(batch.indices, learn.learn(batch).td_errors))
        calls += 1
    adapter.synchronize()
    return calls / (time.perf_counter() - t0)


def run_child(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: child {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what", nargs="+",
                        choices=["dqn", "ddpg", "td3", "sac", "collect", "seeds", "preset", "defaults"],
                        default=["dqn", "ddpg", "collect"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", default="0-7", help="seeds of the seeds case: A-B or a comma list")
    parser.add_argument("--sb3-best", action="store_true",
                        help="seeds case: also train SB3 with its EvalCallback and score its best model")
    parser.add_argument("--rounds", type=int, default=1,
                        help="SB3/pearl pairs per case, SB3 first in odd rounds, pearl first in even ones")
    parser.add_argument("--threads", type=int, default=1, help="pearl learner threads for DQN")
    parser.add_argument("--ddpg-threads", type=int, default=2, help="pearl learner threads for DDPG, TD3 and SAC")
    parser.add_argument("--actors", type=int, default=1)
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16-mixed", "auto"],
                        default=["fp32", "bf16-mixed"],
                        help="learn's arithmetic of pearl's runs in the dqn, ddpg, td3 and sac cases, each a run per "
                        "round (bf16-mixed says why not where this machine lacks bf16 units; auto: pearl's pick from "
                        "this machine's profile in $PEARL_BENCH_RUNS, as `pearl train --precision auto`)")
    parser.add_argument("--envs-per-actor", type=int, default=8, help="pearl's envs per actor for DQN")
    parser.add_argument("--ddpg-envs-per-actor", type=int, default=1, help="pearl's envs per actor for DDPG, TD3 "
                        "and SAC")
    parser.add_argument("--pearl-launcher", choices=["pearl", "local", "sequential"], default="pearl",
                        help="pearl's launcher in the dqn, ddpg, td3 and sac cases (pearl: none named, pearl's own "
                        "choice as `pearl train` makes it; sequential: one actor in the learner's process, --actors "
                        "ignored)")
    parser.add_argument("--collect-actors", type=int, default=2)
    parser.add_argument("--collect-envs", type=int, default=256)
    parser.add_argument("--collect-steps", type=int, default=1_000_000,
                        help="steps of the many-env collection run (at ~500k steps/s, 50k would last 0.1 s)")
    parser.add_argument("--env", default="LunarLanderContinuous-v3", help="the preset case's environment")
    parser.add_argument("--sides", nargs="+", choices=["sb3", "pearl"], default=["sb3", "pearl"],
                        help="who trains in the preset case")
    parser.add_argument("--defaults-steps", type=int, default=0,
                        help="the defaults case's env steps a side (0: the preset's)")
    parser.add_argument("--steps", type=int, default=0,
                        help="env steps a side in the dqn, ddpg, td3 and sac cases (0: the preset's; a check that a "
                        "case runs, past the preset's learning_starts to reach its updates)")
    parser.add_argument("--sb3-devices", nargs="+", default=["auto"],
                        help="SB3's devices in the dqn, ddpg, td3 and sac cases, each a run per round (auto: SB3's "
                        "own pick, cuda where there is one); pearl's ratio is to the fastest of them in its round")
    parser.add_argument("--pearl-plan", default="", metavar="PROFILE",
                        help="pearl trains on the throughput plan it makes from this profile for each case's preset "
                        "(its placement, actors, envs, threads; --precisions still applies) instead of the "
                        "benchmark's layout on the host")
    parser.add_argument("--sb3-device", default="auto", help=argparse.SUPPRESS)  # a child's
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, case, *rest = args.child
        if case == "preset":
            out = (sb3_ddpg_preset if side == "sb3" else pearl_ddpg_preset)(args.env, args.seed)
        elif case == "defaults":
            out = sb3_case(case, args.seed, args.defaults_steps) if side == "sb3" else \
                pearl_defaults(args.seed, args.defaults_steps)
        else:
            out = sb3_case(case, args.seed, args.steps, args.sb3_device) if side == "sb3" else \
                pearl_case(case, args.seed, *map(int, rest[:4]), *rest[4:])
        print(json.dumps(out))
        return

    try:
        import stable_baselines3
    except ImportError:
        raise SystemExit('error: stable-baselines3 is not installed; pip install -e ".[bench]"') from None
    from pearl.hostinfo import cpu_name

    preset_steps = ddpg_preset(args.env).total_steps if "preset" in args.what else 0
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"stable-baselines3 {stable_baselines3.__version__}; "
          + (f"seeds {args.seeds}" if set(args.what) & {"seeds", "preset"} else f"seed {args.seed}"))
    for case in args.what:
        if case == "seeds":
            seeds_case(parse_seeds(args.seeds), args.sb3_best)
            continue
        if case == "preset":
            preset_case(args.env, preset_steps, parse_seeds(args.seeds), args.sides)
            continue
        if case == "defaults":
            defaults_case(args.seed, args.rounds, args.defaults_steps)
            continue
        pearl_runs = [(args.threads, args.actors, args.envs_per_actor, args.steps, p) for p in args.precisions]
        if case in CONTINUOUS:
            pearl_runs = [(args.ddpg_threads, args.actors, args.ddpg_envs_per_actor, args.steps, p)
                          for p in args.precisions]
        if case == "collect":
            pearl_runs = [(1, args.collect_actors, args.collect_envs, args.collect_steps, "fp32"),
                          (1, 1, 1, 50_000, "fp32")]
        speed_case(case, args, pearl_runs)


def speed_case(case: str, args: argparse.Namespace, pearl_runs: list[tuple[int, int, int, int, str]]) -> None:
    """SB3's runs (one per --sb3-devices) and pearl's, --rounds times, SB3 first in odd rounds and last in even
    ones, so the machine's drift over the invocation falls on both sides; a line per run, then the median of each
    pearl run's ratio to its round's fastest SB3 run over the rounds."""
    ratios: dict[int, list[float]] = {i: [] for i in range(len(pearl_runs))}
    pearl_side = [(i, *run) for i, run in enumerate(pearl_runs)]
    sb3_side = [f"sb3:{d}" for d in args.sb3_devices]
    launcher = "local" if case == "collect" else args.pearl_launcher
    plan = args.pearl_plan if case in BUDGET_CASES else ""
    for r in range(args.rounds):
        order = [*sb3_side, *pearl_side] if r % 2 == 0 else [*pearl_side, *sb3_side]
        done: dict = {}
        for side in order:
            if isinstance(side, str):
                device = side.split(":", 1)[1]
                done[side] = sb3 = run_child(["--seed", str(args.seed), "--steps", str(args.steps),
                                              "--sb3-device", device, "--child", "sb3", case])
                print(f"[{case} round {r + 1}] SB3 on {sb3.get('device', device)} {sb3['env_steps_per_s']:9,.0f} env "
                      f"steps/s  ({sb3['wall_s']:.1f} s, {sb3['threads']} torch threads)"
                      + (f"  eval {sb3['eval_mean']:.1f}" if sb3["eval_mean"] is not None else ""), flush=True)
                continue
            i, threads, actors, envs, steps, precision = side
            done[i] = run_child(["--seed", str(args.seed), "--child", "pearl", case,
                                 *map(str, (threads, actors, envs, steps)), launcher, precision, plan])
        best = fastest_sb3({k: v for k, v in done.items() if isinstance(k, str)})
        for i, threads, actors, envs, _, precision in pearl_side:
            p, sb3 = done[i], done[best]
            if "error" in p:
                print(f"[{case} round {r + 1}] pearl learn in {precision}: not run: {p['error']}", flush=True)
                continue
            ratios[i].append(p["env_steps_per_s"] / sb3["env_steps_per_s"])
            ran = p["launcher"]
            layout = (f"{p['actors']} actor(s) × {p['envs_per_actor']} env(s), {p['threads']} learner thread(s) on "
                      f"the plan's placement {placement_text(p['placement'])}" if p.get("planned") else
                      f"{actors if ran == 'local' else 1} actor(s) × {envs} env(s), {threads} learner thread(s)")
            line = (f"[{case} round {r + 1}] pearl {p['env_steps_per_s']:9,.0f} env steps/s  "
                    f"({p['steps']:,} steps in {p['wall_s']:.1f} s, {ran} launcher"
                    + (" (pearl's choice)" if launcher == "pearl" and not p.get("planned") else "")
                    + f", {layout}, learn in {p['precision']}" + (" (auto)" if precision == "auto" else "") + ", "
                    f"{'pearl' if not isinstance(order[0], str) else 'SB3'} ran first)  ratio pearl/SB3"
                    + (f" on {sb3.get('device', best)}" if len(sb3_side) > 1 else "") + f" {ratios[i][-1]:.2f}")
            if p["eval_mean"] is not None:
                line += f"  eval {p['eval_mean']:.1f}"
            if p.get("learning_updates_per_s"):  # None for collection, and for a run that ends before learning
                line += (f"  replay ratio {p['replay_ratio']:.3f}  "
                         f"learner efficiency {p['learner_efficiency']:.2f} "
                         f"({p['learning_updates_per_s']:.0f} / {p['bare_updates_per_s']:.0f} bare updates/s)")
            print(line, flush=True)
    for i, (threads, actors, envs, _, precision) in enumerate(pearl_runs):
        runs = ratios[i]
        if not runs:
            continue
        layout = "the plan's layout" if plan else f"{actors} actor(s) × {envs} env(s), {threads} learner thread(s)"
        print(f"[{case}] pearl/SB3's fastest device over {len(runs)} round(s) ({layout}, learn in {precision}): "
              f"{', '.join(f'{x:.2f}' for x in runs)}; median {statistics.median(runs):.2f}", flush=True)


def fastest_sb3(runs: dict[str, dict]) -> str:
    """The key of the fastest SB3 run of a round (env steps/s); the first listed on a tie."""
    return max(runs, key=lambda k: runs[k]["env_steps_per_s"])


def placement_text(placement: dict[str, str]) -> str:
    """learn → cuda:0, act → cpu, ...: where the plan put each kernel but env_step (always the host)."""
    return ", ".join(f"{k} → {v}" for k, v in placement.items() if k != "env_step")


def parse_seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(x) for x in text.split(",")]


def preset_case(env_id: str, steps: int, seeds: list[int], sides: list[str]) -> None:
    """Each seed: SB3 then pearl, as --sides says; a line per run, then each side's mean over the seeds."""
    done: dict[str, list[dict]] = {side: [] for side in sides}
    for seed in seeds:
        for side in sides:
            print(f"[preset] {env_id} seed {seed}: {side} training, {steps:,} steps ...", flush=True)
            r = run_child(["--seed", str(seed), "--env", env_id, "--child", side, "preset"])
            done[side].append(r)
            what = (f"final {r['final_mean']:.1f} ± {r['final_std']:.1f}" if side == "sb3" else
                    f"final {r['final_mean']:.1f}, best {r['best_mean']:.1f}, headline ({r['headline']}) "
                    f"{r['headline_mean']:.1f}")
            print(f"[preset] {env_id} seed {seed}: {side} {what}  ({r['env_steps_per_s']:,.0f} env steps/s, "
                  f"{r['wall_s'] / 60:.0f} min)", flush=True)
    for side, runs in done.items():
        key = "final_mean" if side == "sb3" else "headline_mean"
        values = [r[key] for r in runs]
        print(f"[preset] {env_id} {side} {key} over seeds {seeds}: {', '.join(f'{v:.1f}' for v in values)}; "
              f"mean {sum(values) / len(values):.1f}", flush=True)


def seeds_case(seeds: list[int], sb3_best: bool) -> None:
    """Each seed: SB3 then pearl (alternating); pearl's final and best policy, SB3's final (and, with sb3_best,
    the final and best of an SB3 run with its EvalCallback); counts at >= 475."""
    rows = []
    for seed in seeds:
        row = {"sb3": run_child(["--seed", str(seed), "--child", "sb3", "seeds"])}
        if sb3_best:
            row["sb3_cb"] = run_child(["--seed", str(seed), "--child", "sb3", "seeds-best"])
        row["pearl"] = run_child(["--seed", str(seed), "--child", "pearl", "seeds", "1", "1", "1", "0"])
        rows.append(row)
        cb = (f" | SB3 with EvalCallback final {row['sb3_cb']['final_mean']:6.1f} "
              f"best {row['sb3_cb']['best_mean']:6.1f}" if sb3_best else "")
        print(f"[seeds] seed {seed}: SB3 final {row['sb3']['final_mean']:6.1f} "
              f"({row['sb3']['env_steps_per_s']:,.0f} env steps/s){cb} | pearl final {row['pearl']['final_mean']:6.1f} "
              f"best {row['pearl']['best_mean']:6.1f} ({row['pearl']['env_steps_per_s']:,.0f} env steps/s)", flush=True)

    def solved(side: str, which: str) -> str:
        return f"{sum(r[side][which] >= 475 for r in rows)} of {len(rows)}"

    extra = (f"; SB3 with EvalCallback final {solved('sb3_cb', 'final_mean')}, best {solved('sb3_cb', 'best_mean')}"
             if sb3_best else "")
    print(f"[seeds] >= 475 over 20 episodes: SB3 final {solved('sb3', 'final_mean')}{extra}; pearl final "
          f"{solved('pearl', 'final_mean')}, best {solved('pearl', 'best_mean')} (pearl's headline is the best policy)")


if __name__ == "__main__":
    main()
