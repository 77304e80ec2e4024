"""Time the torch adapter's hand-derived learn (pearl/adapters/torch/dqn.py, ddpg.py, td3.py, sac.py) against its
algorithm's autograd reference (pearl/adapters/torch/reference.py), on the presets' networks and batches; on a
CUDA device also the hand-derived update captured as CUDA graphs (pearl/adapters/torch/graphs.py) against the
same update run eagerly.

    python benchmarks/learn_paths.py [--what dqn ddpg td3 sac] [--device cpu|cuda:0] [--threads 1] [--rounds 4]
        [--updates 200]

Every side gets the same initial parameters and the same batches (random data on the host, moved to torch tensors
once). Each round times --updates learn calls of each side in turn (the device synchronised before the clock
stops), rotating which goes first, so the machine's drift falls on all. It prints each round's microseconds per
update and each side ÷ reference (and captured ÷ eager), then the medians over the rounds. Then each update again
with its batch drawn from a replay of 10,000 random transitions on the same device (on a CUDA device: replay's
gather and the update captured, against both eager). Not a test: the ratios depend on the machine, the thread count
and the sizes.
"""

from __future__ import annotations

import argparse
import contextlib
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
from pearl.types import SampleBatch, TransitionBatch

WORKLOADS = {"dqn": "CartPole-v1", "ddpg": "Pendulum-v1", "td3": "Pendulum-v1", "sac": "Pendulum-v1"}


def random_transitions(spec, size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """obs, action, reward, next_obs, terminated: `size` random transitions of `spec`'s shapes, on the host."""
    action = (rng.integers(0, spec.action_dim, size) if spec.discrete
              else rng.uniform(-1, 1, (size, spec.action_dim)).astype(np.float32))
    return [rng.normal(size=(size, spec.obs_dim)).astype(np.float32), action, rng.normal(size=size).astype(np.float32),
            rng.normal(size=(size, spec.obs_dim)).astype(np.float32), (rng.random(size) < 0.05).astype(np.float32)]


def batches(adapter: TorchAdapter, spec, size: int, count: int, seed: int = 0) -> list[SampleBatch]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        arrays = [*random_transitions(spec, size, rng), np.ones(size, np.float32)]
        obs, act, reward, next_obs, done, weights = (adapter.from_host(a) for a in arrays)
        out.append(SampleBatch(np.arange(size), obs, act, reward, next_obs, done, weights, adapter.device_id))
    return out


def timed_rounds(names: list[str], rounds: int, seconds_of):
    """(round, the side timed first, {side: seconds_of(side)}) for each round, the sides timed in turn with the
    first side rotating, so the machine's drift falls on all."""
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        yield r, order[0], {name: seconds_of(name) for name in order}


def time_updates(kernel, work: list[SampleBatch], adapter: TorchAdapter) -> float:
    """Seconds per learn call over `work`, the device's queue drained before the clock stops."""
    adapter.synchronize()
    start = time.perf_counter()
    for batch in work:
        kernel.learn(batch)
    adapter.synchronize()
    return (time.perf_counter() - start) / len(work)


def sides_for(algo: str, device: str) -> tuple[TorchAdapter, dict, object]:
    """The kernels to time on `device`: "hand" as the adapter builds it (captured as CUDA graphs where it can
    be), "eager" (that kernel unwrapped, built afresh) when it is captured, and "reference"."""
    from pearl.adapters.torch.graphs import CapturedLearn

    env_id = WORKLOADS[algo]
    config, spec = preset(algo, env_id), env_spec(env_id)
    params = init_params(config, spec, seed=0)
    adapter = TorchAdapter(device)
    hand = adapter.make_learn(config, spec, params)
    sides = {"hand": hand}
    if isinstance(hand, CapturedLearn):
        sides = {"captured": hand, "eager": adapter.make_learn(config, spec, params).kernel}
    sides["reference"] = REFERENCES[algo](adapter.device, config, network_sizes(config, spec), params, 0)
    return adapter, sides, config


def compare(algo: str, rounds: int, updates: int, device: str = "cpu") -> list[float]:
    adapter, sides, config = sides_for(algo, device)
    spec, batch = env_spec(WORKLOADS[algo]), config.batch_size
    work = batches(adapter, spec, batch, updates)
    for kernel in sides.values():  # warm-up: first calls allocate buffers and Adam state (and capture graphs)
        time_updates(kernel, work[:20], adapter)
    print(f"{algo} {WORKLOADS[algo]} on {device}: hidden {'-'.join(map(str, config.hidden))}, batch {batch}, "
          f"{torch.get_num_threads()} thread(s), {updates} updates a side a round", flush=True)
    fast = "captured" if "captured" in sides else "hand"
    ratios, captured_ratios = [], []
    names = list(sides)
    for r, first, seconds in timed_rounds(names, rounds, lambda name: time_updates(sides[name], work, adapter)):
        ratios.append(seconds[fast] / seconds["reference"])
        line = ", ".join(f"{name} {seconds[name] * 1e6:8.1f} us" for name in names)
        line += f", {fast} / reference {ratios[-1]:.3f}"
        if "eager" in seconds:
            captured_ratios.append(seconds["captured"] / seconds["eager"])
            line += f", captured / eager {captured_ratios[-1]:.3f}"
        print(f"  round {r + 1} ({first} first): {line}", flush=True)
    print(f"  median {fast} / reference over {rounds} rounds: {statistics.median(ratios):.3f}", flush=True)
    if captured_ratios:
        print(f"  median captured / eager over {rounds} rounds: {statistics.median(captured_ratios):.3f}", flush=True)
    return ratios


def filled_replay(adapter: TorchAdapter, config, spec, transitions: int = 10_000):
    """A replay on the adapter's device holding `transitions` random transitions."""
    replay = adapter.make_replay(config, spec, seed=0)
    replay.insert(TransitionBatch(*random_transitions(spec, transitions, np.random.default_rng(1))))
    return replay


@contextlib.contextmanager
def graphs_off():
    """Kernels made inside run eagerly ($PEARL_CUDA_GRAPHS=0; replay's maker takes no implementation)."""
    os.environ["PEARL_CUDA_GRAPHS"] = "0"
    try:
        yield
    finally:
        del os.environ["PEARL_CUDA_GRAPHS"]


def time_drawn(replay, kernel, updates: int, batch: int, adapter: TorchAdapter) -> float:
    """Seconds per drawn update: a batch sampled from `replay`, then learned, the queue drained at the end."""
    adapter.synchronize()
    start = time.perf_counter()
    for _ in range(updates):
        kernel.learn(replay.sample(batch, 0.4))
    adapter.synchronize()
    return (time.perf_counter() - start) / updates


def compare_drawn(algo: str, rounds: int, updates: int, device: str = "cpu") -> None:
    """Sample and learn together: on a CUDA device, replay's gather and the update both captured (the update reads
    the replay's fixed buffers) against both eager; on the host, the one way there is."""
    from pearl.adapters.torch.graphs import CapturedLearn

    os.environ.pop("PEARL_CUDA_GRAPHS", None)
    env_id = WORKLOADS[algo]
    config, spec = preset(algo, env_id), env_spec(env_id)
    params, adapter = init_params(config, spec, seed=0), TorchAdapter(device)
    learn = adapter.make_learn(config, spec, params)
    sides = {"drawn": (filled_replay(adapter, config, spec), learn)}
    if isinstance(learn, CapturedLearn):
        with graphs_off():
            sides = {"captured": sides["drawn"],
                     "eager": (filled_replay(adapter, config, spec), adapter.make_learn(config, spec, params))}
    for replay, kernel in sides.values():
        time_drawn(replay, kernel, 20, config.batch_size, adapter)
    print(f"{algo} sample + learn on {device}, batch {config.batch_size}, {updates} updates a side a round",
          flush=True)
    names, ratios = list(sides), []
    def drawn(name: str) -> float:
        return time_drawn(*sides[name], updates, config.batch_size, adapter)

    for r, first, seconds in timed_rounds(names, rounds, drawn):
        line = ", ".join(f"{name} {seconds[name] * 1e6:8.1f} us" for name in names)
        if "eager" in seconds:
            ratios.append(seconds["captured"] / seconds["eager"])
            line += f", captured / eager {ratios[-1]:.3f}"
        print(f"  round {r + 1} ({first} first): {line}", flush=True)
    if ratios:
        print(f"  median captured / eager (sample + learn) over {rounds} rounds: {statistics.median(ratios):.3f}",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--what", nargs="+", choices=sorted(WORKLOADS), default=sorted(WORKLOADS))
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--updates", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}")
    for algo in args.what:
        compare(algo, args.rounds, args.updates, args.device)
        compare_drawn(algo, args.rounds, args.updates, args.device)


if __name__ == "__main__":
    main()
