"""The slice-aware program (ilp.py's (i) slices[r] family) against brute force, and plans on the H100 what-if
profile with slices: split the GPU when the model says that is faster, keep it whole when it is not.

The oracle states the slice rules again on its own (it does not call pearl.planner.ilp):
    used(d)   for a slice that gives each process its own instance (instances > 1): n actors if act is on d,
              + 1 if the learner process (replay kernels, learn) is on d; for any other device of a sliced
              GPU: 1 if anything is on d
    feasible  Σ_d share(d)·used(d) ≤ 1 per sliced GPU; used(d) ≤ instances(d); the learner process on one
              device of a sliced GPU; the slices in use all MIG or all MPS
    busy[r]   each kernel's seconds × share(d) on its device's resource
    instance  for a slice in use: its learner-process kernels, + act when all actors share its one instance
    contention  the n actor processes and the learner's on L host lanes, when N = n + 1 > L: each process
              loses κ = (N − L)/((N − 1)·L) of the others' host work (an actor's: its period when act is on the
              host, else its env stepping, env_cost/n): the learner process's host work + κ·n·that, and an
              actor's period + κ·(the learner's host work + (n − 1)·that); with n = L actors whose host work
              outruns the lane the learner leaves them (n·that > (L − 1)·the learner's), they take turns:
              n·that + the learner's host work
    memory    per device, the memory of the kernels on it; and on a GPU with MPS shares, the learner process's
              kernels on its MPS shares or on the whole GPU plus n × act's memory for the n actor processes there,
              all against the largest memory of those devices (the GPU's: they share one memory)
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from pathlib import Path

import pytest

from pearl.planner.ilp import evaluate, solve
from pearl.planner.problem import PLACED, REPLAY, ActorOption, Device, Edge, Problem, Resource

REL = 1e-6
EDGES = [Edge("batch", "replay_sample", "learn"), Edge("td_errors", "learn", "priority_update")]
LEARNER = (*REPLAY, "learn")


def random_slice_problem(seed: int) -> Problem:
    rng = random.Random(seed)
    resources = [Resource("host-cpu", rng.randint(2, 6), rng.uniform(5, 40), 0.0),
                 Resource("gpu", 1, rng.uniform(30, 70), 0.0)]
    resources = [Resource(r.id, r.lanes, r.idle_w, r.idle_w + rng.uniform(10, 300)) for r in resources]
    devices = [Device("cpu", "host-cpu", 24.0), Device("gpu", "gpu", rng.uniform(10, 60))]
    for i in range(rng.randint(1, 3)):
        share = rng.choice([1 / 7, 2 / 7, 3 / 7, 0.1, 0.25, 0.5])
        instances = rng.choice([1, 2, 3, 7]) if rng.random() < 0.7 else 1
        devices.append(Device(f"gpu/s{i}", "gpu", rng.uniform(4, 40), share=share, instances=instances,
                              slicing=rng.choice(["mig", "mps"])))
    cost, act_cost, actor_period = {}, {}, {}
    host_lanes = resources[0].lanes
    options = sorted({ActorOption(rng.randint(1, host_lanes), 4) for _ in range(3)}, key=lambda a: a.n)
    for d in devices:
        slow = 1.0 if d.id == "cpu" else rng.uniform(0.05, 0.3) / (d.share ** rng.uniform(0, 1))
        cost.update({(k, d.id): slow * rng.uniform(0.01, 0.4) for k in REPLAY})
        cost[("learn", d.id)] = slow * rng.uniform(0.1, 1.5)
        for a in options:
            act_cost[(a, d.id)] = slow * rng.uniform(0.2, 2.0)
            actor_period[(a, d.id)] = rng.uniform(0.05, 0.5) + act_cost[(a, d.id)] / a.n
    transfer = {}
    for e in EDGES:
        for d, d2 in itertools.product(devices, devices):
            if d.id != d2.id:
                transfer[(e.name, d.id, d2.id)] = rng.uniform(0.0, 0.1)
    memory = {}
    for d in devices:
        memory[("replay_insert", d.id)] = rng.uniform(0, 10)
        memory[("learn", d.id)] = rng.uniform(0, 4)
        memory[("act", d.id)] = rng.uniform(0, 10)  # n actor processes × this can fill an MPS GPU's memory
    return Problem(resources, devices, "host-cpu", "cpu", cost, act_cost, rng.uniform(0.0, 2.0), actor_period,
                   list(EDGES), transfer, memory, prefetch=True)


def account(p: Problem, where: dict[str, str], a: ActorOption):
    """(P, E) of one placement, or None: pearl's accounting with the slice rules, written out again."""
    devs = {d.id: d for d in p.devices}
    if len({where[k] for k in REPLAY}) != 1 or a.n > p.resources[0].lanes:
        return None
    for d in p.devices:
        if sum(p.memory.get((k, d.id), 0.0) for k in PLACED if where[k] == d.id) > d.memory_bytes:
            return None
    if mps_memory(p, where, a) is False:
        return None
    sliced = {d.resource for d in p.devices if d.share < 1 or d.instances > 1}
    learner_devs = {where[k] for k in LEARNER}
    used = {}
    for d in p.devices:
        if d.resource not in sliced:
            continue
        if d.instances > 1:
            used[d.id] = (a.n if where["act"] == d.id else 0) + (1 if d.id in learner_devs else 0)
        else:
            used[d.id] = 1 if d.id in where.values() else 0
        if used[d.id] > d.instances:
            return None
    for r in sliced:
        if sum(devs[d].share * u for d, u in used.items() if devs[d].resource == r) > 1 + 1e-9:
            return None
        if len({d for d in learner_devs if devs[d].resource == r}) > 1:
            return None
        if len({devs[d].slicing for d, u in used.items() if u and devs[d].resource == r and devs[d].slicing}) > 1:
            return None  # MIG instances and MPS shares of one GPU exclude each other

    def t(e):
        return p.transfer.get((e.name, where[e.src], where[e.dst]), 0.0)

    busy = {r.id: 0.0 for r in p.resources}
    for k in LEARNER:
        busy[devs[where[k]].resource] += p.cost[(k, where[k])] * devs[where[k]].share
    busy[devs[where["act"]].resource] += p.act_cost[(a, where["act"])] * devs[where["act"]].share
    busy[p.host] += p.env_cost
    for e in p.edges:
        if t(e) > 0:
            rs, rd = devs[where[e.src]].resource, devs[where[e.dst]].resource
            busy[rs] += t(e)
            if rd != rs:
                busy[rd] += t(e)
    lanes = {r.id: r.lanes for r in p.resources}
    lower = [busy[r] / lanes[r] for r in busy]
    lower.append(sum(p.cost[(k, where[k])] for k in REPLAY) + sum(t(e) for e in p.edges))  # both edges cross
    lower.append(p.cost[("learn", where["learn"])] + sum(t(e) for e in p.edges))
    period_a = p.actor_period[(a, where["act"])]
    lower.append(period_a)
    process = sum(p.cost[(k, where[k])] for k in LEARNER if devs[where[k]].resource == p.host) \
        + sum(t(e) for e in p.edges)
    lower.append(process)
    crowd = a.n + 1  # the actor processes and the learner's one thread
    if crowd > lanes[p.host]:
        on_host = period_a if devs[where["act"]].resource == p.host else min(period_a, p.env_cost / a.n)
        lost = (crowd - lanes[p.host]) / ((crowd - 1) * lanes[p.host])
        lower += [process + lost * a.n * on_host, period_a + lost * (process + (a.n - 1) * on_host)]
        if a.n == lanes[p.host] and a.n * on_host > (lanes[p.host] - 1) * process:
            lower.append(a.n * on_host + process)  # the actors and the learner take turns
    for d in p.devices:
        if (d.share < 1 or d.instances > 1) and d.id in where.values():
            work = sum(p.cost[(k, d.id)] for k in LEARNER if where[k] == d.id)
            if d.instances == 1 and where["act"] == d.id:
                work += p.act_cost[(a, d.id)]
            lower.append(work)
    period = max(lower)
    energy = sum(r.idle_w * period + (r.busy_w - r.idle_w) * busy[r.id] / r.lanes for r in p.resources)
    return period, energy


def mps_memory(p: Problem, where: dict[str, str], a: ActorOption) -> bool | None:
    """Whether the processes in each MPS GPU's one memory fit it (None: no GPU has MPS shares)."""
    gpus = {d.resource for d in p.devices if d.slicing == "mps"}
    if not gpus:
        return None
    for r in gpus:
        one = {d.id: d for d in p.devices if d.resource == r and d.slicing != "mig"}
        need = sum(p.memory.get((k, where[k]), 0.0) for k in LEARNER if where[k] in one)
        if where["act"] in one:
            need += a.n * p.memory.get(("act", where["act"]), 0.0)
        if need > max(d.memory_bytes for d in one.values()):
            return False
    return True


def brute_force(p: Problem) -> list[tuple[float, float, dict, ActorOption]]:
    ids = [d.id for d in p.devices]
    options = sorted({a for (a, _) in p.act_cost}, key=lambda a: a.n)
    out = []
    for act, replay, learn in itertools.product(ids, ids, ids):
        where = {"act": act, **{k: replay for k in REPLAY}, "learn": learn}
        for a in options:
            r = account(p, where, a)
            if r is not None:
                out.append((*r, where, a))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_slice_aware_program_matches_brute_force(seed: int) -> None:
    p = random_slice_problem(seed)
    points = brute_force(p)
    best = min(P for P, *_ in points)  # everything on the cpu is always feasible: memory 24 fits the maxima
    fast = solve(p, "throughput")
    assert fast.period_s == pytest.approx(best, rel=REL)
    assert fast.energy_j == pytest.approx(min(E for P, E, *_ in points if P <= best * (1 + 1e-7)), rel=REL)
    green = solve(p, "perf-per-watt")
    assert green.energy_j == pytest.approx(min(E for _, E, *_ in points), rel=REL)
    for plan in (fast, green):
        mine = account(p, plan.placement, plan.actors)
        assert mine is not None and mine[0] == pytest.approx(plan.period_s, rel=REL)
        assert evaluate(p, plan.placement, plan.actors)[:2] == pytest.approx(mine, rel=REL)


def test_shares_over_the_gpu_are_refused() -> None:
    half = Device("gpu/half", "gpu", 40.0, share=0.5, instances=4)
    devices = [Device("cpu", "host-cpu", 16.0), Device("gpu", "gpu", 80.0), half]
    two = ActorOption(2, 4)
    cost = {(k, d.id): 0.1 for k in LEARNER for d in devices}
    act = {(two, d.id): 0.1 for d in devices}
    p = Problem([Resource("host-cpu", 4, 10, 20), Resource("gpu", 1, 50, 300)], devices, "host-cpu", "cpu",
                cost, act, 0.1, dict(act), list(EDGES), {}, {}, prefetch=True)
    learner_on_cpu = {"act": half.id, **{k: "cpu" for k in REPLAY}, "learn": "cpu"}
    assert evaluate(p, learner_on_cpu, two) is not None  # two actors × 50 %: the whole GPU
    crowded = {**learner_on_cpu, "learn": half.id}
    assert evaluate(p, crowded, two) is None  # + the learner's 50 %: 150 %
    whole_and_slice = {**learner_on_cpu, "learn": "gpu"}
    assert evaluate(p, whole_and_slice, two) is None  # the whole GPU is used alone
    apart = {**learner_on_cpu, "act": "cpu", "learn": half.id, **{k: "gpu" for k in REPLAY}}
    assert evaluate(p, apart, two) is None  # the learner process holds one device of the GPU
    assert all(account(p, w, two) is None for w in (crowded, whole_and_slice, apart))


def test_mps_shares_of_one_gpu_share_its_memory() -> None:
    """Four actor processes on 25 % MPS shares would be fastest, and each share alone has room for a policy;
    but the four policies (3 bytes each) live in the GPU's one memory (10 bytes): mps_memory[gpu] allows three."""
    quarter = Device("gpu/mps:25", "gpu", 10.0, share=0.25, instances=4, slicing="mps")
    devices = [Device("cpu", "host-cpu", 100.0), Device("gpu", "gpu", 10.0), quarter]
    options = [ActorOption(n, 4) for n in range(1, 5)]
    cost = {(k, "cpu"): 0.01 for k in LEARNER}
    act = {(a, d.id): 0.4 for a in options for d in devices}
    # on shares of their own the actors act at once (the period falls with n); on the whole GPU or the cpu
    # they take turns
    period = {(a, d.id): 1 / a.n if d.id == quarter.id else 2.0 for a in options for d in devices}
    memory = {("act", d.id): 3.0 for d in devices}
    p = Problem([Resource("host-cpu", 4, 10, 20), Resource("gpu", 1, 50, 300)], devices, "host-cpu", "cpu",
                cost, act, 0.1, period, list(EDGES), {}, memory, prefetch=True)
    plan = solve(p, "throughput")
    assert plan.placement["act"] == quarter.id and plan.actors.n == 3, (plan.placement, plan.actors)
    assert plan.period_s == pytest.approx(1 / 3)
    four = {**plan.placement}
    assert evaluate(p, four, ActorOption(4, 4)) is None and account(p, four, ActorOption(4, 4)) is None
    assert account(p, four, ActorOption(3, 4))[0] == pytest.approx(plan.period_s)
    # a GPU with room for four policies: four shares (the row alone held them to three)
    roomy = Problem(p.resources, [devices[0], replace(devices[1], memory_bytes=12.0), quarter], p.host,
                    p.host_device, cost, act, 0.1, period, list(EDGES), {}, memory, prefetch=True)
    assert solve(roomy, "throughput").actors.n == 4


# ------------------------------------------------------------------------------------------------ H100 what-if
ROOT = Path(__file__).resolve().parent.parent


def _h100_profile(descriptor_path: Path, cores: int = 8, step_s: float = 2e-4):
    """A synthetic host (cores lanes, a slow CPU for act and learn, env steps of step_s) beside the H100 what-if
    GPU and its slices, for the DQN CartPole preset."""
    from pearl.algos import preset
    from pearl.descriptors import load_descriptor
    from pearl.device import HOST_RESOURCE, DeviceKind
    from pearl.profile.format import DeviceEntry, EnvStepTiming, KernelTiming, Power, Profile, Workload, workload_key
    from pearl.profiler.whatif import add_what_if

    config = preset("dqn", "CartPole-v1")
    key = workload_key("dqn", "CartPole-v1", 4, 2, tuple(config.hidden))
    profile = Profile("0", "2026-01-01T00:00:00+00:00", "quick", {"cpu": "synthetic", "cores": cores})
    profile.devices = [DeviceEntry("cpu", DeviceKind.CPU, "torch", "synthetic", cores, 64 << 30, "measured",
                                   HOST_RESOURCE)]
    profile.workloads = [Workload(key, "dqn", "CartPole-v1", 4, 2, tuple(config.hidden), config.batch_size,
                                  config.buffer_size)]
    seconds = {"act": 2e-3, "replay_insert": 2e-5, "replay_sample": 5e-5, "priority_update": 2e-5, "learn": 2e-2}
    for kernel, s in seconds.items():
        for batch in sorted({1, config.n_envs, config.batch_size}):
            profile.kernels.append(KernelTiming(key, kernel, "cpu", batch, s, s, s, 5, "measured"))
    profile.env_step = [EnvStepTiming("CartPole-v1", step_s, step_s, step_s, 5, "measured")]
    profile.power = [Power("cpu", 20.0, 100.0, "modelled", "descriptor")]
    add_what_if(profile, load_descriptor(descriptor_path))
    return profile


def _without_slices(p: Problem) -> Problem:
    """The same problem with the GPU offered whole only."""
    keep = {d.id for d in p.devices if not d.is_slice}
    return Problem(p.resources, [d for d in p.devices if d.id in keep], p.host, p.host_device,
                   {k: v for k, v in p.cost.items() if k[1] in keep},
                   {k: v for k, v in p.act_cost.items() if k[1] in keep}, p.env_cost,
                   {k: v for k, v in p.actor_period.items() if k[1] in keep}, p.edges,
                   {k: v for k, v in p.transfer.items() if k[1] in keep and k[2] in keep},
                   {k: v for k, v in p.memory.items() if k[1] in keep}, p.prefetch,
                   publish={k: v for k, v in p.publish.items() if k[1] in keep})


def _plan(profile):
    """The throughput plan with slices offered, and the best period with the GPU whole only."""
    from pearl.costmodel import CostModel
    from pearl.envs import env_spec
    from pearl.planner.build import build_problem

    problem, _ = build_problem(profile, CostModel(profile), "dqn", env_spec("CartPole-v1"))
    assert any(d.is_slice for d in problem.devices)
    return problem, solve(problem, "throughput"), solve(_without_slices(problem), "throughput").period_s


def _h100_with(tmp_path: Path, *replacements: tuple[str, str]) -> Path:
    """The H100 descriptor with lines replaced, written to tmp_path."""
    text = (ROOT / "devices" / "nvidia-h100-sxm5-80gb.toml").read_text()
    for line, new in replacements:
        assert line in text
        text = text.replace(line, new)
    path = tmp_path / "nvidia-h100-sxm5-80gb.toml"
    path.write_text(text)
    return path


#: an H100 whose launches cost a bare CUDA launch's 5 us (the descriptor's figure is pearl's torch path's, 63 us,
#: measured on an H200 host: a plan of the synthetic host below then keeps act on the CPU and the GPU whole)
FAST_LAUNCHES = ("launch_latency_s = 6.3e-5", "launch_latency_s = 5.0e-6")


def test_h100_what_if_splits_the_gpu_for_dqn_cartpole_when_that_is_faster(tmp_path) -> None:
    # kernels this small are launch-bound on the roofline: a slice runs them as fast as the whole GPU, so
    # actors and the learner each on a slice of their own, at once, beat them taking turns on the whole GPU
    # (with the learner the bottleneck, the actors' processes may share one slice: ties keep fewer devices)
    problem, plan, whole_period = _plan(_h100_profile(_h100_with(tmp_path, FAST_LAUNCHES)))
    assert plan.actors.n >= 4
    act, learn = problem.device(plan.placement["act"]), problem.device(plan.placement["learn"])
    assert act.is_slice and learn.is_slice and act.id != learn.id, plan.placement
    assert act.share + learn.share <= 1 + 1e-9  # two slices of one GPU
    assert plan.period_s < whole_period * 0.9


def test_h100_what_if_keeps_the_gpu_whole_when_slices_are_slower(tmp_path) -> None:
    # the same H100 with launches that cost nothing and a hundredth of its FLOP/s and bandwidth: every kernel
    # is bound by work, which a slice does at its share of the SMs, so splitting only slows it down
    path = _h100_with(tmp_path, ("launch_latency_s = 6.3e-5", "launch_latency_s = 0.0"),
                      ("fp32_peak_flops = 67.0e12", "fp32_peak_flops = 6.7e9"),
                      ("memory_bandwidth_bytes_per_s = 3.35e12", "memory_bandwidth_bytes_per_s = 3.35e9"))
    problem, plan, whole_period = _plan(_h100_profile(path))
    used = {plan.placement[k] for k in PLACED}
    assert "whatif:nvidia-h100-sxm5-80gb" in used, plan.placement
    assert not any(problem.device(d).is_slice for d in used), plan.placement
    assert plan.period_s == pytest.approx(whole_period, rel=1e-6)


def test_the_plan_shows_the_split(capsys, tmp_path) -> None:
    from cli_support import run_cli
    from pearl.planner.plan import load_plan
    from pearl.profile.format import save_profile

    profile = save_profile(_h100_profile(_h100_with(tmp_path, FAST_LAUNCHES)), tmp_path / "p.json")
    code, out, err = run_cli(capsys, "plan", "--profile", str(profile), "--algo", "dqn", "--env", "CartPole-v1",
                             "--out", str(tmp_path / "plan.json"))
    assert code == 0, err
    plan = load_plan(tmp_path / "plan.json")
    by_role = {tuple(s["roles"]): s for s in plan.slices}
    actors, learner = by_role[("actors",)], by_role[("learner",)]
    # the processes holding a slice each: every actor on a slice of its own, or all of them on one
    assert actors["processes"] in (1, plan.actors) and plan.actors >= 4 and actors["device"] == plan.mapping["act"]
    assert learner["device"] == plan.mapping["learn"] and learner["processes"] == 1
    assert actors["share"] * actors["processes"] + learner["share"] <= 1 + 1e-9
    holders = f"{plan.actors} process(es) ×" if actors["processes"] > 1 else \
        f"{plan.actors} process(es) sharing one slice of"
    assert f"split: actors on {actors['device']}, {holders}" in out
