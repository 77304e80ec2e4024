"""The integer program against brute force on small random problems, plus its names, errors and Pareto front.

The oracle below enumerates every allowed device of every placed kernel and every actor option, and states
the accounting again on its own (it does not call pearl.planner.ilp.evaluate):
    busy[r] = kernel costs on r + act cost + env cost on the host + each positive transfer on the resources of
              its two ends (once when they coincide), each kernel's and act's cost × its device share β
              (p.device_share, 1 when absent; the publishes whole); load[r] = busy[r] / lanes(r)
    role[name] = its kernels' costs + transfers of edges with exactly one end in it
    actor_period, latency (no prefetch only), process[learner] = the replay kernels and learn that sit on
    the host resource + the sample→learn and learn→priority transfers; P = the largest;
    E = Σ idle·P + (busy_w − idle_w)·busy/lanes
    learn's cost includes the learner's weight publishes for the option, publish[a, d]
    contention: the n actor processes and the learner's T threads, N = n + T, on L host lanes, when N > L:
    an actor's host work h is its period (all of it when act is on the host resource, else the env stepping,
    env_cost/n); a one-thread process loses (N − L)/((N − 1)·L) of the others' lane-seconds, a learner of
    T > 1 threads all of them: process[learner] + κ_T·n·h, and one actor's period + κ_1·(T·process[learner]
    + (n − 1)·h); with T = 1 and n = L actors whose host work outruns the learner's spare lanes (n·h > (L − 1)·
    process[learner]), they take turns: n·h + process[learner]
    the learner's T threads (p.learner_threads): learn on the host device keeps T lanes busy, T × its cost in
    busy[host]
    infeasible: replay kernels apart, memory over capacity, n > host lanes (one lane per actor process; the
    roles share lanes through the load rows).
"""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from pearl.errors import PearlError
from pearl.planner.ilp import PlanError, PlanInfeasible, evaluate, pareto, solve
from pearl.planner.problem import PLACED, REPLAY, ActorOption, Device, Edge, Problem, Resource

try:
    import highspy  # noqa: F401

    DEFAULT_SOLVER = "HiGHS"
except ImportError:  # the documented fallback
    DEFAULT_SOLVER = "CBC"

REL = 1e-6
#: ids with the characters PuLP rewrites; "cuda:0" and "cuda-0" both sanitise to "cuda_0"
DEVICE_IDS = ["cpu", "opencl:0:0", "cuda:0", "cuda-0", "whatif:nvidia-a100", "gpu/mig 1g.10gb"]
EDGES = [
    Edge("obs", "env_step", "act"),
    Edge("transitions", "act", "replay_insert"),
    Edge("batch", "replay_sample", "learn"),
    Edge("priorities", "learn", "priority_update"),
    Edge("weights", "learn", "act"),
]


def random_problem(seed: int) -> Problem:
    rng = random.Random(seed)
    n_res = rng.randint(1, 3)
    resources = [Resource("host-cpu", rng.randint(2, 8), rng.uniform(5, 40), 0.0)]
    for i in range(1, n_res):
        resources.append(Resource(f"gpu:{i}", rng.randint(1, 3), rng.uniform(5, 60), 0.0))
    resources = [Resource(r.id, r.lanes, r.idle_w, r.idle_w + rng.uniform(0, 200)) for r in resources]
    if n_res > 1 and rng.random() < 0.3:  # odd power numbers (busy below idle) must not fool the linearisation
        r = resources[-1]
        resources[-1] = Resource(r.id, r.lanes, r.idle_w + 50, r.idle_w * rng.uniform(0, 1))
    n_dev = rng.randint(max(2, n_res), 4)
    ids = ["cpu"] + rng.sample(DEVICE_IDS[1:], n_dev - 1)
    devices = [Device("cpu", "host-cpu", rng.uniform(6, 16))]
    for i, d in enumerate(ids[1:], start=1):
        res = resources[i].id if i < n_res else rng.choice(resources).id  # every resource gets a device
        devices.append(Device(d, res, rng.uniform(2, 12)))

    def allowed(d: str) -> bool:
        return d == "cpu" or rng.random() < 0.7

    cost = {}
    for d in devices:
        if allowed(d.id):  # the replay trio is allowed or not as one (the usual case: one adapter implements all)
            cost.update({(k, d.id): rng.uniform(0.01, 0.5) for k in REPLAY})
        if allowed(d.id):
            cost[("learn", d.id)] = rng.uniform(0.05, 1.5)
    if rng.random() < 0.2 and len(devices) > 2:  # sometimes one replay kernel is missing somewhere
        cost.pop((rng.choice(REPLAY), devices[-1].id), None)
    host_lanes = resources[0].lanes
    options = set()
    n_options = rng.randint(2, 4)
    while len(options) < n_options:
        n = rng.randint(1, host_lanes + 1 if rng.random() < 0.2 else max(1, host_lanes - 1))
        options.add(ActorOption(n, rng.choice([1, 2, 4, 8])))
    act_devices = [d.id for d in devices if allowed(d.id)]
    act_cost = {(a, d): rng.uniform(0.05, 2.0) for a in options for d in act_devices}
    actor_period = {(a, d): rng.uniform(0.05, 1.5) * 2 / a.n for a in options for d in act_devices}
    transfer = {}
    for e in EDGES:
        for d, d2 in itertools.product(devices, devices):
            if d.id != d2.id and rng.random() < 0.8:
                transfer[(e.name, d.id, d2.id)] = rng.uniform(0.0, 0.3)
            elif d.id == d2.id and rng.random() < 0.1:
                transfer[(e.name, d.id, d2.id)] = rng.uniform(0.0, 0.05)
    memory = {}
    for d in devices:
        memory[("replay_insert", d.id)] = rng.uniform(0, 7)
        memory[("learn", d.id)] = rng.uniform(0, 4)
        memory[("act", d.id)] = rng.uniform(0, 2)
    return Problem(
        resources=resources,
        devices=devices,
        host="host-cpu",
        host_device="cpu",
        cost=cost,
        act_cost=act_cost,
        env_cost=rng.uniform(0.0, 3.0),
        actor_period=actor_period,
        edges=list(EDGES),
        transfer=transfer,
        memory=memory,
        prefetch=rng.random() < 0.5,
        device_share=_device_shares(seed, cost, act_cost),
    )


def _device_shares(seed: int, cost: dict, act_cost: dict) -> dict[tuple[str, str], float]:
    """In some problems, the share of each accelerator kernel's seconds its device is busy (a GPU's CUDA-event
    time ÷ wall time); drawn from a generator of its own, so the rest of each problem is as before."""
    rng = random.Random(7_919 + seed)
    if rng.random() < 0.6:
        return {}
    kernels = {*cost, *(("act", d) for _, d in act_cost)}
    return {(k, d): rng.uniform(0.05, 1.0) for k, d in sorted(kernels) if d != "cpu"}


# ------------------------------------------------------------------------------------------------ the oracle


def account(p: Problem, where: dict[str, str], a: ActorOption):
    """(P, E) of one placement, or None; written out independently of pearl.planner.ilp."""
    for k, d in where.items():
        if k == "act":
            if (a, d) not in p.act_cost:
                return None
        elif (k, d) not in p.cost:
            return None
    if not (where["replay_insert"] == where["replay_sample"] == where["priority_update"]):
        return None
    for dev in p.devices:
        if sum(p.memory.get((k, dev.id), 0.0) for k in where if where[k] == dev.id) > dev.memory_bytes:
            return None
    res = {d.id: d.resource for d in p.devices}
    lanes = {r.id: r.lanes for r in p.resources}
    if a.n > lanes[p.host]:  # one lane per actor process; roles share lanes through the load rows
        return None

    def dev(end):
        return p.host_device if end == "env_step" else where[end]

    def t(e):
        return p.transfer.get((e.name, dev(e.src), dev(e.dst)), 0.0)

    def c(k):  # a kernel's seconds where it sits; learn with the option's publishes
        return p.cost[(k, where[k])] + (p.publish.get((a, where[k]), 0.0) if k == "learn" else 0.0)

    def beta(k):  # the share of k's seconds its device is busy
        return p.device_share.get((k, where[k]), 1.0)

    busy = {r.id: 0.0 for r in p.resources}
    for k in ("replay_insert", "replay_sample", "priority_update", "learn"):
        busy[res[where[k]]] += c(k) - p.cost[(k, where[k])] * (1 - beta(k))
    if where["learn"] == p.host_device:  # its T threads' lane-seconds (the publishes stay one thread's)
        busy[p.host] += (p.learner_threads - 1) * p.cost[("learn", p.host_device)] * beta("learn")
    busy[res[where["act"]]] += p.act_cost[(a, where["act"])] * beta("act")
    busy[p.host] += p.env_cost
    for e in p.edges:
        if t(e) > 0:
            busy[res[dev(e.src)]] += t(e)
            if res[dev(e.dst)] != res[dev(e.src)]:
                busy[res[dev(e.dst)]] += t(e)
    lower = [busy[r] / lanes[r] for r in busy]
    replay = sum(c(k) for k in REPLAY)
    replay += sum(t(e) for e in p.edges if (e.src in REPLAY) != (e.dst in REPLAY))
    learner = c("learn")
    learner += sum(t(e) for e in p.edges if (e.src == "learn") != (e.dst == "learn"))
    period_a = p.actor_period[(a, where["act"])]
    lower += [replay, learner, period_a]
    chain_edges = (("replay_sample", "learn"), ("learn", "priority_update"))
    process = sum(c(k) for k in (*REPLAY, "learn") if res[where[k]] == p.host) \
        + sum(t(e) for e in p.edges if (e.src, e.dst) in chain_edges)
    lower.append(process)
    # the actor processes and the learner's (its T threads) sharing the host's lanes
    crowd, lanes_h = a.n + p.learner_threads, lanes[p.host]
    if crowd > lanes_h:
        on_host = period_a if res[where["act"]] == p.host else min(period_a, p.env_cost / a.n)
        one = (crowd - lanes_h) / ((crowd - 1) * lanes_h)  # one thread's loss per lane-second of the others
        threaded = one if p.learner_threads == 1 else 1.0  # T > 1 threads wait out all of the others' work
        lower += [process + threaded * a.n * on_host,
                  period_a + one * (p.learner_threads * process + (a.n - 1) * on_host)]
        if p.learner_threads == 1 and a.n == lanes_h and a.n * on_host > (lanes_h - 1) * process:
            lower.append(a.n * on_host + process)  # the actors and the learner take turns
    if not p.prefetch:
        chain = sum(c(k) for k in ("replay_sample", "learn", "priority_update"))
        chain += sum(
            t(e) for e in p.edges if (e.src, e.dst) in (("replay_sample", "learn"), ("learn", "priority_update"))
        )
        lower.append(chain)
    period = max(lower)
    energy = sum(r.idle_w * period + (r.busy_w - r.idle_w) * busy[r.id] / r.lanes for r in p.resources)
    return period, energy


def crowded_problem(seed: int) -> Problem:
    """A random problem whose options include as many actor processes as the host has lanes (with the
    learner's process, one more than its lanes: the contention rows bind there), and the learner's publishes
    priced per option (fewer with more actors, as the schedule's segments grow)."""
    p = random_problem(seed)
    rng = random.Random(5_000 + seed)
    lanes = p.resources[0].lanes
    full = ActorOption(lanes, rng.choice([1, 2]))
    devices = sorted({d for (_, d) in p.act_cost})
    act_cost = {**p.act_cost, **{(full, d): rng.uniform(0.05, 2.0) for d in devices}}
    actor_period = {**p.actor_period, **{(full, d): rng.uniform(0.05, 1.5) * 2 / full.n for d in devices}}
    options = sorted({a for (a, _) in act_cost}, key=lambda a: (a.n, a.envs))
    publish = {}
    for k, d in p.cost:
        if k == "learn" and rng.random() < 0.8:
            base = rng.uniform(0.0, 0.3)
            publish.update({(a, d): base / a.n for a in options})
    return dataclasses.replace(p, act_cost=act_cost, actor_period=actor_period, publish=publish)


def brute_force(p: Problem) -> list[tuple[float, float]]:
    """(P, E) of every feasible placement and actor option."""
    out = []
    choices = [sorted({d for (k2, d) in p.cost if k2 == k}) if k != "act" else None for k in PLACED]
    act_devices = sorted({d for (_, d) in p.act_cost})
    choices[PLACED.index("act")] = act_devices
    options = sorted({a for (a, _) in p.act_cost}, key=lambda a: (a.n, a.envs))
    for devs in itertools.product(*choices):
        for a in options:
            r = account(p, dict(zip(PLACED, devs)), a)
            if r is not None:
                out.append(r)
    return out


def close(a: float, b: float, rel: float = REL) -> bool:
    return a == pytest.approx(b, rel=rel, abs=1e-12)


# ------------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("seed", range(60))
def test_matches_brute_force(seed):
    p = random_problem(seed)
    points = brute_force(p)
    if not points:
        with pytest.raises(PlanInfeasible):
            solve(p, "throughput")
        return
    best_p = min(P for P, _ in points)
    best_e = min(E for _, E in points)
    fast = solve(p, "throughput")  # the default solver: HiGHS when highspy is installed, else CBC
    assert close(fast.period_s, best_p)
    # ties on P are broken by E: the throughput plan is the cheapest of the fastest plans
    assert close(fast.energy_j, min(E for P, E in points if P <= best_p * (1 + 1e-7)))
    green = solve(p, "perf-per-watt")
    assert close(green.energy_j, best_e)
    assert green.energy_j <= fast.energy_j * (1 + REL)
    assert fast.period_s <= green.period_s * (1 + REL)
    for plan in (fast, green):
        assert plan.status == "Optimal" and plan.gap == 0.0 and plan.solver == DEFAULT_SOLVER
        assert set(plan.placement) == set(PLACED)
        assert len({plan.placement[k] for k in REPLAY}) == 1
        again = evaluate(p, plan.placement, plan.actors)
        assert again is not None
        assert close(again[0], plan.period_s) and close(again[1], plan.energy_j)
        assert again[2] == plan.binding
        mine = account(p, plan.placement, plan.actors)
        assert close(mine[0], plan.period_s) and close(mine[1], plan.energy_j)


def _solves_as_the_oracle(p: Problem) -> None:
    """Both objectives' optima are the oracle's (infeasible where it finds no plan), and evaluate agrees with
    the oracle and the program on each plan."""
    points = brute_force(p)
    if not points:
        with pytest.raises(PlanInfeasible):
            solve(p, "throughput")
        return
    best_p = min(P for P, _ in points)
    fast = solve(p, "throughput")
    assert close(fast.period_s, best_p)
    assert close(fast.energy_j, min(E for P, E in points if P <= best_p * (1 + 1e-7)))
    green = solve(p, "perf-per-watt")
    assert close(green.energy_j, min(E for _, E in points))
    for plan in (fast, green):
        again = evaluate(p, plan.placement, plan.actors)
        mine = account(p, plan.placement, plan.actors)
        assert close(again[0], mine[0]) and close(again[1], mine[1]) and close(again[0], plan.period_s)


@pytest.mark.parametrize("seed", range(40))
def test_crowded_hosts_match_brute_force(seed):
    """With an option of as many actors as lanes (contention) and publishes priced per option: the program's
    optimum is the oracle's, and evaluate agrees with the oracle on the plan."""
    p = crowded_problem(seed)
    _solves_as_the_oracle(p)


@pytest.mark.parametrize("seed", range(30))
def test_learner_threads_match_brute_force(seed):
    """With the learner's T threads (2 up to the host's lanes) and learn on the host faster at T threads: the
    program's optimum is the oracle's, evaluate agrees with both, and T counts in the contention rows."""
    p = crowded_problem(seed)
    lanes = p.resources[0].lanes
    if lanes < 2:
        return
    threads = random.Random(seed).randint(2, lanes)
    cost = {(k, d): t * (0.6 if (k, d) == ("learn", p.host_device) else 1.0) for (k, d), t in p.cost.items()}
    p = dataclasses.replace(p, cost=cost, learner_threads=threads)
    _solves_as_the_oracle(p)


def test_two_threads_beside_one_actor_on_two_lanes_are_charged():
    """2 learner threads and 1 actor process on 2 lanes: 3 threads on 2 lanes, so the learner waits out the
    actor's host work (its period here, act on cpu): contention[learner] = its own work + the actor's."""
    p = tiny_problem()
    p = dataclasses.replace(p, resources=[dataclasses.replace(p.resources[0], lanes=2), p.resources[1]])
    where = {k: "cpu" for k in PLACED}
    one = ActorOption(1, 8)
    process = sum(p.cost[(k, "cpu")] for k in (*REPLAY, "learn"))  # the chain's transfers are 0 within cpu
    two = dataclasses.replace(p, learner_threads=2)
    alone, crowded = evaluate(p, where, one), evaluate(two, where, one)
    actor = p.actor_period[(one, "cpu")]
    assert alone[0] < process + actor and crowded[0] == pytest.approx(process + actor)
    assert crowded[2] == "contention[learner]"
    assert crowded[0] == pytest.approx(account(two, where, one)[0])
    assert crowded[1] == pytest.approx(account(two, where, one)[1])
    with pytest.raises(PlanError, match="threads"):
        solve(dataclasses.replace(p, learner_threads=3))


def test_actors_that_outrun_the_learner_take_turns_with_it():
    """2 actor processes and a one-thread learner on 2 lanes: where the actors' host work outruns the lane the
    learner leaves them, they take turns (contention[turns]: both actors' periods one after the other + the
    learner's process), which makes 2 actors slower than 1; where it fits, the row is off and 2 actors keep the
    sharing rows' figure."""
    p = tiny_problem()
    p = dataclasses.replace(p, resources=[dataclasses.replace(p.resources[0], lanes=2), p.resources[1]])
    where = {k: "cpu" for k in PLACED}
    process = sum(p.cost[(k, "cpu")] for k in (*REPLAY, "learn"))
    one, two = ActorOption(1, 8), ActorOption(2, 4)
    for h2, turns in ((0.75 * process, True), (0.4 * process, False)):  # 2·h2 against the 1 lane left: process
        q = dataclasses.replace(p, actor_period={**p.actor_period, (one, "cpu"): 2 * h2, (two, "cpu"): h2},
                                act_cost={**p.act_cost, (one, "cpu"): h2, (two, "cpu"): h2}, env_cost=0.0)
        period, _, binding = evaluate(q, where, two)
        assert period == pytest.approx(account(q, where, two)[0])
        if turns:
            assert binding == "contention[turns]" and period == pytest.approx(2 * h2 + process)
            assert period > evaluate(q, where, one)[0]  # one actor doing both shares: 2·h2 < 2·h2 + process
        else:
            assert binding != "contention[turns]" and period < 2 * h2 + process
        plan = solve(q, "throughput")
        assert plan.period_s == pytest.approx(best_by_brute_force(q)[0])
        # everything on cpu with 2 actors the only option: the program must find the turns the accounting charges
        only = dataclasses.replace(q, actor_period={(two, "cpu"): h2}, act_cost={(two, "cpu"): h2},
                                   cost={(k, d): t for (k, d), t in q.cost.items() if d == "cpu"})
        plan = solve(only, "throughput")
        assert plan.period_s == pytest.approx(best_by_brute_force(only)[0])
        assert (plan.binding == "contention[turns]") == turns


def test_contention_binds_on_some_crowded_instances():
    """The crowded instances exercise the new row: on some the optimum is bound by contention, and on some
    the full option, which the row slows down, loses to fewer actors that the row leaves alone."""
    bound, avoided = 0, 0
    for seed in range(40):
        p = crowded_problem(seed)
        if not brute_force(p):
            continue
        plan = solve(p, "throughput")
        bound += plan.binding.startswith("contention")
        full = max(p.actor_options(), key=lambda a: a.n)
        crowded = evaluate(p, plan.placement, full)
        avoided += plan.actors.n < full.n and crowded is not None and crowded[2].startswith("contention")
    assert bound >= 1 and avoided >= 1, (bound, avoided)


@pytest.mark.parametrize("seed", range(60, 72))
def test_period_bound_matches_brute_force(seed):
    p = random_problem(seed)
    points = brute_force(p)
    if not points:
        with pytest.raises(PlanInfeasible):
            solve(p, "perf-per-watt", period_bound=1.0)
        return
    periods = sorted(P for P, _ in points)
    bound = periods[len(periods) // 3]
    plan = solve(p, "perf-per-watt", period_bound=bound * (1 + 1e-9))
    assert plan.period_s <= bound * (1 + REL)
    assert close(plan.energy_j, min(E for P, E in points if P <= bound * (1 + 1e-9)))
    with pytest.raises(PlanInfeasible, match="period_bound"):
        solve(p, "perf-per-watt", period_bound=periods[0] * 0.5)


@pytest.mark.parametrize("seed", [6, 7, 12, 17, 22, 41])  # instances whose front has 2 to 4 points
def test_pareto_front(seed):
    p = random_problem(seed)
    points = brute_force(p)
    front = pareto(p)
    fast = solve(p, "throughput")
    assert len(front) >= 2
    assert front[0].placement == fast.placement and front[0].actors == fast.actors
    assert close(front[0].period_s, fast.period_s) and close(front[0].period_s, min(P for P, _ in points))
    for a, b in zip(front, front[1:]):
        assert b.period_s >= a.period_s * (1 - REL)
        assert b.energy_j <= a.energy_j * (1 + REL)
    for plan in front:
        assert plan.period_s <= 2.0 * fast.period_s * (1 + REL)  # the largest ε is 1
        # no enumerated placement is at least as fast and clearly cheaper: every point is Pareto-optimal
        assert not any(P <= plan.period_s * (1 + 1e-9) and E < plan.energy_j * (1 - REL) for P, E in points)
    # the last point is the least energy within twice the fastest period
    assert close(front[-1].energy_j, min(E for P, E in points if P <= 2.0 * fast.period_s * (1 + 1e-9)))
    keys = [(tuple(s.placement.items()), s.actors) for s in front]
    assert len(keys) == len(set(keys))
    assert pareto(p, epsilons=(0,))[0].placement == fast.placement


@pytest.mark.parametrize("seed", [6, 12, 41])
def test_real_magnitudes(seed):
    """Microsecond costs and gigabyte memories give the same plans: the solver's absolute tolerances do not bite."""
    p = random_problem(seed)
    points = brute_force(p)
    f = 1e-5

    def times(d):
        return {key: value * f for key, value in d.items()}

    q = dataclasses.replace(
        p,
        cost=times(p.cost),
        act_cost=times(p.act_cost),
        actor_period=times(p.actor_period),
        transfer=times(p.transfer),
        env_cost=p.env_cost * f,
        memory={key: value * 1e9 for key, value in p.memory.items()},
        devices=[dataclasses.replace(d, memory_bytes=d.memory_bytes * 1e9) for d in p.devices],
    )
    assert close(solve(q).period_s, f * min(P for P, _ in points))
    assert close(solve(q, "perf-per-watt").energy_j, f * min(E for _, E in points))


def test_evaluate_rejects_infeasible_placements():
    p = random_problem(1)
    ok = solve(p, "throughput")
    assert evaluate(p, ok.placement, ok.actors) is not None
    split = dict(ok.placement)
    others = [d.id for d in p.devices if d.id != split["replay_sample"]]
    split["replay_sample"] = others[0]
    assert evaluate(p, split, ok.actors) is None
    nowhere = dict(ok.placement, learn="no-such-device")
    assert evaluate(p, nowhere, ok.actors) is None
    crowd = ActorOption(p.resources[0].lanes + 1, 1)
    assert evaluate(p, ok.placement, crowd) is None
    with pytest.raises(PlanError):
        evaluate(p, {"act": "cpu"}, ok.actors)


def tiny_problem(ids=("cpu", "opencl:0:0", "cuda:0")) -> Problem:
    """A host CPU, PoCL on the same cores, and one GPU (or whatever ids are given, in that order)."""
    cpu, pocl, gpu = ids
    resources = [Resource("cpu-cores", 4, 20.0, 100.0), Resource("gpu/0", 1, 30.0, 250.0)]
    devices = [Device(cpu, "cpu-cores", 1e10), Device(pocl, "cpu-cores", 1e10), Device(gpu, "gpu/0", 8e9)]
    cost = {}
    for k in ("replay_insert", "replay_sample", "priority_update", "learn"):
        cost[(k, cpu)] = 1.0 if k == "learn" else 0.2
        cost[(k, pocl)] = 0.8 if k == "learn" else 0.15
        cost[(k, gpu)] = 0.1 if k == "learn" else 0.05
    a1, a2 = ActorOption(1, 8), ActorOption(2, 4)
    act_cost = {(a, d): c for a in (a1, a2) for d, c in ((cpu, 0.3), (gpu, 0.05))}
    actor_period = {(a1, cpu): 0.9, (a1, gpu): 0.6, (a2, cpu): 0.5, (a2, gpu): 0.35}
    transfer = {}
    for e in EDGES:
        for d, d2 in itertools.permutations((cpu, pocl, gpu), 2):
            transfer[(e.name, d, d2)] = 0.02 if gpu not in (d, d2) else 0.08
    return Problem(
        resources=resources,
        devices=devices,
        host="cpu-cores",
        host_device=cpu,
        cost=cost,
        act_cost=act_cost,
        env_cost=0.4,
        actor_period=actor_period,
        edges=list(EDGES),
        transfer=transfer,
        memory={("replay_insert", d): 1e9 for d in (cpu, pocl, gpu)},
    )


def best_by_brute_force(p: Problem):
    points = brute_force(p)
    return min(P for P, _ in points), min(E for _, E in points)


def test_device_ids_with_special_characters():
    p = tiny_problem(("cpu", "opencl:0:0", "whatif:nvidia-a100"))
    plan = solve(p)
    best_p, best_e = best_by_brute_force(p)
    assert close(plan.period_s, best_p)
    assert set(plan.placement.values()) <= {"cpu", "opencl:0:0", "whatif:nvidia-a100"}
    assert close(solve(p, "perf-per-watt").energy_j, best_e)
    if plan.binding.startswith("load["):
        assert plan.binding[5:-1] in {"cpu-cores", "gpu/0"}


def test_ids_that_sanitise_alike_do_not_collide():
    # "cuda:0", "cuda-0" and "cuda_0" are one name to PuLP; here they are three devices with different costs
    p = tiny_problem(("cuda_0", "cuda-0", "cuda:0"))
    for objective in ("throughput", "perf-per-watt"):
        plan = solve(p, objective)
        best_p, best_e = best_by_brute_force(p)
        if objective == "throughput":
            assert close(plan.period_s, best_p)
        else:
            assert close(plan.energy_j, best_e)
        assert evaluate(p, plan.placement, plan.actors)[:2] == pytest.approx((plan.period_s, plan.energy_j))
    # the GPU ("cuda:0") is by far the fastest learner: the throughput plan must name it, not a look-alike
    assert solve(p).placement["learn"] == "cuda:0"


def test_infeasible_assign():
    p = tiny_problem()
    p.cost = {key: c for key, c in p.cost.items() if key[0] != "learn"}
    with pytest.raises(PlanInfeasible, match="assign"):
        solve(p)


def test_infeasible_memory():
    p = tiny_problem()
    p.memory = {("replay_insert", d.id): 2 * max(x.memory_bytes for x in p.devices) for d in p.devices}
    with pytest.raises(PlanInfeasible, match="memory") as info:
        solve(p)
    assert isinstance(info.value, PearlError)


def test_infeasible_memory_only_together():
    # replay runs only on cpu; learn fits cpu alone (not cuda:0); both on cpu exceed it: found by the solver
    p = tiny_problem()
    p.cost = {key: c for key, c in p.cost.items() if key[1] == "cpu" or key[0] == "learn"}
    p.cost = {key: c for key, c in p.cost.items() if key[1] != "opencl:0:0"}
    p.memory = {("replay_insert", "cpu"): 6e9, ("learn", "cpu"): 6e9, ("learn", "cuda:0"): 9e9}
    with pytest.raises(PlanInfeasible, match="memory"):
        solve(p)


def test_infeasible_actors():
    p = tiny_problem()
    big = {ActorOption(5, 1), ActorOption(9, 2)}
    p.act_cost = {(a, d): 0.1 for a in big for d in ("cpu", "cuda:0")}
    p.actor_period = {(a, d): 0.5 for a in big for d in ("cpu", "cuda:0")}
    with pytest.raises(PlanInfeasible, match="actors"):
        solve(p)


def test_roles_on_the_host_share_lanes_with_actors():
    # 4 actors on 4 lanes with replay and learn also on the host: feasible, the load row shares the time
    p = tiny_problem()
    p.cost = {key: c for key, c in p.cost.items() if key[1] == "cpu"}
    p.act_cost = {(ActorOption(4, 1), "cpu"): 0.1}
    p.actor_period = {(ActorOption(4, 1), "cpu"): 0.5}
    plan = solve(p)
    busy = sum(c for (k, d), c in p.cost.items() if k in plan.placement and plan.placement[k] == d) + 0.1 + p.env_cost
    assert plan.period_s >= busy / 4 - 1e-12


@pytest.mark.parametrize("seed", [0, 6, 12, 40, 41])
def test_highs_and_cbc_agree(seed):
    pytest.importorskip("highspy", reason="HiGHS (highspy) is not installed; CBC alone is tested")
    p = random_problem(seed)
    for objective in ("throughput", "perf-per-watt"):
        highs = solve(p, objective, solver="highs")
        cbc = solve(p, objective, solver="cbc")
        assert cbc.solver == "CBC" and cbc.status == "Optimal" and highs.solver == "HiGHS"
        if objective == "throughput":
            assert close(highs.period_s, cbc.period_s)
        else:
            assert close(highs.energy_j, cbc.energy_j)


def test_bad_arguments():
    p = tiny_problem()
    with pytest.raises(PearlError):
        solve(p, "fastest")
    with pytest.raises(PearlError):
        solve(p, solver="gurobi")


def tied_problem(seed: int) -> Problem:
    """A random problem where the actor count moves neither P nor E: act costs the same for every option on a
    device and every actor's period is short, as when the learner binds (the composer example of the PEARL
    paper, where 10 actors give the period 1 gives)."""
    p = random_problem(seed)
    rng = random.Random(seed)
    per_device = {d: rng.uniform(0.01, 0.1) for (_, d) in p.act_cost}
    act_cost = {(a, d): per_device[d] for (a, d) in p.act_cost}
    actor_period = {key: 1e-3 for key in p.actor_period}
    return dataclasses.replace(p, act_cost=act_cost, actor_period=actor_period)


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("make", [random_problem, tied_problem])
def test_ties_prefer_fewer_actors_then_fewer_devices(seed, make):
    """Among the placements with the optimal objectives (both, lexicographically), the plan has the fewest actor
    processes, and among those the fewest devices (the oracle's own enumeration)."""
    p = make(seed)
    choices = [sorted({d for (_, d) in p.act_cost}) if k == "act" else sorted({d for (kk, d) in p.cost if kk == k})
               for k in PLACED]
    points = []
    for devs in itertools.product(*choices):
        where = dict(zip(PLACED, devs))
        for a in p.actor_options():
            r = account(p, where, a)
            if r is not None:
                points.append((r[0], r[1], a.n, len(set(devs))))
    if not points:
        return
    for objective, (i, j) in (("throughput", (0, 1)), ("perf-per-watt", (1, 0))):
        plan = solve(p, objective)
        best_i = min(pt[i] for pt in points)
        best_j = min(pt[j] for pt in points if pt[i] <= best_i * (1 + 1e-9))
        tied = [pt for pt in points if pt[i] <= best_i * (1 + 1e-9) and pt[j] <= best_j * (1 + 1e-9)]
        fewest = min(pt[2] for pt in tied)
        assert plan.actors.n <= fewest
        devices = len(set(plan.placement.values()))
        assert devices <= min(pt[3] for pt in tied if pt[2] == fewest)


def test_ties_on_a_real_profile_take_one_actor_when_actors_do_not_bind():
    """DQN CartPole on the reference profile: the learner binds, so more actor processes cannot shorten P;
    the plan starts as few as reach the optimum, and every smaller count is slower (or infeasible)."""
    from pathlib import Path

    from pearl.envs import env_spec
    from pearl.planner.build import build_problem
    from pearl.costmodel import CostModel
    from pearl.profile.format import load_profile

    profile = load_profile(Path(__file__).resolve().parent.parent / "profiles" / "reference.json")
    p, _ = build_problem(profile, CostModel(profile), "dqn", env_spec("CartPole-v1"))
    plan = solve(p, "throughput")
    for a in p.actor_options():
        if a.n < plan.actors.n:
            r = evaluate(p, plan.placement, a)
            assert r is None or r[0] > plan.period_s * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(30))
def test_learner_groups_match_brute_force(seed):
    """A learner group of N one-thread learners (2 up to the host's lanes): learn only on the host device, at
    its part of the batch plus the group's communication, N lanes and N processes held (Problem.learners): the
    program's optimum is the oracle's, and evaluate agrees with both."""
    p = crowded_problem(seed)
    lanes = p.resources[0].lanes
    if lanes < 2:
        return
    rng = random.Random(7_000 + seed)
    learners = rng.randint(2, lanes)
    host_learn = p.cost[("learn", p.host_device)] / learners + rng.uniform(0.0, 0.5) * p.cost[("learn", p.host_device)]
    cost = {(k, d): t for (k, d), t in p.cost.items() if k != "learn"}
    cost[("learn", p.host_device)] = host_learn
    publish = {(a, d): t for (a, d), t in p.publish.items() if d == p.host_device}
    p = dataclasses.replace(p, cost=cost, publish=publish, learner_threads=learners, learners=learners)
    _solves_as_the_oracle(p)
