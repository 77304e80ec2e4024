"""Whether a run's roles fit a Ray cluster node by node, and the largest CPU share with which they do: pure
functions of numbers (no Ray), which `placement` feeds with the cluster's nodes.

Ray admits an actor on one node only, so roles whose demands fit the cluster's totals may still not fit its
nodes: three roles of 2/3 CPU on two nodes of 1 CPU ask for the 2 CPUs there are, but no node takes a second
role, and Ray waits for the third for ever. `pack` answers whether some assignment of the roles to the nodes
holds them all (an exact search over the roles, identical ones and identical nodes taken once, within a budget
of steps); `largest_share` finds the largest equal CPU share with which it does; `refusal` is the one-line
answer to a run that cannot be placed, naming the roles, what each node has and what to change.

Ray keeps resources in fixed point (`UNIT`: 1/10 000 of one) and truncates what it is asked (k roles of c/k
CPUs fill no more than c; checked on Ray 2.60), so the arithmetic here is in those units, exactly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

__all__ = ["UNIT", "NodeRoom", "Packing", "RoleNeed", "equal_share", "largest_share", "pack", "refusal", "waiting_line"]

UNIT = 10_000  # Ray's resources are integers of 1/UNIT
SEARCH_BUDGET = 20_000  # steps of one search; past it the answer is undecided (a run is never refused on a guess)
SHARE = "CPU"  # the resource `largest_share` splits


def units(amount: float) -> int:
    """An amount in Ray's fixed point, truncated as Ray does (the epsilon keeps 0.3 at 3000, not 2999)."""
    return math.floor(amount * UNIT + 1e-6)


@dataclass(frozen=True)
class NodeRoom:
    """One live node and what it has (Ray's totals: what the node holds when no actor runs there)."""

    node_id: str
    resources: Mapping[str, float]
    label: str = ""  # how errors name it; the id's first 8 hex digits when empty

    @property
    def name(self) -> str:
        return self.label or f"node {self.node_id[:8]}"


@dataclass(frozen=True)
class RoleNeed:
    """One role's demand and where it must or would go."""

    role: str
    demand: Mapping[str, float]
    node_id: str | None = None  # the node it is pinned to
    soft: bool = False  # with node_id: elsewhere when that node cannot hold it (Ray's soft affinity)
    shared: bool = False  # its CPUs are the share `largest_share` looks for (its own demand's CPU is ignored)


@dataclass(frozen=True)
class Packing:
    """`pack`'s answer: each role's node where an assignment was found; `undecided` where the search ran out."""

    where: dict[str, str] | None
    undecided: bool = False

    @property
    def fits(self) -> bool:
        """Placeable, or not known not to be (a search out of budget refuses nothing)."""
        return self.where is not None or self.undecided


class _OutOfBudget(Exception):
    pass


@dataclass
class _Search:
    """One search: the nodes' room left (units, per key) and the roles' groups (identical free roles)."""

    room: list[list[int]]
    groups: list[tuple[tuple[int, ...], list[str]]]
    order: list[int]  # node indices, roomiest first
    budget: int = SEARCH_BUDGET
    steps: int = 0
    taken: dict[str, int] = field(default_factory=dict)  # role → node index

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise _OutOfBudget

    def holds(self, j: int, need: tuple[int, ...]) -> int:
        """How many roles of demand `need` node j has room for."""
        return min((r // d for r, d in zip(self.room[j], need, strict=True) if d), default=1 << 30)

    def place(self, g: int) -> bool:
        if g == len(self.groups):
            return True
        if not self._room_for_the_rest(g):
            return False
        need, names = self.groups[g]
        return self._spread(g, need, names, 0, None, 1 << 30)

    def _spread(self, g: int, need: tuple[int, ...], names: list[str], at: int, twin: list[int] | None,
                most: int) -> bool:
        """Roles `names` of group g over the nodes order[at:], as many on each node as fit first; a node as roomy as
        the one before it (`twin`: that one's room before this group) takes no more than it did (`most`)."""
        self.tick()
        if not names:
            return self.place(g + 1)
        if at == len(self.order) or sum(self.holds(j, need) for j in self.order[at:]) < len(names):
            return False
        j = self.order[at]
        before = list(self.room[j])
        cap = min(self.holds(j, need), len(names), most if twin == before else 1 << 30)
        for t in range(cap, -1, -1):
            self.room[j] = [r - t * d for r, d in zip(before, need, strict=True)]
            for name in names[:t]:
                self.taken[name] = j
            if self._spread(g, need, names[t:], at + 1, before, t):
                return True
        self.room[j] = before
        return False

    def _room_for_the_rest(self, g: int) -> bool:
        """Each resource's room left covers what groups g.. ask for (a bound that prunes most dead ends)."""
        for k in range(len(self.room[0]) if self.room else 0):
            asked = sum(need[k] * len(names) for need, names in self.groups[g:])
            if asked > sum(room[k] for room in self.room):
                return False
        return True


def _keys(needs: Sequence[RoleNeed]) -> list[str]:
    return sorted({k for n in needs for k, v in n.demand.items() if units(v) > 0})


def pack(needs: Sequence[RoleNeed], nodes: Sequence[NodeRoom], budget: int = SEARCH_BUDGET) -> Packing:
    """Some assignment of every role to one node that holds all the roles put on it: the pinned roles on their
    node (a soft pin as Ray keeps it: on its node whenever that node could hold the role alone), the others
    searched for, roomiest nodes and largest roles first, within `budget` steps."""
    keys = _keys(needs)
    has = [[units(n.resources.get(k, 0.0)) for k in keys] for n in nodes]
    room = [list(h) for h in has]
    index = {n.node_id: j for j, n in enumerate(nodes)}
    demands = {need.role: tuple(units(need.demand.get(k, 0.0)) for k in keys) for need in needs}
    free: dict[tuple[int, ...], list[str]] = {}
    taken: dict[str, int] = {}
    for need in needs:
        demand, j = demands[need.role], index.get(need.node_id) if need.node_id is not None else None
        if need.node_id is not None and j is None and not need.soft:
            return Packing(None)  # pinned to a node the cluster lacks
        if j is not None and need.soft and any(d > h for d, h in zip(demand, has[j], strict=True)):
            j = None  # its node could never hold it: Ray puts it elsewhere (a node only busy, Ray waits for)
        if j is None:
            free.setdefault(demand, []).append(need.role)
            continue
        room[j] = [r - d for r, d in zip(room[j], demand, strict=True)]
        if min(room[j], default=0) < 0:
            return Packing(None)
        taken[need.role] = j
    largest = [max([r[k] for r in room] + [1]) for k in range(len(keys))]
    groups = sorted(free.items(), key=lambda item: max((d / m for d, m in zip(item[0], largest, strict=True)),
                                                        default=0.0), reverse=True)
    order = sorted(range(len(nodes)), key=lambda j: room[j], reverse=True)
    search = _Search(room, [(need, names) for need, names in groups if any(need)], order, budget, taken=taken)
    try:
        found = search.place(0)
    except _OutOfBudget:
        return Packing(None, undecided=True)
    if not found:
        return Packing(None)
    anywhere = {name: order[0] if order else -1 for need, names in groups if not any(need) for name in names}
    return Packing({role: nodes[j].node_id if j >= 0 else "" for role, j in {**search.taken, **anywhere}.items()})


def largest_share(needs: Sequence[RoleNeed], nodes: Sequence[NodeRoom], most: float = 1.0) -> float | None:
    """The largest CPU share, at most `most`, that the `shared` roles can each have with every role placed on the
    nodes (`pack`), in Ray's units; None where no share does. More room never hurts, so a binary search."""
    def fits(share: int) -> bool:
        trial = [replace(n, demand={**n.demand, SHARE: share / UNIT}) if n.shared else n for n in needs]
        return pack(trial, nodes).where is not None  # undecided counts as no: a smaller share is safe

    low, high = 0, min(units(most), max((units(n.resources.get(SHARE, 0.0)) for n in nodes), default=0))
    if high < 1 or not fits(1):
        return None
    low = 1
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low / UNIT


def equal_share(capacities: Sequence[float], roles: int, most: float = 1.0) -> float | None:
    """The largest share, at most `most`, of which `roles` roles fit on nodes with these capacities one node at a
    time (a node of c holds floor(c / share) of them), in Ray's units; None where the nodes have none."""
    have = [units(c) for c in capacities if units(c) > 0]
    if not have or roles < 1:
        return None
    low, high = 1, min(units(most), max(have))
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if sum(c // mid for c in have) >= roles else (low, mid - 1)
    return low / UNIT if sum(c // low for c in have) >= roles else None


# --------------------------------------------------------------------------------------------- the error
def refusal(needs: Sequence[RoleNeed], nodes: Sequence[NodeRoom]) -> str | None:
    """Why the cluster cannot hold the roles, in one line, or None where it can (or the search could not tell):
    the first role past a resource's total, a role pinned to a node the cluster lacks or past its node's
    resources, or roles that fit the totals but no assignment to the nodes; each with what the roles ask for,
    what each node has, and what to change."""
    why = _past_totals(needs, nodes) or _past_pins(needs, nodes)
    if why is None and not pack(needs, nodes).fits:
        why = "the roles fit the cluster's totals but cannot be packed onto its nodes (Ray puts each on one node)"
    if why is None:
        return None
    keys = _keys(needs) or [SHARE]
    return (f"{why}. The roles ask for: {_asked(needs, nodes, keys)}; the nodes have: {_had(nodes, keys)}; "
            f"{_advice(keys)}")


def waiting_line(needs: Sequence[RoleNeed], nodes: Sequence[NodeRoom], free: Mapping[str, float],
                 seconds: float) -> str:
    """The progress line of roles Ray has not started after `seconds`: what they ask for, what the cluster has
    free (`free`: Ray's available resources), and where to look."""
    keys = _keys(needs) or [SHARE]
    have = " + ".join(f"{free.get(k, 0.0):.4g} {k}" for k in keys)
    return (f"waiting {seconds:.0f} s for Ray to start {_asked(needs, nodes, keys)}; the cluster has {have} free "
            "in all (Ray starts a role once one node has all it asks for free; `ray status` on the head shows "
            "what is pending)")


def _past_totals(needs: Sequence[RoleNeed], nodes: Sequence[NodeRoom]) -> str | None:
    totals: dict[str, int] = {}
    for node in nodes:
        for k, v in node.resources.items():
            totals[k] = totals.get(k, 0) + units(v)
    asked: dict[str, float] = {}
    held: dict[str, int] = {}  # what Ray holds of it: each role's demand truncated
    for need in needs:
        for k, v in need.demand.items():
            asked[k], held[k] = asked.get(k, 0.0) + v, held.get(k, 0) + units(v)
            if held[k] > totals.get(k, 0):
                return (f"{need.role} cannot be placed: the cluster has {totals.get(k, 0) / UNIT:g} {k}, the roles "
                        f"up to it ask for {asked[k]:g}")
    return None


def _past_pins(needs: Sequence[RoleNeed], nodes: Sequence[NodeRoom]) -> str | None:
    by_id = {n.node_id: n for n in nodes}
    pinned: dict[tuple[str, str], tuple[float, int]] = {}  # (node, resource) → asked, held by the roles pinned so far
    for need in needs:
        if need.node_id is None or need.soft:
            continue
        if need.node_id not in by_id:
            return f"{need.role} is pinned to node {need.node_id}, which is not in the cluster"
        have = by_id[need.node_id].resources
        for k, v in need.demand.items():
            total, held = pinned.get((need.node_id, k), (0.0, 0))
            pinned[need.node_id, k] = total, held = total + v, held + units(v)
            if held > units(have.get(k, 0.0)):
                return (f"{need.role} cannot be placed on node {need.node_id}: it has {have.get(k, 0.0):g} {k}, the "
                        f"roles pinned to it up to this one ask for {total:g}")
    return None


def _amounts(demand: Mapping[str, float], keys: Sequence[str]) -> str:
    shown = [f"{demand.get(k, 0.0):.4g} {k}" for k in keys if units(demand.get(k, 0.0)) > 0]
    return " + ".join(shown) or "nothing"


def _asked(needs: Sequence[RoleNeed], nodes: Sequence[NodeRoom], keys: Sequence[str]) -> str:
    """The roles and their demands, a run of numbered roles asking the same as one ('actor worker 0-3 ... each')."""
    names = {n.node_id: n.name for n in nodes}
    runs: list[tuple[str, int, int, str]] = []  # (kind, first, last, what) of consecutive alike roles
    for need in needs:
        what = _amounts(need.demand, keys)
        if need.node_id is not None:
            where = names.get(need.node_id, f"node {need.node_id[:8]}")
            what += f" ({'preferably ' if need.soft else ''}on {where})"
        kind, number = _numbered(need.role)
        if runs and number is not None and runs[-1][0] == kind and runs[-1][3] == what and runs[-1][2] == number - 1:
            runs[-1] = (kind, runs[-1][1], number, what)
        else:
            runs.append((kind, number if number is not None else -1, number if number is not None else -1, what))
    return ", ".join(_run(kind, first, last, what) for kind, first, last, what in runs)


def _numbered(role: str) -> tuple[str, int | None]:
    m = re.fullmatch(r"(.*) (\d+)", role)
    return (m.group(1), int(m.group(2))) if m else (role, None)


def _run(kind: str, first: int, last: int, what: str) -> str:
    if first < 0:
        return f"{kind}: {what}"
    if first == last:
        return f"{kind} {first}: {what}"
    return f"{kind} {first}-{last}: {what} each"


def _had(nodes: Sequence[NodeRoom], keys: Sequence[str]) -> str:
    if not nodes:
        return "no live node"
    return ", ".join(f"{n.name}: " + " + ".join(f"{n.resources.get(k, 0.0):g} {k}" for k in keys) for n in nodes)


def _advice(keys: Sequence[str]) -> str:
    """What to change, the resource the nodes may lack first."""
    ways = []
    if "GPU" in keys:
        ways.append("learn and act on a device the nodes have (--device cpu), or add a node with a GPU")
    custom = [k for k in keys if k not in (SHARE, "GPU")]
    if custom:
        ways.append(f"start nodes that carry {', '.join(custom)} (ray start --resources)")
    ways.append("run fewer --actors or --learners, or give a cluster plan (--plan) that puts each role on a node "
                "that can hold it")
    return "to place them, " + "; or ".join(ways)
