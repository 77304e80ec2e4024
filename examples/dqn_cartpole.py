"""DQN on CartPole-v1, written out step by step with pearl's roles.

    python examples/dqn_cartpole.py [--device cpu] [--seed 0] [--steps N]

The loop below is DQN as the paper states it: act ε-greedily, store the transition, and every `train_freq`
steps run `gradient_steps` updates on uniformly sampled minibatches, copying the online network into the
target every `target_update_interval` updates. `pearl.train(...)` runs the same loop with logging and a run
record; this file shows the pieces.
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
config = preset("dqn", "CartPole-v1")
if args.steps is not None:  # a shorter run: learning starts by half way
    config = config.replace(total_steps=args.steps, learning_starts=min(config.learning_starts, args.steps // 2))
spec = env_spec("CartPole-v1")
device = open_adapter(args.device)

# 2. Seeded initial weights, and the three roles built on the device's kernels.
params = init_params(config, spec, args.seed)
act = device.make_act(config, spec, params, args.seed + 1)
actor = VectorActor(0, spec.env_id, spec, config.n_envs, act, args.seed)
replay = ReplayManager(device.make_replay(config, spec, args.seed + 2), config.batch_size)
learner = Learner(device.make_learn(config, spec, params), device, config)

# 3. Collect, and every train_freq steps learn from replay.
returns: list[float] = []
# (the step after an episode ends only resets the env: it returns no transition)
for step in range(1, config.total_steps + 1):
    transitions = actor.step(explore=config.epsilon(step), random=step <= config.learning_starts)
    replay.insert(transitions)
    if step % config.train_freq == 0 and step > config.learning_starts:
        for _ in range(config.gradient_steps):
            batch = replay.sample(beta=1.0)  # uniform replay: the weights are all 1
            replay.update_priorities(learner.update(batch))
        actor.load_weights(learner.snapshot())  # act with the new Q-network
    returns += [e.ret for e in actor.drain_episodes()]
    if step % 10_000 == 0:
        print(f"step {step:6d}  mean return of the last 10 episodes {np.mean(returns[-10:]):6.1f}")

# 4. Evaluate the greedy policy.
final = evaluate(device.make_act(config, spec, learner.kernel.policy_params(), 0), spec, episodes=20, seed=10_000)
print(f"greedy evaluation over 20 episodes: {np.mean(final):.1f} ± {np.std(final):.1f}")
