"""Time the torch adapter's hand-derived learn (pearl/adapters/torch/dqn.py, ddpg.py, td3.py, sac.py) against its
algorithm's autograd reference (pearl/adapters/torch/reference.py), on the presets' networks and batches.

    python benchmarks/learn_paths.py [--what dqn ddpg td3 sac] [--threads 1] [--rounds 4] [--updates 200]

Both sides get the same initial parameters and the same batches (random data on the host, moved to torch tensors
once). Each round times --updates learn calls of one side, then of the other, alternating which goes first, so the
machine's drift falls on both. It prints each round's microseconds per update and hand ÷ reference, then the
median ratio over the rounds. Not a test: the ratio depends on the machine, the thread count and the sizes.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import torch

from pearl.adapters.torch import TorchAdapter
from pearl.adapters.torch.reference import REFERENCES
from pearl.algos import preset
from pearl.algos.params import init_params, network_sizes
from pearl.envs import env_spec
from pearl.types import SampleBatch

WORKLOADS = {"dqn": "CartPole-v1", "ddpg": "Pendulum-v1", "td3": "Pendulum-v1", "sac": "Pendulum-v1"}


def batches(adapter: TorchAdapter, spec, size: int, count: int, seed: int = 0) -> list[SampleBatch]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        action = (rng.integers(0, spec.action_dim, size) if spec.discrete
                  else rng.uniform(-1, 1, (size, spec.action_dim)).astype(np.float32))
        arrays = [rng.normal(size=(size, spec.obs_dim)).astype(np.float32), action,
                  rng.normal(size=size).astype(np.float32), rng.normal(size=(size, spec.obs_dim)).astype(np.float32),
                  (rng.random(size) < 0.05).astype(np.float32), np.ones(size, np.float32)]
        obs, act, reward, next_obs, done, weights = (adapter.from_host(a) for a in arrays)
        out.append(SampleBatch(np.arange(size), obs, act, reward, next_obs, done, weights, adapter.device_id))
    return out


def time_updates(kernel, work: list[SampleBatch]) -> float:
    """Seconds per learn call over `work`."""
    start = time.perf_counter()
    for batch in work:
        kernel.learn(batch)
    return (time.perf_counter() - start) / len(work)


def compare(algo: str, rounds: int, updates: int) -> list[float]:
    env_id = WORKLOADS[algo]
    config, spec = preset(algo, env_id), env_spec(env_id)
    params = init_params(config, spec, seed=0)
    cpu = TorchAdapter("cpu")
    sides = {"hand": cpu.make_learn(config, spec, params),
             "reference": REFERENCES[algo](torch.device("cpu"), config, network_sizes(config, spec), params, 0)}
    work = batches(cpu, spec, config.batch_size, updates)
    for kernel in sides.values():  # warm-up: first calls allocate buffers and Adam state
        time_updates(kernel, work[:20])
    print(f"{algo} {env_id}: hidden {'-'.join(map(str, config.hidden))}, batch {config.batch_size}, "
          f"{torch.get_num_threads()} thread(s), {updates} updates a side a round", flush=True)
    ratios = []
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        seconds = {name: time_updates(sides[name], work) for name in order}
        ratios.append(seconds["hand"] / seconds["reference"])
        print(f"  round {r + 1} ({order[0]} first): hand {seconds['hand'] * 1e6:8.1f} us, "
              f"reference {seconds['reference'] * 1e6:8.1f} us, hand / reference {ratios[-1]:.3f}", flush=True)
    print(f"  median hand / reference over {rounds} rounds: {statistics.median(ratios):.3f}", flush=True)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--what", nargs="+", choices=sorted(WORKLOADS), default=sorted(WORKLOADS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--updates", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}")
    for algo in args.what:
        compare(algo, args.rounds, args.updates)


if __name__ == "__main__":
    main()
