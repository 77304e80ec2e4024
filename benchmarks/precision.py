"""Time the torch adapter's learn in fp32 against bf16-mixed (pearl.kernels.Precision) on the CPU: DQN (CartPole-v1,
256-256, batch 64) and DDPG (Pendulum-v1, 400-300, batch 256), then print the backend's `precision_problem`
verdict for bf16-mixed (pearl.adapters.registry).

    python benchmarks/precision.py [--what dqn ddpg] [--threads 1] [--rounds 5] [--updates 100]

Both precisions start from the same parameters and learn on the same batches (learn_paths.batches). Each round
times --updates learn calls of one precision, then of the other, alternating which goes first, so the machine's
drift falls on both. It prints each round's microseconds per update and bf16 ÷ fp32, then the medians over the
rounds. Not a test: the ratio depends on the machine (whether its CPU has bf16 units), the threads and the sizes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learn_paths import batches, time_updates  # noqa: E402 - the benchmark beside this one

from pearl.adapters.registry import precision_problem  # noqa: E402
from pearl.adapters.torch import TorchAdapter  # noqa: E402
from pearl.algos import preset  # noqa: E402
from pearl.algos.params import init_params  # noqa: E402
from pearl.device import HOST_DEVICE  # noqa: E402
from pearl.envs import env_spec  # noqa: E402
from pearl.hostinfo import cpu_name  # noqa: E402
from pearl.kernels import Precision  # noqa: E402

#: algo → (environment, hidden, batch): the issue's two workloads
WORKLOADS = {"dqn": ("CartPole-v1", (256, 256), 64), "ddpg": ("Pendulum-v1", (400, 300), 256)}


def compare(cpu: TorchAdapter, algo: str, rounds: int, updates: int) -> float:
    """Print each round's µs per update of both precisions; returns the median bf16 ÷ fp32."""
    env_id, hidden, batch_size = WORKLOADS[algo]
    config, spec = preset(algo, env_id).replace(hidden=hidden, batch_size=batch_size), env_spec(env_id)
    params = init_params(config, spec, seed=0)
    sides = {p: cpu.make_learn(config, spec, params, precision=p) for p in (Precision.FP32, Precision.BF16_MIXED)}
    work = batches(cpu, spec, config.batch_size, updates)
    for kernel in sides.values():  # warm-up: first calls allocate buffers and Adam state
        time_updates(kernel, work[:10])
    print(f"{algo} {env_id}: hidden {'-'.join(map(str, hidden))}, batch {batch_size}, "
          f"{torch.get_num_threads()} thread(s), {updates} updates a side a round", flush=True)
    seconds: dict[Precision, list[float]] = {p: [] for p in sides}
    ratios = []
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for p in order:
            seconds[p].append(time_updates(sides[p], work))
        fp32, bf16 = seconds[Precision.FP32][-1], seconds[Precision.BF16_MIXED][-1]
        ratios.append(bf16 / fp32)
        print(f"  round {r + 1} ({order[0].value} first): fp32 {fp32 * 1e6:9.1f} us, bf16-mixed {bf16 * 1e6:9.1f} us, "
              f"bf16 / fp32 {ratios[-1]:.3f}", flush=True)
    median = {p: statistics.median(s) * 1e6 for p, s in seconds.items()}
    print(f"  medians over {rounds} runs a side: fp32 {median[Precision.FP32]:.1f} us, bf16-mixed "
          f"{median[Precision.BF16_MIXED]:.1f} us per update; bf16 / fp32 {statistics.median(ratios):.3f}", flush=True)
    return statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--what", nargs="+", choices=sorted(WORKLOADS), default=sorted(WORKLOADS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
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
