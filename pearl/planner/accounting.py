"""The accounting of a placement: each bound on the period P is a row of terms, each term seconds that count
when its literals hold. The integer program (ilp.py) turns a literal into a binary
variable (a product of two into a linearised one, couple[...]) and `evaluate` into True or False, so the two
cannot disagree about what a plan costs. The literals and the terms (each kernel's, transfer's and resource's
seconds) are built in pearl/planner/terms.py; this module groups them into rows and values them for one placement.

Literals
    ("x", k, d)   kernel k on device d (k ≠ "act")
    ("v", a, d)   actor option a, with act on d (in a cluster: some of its processes on d's node act on d)
    ("w", a, d)   a count, not a truth value: how many processes of option a act on d (0 unless option a;
                  n·[act on d] with one host). Every actor process does an equal share (1/n) of the iteration's
                  env steps, so the actors' act work on a node is one process's seconds × this count
    ("f", d)      a share in [0, 1]: the processes acting on d ÷ all of them (Σ_a w[a,d]/n; [act on d] with
                  one host): the part of the env stepping and of the actors' traffic (act_cost aside, every
                  actor figure of the problem is the same whatever the option) that d's node carries
    ("k", K)      (a sharded replay server, problem.sharded) the replay server is K shards: σ[K]. A replay
                  kernel's literal ("x", k, d) then reads "a shard on d", and its terms come once per K, each
                  coupled with ("k", K): one shard's seconds (problem.shard_cost; K = 1: problem.cost)
    ("o", a)      actor option a is the plan's (whatever devices its processes act on): the learner's weight
                  publishes (problem.publish[a, d]) come with learn's ("x", "learn", d) coupled with it, unless
                  every option costs d's publishes the same
    ("c", n)      (a cluster) a share in [0, 1]: c[n], node n's contention (ilp.py's contention[...@n];
                  `crowding`)
    ("r", a)      (one host, a one-thread learner) option a is the plan's and its actors take turns with the
                  learner: r[a] of ilp.py's contention[turns] (`takes_turns`)
A term counts its seconds × the product of its literals (True = 1); a count stands alone, a share may be
coupled with a kernel's literal or an actor option's.

Rows: the bounds on P that ilp.py's docstring states (load, role, actor period, process, latency, network, a GPU
slice's instance, contention and turns), one function here per family, each a row that reads Σ its terms ≤
lanes · P; and the memory rows (memory[d], mps_memory[r]: Σ needs ≤ capacity, in bytes), which are feasibility,
not bounds on P. `in_turn` is the sequential launcher's period instead: every role's work of an iteration in turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from pearl.planner.problem import PLACED, REPLAY, ROLES, ActorOption, Edge, Node, Problem
from pearl.planner.terms import (ACT, LEARN, LEARNER_PROCESS, Literal, Term, contention_literal, count_literal,
                                 kernel_literal, kernel_terms, multi_node, on_node, replay_end, shard_k,
                                 shards_literal, transfer_terms, turns_literal)

#: edges of the no-prefetch chain sample → learn → priority update
CHAIN = (("replay_sample", LEARN), (LEARN, "priority_update"))


@dataclass(frozen=True)
class Need:
    bytes: float
    when: tuple[Literal, ...]  # the bytes count × the product of their values, as a Term's seconds


@dataclass
class MemoryRow:
    name: str  # built from indices, as Row's
    label: str
    needs: list[Need]
    capacity: float  # bytes


@dataclass
class Row:
    name: str  # built from indices: PuLP rewrites the characters of device ids
    label: str  # the human label (`load[cpu]`), which plans report as the bottleneck
    terms: list[Term]
    lanes: int = 1


#: the label of the contention rows, which lean on actors[n] (N ≤ L + T there)
CONTENTION = "contention"


def role_crossing(e: Edge, kernels: tuple[str, ...]) -> bool:
    return (e.src in kernels) != (e.dst in kernels)


def chain_edge(e: Edge) -> bool:
    return (e.src, e.dst) in CHAIN


def load_rows(problem: Problem, busy_terms: dict[str, list[Term]]) -> list[Row]:
    """(c) load[r]: busy[r] ≤ lanes(r)·P."""
    return [Row(f"load_r{ri}", f"load[{r.id}]", busy_terms[r.id], r.lanes) for ri, r in enumerate(problem.resources)]


def role_rows(problem: Problem) -> list[Row]:
    """(c') role[name]: a role is one thread: its kernels and the transfers that cross its boundary ≤ P."""
    rows = []
    for ni, (name, kernels) in enumerate(ROLES.items()):
        crossing = transfer_terms(problem, lambda e, kernels=kernels: role_crossing(e, kernels))
        if kernels == REPLAY and problem.sharded:  # each shard is a process of its own: a row per device
            for j, d in enumerate(problem.devices):
                terms = [t for k in kernels for t in kernel_terms(problem, k, lambda dd, d=d: dd == d.id)]
                terms += [t for e, s, s2, t in crossing if replay_end(e, s, s2) == d.id]
                if terms:
                    rows.append(Row(f"role_{ni}_d{j}", f"role[{name}]", terms))
            continue
        terms = [t for k in kernels for t in kernel_terms(problem, k)]
        terms += [t for *_, t in crossing]
        rows.append(Row(f"role_{ni}", f"role[{name}]", terms))
    return rows


def actor_period_rows(problem: Problem) -> list[Row]:
    """(e') actor_period[a]: one actor's share of an iteration ≤ P; in a cluster one row per node (its actors
    act on one device of it), actor_period[n]."""
    rows = []
    multi = multi_node(problem)
    node_of = {d.id: d.node for d in problem.devices}
    by_option: dict[tuple[ActorOption, str], list[Term]] = {}
    for (a, d), t in problem.actor_period.items():
        by_option.setdefault((a, node_of[d]), []).append(Term(t, (("v", a, d),)))
    for ai, a in enumerate(problem.actor_options()):
        for ni, node in enumerate(problem.node_list()):
            terms = by_option.get((a, node.name), [])
            if terms:
                name, label = (f"actor_period_a{ai}_n{ni}", f"actor_period[{node.name}]") if multi else \
                    (f"actor_period_a{ai}", "actor_period")
                rows.append(Row(name, label, terms))
    return rows


def process_rows(problem: Problem) -> list[Row]:
    """(h) process[learner]: per node, the replay and learn work on its host resource, serialised in one
    interpreter, with the chain transfers (host-side waits of the learner thread; without host work the row
    is implied by role[learner], which counts the same transfers)."""
    rows = []
    for node in problem.node_list():
        tag, label = _node_tag(problem, node.name, "learner")
        rows.append(Row(f"process_learner{tag}", f"process[{label}]", _process_terms(problem, node)))
    return rows


def _process_terms(problem: Problem, node: Node) -> list[Term]:
    res_of = {d.id: d.resource for d in problem.devices}
    on_host = partial(_on, res_of, node.host)
    terms = [t for k in (*REPLAY, LEARN) for t in kernel_terms(problem, k, on_host) if shard_k(t) == 1]
    return terms + [t for *_, t in transfer_terms(problem, chain_edge)]


def _node_tag(problem: Problem, node: str, role: str) -> tuple[str, str]:
    """(a PuLP name's suffix, the label's role) of a row per node: `role@node` in a cluster, `role` alone."""
    return ("_" + _safe(node), f"{role}@{node}") if multi_node(problem) else ("", role)


def server_nodes(problem: Problem, where: dict[str, str], shards: tuple[str, ...] = ()) -> list[str]:
    """The nodes where the replay server runs as a process of its own (actors[n] gives each a lane): every
    shard's node when it is sharded, its node when it is not the learner's, none with one node."""
    if not multi_node(problem):
        return []
    if len(shards) > 1:
        return [problem.device(d).node for d in shards]
    node = problem.device(where[REPLAY[0]]).node
    return [node] if node != problem.device(where[LEARN]).node else []


def crowding(problem: Problem, a: ActorOption, node: Node) -> bool:
    """Whether option a's actor processes on the node, with the learner's process and (in a cluster) a replay
    server's, can outnumber its host's lanes."""
    others = problem.learner_threads + (1 if multi_node(problem) else 0)
    return a.n + others > problem.resource(node.host).lanes


def sharing(problem: Problem, a: ActorOption, width: int = 1) -> float:
    """κ on one host with option a: the part of the other processes' lane-seconds that a process of `width`
    threads loses (the module docstring). N = a's actor processes + the learner's T, L the host's lanes; 0 when
    N ≤ L; else (N − L)/((N − 1)·L) for one thread, and 1 for several (the learner's T threads)."""
    lanes = problem.resource(problem.host).lanes
    n = a.n + problem.learner_threads
    if n <= lanes:
        return 0.0
    return (n - lanes) / ((n - 1) * lanes) if width == 1 else 1.0


def contention_rows(problem: Problem) -> list[Row]:
    """contention[learner], contention[actors], contention[replay] (per node of a cluster): the rows of the
    processes on a node that may be crowded (the module docstring): on one host each process's own work and
    κ[a] of the others' lane-seconds; in a cluster each process's own work again × c[n]."""
    if not multi_node(problem):
        return _shared_host_rows(problem)
    rows = []
    options = problem.actor_options()
    for node in problem.node_list():
        crowded = [a for a in options if crowding(problem, a, node)]
        if not crowded:
            continue
        c = contention_literal(node.name)
        tag, learner = _node_tag(problem, node.name, "learner")
        rows.append(Row(f"contention_learner{tag}", f"{CONTENTION}[{learner}]",
                        _stretched(_process_terms(problem, node), c)))
        _, actors = _node_tag(problem, node.name, "actors")
        for ai, a in enumerate(options):
            if a not in crowded:
                continue
            terms = []
            for (aa, d), t in problem.actor_period.items():
                if aa == a and on_node(problem, node.name, d):
                    terms += [Term(t, (("v", a, d),)), Term(_host_work(problem, node, a, d, t), (("v", a, d), c))]
            if terms:
                rows.append(Row(f"contention_actors_a{ai}{tag}", f"{CONTENTION}[{actors}]", terms))
        if problem.sharded:  # a shard is a process of its own: its kernels on the host
            res_of = {d.id: d.resource for d in problem.devices}
            on_host = partial(_on, res_of, node.host)
            shard = [t for k in REPLAY for t in kernel_terms(problem, k, on_host) if shard_k(t) > 1]
            if shard:
                _, replay = _node_tag(problem, node.name, "replay")
                rows.append(Row(f"contention_replay{tag}", f"{CONTENTION}[{replay}]", _stretched(shard, c)))
    return rows


def _shared_host_rows(problem: Problem) -> list[Row]:
    """One host: contention[learner] = process[learner]'s terms + κ[a] × the actors' host work (their env
    side, and act where it runs on the host); contention[actors] per crowded option = one actor's period +
    κ[a] × (T × the learner's host work + the n − 1 other actors' host work)."""
    node = problem.node_list()[0]
    own = _process_terms(problem, node)
    others: list[Term] = []
    rows = []
    for ai, a in enumerate(problem.actor_options()):
        kappa, lost = sharing(problem, a), sharing(problem, a, problem.learner_threads)
        if kappa == 0:
            continue
        actor_terms, turns, r = [], [], turns_literal(a)
        for (aa, d), t in problem.actor_period.items():
            if aa != a:
                continue
            v = ("v", a, d)
            host_work = _host_work(problem, node, a, d, t)
            others.append(Term(lost * a.n * host_work, (v,)))
            learner = [Term(kappa * problem.learner_threads * x.seconds, (*x.when, v)) for x in own]
            actor_terms += [Term(t, (v,)), Term(kappa * (a.n - 1) * host_work, (v,)), *learner]
            turns.append(Term(a.n * host_work, (v, r)))
        if actor_terms:
            rows.append(Row(f"contention_actors_a{ai}", f"{CONTENTION}[actors]", actor_terms))
        if actor_terms and turning(problem, a):
            rows.append(Row(f"contention_turns_a{ai}", f"{CONTENTION}[turns]",
                            turns + [Term(x.seconds, (*x.when, r)) for x in own]))
    return [Row("contention_learner", f"{CONTENTION}[learner]", own + others)] + rows if rows else []


def turning(problem: Problem, a: ActorOption) -> bool:
    """(one host) whether option a's actors may take turns with the learner: a one-thread learner beside as many
    actor processes as the host has lanes (more actors than lanes crowd among themselves and share them as
    contention[actors] says; a learner of T > 1 threads waits out all of their work anyway)."""
    return problem.learner_threads == 1 and a.n == problem.resource(problem.host).lanes


def turn_work(problem: Problem, a: ActorOption) -> tuple[dict[str, float], list[Term]]:
    """(one host) what `takes_turns` weighs for option a: one actor's host work h with act on each device d it
    may act on, and process[learner]'s terms."""
    node = problem.node_list()[0]
    works = {d: _host_work(problem, node, a, d, t) for (aa, d), t in problem.actor_period.items() if aa == a}
    return works, _process_terms(problem, node)


def takes_turns(problem: Problem, a: ActorOption, where: dict[str, str], actors: ActorOption,
                spread: dict[str, int], shards: tuple[str, ...] = ()) -> bool:
    """r[a] of one placement (one host): option a is the plan's, it crowds the host with a one-thread learner,
    and its actors' host work outruns the lanes the learner leaves them: n·h > (L − 1)·process[learner]."""
    if actors != a or multi_node(problem) or not turning(problem, a):
        return False
    works, own = turn_work(problem, a)
    lanes = problem.resource(problem.host).lanes
    return a.n * works[where[ACT]] > (lanes - 1) * value(problem, own, where, actors, spread, shards)


def _host_work(problem: Problem, node: Node, a: ActorOption, d: str, period: float) -> float:
    """One actor's work on the host per iteration, of its period with act on d: all of it when d is on the host,
    else its env stepping (the act device's time is not the host's)."""
    return period if problem.device(d).resource == node.host else min(period, node.env_cost / a.n)


def _stretched(terms: list[Term], c: Literal) -> list[Term]:
    """The terms, and each again × the contention c: N/L of the work in all."""
    return terms + [Term(t.seconds, (*t.when, c)) for t in terms]


def latency_rows(problem: Problem) -> list[Row]:
    """(f) latency: without prefetch, sample → learn → priority update in turn ≤ P."""
    if problem.prefetch:
        return []
    if problem.sharded:  # the shards answer side by side: one row per device a shard may sit on
        chain = transfer_terms(problem, chain_edge)
        rows = []
        for j, d in enumerate(problem.devices):
            mine = [t for k in ("replay_sample", "priority_update")
                    for t in kernel_terms(problem, k, lambda dd, d=d: dd == d.id)]
            if mine:
                terms = mine + kernel_terms(problem, LEARN) + \
                    [t for e, s, s2, t in chain if replay_end(e, s, s2) == d.id]
                rows.append(Row(f"latency_d{j}", "latency", terms))
        return rows
    terms = [t for k in ("replay_sample", LEARN, "priority_update") for t in kernel_terms(problem, k)]
    terms += [t for *_, t in transfer_terms(problem, chain_edge)]
    return [Row("latency", "latency", terms)]


def network_rows(problem: Problem) -> list[Row]:
    """(i) network[n,out], network[n,in]: a node's network interface sends (receives) the bytes of every
    edge that leaves (enters) the node, at the link's bandwidth, within P (full duplex)."""
    if not multi_node(problem):
        return []
    crossing = transfer_terms(problem, lambda e: True, nic=True)
    node_of = {d.id: d.node for d in problem.devices}
    rows = []
    for ni, node in enumerate(problem.node_list()):
        out = [t for _, d, d2, t in crossing if node_of[d] == node.name and node_of[d2] != node.name]
        into = [t for _, d, d2, t in crossing if node_of[d2] == node.name and node_of[d] != node.name]
        rows.append(Row(f"network_n{ni}_out", f"network[{node.name},out]", out))
        rows.append(Row(f"network_n{ni}_in", f"network[{node.name},in]", into))
    return rows


def instance_rows(problem: Problem) -> list[Row]:
    """instance[d]: the work one instance of a GPU slice runs in an iteration ≤ P."""
    rows = []
    for j, d in enumerate(problem.devices):
        if not d.is_slice:
            continue
        terms = [t for k in LEARNER_PROCESS for t in kernel_terms(problem, k, lambda dd, d=d: dd == d.id)]
        if d.instances == 1:
            terms += kernel_terms(problem, ACT, lambda dd, d=d: dd == d.id)
        if terms:
            rows.append(Row(f"instance_d{j}", f"instance[{d.id}]", terms))
    return rows


def memory_rows(problem: Problem) -> list[MemoryRow]:
    """(d) memory[d] for every device, then mps_memory[r] for every GPU with an MPS share among its devices."""
    rows = []
    for j, d in enumerate(problem.devices):
        rows.append(MemoryRow(f"memory_d{j}", f"memory[{d.id}]", _needs(problem, PLACED, d.id), d.memory_bytes))
    mps = sorted({d.resource for d in problem.devices if d.slicing == "mps"})
    for ri, r in enumerate(mps):
        one_memory = [d for d in problem.devices if d.resource == r and d.slicing in ("mps", "")]
        needs = [n for d in one_memory for n in _needs(problem, LEARNER_PROCESS, d.id)]
        needs += [Need(m, (count_literal(a, d.id),)) for d in one_memory for (a, dd) in problem.act_cost
                  if dd == d.id and (m := problem.memory.get((ACT, d.id), 0.0)) > 0]
        # an MPS share reports its GPU's memory, as the whole GPU does
        rows.append(MemoryRow(f"mps_memory_r{ri}", f"mps_memory[{r}]", needs,
                              max(d.memory_bytes for d in one_memory)))
    return rows


def _needs(problem: Problem, kernels: tuple[str, ...], d: str) -> list[Need]:
    """The memory of each of `kernels` that may sit on d, when it does."""
    return [n for k in kernels if (m := problem.memory.get((k, d), 0.0)) > 0 and _allowed(problem, k, d)
            for n in _kernel_needs(problem, k, d, m)]


def _kernel_needs(problem: Problem, k: str, d: str, m: float) -> list[Need]:
    """k's memory m on d: a shard of K holds 1/K of the replay storage."""
    if k not in REPLAY or not problem.sharded:
        return [Need(m, (kernel_literal(k, d),))]
    return [Need(m, (kernel_literal(k, d), shards_literal(1)))] + \
        [Need(m / K, (kernel_literal(k, d), shards_literal(K))) for (kk, dd, K) in problem.shard_cost
         if kk == k and dd == d]


def _allowed(problem: Problem, k: str, d: str) -> bool:
    if k == ACT:
        return any(dd == d for (_, dd) in problem.act_cost)
    return (k, d) in problem.cost


def _on(res_of: dict[str, str], resource: str, device: str) -> bool:
    return res_of[device] == resource


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def period_rows(problem: Problem, busy_terms: dict[str, list[Term]]) -> tuple[list[Row], list[Row]]:
    """(rows before the feasibility families, rows after them), in the order the program adds them."""
    return (load_rows(problem, busy_terms) + role_rows(problem),
            actor_period_rows(problem) + process_rows(problem) + latency_rows(problem) + network_rows(problem)
            + instance_rows(problem) + contention_rows(problem))


# ---------------------------------------------------------------------------------------------------------------
# one fixed placement


def holds(problem: Problem, literal: Literal, where: dict[str, str], actors: ActorOption,
          spread: dict[str, int], shards: tuple[str, ...] = ()) -> float:
    """A literal's value for one placement: 1 or 0, for a count the processes and for a share their part of
    all of them (`spread`: act's device on each node with actors → how many; `shards`: the devices holding
    the replay server's shards, () for one on where["replay_insert"])."""
    kind = literal[0]
    if kind == "o":
        return float(actors == literal[1])
    if kind == "r":
        return float(takes_turns(problem, literal[1], where, actors, spread, shards))
    if kind == "c":
        return contention(problem, literal[1], where, spread, shards)
    if kind == "k":
        return float(max(1, len(shards)) == literal[1])
    if kind == "x":
        if literal[1] in REPLAY and shards:
            return float(literal[2] in shards)
        return float(spread.get(literal[2], 0) > 0) if literal[1] == ACT else float(where[literal[1]] == literal[2])
    if kind == "v":
        return float(actors == literal[1] and spread.get(literal[2], 0) > 0)
    if kind == "f":
        return spread.get(literal[1], 0) / actors.n
    return float(spread.get(literal[2], 0)) if actors == literal[1] else 0.0  # "w"


def contention(problem: Problem, node: str, where: dict[str, str], spread: dict[str, int],
               shards: tuple[str, ...] = ()) -> float:
    """c[node] of one placement: (N − L)/L when its N processes outnumber its host's L lanes, else 0."""
    lanes = problem.resource(problem.node(node).host).lanes
    processes = sum(n for d, n in spread.items() if problem.device(d).node == node)
    processes += problem.learner_processes(node, problem.device(where[LEARN]).node)
    processes += sum(n == node for n in server_nodes(problem, where, shards))
    return max(0, processes - lanes) / lanes


def value(problem: Problem, terms: list[Term], where: dict[str, str], actors: ActorOption,
          spread: dict[str, int], shards: tuple[str, ...] = ()) -> float:
    return sum(t.seconds * _factor(problem, t.when, where, actors, spread, shards) for t in terms)


def held(problem: Problem, row: MemoryRow, where: dict[str, str], actors: ActorOption,
         spread: dict[str, int], shards: tuple[str, ...] = ()) -> float:
    """The bytes a memory row counts for one placement."""
    return sum(n.bytes * _factor(problem, n.when, where, actors, spread, shards) for n in row.needs)


def _factor(problem: Problem, when: tuple[Literal, ...], where: dict[str, str], actors: ActorOption,
            spread: dict[str, int], shards: tuple[str, ...] = ()) -> float:
    """The product of the literals' values (1 for none)."""
    factor = 1.0
    for lit in when:
        factor *= holds(problem, lit, where, actors, spread, shards)
    return factor


def fastest_threads(lanes: int, learn_s: dict[int, float]) -> int:
    """The learner's threads T ∈ {1, …, lanes} whose learn is fastest when it has the host to itself (the
    sequential launcher's roles run in turn), over the counts `learn_s` times (a count it lacks costs its 1-thread
    figure, so it never wins: ties keep the fewer threads)."""
    return min(range(1, max(1, lanes) + 1), key=lambda t: (learn_s.get(t, learn_s[1]), t))


def in_turn(problem: Problem, where: dict[str, str], actors: ActorOption) -> float:
    """The period of one host's placement when every role runs in turn in one process (the sequential launcher):
    nothing overlaps and no process waits on another, so an iteration costs all of its work once: the env
    stepping, act with its weight loads, the replay kernels, learn, the learner's publishes and the transfers
    between the kernels' devices. Build the problem with `beside_actors=False` (build.py) for learn's T-thread
    figure alone on the host, which is how it runs there."""
    if problem.nodes:
        raise ValueError("the sequential launcher runs on one host; a cluster's problem has no in-turn period")
    learn = where[LEARN]
    work = problem.env_cost + problem.act_cost[(actors, where[ACT])] + problem.publish.get((actors, learn), 0.0)
    work += sum(problem.cost[(k, where[k])] for k in (*REPLAY, LEARN))
    return work + sum(problem.transfer.get((e.name, where[e.src], where[e.dst]), 0.0) for e in problem.edges)
