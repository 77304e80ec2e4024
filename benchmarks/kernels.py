"""Time every device kernel of the catalogue, per algorithm preset and per device, and print one table each.

    python benchmarks/kernels.py [--devices cpu opencl:0:0] [--algo dqn ddpg] [--seconds 1.0] [--prioritized]
                                 [--threads 1] [--seed 0]

What is measured, at the sizes of the presets (DQN CartPole-v1, DDPG Pendulum-v1: their networks, batch
sizes and buffer sizes), on each device through its adapter:

- ``act``: one observation, as an actor stepping one env calls it; explore is the preset's final ε (DQN)
  or its action-noise σ (DDPG);
- ``replay_insert``: one transition (a TransitionBatch of length 1) into a buffer of the preset's capacity,
  pre-filled with 10,000 transitions;
- ``replay_sample``: the preset's batch size, beta 0.4;
- ``learn``: one update on a batch freshly sampled from the same device's replay (drawn before the clock
  starts), so the batch is resident on the device, as in training;
- ``priority_update``: the TD errors of a learn call fed back to the same replay for the sampled slots (the
  sample and the learn happen before the clock starts). Uniform replay makes it a no-op; its row says so.

How: every kernel gets warm-up calls first (5, and 10 for learn), then is repeated until --seconds of wall
time have passed. Each call is timed on its own: its inputs are prepared and the device synchronized
before the clock starts, then start, call, adapter.synchronize(), stop. The tables give the median in
microseconds per device, the p90 and the number of timed calls, and each later device's median over the
first device's. Devices alternate kernel by kernel (cpu act, opencl act, cpu insert, ...) so slow drift
on the machine hits every device alike. Parameters, exploration streams, replay samplers and the data fed
to each device come from the same seeds, so every device sees the same inputs and runs are comparable.

--threads sets torch's intra-op threads (1 by default, as pearl trains without a plan or profile); it does not
limit an OpenCL CPU device such as PoCL, which runs kernels on its own thread pool. Not a test: the numbers
depend on the machine, on its load and on the OpenCL implementation.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from pearl.adapters.base import Adapter
from pearl.adapters.registry import discover, open_adapter
from pearl.algos import preset
from pearl.algos.base import OffPolicyConfig
from pearl.algos.params import init_params
from pearl.envs import env_spec
from pearl.errors import PearlError
from pearl.hostinfo import cpu_name
from pearl.kernels import DEVICE_KERNELS
from pearl.profiler.timing import durations
from pearl.types import EnvSpec, PriorityUpdate, SampleBatch, TransitionBatch

#: The preset each algorithm is timed at.
ENVS = {"dqn": "CartPole-v1", "ddpg": "Pendulum-v1"}
PREFILL = 10_000
BETA = 0.4
WARMUP = {"learn": 10}
DEFAULT_WARMUP = 5
EXIT_USER_ERROR = 2

Prepare = Callable[[], Any]
Call = Callable[[Any], Any]


@dataclass
class Timing:
    kernel: str
    batch: int
    us: np.ndarray  # per-call durations in microseconds
    note: str = ""

    @property
    def median(self) -> float:
        return float(np.median(self.us))

    @property
    def p90(self) -> float:
        return float(np.percentile(self.us, 90))


# ---------------------------------------------------------------------------------------------- timing
def time_calls(prepare: Prepare, call: Call, sync: Callable[[], None], seconds: float, warmup: int) -> np.ndarray:
    """Per-call microseconds of call(prepare()), each up to sync(); at least one call."""
    return np.asarray(durations(call, sync, prepare=prepare, min_time=seconds, warmup=warmup, min_samples=1)) * 1e6


def random_transitions(rng: np.random.Generator, spec: EnvSpec, count: int) -> TransitionBatch:
    """count transitions with random contents (actions valid for spec; about 1 % terminal)."""
    action = (rng.integers(0, spec.action_dim, count) if spec.discrete
              else rng.uniform(-1, 1, (count, spec.action_dim)).astype(np.float32))
    return TransitionBatch(rng.normal(size=(count, spec.obs_dim)).astype(np.float32), action,
                           rng.normal(size=count).astype(np.float32),
                           rng.normal(size=(count, spec.obs_dim)).astype(np.float32),
                           (rng.random(count) < 0.01).astype(np.float32))


def explore_rate(config: OffPolicyConfig) -> float:
    """The preset's exploration: final ε for DQN, action-noise σ for DDPG."""
    return config.exploration_final_eps if config.algo == "dqn" else config.action_noise


# ---------------------------------------------------------------------------------------------- kernels
@dataclass
class DeviceBench:
    """One device's kernels for one preset, with the seeded data it is fed and the last learn's output."""

    adapter: Adapter
    config: OffPolicyConfig
    spec: EnvSpec
    seed: int
    ops: dict[str, tuple[int, Prepare, Call]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        config, spec, a = self.config, self.spec, self.adapter
        params = init_params(config, spec, self.seed)
        self.rng = np.random.default_rng(self.seed)  # the same stream on every device: the same inputs
        self.actor = a.make_act(config, spec, params, self.seed)
        self.learner = a.make_learn(config, spec, params)
        self.replay = a.make_replay(config, spec, self.seed)
        self.replay.insert(random_transitions(self.rng, spec, PREFILL))
        if config.prioritized:  # a tree of unequal priorities, as after some training
            self.replay.update_priorities(PriorityUpdate(np.arange(PREFILL), self.rng.exponential(size=PREFILL)))
        a.synchronize()
        self.explore = explore_rate(config)
        self.ops = {
            "act": (1, self._one_obs, lambda obs: self.actor.act(obs, self.explore)),
            "replay_insert": (1, lambda: random_transitions(self.rng, spec, 1), self.replay.insert),
            "replay_sample": (config.batch_size, lambda: None,
                              lambda _: self.replay.sample(config.batch_size, BETA)),
            "learn": (config.batch_size, self._sample, self.learner.learn),
            "priority_update": (config.batch_size, self._learned_update, self.replay.update_priorities),
        }

    def _one_obs(self) -> np.ndarray:
        return self.rng.normal(size=(1, self.spec.obs_dim)).astype(np.float32)

    def _sample(self) -> SampleBatch:
        return self.replay.sample(self.config.batch_size, BETA)

    def _learned_update(self) -> PriorityUpdate:
        """Sample, learn, and hand back that learn call's TD errors for the sampled slots (device-native)."""
        batch = self._sample()
        return PriorityUpdate(batch.indices, self.learner.learn(batch).td_errors)

    def time(self, kernel: str, seconds: float) -> Timing:
        batch, prepare, call = self.ops[kernel]
        us = time_calls(prepare, call, self.adapter.synchronize, seconds, WARMUP.get(kernel, DEFAULT_WARMUP))
        note = "(no-op: uniform)" if kernel == "priority_update" and not self.config.prioritized else ""
        return Timing(kernel, batch, us, note)


def bench_algo(algo: str, adapters: list[Adapter], args: argparse.Namespace) -> dict[str, list[Timing]]:
    """Timings of every device kernel on every adapter, alternating devices kernel by kernel."""
    config = preset(algo, ENVS[algo]).replace(prioritized=args.prioritized)
    spec = env_spec(ENVS[algo])
    benches = [DeviceBench(a, config, spec, args.seed) for a in adapters]
    results: dict[str, list[Timing]] = {a.device_id: [] for a in adapters}
    for kernel in DEVICE_KERNELS:
        for bench in benches:
            results[bench.adapter.device_id].append(bench.time(kernel, args.seconds))
    return results


# ---------------------------------------------------------------------------------------------- report
def print_header(adapters: list[Adapter], args: argparse.Namespace) -> None:
    found = {d.id: d for d in discover().devices}  # what `pearl devices --json` lists
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs, torch {torch.__version__}, numpy {np.__version__}")
    print(f"torch threads: {torch.get_num_threads()} (--threads {args.threads}; OpenCL CPU devices use their own)")
    for a in adapters:
        info = found.get(a.device_id)
        detail = f"{info.name}; {info.note}" if info is not None else "?"
        print(f"device: {a.device_id:<12} {a.backend:<7} {detail}")
    replay = "prioritized" if args.prioritized else "uniform"
    print(f"replay: {replay}, pre-filled with {PREFILL} transitions; sample beta {BETA}; seed {args.seed}; "
          f"{args.seconds:g} s per kernel and device after warm-up")


def print_table(algo: str, config: OffPolicyConfig, results: dict[str, list[Timing]]) -> None:
    devices = list(results)
    first = devices[0]
    print(f"\n{algo} {ENVS[algo]}: hidden {list(config.hidden)}, batch {config.batch_size}, "
          f"buffer {config.buffer_size}, explore {explore_rate(config):g}")
    cells = [f"{'kernel':<16} {'batch':>5}"]
    cells += [f"{d + ' µs':>18} {'p90':>9} {'calls':>6}" for d in devices]
    cells += [f"{d.split(':')[0] + '/' + first.split(':')[0]:>11}" for d in devices[1:]]
    print("  ".join(cells))
    for i, kernel in enumerate(DEVICE_KERNELS):
        rows = [results[d][i] for d in devices]
        cells = [f"{kernel:<16} {rows[0].batch:>5}"]
        cells += [f"{r.median:>18.1f} {r.p90:>9.1f} {r.us.size:>6}" for r in rows]
        cells += [f"{r.median / rows[0].median:>10.2f}x" for r in rows[1:]]
        print("  ".join(cells) + (f"  {rows[0].note}" if rows[0].note else ""))


# ---------------------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", nargs="+", default=["cpu", "opencl:0:0"], help="device ids, first = baseline")
    parser.add_argument("--algo", nargs="+", choices=list(ENVS), default=list(ENVS))
    parser.add_argument("--seconds", type=float, default=1.0, help="timed wall time per kernel and device")
    parser.add_argument("--prioritized", action="store_true", help="proportional prioritized replay")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (pearl trains with 1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.threads < 1:
        parser.error("--seconds must be > 0 and --threads >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        adapters = [open_adapter(d, threads=args.threads) for d in args.devices]
        print_header(adapters, args)
        for algo in args.algo:
            results = bench_algo(algo, adapters, args)
            print_table(algo, preset(algo, ENVS[algo]), results)
    except PearlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)


if __name__ == "__main__":
    main()
