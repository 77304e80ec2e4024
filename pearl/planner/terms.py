"""The literals and terms of the planner's accounting, which pearl/planner/accounting.py's docstring describes:
the kernel names, the literal of each decision (a kernel on a device, an actor option's processes, a share, a
shard count, a contention, turns) and what the work of a placement is made of as terms over them: each kernel's
seconds (learn with the learner's weight publishes), each transfer's, and busy[r], every resource's. The rows
of accounting.py group these terms into the bounds on P.
"""

from __future__ import annotations

from dataclasses import dataclass

from pearl.planner.problem import PLACED, REPLAY, ActorOption, Edge, Problem

ENV = "env_step"  # the edge end that is not placed: the actor processes run it at their node's host device
ACT = "act"
LEARN = "learn"
#: the kernels the learner process runs (act runs in the actor processes)
LEARNER_PROCESS = (*REPLAY, LEARN)

Literal = tuple


@dataclass(frozen=True)
class Term:
    seconds: float
    when: tuple[Literal, ...]  # the seconds count × the product of their values; () always counts


def multi_node(problem: Problem) -> bool:
    return len(problem.node_list()) > 1


def kernel_literal(k: str, d: str) -> Literal:
    return ("x", k, d)


def count_literal(a: ActorOption, d: str) -> Literal:
    return ("w", a, d)


def share_literal(d: str) -> Literal:
    return ("f", d)


def shards_literal(K: int) -> Literal:
    return ("k", K)


def option_literal(a: ActorOption) -> Literal:
    return ("o", a)


def contention_literal(node: str) -> Literal:
    return ("c", node)


def turns_literal(a: ActorOption) -> Literal:
    return ("r", a)


#: literals whose value is a share, not a truth value: the program couples them last
SHARES = ("f", "c")


def _sharded_end(problem: Problem, e: Edge) -> bool:
    return problem.sharded and (e.src in REPLAY or e.dst in REPLAY)


def shard_k(term: Term) -> int:
    """The shard count a term holds for (1 when it names none)."""
    return next((lit[1] for lit in term.when if lit[0] == "k"), 1)


def replay_end(e: Edge, d: str, d2: str) -> str | None:
    """The device of a transfer's replay end (None: the edge has none)."""
    return d if e.src in REPLAY else d2 if e.dst in REPLAY else None


def actor_ends(problem: Problem, end: str, d: str, acting: list[str]) -> list[str] | None:
    """For an edge end the actor processes run (act, or env_step at a node's host device): the act devices
    (of `acting`, problem.allowed("act")) whose processes carry it from d; None for a placed kernel's end."""
    if end == ACT:
        return [d] if d in acting else []
    if end != ENV:
        return None
    node = next((n.name for n in problem.node_list() if n.host_device == d), None)
    return [dd for dd in acting if node is not None and problem.device(dd).node == node]


def kernel_terms(problem: Problem, k: str, keep=lambda d: True) -> list[Term]:
    """k's seconds on each device it is allowed on (act: per actor option, each node its processes' part: the
    seconds of one process × their count; learn: with the learner's weight publishes)."""
    if k == LEARN:
        return [Term(t, (kernel_literal(k, d),)) for (kk, d), t in problem.cost.items() if kk == k and keep(d)] + \
            publish_terms(problem, keep)
    if k == ACT:
        return [Term(t / a.n, (count_literal(a, d),)) for (a, d), t in problem.act_cost.items() if keep(d)]
    if k in REPLAY and problem.sharded:  # one shard's seconds for each shard count K
        out = [Term(t, (kernel_literal(k, d), shards_literal(1))) for (kk, d), t in problem.cost.items()
               if kk == k and keep(d)]
        return out + [Term(t, (kernel_literal(k, d), shards_literal(K))) for (kk, d, K), t in
                      problem.shard_cost.items() if kk == k and keep(d)]
    return [Term(t, (kernel_literal(k, d),)) for (kk, d), t in problem.cost.items() if kk == k and keep(d)]


def publish_terms(problem: Problem, keep=lambda d: True) -> list[Term]:
    """The learner's weight publishes with learn on d: one term when every actor option costs them the same,
    else one per option, coupled with it."""
    options = problem.actor_options()
    by_device: dict[str, dict[ActorOption, float]] = {}
    for (a, d), t in problem.publish.items():
        by_device.setdefault(d, {})[a] = t
    out = []
    for d, per_option in by_device.items():
        if not keep(d):
            continue
        seconds = [per_option.get(a, 0.0) for a in options]
        if len(set(seconds)) == 1:
            out += [Term(seconds[0], (kernel_literal(LEARN, d),))] if seconds and seconds[0] else []
        else:
            out += [Term(t, (kernel_literal(LEARN, d), option_literal(a))) for a, t in zip(options, seconds) if t]
    return out


def transfer_terms(problem: Problem, keep, nic: bool = False) -> list[tuple[Edge, str, str, Term]]:
    """(edge, source device, destination device, term) of every positive transfer of the edges `keep`
    accepts, from problem.transfer (nic: problem.nic). An edge with an actor end (act, env_step) carries all
    the actors' traffic, whatever their option: each node's processes their share of it. An edge with a
    replay end of a sharded replay server: once per shard count K, one shard's part (problem.shard_transfer,
    shard_nic), coupled with ("k", K)."""
    table = problem.nic if nic else problem.transfer
    shard_table = problem.shard_nic if nic else problem.shard_transfer
    acting = problem.allowed(ACT)
    out = []
    for e in problem.edges:
        if not keep(e):
            continue
        sharded = _sharded_end(problem, e)
        for (name, d, d2), t in table.items():
            if name == e.name and t > 0:
                out += _edge_terms(problem, e, d, d2, t, acting, (shards_literal(1),) if sharded else ())
        if sharded:
            out += [term for (name, d, d2, K), t in shard_table.items() if name == e.name and t > 0
                    for term in _edge_terms(problem, e, d, d2, t, acting, (shards_literal(K),))]
    return out


def _edge_terms(problem: Problem, e: Edge, d: str, d2: str, t: float, acting: list[str],
                extra: tuple[Literal, ...]) -> list[tuple[Edge, str, str, Term]]:
    src, dst = actor_ends(problem, e.src, d, acting), actor_ends(problem, e.dst, d2, acting)
    if src is None and dst is None:
        return [(e, d, d2, Term(t, (kernel_literal(e.src, d), kernel_literal(e.dst, d2), *extra)))]
    if src is not None and dst is not None:  # env_step → act: the same processes' own traffic
        return [(e, d, d2, Term(t, (share_literal(dd), *extra))) for dd in src if dd in dst]
    ends, other = (src, kernel_literal(e.dst, d2)) if src is not None else (dst, kernel_literal(e.src, d))
    return [(e, d, d2, Term(t, (share_literal(dd), other, *extra))) for dd in ends]


def busy(problem: Problem) -> dict[str, list[Term]]:
    """busy[r]; (g) shared[r]: every device of r adds into one busy[r], a GPU slice's kernel seconds at its
    share of the GPU (SM-seconds: slices run side by side)."""
    res_of = {d.id: d.resource for d in problem.devices}
    share = {d.id: d.share for d in problem.devices}
    out: dict[str, list[Term]] = {r.id: [] for r in problem.resources}
    for k in PLACED:
        for term in _busy_terms(problem, k):
            d = term.when[0][2]
            out[res_of[d]].append(term if share[d] == 1 else Term(term.seconds * share[d], term.when))
    if multi_node(problem):  # each node's actors step their share of the envs on its host
        for node in problem.node_list():
            out[node.host] += [Term(node.env_cost, (share_literal(d),)) for d in problem.allowed(ACT)
                               if on_node(problem, node.name, d)]
    else:
        out[problem.host].append(Term(problem.env_cost, ()))
    for _, d, d2, term in transfer_terms(problem, lambda e: True):
        out[res_of[d]].append(term)
        if res_of[d2] != res_of[d]:
            out[res_of[d2]].append(term)
    return out


def _busy_terms(problem: Problem, k: str) -> list[Term]:
    """k's kernel terms as lane-seconds: learn on a host device with T threads keeps T lanes busy (T·its
    seconds; its weight publishes stay one thread's); a kernel timed by its device's own clock counts the share
    of its seconds the device is busy (β[k, d], Problem.device_share; 1 where absent)."""
    def beta(d: str) -> float:
        return problem.device_share.get((k, d), 1.0)

    if k != LEARN:
        return [Term(t.seconds * beta(t.when[0][2]), t.when) for t in kernel_terms(problem, k)]
    hosts = {n.host_device for n in problem.node_list()}
    return [Term(t * (problem.learner_threads if d in hosts else 1) * beta(d), (kernel_literal(k, d),))
            for (kk, d), t in problem.cost.items() if kk == k] + publish_terms(problem)


def on_node(problem: Problem, node: str, device: str) -> bool:
    return problem.device(device).node == node
