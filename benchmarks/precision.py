"""Time the torch adapter's learn in fp32 against bf16-mixed (pearl.kernels.Precision) on the CPU, and bf16-mixed
against the same with every layer in bfloat16 (the thin first and last layers too, which bf16-mixed keeps in float32:
nets.MIXED_MIN_WIDTH), on the presets' networks and batches; then print the backend's `precision_problem` verdict
for bf16-mixed (pearl.adapters.registry).

    python benchmarks/precision.py [--what dqn ddpg td3 sac] [--threads 1] [--rounds 6] [--updates 100]

All sides start from the same parameters and learn on the same batches (learn_paths.batches). Each round times
--updates learn calls of each side in turn, the side timed first rotating, so the machine's drift falls on all. It
prints each round's microseconds per update, then the medians over the rounds and the median per-round ratios.
Not a test: the ratios depend on the machine (whether its CPU has bf16 units), the threads and the sizes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learn_paths import batches, time_updates, timed_rounds  # noqa: E402 - the benchmark beside this one

import pearl.adapters.torch.nets as nets  # noqa: E402
from pearl.adapters.registry import precision_problem  # noqa: E402
from pearl.adapters.torch import TorchAdapter  # noqa: E402
from pearl.algos import preset  # noqa: E402
from pearl.algos.params import init_params  # noqa: E402
from pearl.device import HOST_DEVICE  # noqa: E402
from pearl.envs import env_spec  # noqa: E402
from pearl.hostinfo import cpu_name  # noqa: E402
from pearl.kernels import Precision  # noqa: E402

#: algo → the preset's environment (its network and batch are the preset's)
WORKLOADS = {"dqn": "CartPole-v1", "ddpg": "Pendulum-v1", "td3": "Pendulum-v1", "sac": "Pendulum-v1"}
#: side → (precision, the narrowest layer that runs in bfloat16)
SIDES = {"fp32": (Precision.FP32, nets.MIXED_MIN_WIDTH), "bf16-mixed": (Precision.BF16_MIXED, nets.MIXED_MIN_WIDTH),
         "bf16 every layer": (Precision.BF16_MIXED, 1)}


def build(cpu: TorchAdapter, config, spec, params, side: str):
    precision, min_width = SIDES[side]
    previous, nets.MIXED_MIN_WIDTH = nets.MIXED_MIN_WIDTH, min_width  # read when each network is built
    try:
        return cpu.make_learn(config, spec, params, precision=precision)
    finally:
        nets.MIXED_MIN_WIDTH = previous


def compare(cpu: TorchAdapter, algo: str, rounds: int, updates: int) -> None:
    """Print each round's µs per update of every side, then the medians and the median per-round ratios."""
    env_id = WORKLOADS[algo]
    config, spec = preset(algo, env_id), env_spec(env_id)
    params = init_params(config, spec, seed=0)
    kernels = {side: build(cpu, config, spec, params, side) for side in SIDES}
    work = batches(cpu, spec, config.batch_size, updates)
    for kernel in kernels.values():  # warm-up: first calls allocate buffers and Adam state
        time_updates(kernel, work[:10], cpu)
    print(f"{algo} {env_id}: hidden {'-'.join(map(str, config.hidden))}, batch {config.batch_size}, "
          f"{torch.get_num_threads()} thread(s), {updates} updates a side a round", flush=True)
    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    for r, first, timed in timed_rounds(list(SIDES), rounds, lambda side: time_updates(kernels[side], work, cpu)):
        for side, value in timed.items():
            seconds[side].append(value)
        print(f"  round {r + 1} ({first} first): " + ", ".join(f"{side} {timed[side] * 1e6:8.1f} us" for side in SIDES),
              flush=True)
    median = {side: statistics.median(v) * 1e6 for side, v in seconds.items()}

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(seconds[a], seconds[b]))

    print(f"  medians over {rounds} runs a side (us per update): "
          + ", ".join(f"{side} {median[side]:.1f}" for side in SIDES)
          + f"; bf16-mixed / fp32 {ratio('bf16-mixed', 'fp32'):.3f}, "
          f"bf16-mixed / bf16 every layer {ratio('bf16-mixed', 'bf16 every layer'):.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--what", nargs="+", choices=sorted(WORKLOADS), default=sorted(WORKLOADS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--updates", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cpu = TorchAdapter("cpu")
    print(f"{cpu_name()}, {os.cpu_count()} cores, torch {torch.__version__}")
    for algo in args.what:
        compare(cpu, algo, args.rounds, args.updates)
    verdict = precision_problem(HOST_DEVICE, Precision.BF16_MIXED)
    print(f"precision_problem(bf16-mixed) on cpu: {verdict or 'none: bf16 products are at least as fast as float32'}")


if __name__ == "__main__":
    main()
