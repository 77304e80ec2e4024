"""The plan file, schema `pearl.plan/1`: where every kernel runs, how many actors, and what the cost model
predicts for it and for the all-on-one-device mappings.

    {
      "schema": "pearl.plan/1", "pearl_version", "created", "algo", "env", "objective",
      "profile": {"path", "node", "cpu", "created", "mode"},
      "mapping": {"env_step": "cpu", "act": D, "replay_insert": D, "replay_sample": D, "priority_update": D,
                  "learn": D},
      "actors": n, "envs_per_actor": e,
      "threads": T,  the learner's CPU threads (torch's intra-op threads on `cpu`); optional, 1 when absent
      "learners": N, "learners_why": text,  the learner group's size and why the planner chose it; optional
                     (1 and "" when absent)
      "precision": "fp32" | "bf16-mixed", "precision_why": text,  learn's arithmetic and why the planner chose
                     it, with what the other precision would have given; optional ("fp32" and "" when absent)
      "implementations": {kernel: "eager" | "captured"},  how each placed kernel whose device the profile times
                     more than one way runs (the faster there: act and learn on cuda:N eager or as CUDA graphs);
                     optional ({} when absent: each adapter's own way)
      "actor_devices": {D: processes},  (cluster plans) act's device on each node that runs actor processes
      "replay_shards": {D: shards},  (cluster plans) the devices holding the replay server's shards
      "predicted": {"env_steps_per_s", "updates_per_s", "learner_samples_per_s", "period_s",
                    "energy_per_iteration_j", "power_w", "env_steps_per_joule", "source", "power_source",
                    "scaled": {kernel: the measured workload its times were scaled from}, "workload",
                    "power_by_resource_w": {resource: its mean watts, summing to power_w}},
      "bottleneck": "load[host-cpu]" | "role[learner]" | ...,
      "kernels": {kernel: predicted seconds per iteration on its device (env_step included; weight_sync:
                  the learner's publish + the actors' loads; group_comm with a learner group: learner 0's
                  time in the group's collectives, a part of learn's)},
      "lanes": {"cpu": lanes the plan uses on the host, "accelerator": lanes on other resources, "ratio"},
      "baselines": [{"device", "feasible", "env_steps_per_s", "env_steps_per_joule", "speedup"}],
      "solver": {"name", "status", "gap", "solve_s", "ties": how plans with equal objective figures were told apart},
      "pareto": [{"period_s", "energy_per_iteration_j", "env_steps_per_s", "env_steps_per_joule", "mapping"}],
      "power": {device: {"resource", "idle_w", "busy_w", "source", "method", "descriptor", "scale"}},
      "why": [{"role", "node", "period_s", "bottleneck"}],  (cluster plans: each role moved to each other node)
      "slices": [{"gpu", "device", "roles", "processes", "share"}]
    }

`source` is "modelled" when any figure behind a prediction was modelled (a what-if device, a descriptor's
power), else "scaled" when a kernel's times were scaled from another workload's (the profile has not measured
this one's shapes; "scaled" names those kernels, pearl/costmodel/model.py says how), else "measured";
"workload" is the key of the planned workload and "power_by_resource_w" each resource's share of power_w, which
a run that reads some resources' energy counters and not others adds for the others (optional: older plans lack
them); "power_source" says
where the power figures came from, and "power" (optional; older plans lack it) gives each device's figures
with their method and, for modelled ones, the descriptor file and the share of its figures charged (a host
with fewer cores than the descriptor's). "slices" (optional; empty when no GPU is split) is the split of each
GPU the plan slices: each slice in use, the roles on it, the processes that each hold one (the actors on a
share or MIG profile of their own, or 1) and the share of the GPU's SMs each has. "actor_devices" (optional;
empty, or absent in older plans: all `actors` act on mapping["act"]) spreads the actor processes over the nodes
of a cluster: they add up to `actors`, mapping["act"] is one of them (the one with the most) and
mapping["env_step"] its node's host; each process steps an equal share of the env steps. "replay_shards"
(optional; empty, or absent in older plans: one replay server on mapping["replay_insert"]) shards the replay
server over nodes: each device (one per node, mapping["replay_insert"] among them) holds that many shards (1),
each shard an equal part of the buffer, the inserts and the samples. This module imports no hardware
library.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pearl.device import NodeDevice
from pearl.errors import DeviceError, PearlError
from pearl.kernels import GROUP_COMM, Implementation, Precision
from pearl.fileio import MAX_INT, FieldChecker, finite_number, read_json, write_json_atomic
from pearl.profile.format import MAX_LANES

SCHEMA = "pearl.plan/1"
MAPPED = ("env_step", "act", "replay_insert", "replay_sample", "priority_update", "learn")


class PlanFileError(PearlError):
    """A plan file that is missing, not JSON, of another schema, or has a bad field."""


@dataclass
class Plan:
    pearl_version: str
    created: str
    algo: str
    env: str
    objective: str
    profile: dict[str, Any]
    mapping: dict[str, str]
    actors: int
    envs_per_actor: int
    predicted: dict[str, Any]
    bottleneck: str
    lanes: dict[str, Any]
    baselines: list[dict[str, Any]] = field(default_factory=list)
    solver: dict[str, Any] = field(default_factory=dict)
    pareto: list[dict[str, Any]] = field(default_factory=list)
    kernels: dict[str, float] = field(default_factory=dict)
    power: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: (cluster plans) for each role, the best plan with that role moved to each other node, as evaluated
    why: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    #: (cluster plans) act's device on each node with actor processes → how many; empty: all on mapping["act"]
    actor_devices: dict[str, int] = field(default_factory=dict)
    #: (cluster plans) the devices holding the replay server's shards → shards there; empty: one replay server
    replay_shards: dict[str, int] = field(default_factory=dict)
    #: the learner's CPU threads the plan chose (Problem.learner_threads); 1 in plans made before the choice
    threads: int = 1
    #: the learners of a learner group the plan chose (Problem.learners), and why; 1 and "" in older plans
    learners: int = 1
    learners_why: str = ""
    #: learn's arithmetic (pearl.kernels.Precision), and why the planner chose it; "fp32" and "" in older plans
    precision: str = Precision.FP32.value
    precision_why: str = ""
    #: kernel → how it runs on its device (pearl.kernels.Implementation), for each placed kernel the profile times
    #: more than one way there; empty in older plans and where every device has one way (each adapter's own)
    implementations: dict[str, str] = field(default_factory=dict)

    def implementation(self, kernel: str) -> Implementation | None:
        """How `kernel` runs as planned; None: the adapter's own way."""
        way = self.implementations.get(kernel)
        return Implementation(way) if way else None

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    @property
    def is_cluster(self) -> bool:
        """A plan of a cluster profile (`pearl profile merge`): its device ids are NODE/DEVICE."""
        return isinstance(self.profile.get("nodes"), dict)

    @property
    def devices(self) -> dict[str, NodeDevice]:
        """Each mapped kernel's device as a typed value: on a node of a cluster plan, or on the planned host."""
        return self._ids[0]

    @property
    def actor_spread(self) -> dict[NodeDevice, int]:
        """Act's device on each node with actor processes → how many (every actor on devices["act"] when the
        plan spreads none)."""
        return self._ids[1]

    @property
    def shard_devices(self) -> dict[NodeDevice, int]:
        """The replay server's shards on each device (empty: one replay server, on devices["replay_insert"])."""
        return self._ids[2]

    @cached_property
    def _ids(self) -> tuple[dict[str, NodeDevice], dict[NodeDevice, int], dict[NodeDevice, int]]:
        """Every device id of the plan, read once (parse_plan reads them when the plan loads): DeviceError naming
        the field and the id when one is no device id (in a cluster plan: not NODE/DEVICE of one of its nodes)."""
        nodes = self.profile["nodes"] if self.is_cluster else {}

        def typed(name: str, text: str) -> NodeDevice:
            try:
                at = NodeDevice.parse(text, self.is_cluster)
            except DeviceError as exc:
                what = f"not a NODE/DEVICE id of its nodes ({', '.join(nodes)})" if self.is_cluster else str(exc)
                raise DeviceError(f"field '{name}' names {text}, {what}") from None
            if self.is_cluster and at.node not in nodes:
                raise DeviceError(f"field '{name}' names {text}, on a node the plan's profile lacks "
                                  f"(it has {', '.join(nodes)})")
            return at

        devices = {k: typed("mapping", d) for k, d in self.mapping.items()}
        spread = {typed("actor_devices", d): n for d, n in self.actor_devices.items()}
        shards = {typed("replay_shards", d): n for d, n in self.replay_shards.items()}
        return devices, spread or {devices["act"]: self.actors}, shards


def save_plan(plan: Plan, path: str | Path) -> Path:
    return write_json_atomic(path, plan.to_dict())


def load_plan(path: str | Path) -> Plan:
    return parse_plan(read_json(path, PlanFileError, f"no such plan; `pearl plan ... --out {path}` makes one"),
                      str(path))


def parse_plan(data: Any, where: str) -> Plan:
    check = FieldChecker(where, PlanFileError)
    fail = check.fail
    if not isinstance(data, dict):
        fail("<top>", "a JSON object")
    schema = data.get("schema")
    if not isinstance(schema, str) or schema.split("/")[0] != "pearl.plan":
        fail("schema", repr(SCHEMA), schema)
    if schema != SCHEMA:
        raise PlanFileError(f"{where}: field 'schema' is {schema!r}, a version this pearl cannot read "
                            f"(it reads {SCHEMA!r}); re-run `pearl plan` or upgrade pearl")
    for name in ("pearl_version", "created", "algo", "env", "bottleneck"):
        check.text(data, name)
    check.member(data, "objective", "", {"throughput", "perf-per-watt"})
    mapping = data.get("mapping")
    if not isinstance(mapping, dict) or set(mapping) != set(MAPPED) or \
            not all(isinstance(v, str) and v for v in mapping.values()):
        fail("mapping", f"an object mapping each of {', '.join(MAPPED)} to a device id", mapping)
    # training starts `actors` processes: at most one per lane of the largest host a profile can describe
    check.integer(data, "actors", minimum=1, maximum=MAX_LANES)
    check.integer(data, "envs_per_actor", minimum=1, maximum=MAX_INT)
    for name in ("profile", "predicted", "lanes"):
        check.mapping(data, name)
    for name in ("env_steps_per_s", "updates_per_s", "learner_samples_per_s", "period_s"):
        check.number(data["predicted"], name, "predicted", positive=True)
    # optional: older plans may lack them; `pearl train` compares kernels[k] with the time measured for k
    solver = data.get("solver", {})
    if not isinstance(solver, dict):
        fail("solver", "an object", solver)
    for name in ("baselines", "pareto"):
        entries = data.get(name, [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            fail(name, "a list of objects", entries)
    kernels = data.get("kernels", {})
    timed = (*MAPPED, "weight_sync", GROUP_COMM)
    if not isinstance(kernels, dict) or not set(kernels) <= set(timed) or \
            any(finite_number(v) is None for v in kernels.values()):
        fail("kernels", f"an object mapping some of {', '.join(timed)} to seconds (a finite number >= 0)",
             kernels)
    slices = data.get("slices", [])
    if not isinstance(slices, list) or not all(isinstance(e, dict) for e in slices):
        fail("slices", "a list of objects", slices)
    power = data.get("power", {})
    if not isinstance(power, dict) or not all(isinstance(v, dict) for v in power.values()):
        fail("power", "an object mapping device ids to their power figures", power)
    actor_devices = _actor_devices(data, fail)
    replay_shards = _replay_shards(data, fail)
    if "threads" in data:
        check.integer(data, "threads", minimum=1, maximum=MAX_LANES)
    if "learners" in data:
        check.integer(data, "learners", minimum=1, maximum=MAX_LANES)
    if not isinstance(data.get("learners_why", ""), str):  # "" in a plan that chose no group size
        fail("learners_why", "a string", data["learners_why"])
    precision = data.get("precision", Precision.FP32.value)
    if precision not in {p.value for p in Precision}:
        fail("precision", " or ".join(repr(p.value) for p in Precision), precision)
    if not isinstance(data.get("precision_why", ""), str):
        fail("precision_why", "a string", data["precision_why"])
    ways = data.get("implementations", {})
    if not isinstance(ways, dict) or not set(ways) <= set(MAPPED) or \
            not all(w in {i.value for i in Implementation} for w in ways.values()):
        fail("implementations", f"an object mapping some of {', '.join(MAPPED)} to "
             + " or ".join(repr(i.value) for i in Implementation), ways)
    plan = Plan(data["pearl_version"], data["created"], data["algo"], data["env"], data["objective"],
                data["profile"], dict(mapping), data["actors"], data["envs_per_actor"], data["predicted"],
                data["bottleneck"], data["lanes"], list(data.get("baselines", [])), dict(solver),
                list(data.get("pareto", [])), {k: float(v) for k, v in kernels.items()}, dict(power),
                list(data.get("why", [])) if isinstance(data.get("why", []), list) else [], list(slices),
                actor_devices, replay_shards, data.get("threads", 1), data.get("learners", 1),
                data.get("learners_why", ""), precision, data.get("precision_why", ""), dict(ways))
    try:
        _ = plan.devices  # every device id is read here, once: a bad one refuses the file
    except DeviceError as exc:
        raise PlanFileError(f"{where}: {exc}") from None
    return plan


def _actor_devices(data: dict, fail) -> dict[str, int]:
    """The optional spread of the actor processes: device ids → counts ≥ 1 adding up to `actors`, one of them
    mapping["act"]."""
    spread = data.get("actor_devices", {})
    ok = isinstance(spread, dict) and all(isinstance(d, str) and d and isinstance(n, int) and not isinstance(n, bool)
                                          and n >= 1 for d, n in spread.items())
    if not ok or (spread and (sum(spread.values()) != data["actors"] or data["mapping"]["act"] not in spread)):
        fail("actor_devices", f"an object mapping act devices (one of them mapping.act, {data['mapping']['act']}) "
             f"to actor processes that add up to actors ({data['actors']})", spread)
    return dict(spread)


def _replay_shards(data: dict, fail) -> dict[str, int]:
    """The optional shards of the replay server: device ids (NODE/DEVICE, one per node, mapping["replay_insert"]
    among them) → shards ≥ 1, two or more in all."""
    shards = data.get("replay_shards", {})
    ok = isinstance(shards, dict) and all(NodeDevice.valid(d) and isinstance(n, int)
                                          and not isinstance(n, bool) and n >= 1 for d, n in shards.items())
    if ok and shards:
        try:
            nodes = [NodeDevice.parse(d).node for d in shards]
        except DeviceError:  # NODE/ and something that is no device id
            nodes = []
        ok = len(set(nodes)) == len(shards) and sum(shards.values()) >= 2 and \
            data["mapping"]["replay_insert"] in shards
    if not ok:
        fail("replay_shards", "an object mapping NODE/DEVICE ids, one per node, mapping.replay_insert "
             f"({data['mapping']['replay_insert']}) among them, to shards (at least 2 in all)", shards)
    return dict(shards)
