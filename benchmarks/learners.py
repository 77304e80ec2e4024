"""How fast does a learner group learn? 1, 2 and 4 learners on this machine's CPU, one learner with as many
threads as the group has processes beside them. (Not a test: it prints.)

    python benchmarks/learners.py [--updates 200] [--rounds 3] [--learners 1 2 4] [--device cpu|cuda:0]
                                  [--profile PROFILE]

For each workload (the DQN CartPole-v1 and DDPG Pendulum-v1 presets, and a large network: DDPG with hidden
1024-1024 at batch 1024) and each side (N learners of one thread each, and one learner of N threads), the
same fixed batches are learnt for --updates updates, and the script prints updates/s and, for a group, the
seconds per update it spent communicating (learner 0's time in the group's collectives, the scatter of the
rows, the gradient all-gathers and the gather of the TD errors, waiting for the others included: the
group's own clock, `GroupComm.comm_s`, which a run records as `group_comm`). The sides take turns within each
round, rounds repeat, and every ratio is against one learner of one thread in the same round; the medians over
the rounds are printed last. The group's learners are the local launcher's own learner processes
(`pearl.runtime.learner_group`). With `--device cuda:N` every learner runs on that GPU (their gradients still
travel through host memory) and there is no threads side: one learner on the GPU against N learner processes
sharing it (time-sliced, or concurrently when an MPS control daemon is running: start one before, with
CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY set, and the learners become its clients).

With `--profile` (a `pearl profile` of this machine) each group size's measured figures are set against what
the planner prices for it (`pearl.planner.build.build_problem` with that many learners, learn as it runs alone:
its cost over the learner iteration's in-situ factor; the communication: the plan's `group_comm`), as medians
over the rounds. A group across the nodes of a cluster is a `pearl train` run of a cluster plan
(docs/MEASUREMENTS.md, "A learner group across two nodes").
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pearl.adapters.torch import TorchAdapter
from pearl.algos import preset
from pearl.algos.params import init_params
from pearl.envs import env_spec
from pearl.errors import PearlError
from pearl.profile.format import Profile, load_profile
from pearl.hostinfo import cpu_name
from pearl.adapters.learner_group import dead_learner, open_group, stop_learners
from pearl.runtime.learner_group import GroupLearner
from pearl.types import SampleBatch

SEED = 0


@dataclass(frozen=True)
class Workload:
    name: str
    algo: str
    env: str
    settings: dict[str, str]

    def config_and_spec(self) -> tuple[Any, Any]:
        config = preset(self.algo, self.env)
        return (config.with_text(self.settings) if self.settings else config), env_spec(self.env)


WORKLOADS = (Workload("dqn-cartpole", "dqn", "CartPole-v1", {}),
             Workload("ddpg-pendulum", "ddpg", "Pendulum-v1", {}),
             Workload("ddpg-1024x1024-b1024", "ddpg", "Pendulum-v1", {"hidden": "1024,1024", "batch_size": "1024"}))


def batches(workload: Workload, adapter: TorchAdapter, count: int) -> list[SampleBatch]:
    config, spec = workload.config_and_spec()
    rng = np.random.default_rng(1)
    b = config.batch_size
    out = []
    for _ in range(count):
        action = (rng.integers(0, spec.action_dim, b) if spec.discrete
                  else rng.uniform(-1, 1, (b, spec.action_dim)).astype(np.float32))
        arrays = {"obs": rng.normal(size=(b, spec.obs_dim)).astype(np.float32), "action": action,
                  "reward": rng.normal(size=b).astype(np.float32),
                  "next_obs": rng.normal(size=(b, spec.obs_dim)).astype(np.float32),
                  "terminated": (rng.random(b) < 0.05).astype(np.float32), "weights": np.ones(b, np.float32)}
        t = {k: adapter.from_host(v) for k, v in arrays.items()}
        out.append(SampleBatch(np.arange(b), t["obs"], t["action"], t["reward"], t["next_obs"], t["terminated"],
                               t["weights"], adapter.device_id))
    return out


def one_learner(workload: Workload, threads: int, updates: int, device: str) -> tuple[float, float]:
    torch.set_num_threads(threads)
    adapter = TorchAdapter(device)
    config, spec = workload.config_and_spec()
    kernel = adapter.make_learn(config, spec, init_params(config, spec, SEED), SEED)
    work = batches(workload, adapter, updates)
    kernel.learn(work[0])  # warm-up
    adapter.synchronize()
    t0 = time.perf_counter()
    for batch in work:
        kernel.learn(batch)
    adapter.synchronize()
    return updates / (time.perf_counter() - t0), 0.0


def group(workload: Workload, learners: int, updates: int, device: str) -> tuple[float, float]:
    torch.set_num_threads(1)
    adapter = TorchAdapter(device)
    config, spec = workload.config_and_spec()
    kernel = adapter.make_learn(config, spec, init_params(config, spec, SEED), SEED)
    procs: list = []
    comm = open_group(adapter, kernel, config, spec, learners, 1, SEED, procs)
    learner = GroupLearner(kernel, adapter, config, comm, 0, lambda: dead_learner(procs))
    try:
        work = batches(workload, adapter, updates)
        learner.update(work[0])  # warm-up (and every learner has joined)
        comm_s = comm.comm_s
        t0 = time.perf_counter()
        for batch in work:
            learner.update(batch)
        adapter.synchronize()
        elapsed = time.perf_counter() - t0
        return updates / elapsed, (comm.comm_s - comm_s) / updates
    finally:
        learner.close()
        stop_learners(procs)


def predicted(profile: Profile, workload: Workload, learners: list[int]) -> dict[int, tuple[float, float]]:
    """{N: (updates/s, seconds an update communicating)} as the planner prices a group of N one-thread learners
    learning alone (N = 1: one learner of one thread) from the profile."""
    from pearl.costmodel import CostModel
    from pearl.planner.build import build_problem
    from pearl.profile.format import config_workload

    model = CostModel(profile)
    config, spec = workload.config_and_spec()
    factor = model.in_situ_factor("cpu", config_workload(config, spec).key)
    out = {}
    for n in sorted({1, *learners}):
        problem, _ = build_problem(profile, model, workload.algo, spec, config=config, learners=n,
                                   beside_actors=False)
        out[n] = (factor / problem.cost[("learn", "cpu")], problem.group_comm_s.get("cpu", 0.0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--learners", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--workloads", nargs="+", default=[w.name for w in WORKLOADS])
    parser.add_argument("--device", default="cpu", help="cpu, or cuda:N for every learner on that GPU")
    parser.add_argument("--profile", help="a profile of this machine: print the planner's figures beside (cpu)")
    args = parser.parse_args()
    on_gpu = args.device != "cpu"
    profile = load_profile(args.profile) if args.profile and not on_gpu else None
    where = torch.cuda.get_device_name(torch.device(args.device)) if on_gpu else "its CPU"
    print(f"# {cpu_name()}, {os.cpu_count()} cores, {platform.python_version()}, torch {torch.__version__}; "
          f"learners on {args.device} ({where}); {args.updates} updates a side, {args.rounds} rounds, sides "
          f"alternated within each round")
    for workload in (w for w in WORKLOADS if w.name in args.workloads):
        updates = max(20, args.updates // (8 if "1024" in workload.name else 1))
        ratios: dict[str, list[float]] = {}
        measured: dict[int, list[tuple[float, float]]] = {}
        for r in range(args.rounds):
            base, _ = one_learner(workload, 1, updates, args.device)
            measured.setdefault(1, []).append((base, 0.0))
            line = [f"{workload.name} round {r + 1}: 1 learner x 1 thread {base:8.1f} updates/s"]
            for n in (n for n in args.learners if n > 1):
                if not on_gpu:
                    threads_rate, _ = one_learner(workload, n, updates, args.device)
                    ratios.setdefault(f"1 learner x {n} threads", []).append(threads_rate / base)
                    line.append(f"1x{n}t {threads_rate:8.1f} ({threads_rate / base:.2f}x)")
                group_rate, comm_s = group(workload, n, updates, args.device)
                measured.setdefault(n, []).append((group_rate, comm_s))
                ratios.setdefault(f"{n} learners x 1 thread", []).append(group_rate / base)
                ratios.setdefault(f"{n} learners: communication ms/update", []).append(comm_s * 1e3)
                line.append(f"{n} learners {group_rate:8.1f} ({group_rate / base:.2f}x, {comm_s * 1e3:.2f} ms/update "
                            f"communicating)")
            print(" | ".join(line), flush=True)
        for name, values in ratios.items():
            unit = "" if "ms" in name else "x"
            print(f"  {workload.name}: {name}: median {statistics.median(values):.2f}{unit} of {len(values)} rounds "
                  f"(min {min(values):.2f}, max {max(values):.2f})")
        if profile is not None:
            try:
                prices = predicted(profile, workload, list(measured))
            except PearlError as exc:
                print(f"  {workload.name}: no prediction: {exc}")
                continue
            for n, (rate, comm) in prices.items():
                got = statistics.median(m[0] for m in measured[n])
                line = f"  {workload.name}: {n} learner(s): predicted {rate:.1f} updates/s, measured {got:.1f} " \
                       f"(median; {got / rate:.2f}x)"
                if n > 1:
                    spent = statistics.median(m[1] for m in measured[n])
                    line += f"; communicating {comm * 1e3:.2f} ms/update predicted, {spent * 1e3:.2f} measured " \
                            f"({spent / comm:.2f}x)"
                print(line)


if __name__ == "__main__":
    main()
