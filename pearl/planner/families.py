"""The constraint families of the integer program (pearl/planner/ilp.py's docstring states them): one small
function per family, each named after its row there, and `build`, which makes the whole program (no objective
yet) from a problem, with some families relaxed for a diagnosis.
"""

from __future__ import annotations

import math

import pulp

from pearl.planner import accounting as acc
from pearl.planner.accounting import Row
from pearl.planner.feasibility import partitioned
from pearl.planner.problem import PLACED, REPLAY, Problem
from pearl.planner.program import Builder, Model, affine, time_scale, variable
from pearl.planner.terms import ACT, LEARN, LEARNER_PROCESS, Term, busy


def _variables(b: Builder) -> None:
    """x[k,d] for the kernels other than act, v[a,d] for act: only where the problem allows them."""
    problem = b.problem
    for ki, k in enumerate(PLACED):
        if k == ACT:
            continue
        for d in problem.devices:
            if (k, d.id) in problem.cost:
                b.x[(k, d.id)] = variable(b.lp, f"x_k{ki}_d{b.didx[d.id]}", 0, 1, pulp.LpBinary)
    # in a cluster the binaries are s[a] and acting[d]; v[a,d] = s[a]·acting[d] is then continuous (`_spread`)
    kind = pulp.LpContinuous if b.multi else pulp.LpBinary
    for ai, a in enumerate(b.options):
        if b.multi:
            b.s[a] = variable(b.lp, f"s_a{ai}", 0, 1, pulp.LpBinary)
        for d in problem.devices:
            if (a, d.id) in problem.act_cost:
                tag = f"a{ai}_d{b.didx[d.id]}"
                b.v[(a, d.id)] = variable(b.lp, f"v_{tag}", 0, 1, kind)
                if b.multi:
                    b.w[(a, d.id)] = variable(b.lp, f"w_{tag}", 0, b.cap(a, d.id), pulp.LpInteger)
    if b.multi:
        for d in problem.allowed(ACT):
            b.acting[d] = variable(b.lp, f"acting_d{b.didx[d]}", 0, 1, pulp.LpBinary)
    if problem.sharded:
        b.sigma.update({K: variable(b.lp, f"sigma_{K}", 0, 1, pulp.LpBinary) for K in problem.shard_counts()})


def _assign(b: Builder) -> None:
    """(a) assign[k]: every kernel on one device; replay_same[k,d]: the replay kernels on one device."""
    for ki, k in enumerate(PLACED):
        act = list(b.s.values()) if b.multi else list(b.v.values())
        terms = act if k == ACT else [var for (kk, _), var in b.x.items() if kk == k]
        if k in REPLAY and b.sigma:  # one device per shard
            b.add(pulp.lpSum(terms) - pulp.lpSum(K * var for K, var in b.sigma.items()) == 0, f"assign_k{ki}",
                  f"assign[{k}]")
        else:
            b.add(pulp.lpSum(terms) == 1, f"assign_k{ki}", f"assign[{k}]")
    _shards(b)
    for k in REPLAY[1:]:
        ki = PLACED.index(k)
        for d in b.problem.devices:
            diff = affine(b.on(k, d.id)) - affine(b.on(REPLAY[0], d.id))
            if diff.keys():
                b.add(diff == 0, f"replay_same_k{ki}_d{b.didx[d.id]}", f"replay_same[{k},{d.id}]")


def _shards(b: Builder) -> None:
    """(sharded replay) shards: Σ_K σ[K] = 1; shard_node[n]: at most one shard on a node; shard_device[d,K]:
    a device without a shard's cost for K holds none of K shards."""
    if not b.sigma:
        return
    problem = b.problem
    b.add(pulp.lpSum(b.sigma.values()) == 1, "shards", "shards")
    for ni, node in enumerate(problem.node_list()):
        on_node = [var for (k, d), var in b.x.items() if k == REPLAY[0] and problem.device(d).node == node.name]
        if len(on_node) > 1:
            b.add(pulp.lpSum(on_node) <= 1, f"shard_node_n{ni}", f"shard_node[{node.name}]")
    for (k, d), var in b.x.items():
        if k != REPLAY[0]:
            continue
        for K, sigma in b.sigma.items():
            if K > 1 and (k, d, K) not in problem.shard_cost:
                b.add(var + sigma <= 1, f"shard_device_d{b.didx[d]}_{K}", f"shard_device[{d},{K}]")


def _spread(b: Builder) -> None:
    """(clusters) spread: the chosen option's processes over the nodes, each node acting on one device; v[a,d]
    ≥ s[a] + acting[d] − 1 is their product (v only ever raises a bound, so its lower bound is enough)."""
    if not b.multi:
        return
    problem = b.problem
    for (a, d), var in b.v.items():
        tag, label = f"a{b.options.index(a)}_d{b.didx[d]}", f"spread[{a.n}x{a.envs},{d}]"
        b.add(var - b.s[a] - b.acting[d] >= -1, f"option_{tag}", label)
        b.add(b.w[(a, d)] - b.cap(a, d) * b.s[a] <= 0, f"count_option_{tag}", label)
        b.add(b.w[(a, d)] - b.cap(a, d) * b.acting[d] <= 0, f"count_device_{tag}", label)
    for d, var in b.acting.items():  # a device acted on runs at least one process
        counts = [b.w[(a, dd)] for (a, dd) in b.v if dd == d]
        b.add(pulp.lpSum(counts) - var >= 0, f"acting_d{b.didx[d]}", f"spread[{d}]")
    for ai, a in enumerate(b.options):
        counts = [b.w[(a, d)] for (aa, d) in b.v if aa == a]
        b.add(pulp.lpSum(counts) - a.n * b.s[a] == 0, f"total_a{ai}", f"spread[{a.n}x{a.envs}]")
    for ni, node in enumerate(problem.node_list()):
        on_node = [var for d, var in b.acting.items() if problem.device(d).node == node.name]
        if len(on_node) > 1:
            b.add(pulp.lpSum(on_node) <= 1, f"act_node_n{ni}", f"act_node[{node.name}]")


def _rows(b: Builder, rows: list[Row]) -> None:
    """The bounds on P of pearl/planner/accounting.py (load, role, actor_period, process, latency, network):
    Σ terms ≤ lanes·P, each term's indicator made by `Builder.term` (couple[...] where it is a product)."""
    for row in rows:
        b.add(b.seconds(row.terms) - row.lanes * b.period <= 0, row.name, row.label)


def _memory(b: Builder) -> None:
    """(d) memory[d] and mps_memory[r], the memory rows of accounting.py: Σ needs ≤ capacity, scaled by the
    capacity."""
    for row in acc.memory_rows(b.problem):
        needs = [(n.bytes, ind) for n in row.needs if not isinstance(ind := b.term(Term(n.bytes, n.when)), int)]
        if not needs or math.isinf(row.capacity):
            continue
        cap = row.capacity if row.capacity > 0 else 1.0
        rhs = 1.0 if row.capacity > 0 else 0.0
        b.add(pulp.lpSum(m / cap * ind for m, ind in needs) <= rhs, row.name, row.label)


def _actors(b: Builder) -> None:
    """(e) actors[n]: every actor process, and in a cluster every replay server process, has a lane of its
    node's host; the learner process shares lanes through load[r] and role[...]. A replay server is a process
    of its own when it sits on another node than the learner or is sharded (K ≥ 2): with z[n] ≤ R[n], L[n],
    σ[1] (R, L: the replay server, the learner on n) it adds R[n] − z[n], exact since z only loosens the row."""
    nodes = b.problem.node_list()
    for ni, node in enumerate(nodes):
        used = b.actors_on(node.name)
        name, label = ("actors", "actors") if len(nodes) == 1 else (f"actors_n{ni}", f"actors[{node.name}]")
        if len(nodes) > 1:
            used = used + b.server_processes(ni)
        b.add(used <= b.problem.resource(node.host).lanes, name, label)


def _slices(b: Builder) -> None:
    """slices[r]: the slices of one GPU in use hold at most all of its SMs; count[d]: no more instances of a
    slice than it has; one_slice[d,d']: the learner process runs on one device of the GPU; one_way[r]: MIG
    instances or MPS shares, not both. See ilp.py's slices[r] and feasibility.py's `_slices_fit`, which
    evaluate uses (instance[d], a bound on P, is a row of accounting.py)."""
    problem = b.problem
    for ri, r in enumerate(sorted(partitioned(problem))):
        devices = [d for d in problem.devices if d.resource == r]
        used = {}
        for d in devices:
            j = b.didx[d.id]
            indicators = [ind for k in PLACED if not isinstance(ind := b.on(k, d.id), int)]
            if not indicators:
                continue
            held = variable(b.lp, f"held_d{j}", 0, 1, pulp.LpContinuous)  # the learner process, or anything, on d
            ties = [b.on(k, d.id) for k in LEARNER_PROCESS] if d.instances > 1 else indicators
            for i, ind in enumerate(ties):
                if not isinstance(ind, int):
                    b.add(held - ind >= 0, f"held_d{j}_{i}", f"slices[{r}]")
            used[d.id] = held
            if d.instances > 1:
                used[d.id] = held + pulp.lpSum(b.count(a, dd) for (a, dd) in b.v if dd == d.id)
                b.add(used[d.id] <= d.instances, f"count_d{j}", f"count[{d.id}]")
        b.add(pulp.lpSum(problem.device(d).share * u for d, u in used.items()) <= 1, f"slices_r{ri}",
              f"slices[{r}]")
        for d in devices:
            for d2 in devices:
                learn, insert = b.x.get((LEARN, d.id)), b.x.get((REPLAY[0], d2.id))
                if d != d2 and learn is not None and insert is not None:
                    b.add(learn + insert <= 1, f"one_slice_d{b.didx[d.id]}_d{b.didx[d2.id]}",
                          f"one_slice[{d.id},{d2.id}]")
        ways = sorted({d.slicing for d in devices if d.slicing})
        if len(ways) > 1:  # one_way[r]: MIG instances or MPS shares, not both
            way = {w: variable(b.lp, f"way_r{ri}_{i}", 0, 1, pulp.LpBinary) for i, w in enumerate(ways)}
            b.add(pulp.lpSum(way.values()) <= 1, f"one_way_r{ri}", f"one_way[{r}]")
            for d in devices:
                for i, k in enumerate(PLACED):
                    ind = b.on(k, d.id)
                    if d.slicing and not isinstance(ind, int):
                        b.add(ind - way[d.slicing] <= 0, f"one_way_d{b.didx[d.id]}_{i}", f"one_way[{r}]")


def _energy(b: Builder, busy_terms: dict[str, list[Term]]) -> pulp.LpAffineExpression:
    """E = Σ_r idle_w·P + (busy_w − idle_w)·busy[r]/lanes(r)."""
    return pulp.lpSum(r.idle_w * b.period + (r.busy_w - r.idle_w) / r.lanes * b.seconds(busy_terms[r.id])
                      for r in b.problem.resources)


def build(problem: Problem, relax: frozenset[str] = frozenset()) -> Model:
    """The program with every family except those in `relax` ("memory", "actors"); no objective yet."""
    lp = pulp.LpProblem("pearl_plan", pulp.LpMinimize)
    b = Builder(problem, lp, variable(lp, "period", 0, None, pulp.LpContinuous), time_scale(problem), relax=relax)
    _variables(b)
    _assign(b)
    _spread(b)
    busy_terms = busy(problem)
    before, after = acc.period_rows(problem, busy_terms)
    _rows(b, before)
    if "memory" not in relax:
        _memory(b)
    if "actors" not in relax:
        _actors(b)
    else:  # the contention rows lean on actors[n] (c[n] ≤ 1); they bound P only, never feasibility
        after = [row for row in after if not row.label.startswith(acc.CONTENTION)]
    _slices(b)
    _rows(b, after)
    return Model(lp=lp, period=b.period, energy=_energy(b, busy_terms), x=b.x, v=b.v, scale=b.scale, names=b.names,
                  s=b.s, w=b.w, processes=b.processes(), sigma=b.sigma)
