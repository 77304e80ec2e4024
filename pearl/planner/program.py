"""The integer program of pearl/planner/ilp.py while it is built: `Builder` holds its variables and turns the
literals of the accounting's rows (pearl/planner/terms.py) into PuLP expressions (x[k,d], v[a,d], w[a,d], f[d],
o[a], c[n], r[a], σ[K], and couple[...] for a product of literals), making each auxiliary variable once;
`Model` is the built program that the solver runs and reads back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pulp

from pearl.planner import accounting as acc
from pearl.planner.problem import REPLAY, ActorOption, Problem
from pearl.planner.terms import ACT, LEARN, SHARES, Literal, Term, multi_node


@dataclass
class Model:
    lp: pulp.LpProblem
    period: pulp.LpVariable
    energy: pulp.LpAffineExpression
    x: dict[tuple[str, str], pulp.LpVariable]  # (kernel, device) for the kernels other than act
    v: dict[tuple[ActorOption, str], pulp.LpVariable]  # (actor option, act's device)
    scale: float  # seconds per model time unit
    names: dict[str, str] = field(default_factory=dict)  # PuLP constraint name -> human label
    #: (clusters) the option chosen, and the actor processes of each option with act on each device
    s: dict[ActorOption, pulp.LpVariable] = field(default_factory=dict)
    w: dict[tuple[ActorOption, str], pulp.LpVariable] = field(default_factory=dict)
    processes: pulp.LpAffineExpression | None = None  # the actor processes the plan starts (TIES)
    sigma: dict[int, pulp.LpVariable] = field(default_factory=dict)  # (sharded replay) σ[K]


def time_scale(problem: Problem) -> float:
    times = [problem.env_cost, *problem.cost.values(), *problem.act_cost.values()]
    times += [*problem.actor_period.values(), *problem.transfer.values()]
    times += [*problem.shard_cost.values(), *problem.shard_transfer.values(), *problem.publish.values()]
    top = max((t for t in times if math.isfinite(t)), default=0.0)
    return top if top > 0 else 1.0


def variable(lp: pulp.LpProblem, name: str, low: float | None, up: float | None, cat: str) -> pulp.LpVariable:
    """One variable, made the PuLP 4 way where this PuLP has it (a bare LpVariable is deprecated in PuLP 3.x)."""
    if hasattr(lp, "add_variable"):
        return lp.add_variable(name, lowBound=low, upBound=up, cat=cat)
    return pulp.LpVariable(name, lowBound=low, upBound=up, cat=cat)


def affine(value: object) -> pulp.LpAffineExpression:
    if isinstance(value, (int, float)):
        return pulp.LpAffineExpression(constant=value)
    return pulp.LpAffineExpression(value)


@dataclass
class Builder:
    """The program while it is being built: its variables, and the literal → expression map the rows use."""

    problem: Problem
    lp: pulp.LpProblem
    period: pulp.LpVariable
    scale: float
    x: dict[tuple[str, str], pulp.LpVariable] = field(default_factory=dict)
    v: dict[tuple[ActorOption, str], pulp.LpVariable] = field(default_factory=dict)
    s: dict[ActorOption, pulp.LpVariable] = field(default_factory=dict)
    w: dict[tuple[ActorOption, str], pulp.LpVariable] = field(default_factory=dict)
    acting: dict[str, pulp.LpVariable] = field(default_factory=dict)
    sigma: dict[int, pulp.LpVariable] = field(default_factory=dict)  # σ[K]: the replay server is K shards
    #: the linearised product of two literals, made once (couple[...])
    products: dict[frozenset, pulp.LpVariable] = field(default_factory=dict)
    #: (clusters) R[n] − z[n], the replay server processes of their own on node n, and c[n], made once
    servers: dict[int, pulp.LpAffineExpression] = field(default_factory=dict)
    crowds: dict[str, pulp.LpAffineExpression | pulp.LpVariable] = field(default_factory=dict)
    #: (one host) r[a]: option a's actors take turns with the learner, made once
    turn: dict[ActorOption, pulp.LpVariable] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    relax: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.didx = {d.id: j for j, d in enumerate(self.problem.devices)}
        self.options = self.problem.actor_options()
        self.multi = multi_node(self.problem)

    def cap(self, a: ActorOption, d: str) -> int:
        """The most processes of option a that d's node may run: its host's lanes (unless `actors` is relaxed)."""
        if "actors" in self.relax:
            return a.n
        return min(a.n, self.problem.resource(self.problem.node_of(d).host).lanes)

    def count(self, a: ActorOption, d: str) -> pulp.LpAffineExpression | int:
        """w[a,d]: the processes of option a acting on d (n·v[a,d] with one host)."""
        if (a, d) not in self.v:
            return 0
        return self.w[(a, d)] if self.multi else a.n * self.v[(a, d)]

    def share(self, d: str) -> pulp.LpAffineExpression | int:
        """f[d]: the part of the actor processes acting on d, Σ_a w[a,d]/n ([act on d] with one host)."""
        if not self.multi:
            return self.on(ACT, d)
        return pulp.lpSum(var * (1.0 / a.n) for (a, dd), var in self.w.items() if dd == d)

    def processes(self) -> pulp.LpAffineExpression:
        """The actor processes the plan starts."""
        if self.multi:
            return pulp.lpSum(a.n * var for a, var in self.s.items())
        return pulp.lpSum(a.n * var for (a, _), var in self.v.items())

    def add(self, constraint: pulp.LpConstraint, name: str, label: str) -> None:
        self.lp.addConstraint(constraint, name)
        self.names[name] = label

    def on(self, k: str, d: str) -> pulp.LpAffineExpression | int:
        """x[k,d] as an expression, or the constant 0 (a device k is not allowed on)."""
        if k == ACT:
            terms = [self.v[(a, d)] for a in self.options if (a, d) in self.v]
            return pulp.lpSum(terms) if terms else 0
        var = self.x.get((k, d))
        return 0 if var is None else var

    def option(self, a: ActorOption) -> pulp.LpAffineExpression | pulp.LpVariable:
        """[the plan's actor option is a]: s[a] in a cluster, Σ_d v[a,d] with one host (binary-valued)."""
        if self.multi:
            return self.s[a]
        return pulp.lpSum(var for (aa, _), var in self.v.items() if aa == a)

    def actors_on(self, node: str) -> pulp.LpAffineExpression:
        """The actor processes on a node: Σ_{a, d on it} w[a,d]."""
        return pulp.lpSum(self.count(a, d) for (a, d) in self.v if self.problem.device(d).node == node)

    def server_processes(self, ni: int) -> pulp.LpAffineExpression:
        """(clusters) R[n] − z[n]: a replay server (or a shard) on node n, unless it runs in the learner's
        process there (z[n] ≤ R[n], L[n], σ[1]: exact, since z only loosens the rows it is in)."""
        if ni not in self.servers:
            node = self.problem.node_list()[ni]
            mine = [d.id for d in self.problem.devices if d.node == node.name]
            server = pulp.lpSum(self.on(REPLAY[0], d) for d in mine)
            joined = variable(self.lp, f"joined_n{ni}", 0, 1, pulp.LpContinuous)  # z[n]: the server is in the learner
            self.add(joined - server <= 0, f"joined_r_n{ni}", f"joined[{node.name}]")
            self.add(joined - pulp.lpSum(self.on(LEARN, d) for d in mine) <= 0, f"joined_l_n{ni}",
                     f"joined[{node.name}]")
            if 1 in self.sigma:
                self.add(joined - self.sigma[1] <= 0, f"joined_k_n{ni}", f"joined[{node.name}]")
            elif self.sigma:  # every K offered shards: no server joins the learner
                self.add(joined <= 0, f"joined_k_n{ni}", f"joined[{node.name}]")
            self.servers[ni] = server - joined
        return self.servers[ni]

    def crowd(self, name: str) -> pulp.LpVariable:
        """c[n] (clusters): a variable in [0, 1] with L·c[n] ≥ N[n] − L, N[n] = the node's actor processes + its
        replay server processes of their own + T·[learn on n] (T on every node for a cluster's
        learner group, `Problem.spread_group`) (exact: c only raises the rows it is in, and
        actors[n] keeps N[n] ≤ L + T ≤ 2L). One host's contention rows need no c (accounting.sharing)."""
        if name not in self.crowds:
            nodes = self.problem.node_list()
            ni = next(i for i, n in enumerate(nodes) if n.name == name)
            lanes = self.problem.resource(nodes[ni].host).lanes
            c = variable(self.lp, f"crowd_n{ni}", 0, 1, pulp.LpContinuous)
            learner = self.problem.learner_threads if self.problem.spread_group else \
                self.problem.learner_threads * pulp.lpSum(self.on(LEARN, d.id) for d in self.problem.devices
                                                          if d.node == name)
            processes = self.actors_on(name) + self.server_processes(ni) + learner
            self.add(lanes * c - processes >= -lanes, f"crowd_n{ni}", f"crowd[{name}]")
            self.crowds[name] = c
        return self.crowds[name]

    def turns(self, a: ActorOption) -> pulp.LpVariable:
        """r[a] (one host): a binary with r[a] ≤ o[a] and n·Σ_d h[a,d]·v[a,d] − (L − 1)·process[learner] ≤
        M·r[a], M = n·max_d h[a,d]: the actors outrunning the learner's spare lanes force it to 1, and nothing
        else does (it only raises the row it is in, so the optimum leaves it at 0 where it may)."""
        if a not in self.turn:
            ai = self.options.index(a)
            r = variable(self.lp, f"turns_a{ai}", 0, 1, pulp.LpBinary)
            works, own = acc.turn_work(self.problem, a)
            lanes = self.problem.resource(self.problem.host).lanes
            actors = pulp.lpSum(a.n * h / self.scale * self.v[(a, d)] for d, h in works.items() if (a, d) in self.v)
            big = a.n * max(works.values()) / self.scale
            label = f"turns[{a.n}x{a.envs}]"
            self.add(r - self.option(a) <= 0, f"turns_o_a{ai}", label)
            self.add(actors - (lanes - 1) * self.seconds(own) - big * r <= 0, f"turns_w_a{ai}", label)
            self.turn[a] = r
        return self.turn[a]

    def literal(self, lit: Literal) -> pulp.LpAffineExpression | int:
        if lit[0] == "c":
            return self.crowd(lit[1])
        if lit[0] == "r":
            return self.turns(lit[1])
        if lit[0] == "o":
            return self.option(lit[1])
        if lit[0] == "k":
            return self.sigma[lit[1]]
        if lit[0] == "x":
            return self.on(lit[1], lit[2])
        if lit[0] == "v":
            return self.v[(lit[1], lit[2])]
        if lit[0] == "f":
            return self.share(lit[1])
        return self.count(lit[1], lit[2])  # "w"

    def term(self, term: Term) -> pulp.LpAffineExpression | int:
        """The term's factor: 1, a literal, or couple[a,b], y = a·b, exact for a binary b and a in [0, 1] (a
        binary, or a share of the actor processes). Three literals (a sharded replay end): the binaries are
        coupled first, then their product with the share, if any, so every couple is exact."""
        lits = sorted(dict.fromkeys(term.when), key=lambda lit: lit[0] in SHARES)  # a share last
        if not lits:
            return 1
        factor = self.literal(lits[0])
        for i in range(1, len(lits)):
            factor = self._couple(tuple(lits[:i]), lits[i], factor)
        return factor

    def _couple(self, left: tuple[Literal, ...], lit: Literal,
                a: pulp.LpAffineExpression | int) -> pulp.LpAffineExpression | int:
        key = frozenset((*left, lit))
        if key not in self.products:
            b = self.literal(lit)
            tag = f"p{len(self.products)}"
            y = variable(self.lp, f"y_{tag}", 0, 1, pulp.LpContinuous)
            label = "couple[" + ",".join(_show(x) for x in (*left, lit)) + "]"
            self.add(y >= a + b - 1, f"couple_{tag}", label)
            self.add(y <= a, f"couple_src_{tag}", label)
            self.add(y <= b, f"couple_dst_{tag}", label)
            self.products[key] = y
        return self.products[key]

    def seconds(self, terms: list[Term]) -> pulp.LpAffineExpression:
        return pulp.lpSum(t.seconds / self.scale * self.term(t) for t in terms)


def _show(lit: Literal) -> str:
    if lit[0] == "o":
        return f"option:{lit[1].n}x{lit[1].envs}"
    if lit[0] == "c":
        return f"contention@{lit[1]}"
    if lit[0] == "r":
        return f"turns:{lit[1].n}x{lit[1].envs}"
    if lit[0] == "k":
        return f"shards={lit[1]}"
    if lit[0] == "f":
        return f"actors@{lit[1]}"
    return f"{lit[1]}@{lit[2]}" if lit[0] == "x" else f"{lit[1].n}x{lit[1].envs}@{lit[2]}" if lit[0] == "v" else \
        f"count:{lit[1].n}x{lit[1].envs}@{lit[2]}"

