"""DDPG on Pendulum-v1, written out step by step with pearl's roles.

    python examples/ddpg_pendulum.py [--device cpu] [--seed 0] [--steps N]

DDPG as the paper states it: act with μ(s) plus Gaussian noise, store the transition, and after
`learning_starts` random steps update the critic and then the actor once per env step, Polyak-averaging
both target networks. `pearl.train(...)` runs the same loop with logging and a run record.
"""

from __future__ import annotations

import argparse

import numpy as np

from pearl.adapters import open_adapter
from pearl.algos import preset
from pearl.algos.params import init_params
from pearl.envs import env_spec
from pearl.runtime.evaluate import evaluate
from pearl.runtime.protocol import Learner, ReplayManager, VectorActor

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cpu")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=None, help="env steps [default: the preset's]")
args = parser.parse_args()

# 1. Hyperparameters (the tuned preset), the env's spaces, one device for every kernel.
config = preset("ddpg", "Pendulum-v1")
if args.steps is not None:  # a shorter run: learning starts by half way
    config = config.replace(total_steps=args.steps, learning_starts=min(config.learning_starts, args.steps // 2))
spec = env_spec("Pendulum-v1")
device = open_adapter(args.device)

# 2. Seeded initial weights, and the three roles built on the device's kernels.
params = init_params(config, spec, args.seed)
act = device.make_act(config, spec, params, args.seed + 1)
actor = VectorActor(0, spec.env_id, spec, config.n_envs, act, args.seed)
replay = ReplayManager(device.make_replay(config, spec, args.seed + 2), config.batch_size)
learner = Learner(device.make_learn(config, spec, params), device, config)

# 3. Random actions until learning starts, then one critic + actor update per env step.
returns: list[float] = []
# (the step after an episode ends only resets the env: it returns no transition)
for step in range(1, config.total_steps + 1):
    replay.insert(actor.step(explore=config.action_noise, random=step <= config.learning_starts))
    if step > config.learning_starts:
        replay.update_priorities(learner.update(replay.sample(beta=1.0)))
        actor.load_weights(learner.snapshot())  # act with the newest actor network
    returns += [e.ret for e in actor.drain_episodes()]
    if step % 2_000 == 0:
        print(f"step {step:6d}  mean return of the last 5 episodes {np.mean(returns[-5:]):8.1f}")

# 4. Evaluate the deterministic policy.
final = evaluate(device.make_act(config, spec, learner.kernel.policy_params(), 0), spec, episodes=10, seed=10_000)
print(f"deterministic evaluation over 10 episodes: {np.mean(final):.1f} ± {np.std(final):.1f}")
