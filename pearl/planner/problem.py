"""The planning problem as plain numbers: what the integer program takes, and nothing of how it is built.

Every cost is in seconds per iteration (one learner update and 1/ρ env steps), every memory need in bytes, as the
fields' comments say. pearl/planner/build.py (one host) and cluster_problem.py (a
cluster) fill a `Problem` from the cost model; the program over it (decisions, constraints (a)-(j) and the rows
besides, objectives) is stated once, in pearl/planner/ilp.py's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Kernels the program places (env_step always runs in the actors on the host CPU; weight_sync is a transfer).
PLACED: tuple[str, ...] = ("act", "replay_insert", "replay_sample", "priority_update", "learn")
REPLAY: tuple[str, ...] = ("replay_insert", "replay_sample", "priority_update")
ROLES: dict[str, tuple[str, ...]] = {"replay": REPLAY, "learner": ("learn",)}


@dataclass(frozen=True)
class Resource:
    """A physical resource: its lanes and its power (idle, and all lanes busy)."""

    id: str
    lanes: int
    idle_w: float
    busy_w: float


@dataclass(frozen=True)
class Device:
    id: str
    resource: str
    memory_bytes: float
    node: str = ""  # the node the device is in ("" in a problem of one host)
    #: a GPU slice's fraction of its GPU's SMs (1: a whole device), and how many processes may each hold one
    #: instance of it (1: the processes placed on it share one instance, as on a whole device)
    share: float = 1.0
    instances: int = 1
    #: how the GPU is sliced: "mig" or "mps" ("" for a whole device); one GPU is sliced one way in a plan
    #: (MIG's instances and MPS's shares of the whole GPU exclude each other)
    slicing: str = ""
    #: the device's id in its node's own profile, where the id is NODE/DEVICE ("": the id itself, in a problem
    #: of one host)
    local_id: str = ""

    @property
    def is_slice(self) -> bool:
        return self.share < 1 or self.instances > 1

    @property
    def local(self) -> str:
        """The id its node's profile and cost model know the device by."""
        return self.local_id or self.id


@dataclass(frozen=True)
class Node:
    """One machine of a cluster: where its actors' env stepping runs, and what it costs there."""

    name: str
    host: str  # the resource of its CPU
    host_device: str  # its `cpu` device
    env_cost: float  # seconds per iteration of the env stepping when the actors are on this node


@dataclass(frozen=True)
class ActorOption:
    """n actor processes, each stepping `envs` environments and calling act on all of them at once."""

    n: int
    envs: int


@dataclass(frozen=True)
class Edge:
    """Data from kernel src to kernel dst: bytes per iteration (transfer cost depends on the two devices)."""

    name: str
    src: str
    dst: str


@dataclass
class Problem:
    resources: list[Resource]
    devices: list[Device]
    host: str  # the resource the actors' env stepping runs on (the CPU)
    host_device: str  # the device env_step runs on ("cpu"): the source of the actors' edges
    #: seconds per iteration of each replay/learner kernel on each device that implements it (learn without its
    #: weight publishes, which are `publish`'s)
    cost: dict[tuple[str, str], float]
    #: for each actor option and act device: seconds per iteration of act on that device (all actors together)
    act_cost: dict[tuple[ActorOption, str], float]
    #: seconds per iteration of env stepping (all actors together, on the host; node.env_cost in a cluster)
    env_cost: float
    #: one actor's period for option a with act on device d: (S/n)·(env step + act per call)
    actor_period: dict[tuple[ActorOption, str], float]
    edges: list[Edge]
    #: seconds per iteration for edge e from device d to d' (0 within one device/resource)
    transfer: dict[tuple[str, str, str], float]
    #: bytes kernel k needs on device d (replay storage, parameters)
    memory: dict[tuple[str, str], float] = field(default_factory=dict)
    prefetch: bool = True  # the learner samples the next batch while it learns: no latency chain
    #: the nodes of a cluster (empty: one host, described by host, host_device and env_cost)
    nodes: list[Node] = field(default_factory=list)
    #: seconds per iteration that edge e from d to d' on another node keeps the two nodes' network
    #: interfaces busy (bytes / bandwidth, sent by d's node and received by d''s)
    nic: dict[tuple[str, str, str], float] = field(default_factory=dict)
    #: (clusters) the replay server sharded over K ≥ 2 nodes, one shard on one device of each: seconds per
    #: iteration of replay kernel k on one shard on d (its 1/K of the inserts, samples and priority updates);
    #: empty: one replay server, never sharded. A device with no entry for K holds no shard of K
    shard_cost: dict[tuple[str, str, int], float] = field(default_factory=dict)
    #: the transfer (and nic) seconds of edge e between a shard on one end and d' on the other when there are
    #: K ≥ 2 shards, one shard's part: keyed (e, d, d', K) as `transfer` is (e, d, d')
    shard_transfer: dict[tuple[str, str, str, int], float] = field(default_factory=dict)
    shard_nic: dict[tuple[str, str, str, int], float] = field(default_factory=dict)
    #: seconds per iteration of the learner's work once a segment with actor option a and learn on d, which the
    #: learner's thread adds to learn: its weight publishes and its first iteration's surplus (the schedule's
    #: segments grow with the actors: build.py); empty: none
    publish: dict[tuple[ActorOption, str], float] = field(default_factory=dict)
    #: T, the learner's CPU threads (torch's intra-op threads): learn's cost on a host device (`cpu`) is its
    #: T-thread figure (build.py), its busy[host] counts T·cost (T lanes busy), and the learner's process is T
    #: processes in the contention rows. A plan decision: make.py solves one program per T and keeps the best
    learner_threads: int = 1
    #: N, the learners of a learner group (`--learners`), each a process of T threads on the host: learn is on
    #: the host device only, its cost one learner's on B/N rows plus the group's communication (build.py), and
    #: learner_threads is then N·T (the lanes and processes the group holds). A plan decision as T is. In a
    #: cluster (`spread_group`) one learner of T threads on every node: learn's cost on a device is the slowest
    #: node's learn on B/N rows plus the group's communication over the links, and every node holds T
    #: processes of the group wherever learn is placed (learner_threads stays T)
    learners: int = 1
    #: per device learn may take in a group: seconds per update learner 0 spends in the group's collectives, as
    #: priced into learn's cost (what the plan predicts for the run's `group_comm` clock); empty with one learner
    group_comm_s: dict[str, float] = field(default_factory=dict)
    #: (kernel, device) → the share of its seconds the device itself is busy (the profile's device-clock figure
    #: ÷ its wall time, at most 1: a GPU idles between the launches of an eager call): busy[r] counts that share,
    #: the roles' rows the whole; absent: 1
    device_share: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def spread_group(self) -> bool:
        """A cluster's learner group: one learner on every node."""
        return self.learners > 1 and len(self.node_list()) > 1

    def learner_processes(self, node: str, learn_node: str) -> int:
        """The learner group's processes (lanes) on `node` with learn (learner 0) placed on `learn_node`."""
        return self.learner_threads if self.spread_group or node == learn_node else 0

    def shard_counts(self) -> list[int]:
        """The shard counts K the replay server may take: 1, and each K that shard_cost offers."""
        return sorted({1, *(K for (_, _, K) in self.shard_cost)})

    @property
    def sharded(self) -> bool:
        return bool(self.shard_cost)

    def node_list(self) -> list[Node]:
        return self.nodes or [Node("", self.host, self.host_device, self.env_cost)]

    def node(self, name: str) -> Node:
        return next(n for n in self.node_list() if n.name == name)

    def node_of(self, device_id: str) -> Node:
        """The node a device is in."""
        return self.node(self.device(device_id).node)

    def device(self, device_id: str) -> Device:
        return next(d for d in self.devices if d.id == device_id)

    def resource(self, resource_id: str) -> Resource:
        return next(r for r in self.resources if r.id == resource_id)

    def allowed(self, kernel: str) -> list[str]:
        if kernel == "act":
            return sorted({d for (_, d) in self.act_cost})
        return sorted({d for (k, d) in self.cost if k == kernel})

    def actor_options(self) -> list[ActorOption]:
        return sorted({a for (a, _) in self.act_cost}, key=lambda a: (a.n, a.envs))


@dataclass(frozen=True)
class Solution:
    placement: dict[str, str]  # kernel -> device
    actors: ActorOption
    period_s: float
    energy_j: float  # per iteration
    status: str
    solver: str
    gap: float
    solve_s: float
    binding: str  # the constraint that sets P (a resource's load, a role, the actors, the chain)
    #: (clusters) act's device on each node that runs actor processes, and how many it runs there (they sum to
    #: actors.n); empty: all of them on placement["act"]
    spread: dict[str, int] = field(default_factory=dict)
    #: (clusters) the devices holding the replay server's shards, one per node, when it is sharded (K ≥ 2);
    #: empty: one replay server, on placement["replay_insert"]
    shards: tuple[str, ...] = ()

    def replay_devices(self) -> tuple[str, ...]:
        return tuple(self.shards) or (self.placement["replay_insert"],)

    def actor_spread(self) -> dict[str, int]:
        return dict(self.spread) or {self.placement["act"]: self.actors.n}
