"""From a cost model and an algorithm preset to the numbers of the planning problem (pearl/planner/problem.py).

One iteration = one update and S = 1/ρ env steps. Per iteration, with e environments per actor (the preset's
n_envs) and B the batch size:
    act           (S/e) calls at batch e, on the act device (all actors together)
    env_step      S steps on the host
    replay_insert (S/e) calls of e transitions
    replay_sample 1 call at batch B;  learn 1 call at B;  priority_update 1 call at B (0 for uniform replay)
    env side      (S/e) actor iterations' env side on the host: e envs stepped with their resets and bookkeeping
                  and the transitions written, the profile's actor step less act at e (CostModel.actor_env_time;
                  e bare env steps for a profile without actor steps)
    actor period  (S/(n·e)) · (env side + act at batch e)       for n actor processes
The replay and learn kernels of a device are scaled by its in-situ factor (CostModel.in_situ_factor): the
profile's learner iteration timed as the runtime runs it ÷ the sum of those kernels timed one at a time.
Traffic is the launchers' own statement (pearl.traffic): what the launcher a plan is for sends on each edge in
a segment of G env steps and U updates of the schedule `actors` run (Schedule.for_config(config, n): the
segment grows with the actors, so U does too), for a segment of the steady state; the planner prices it per
iteration, a segment's figure ÷ U (`per_iteration`), and derives none of it. A host profile's plan is priced
with the local launcher's statement (HOST_LAUNCHER), a cluster's with the Ray launcher's (CLUSTER_LAUNCHER):
    weight sync   (actors are processes of their own, so the policy always goes through host memory, even with
                  learn and act on one device) the statement's publishes per iteration × the learn device's
                  publish time: Problem.publish[a, d], work of the learner's thread, counted wherever learn is
                  (accounting.kernel_terms); each actor's loads per iteration × the act device's load time,
                  added to act (n of them) and to the actor period (one). Times are the profile's
                  (CostModel.weight_sync_time); a device it has no such figure of (an older profile, a what-if
                  device) is costed by its transfers of the policy's bytes, device→host and host→device
    batch, td_errors   the statement's samples (replay → learn) and priorities (learn → replay), each message
                  one copy of its arrays, when those kernels sit on different devices
    cluster edges the Ray launcher's transitions, inserts, weights, and its replay server's reads and TD errors,
                  crossing nodes at the link's per-message cost and bandwidth (`crossings`)
Observations, actions and transitions cross no edge on one host: act and replay_insert take and give host
arrays, so the profile's timings of them hold those copies. This is the one description of the traffic's
accounting; problem.py and ilp.py refer to it.
Memory: replay storage on the replay device; parameters (+ target, + Adam's two moments) on the learner's;
the policy's parameters on act's. This module imports no torch and no pyopencl.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from itertools import combinations, product
from typing import Callable

from pearl.algos import OffPolicyConfig, preset
from pearl.algos.params import network_sizes, param_count, policy_net
from pearl.costmodel import CostModel, Estimate
from pearl.costmodel.model import HOST
from pearl.device import DeviceId
from pearl.errors import ConfigError, PlanError
from pearl.planner.problem import REPLAY, ActorOption, Device, Edge, Node, Problem, Resource
from pearl.profile.cluster import Cluster
from pearl.profile.format import Profile, Workload, workload_key
from pearl.schedule import Schedule  # pure segment arithmetic
from pearl.traffic import (BATCH_ARRAYS, FLOAT, INSERTS, PRIORITIES, SAMPLES, TRANSITIONS, WEIGHTS, EdgeTraffic,
                           Traffic, statement, transition_bytes)
from pearl.types import EnvSpec

#: the launcher whose traffic statement prices a host profile's plan, and a cluster's
HOST_LAUNCHER, CLUSTER_LAUNCHER = "local", "ray"


def preset_workload(algo: str, spec: EnvSpec) -> tuple[OffPolicyConfig, str]:
    config = preset(algo, spec.env_id)
    return config, workload_key(algo, spec.env_id, spec.obs_dim, spec.action_dim, tuple(config.hidden))


def config_workload(config: OffPolicyConfig, spec: EnvSpec) -> Workload:
    """The workload (shapes) `config` trains on `spec`: what the cost model times, or scales when the profile
    has not measured it."""
    hidden = tuple(config.hidden)
    return Workload(workload_key(config.algo, spec.env_id, spec.obs_dim, spec.action_dim, hidden), config.algo,
                    spec.env_id, spec.obs_dim, spec.action_dim, hidden, config.batch_size, config.buffer_size)


@dataclass(frozen=True)
class Facts:
    """What the plan reports beside the problem's numbers."""

    workload: str  # the profile's workload key
    steps_per_iteration: float  # S = 1/ρ
    batch_size: int
    envs_per_actor: int
    config: OffPolicyConfig
    #: the weight sync's seconds per iteration, which plans report apart: ("learn", actor option, d) -> the
    #: learner's publishes (Problem.publish), ("act", actor option, d) -> the loads of all the actors (in act)
    weight_sync_s: dict[tuple, float]
    target: Workload  # the planned workload's shapes
    #: (kernel, device) -> the measured workload whose times were scaled to this one's (CostModel.kernel_time)
    scaled: dict[tuple[str, str], str] = field(default_factory=dict)


@dataclass(eq=False)
class _Inputs:
    """The cost model's figures for one workload, as the problem's builders ask for them (seconds)."""

    model: CostModel
    config: OffPolicyConfig
    spec: EnvSpec
    workload: Workload
    host_device: str
    _syncs: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: (kernel, device) -> the workload its times were scaled from
    scaled: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.workload.key

    def t(self, kernel: str, device: str, size: int, threads: int = 1, beside: float = 0.0) -> float:
        estimate = _estimate(lambda: self.model.kernel_time(kernel, device, self.workload, size, threads, beside))
        if estimate.scaled_from is not None:
            self.scaled[(kernel, device)] = estimate.scaled_from
        return estimate.seconds

    def can(self, kernel: str, device: str) -> bool:
        return bool(self.model.batches(kernel, device, self.workload))

    def tau(self, src: str, dst: str, nbytes: float, arrays: int = 1) -> float:
        return _seconds(lambda: self.model.transfer_time(src, dst, int(nbytes), arrays))

    @property
    def steps(self) -> float:
        return 1.0 / self.config.replay_ratio

    @cached_property
    def env_side(self) -> float:
        """Seconds of one actor iteration's env side (e envs stepped, reset, bookkept and written): the profile's
        actor step less act (CostModel.actor_env_time), else e bare env steps (a profile without actor steps)."""
        envs = self.config.n_envs
        timed = _profiled(partial(self.model.actor_env_time, self.workload, envs))
        if timed is not None:
            return timed.seconds
        return envs * _seconds(lambda: self.model.env_step_time(self.spec.env_id))

    @cached_property
    def policy_params(self) -> int:
        return param_count(self.config, self.spec, policy_net(self.config.algo))

    def weight_sync(self, d: str) -> tuple[float, float]:
        """(publish, load) seconds of one weight sync on device d (asked for by learn's device and act's)."""
        if d not in self._syncs:
            self._syncs[d] = self._weight_sync(d)
        return self._syncs[d]

    def _weight_sync(self, d: str) -> tuple[float, float]:
        timed = _profiled(partial(self.model.weight_sync_time, d, self.workload))
        if timed is not None:
            return timed[0].seconds, timed[1].seconds
        nbytes = self.policy_params * FLOAT
        return self.tau(d, self.host_device, nbytes), self.tau(self.host_device, d, nbytes)


def build_problem(profile: Profile, model: CostModel, algo: str, spec: EnvSpec,
                  envs: int | None = None, config: OffPolicyConfig | None = None,
                  max_actors: int | None = None, threads: int = 1, learners: int = 1) -> tuple[Problem, Facts]:
    """The problem for actors stepping `envs` environments each (default: the config's n_envs), and facts the
    plan reports (S, B, the workload key, the weight-sync seconds, the kernels whose times were scaled).
    `config` defaults to the preset. A workload the profile has not measured is costed from the nearest one it
    has, scaled by their work (CostModel.kernel_time). The actor options go from 1 to `max_actors` processes
    (default: the host's lanes; a cluster offers every node's lanes together, its nodes share them out).
    `threads`: the learner's CPU threads, T (Problem.learner_threads): learn on `cpu` at its T-thread figure.
    `learners`: a learner group of N processes of T threads on the host (Problem.learners)."""
    config = config if config is not None else preset(algo, spec.env_id)
    if envs is not None:
        config = config.replace(n_envs=envs)
    inputs = _Inputs(model, config, spec, config_workload(config, spec), HOST)
    devices = _devices(profile, inputs, algo)
    resources = _resources(profile, model, devices)
    sync_s: dict[tuple, float] = {}
    cost = _learner_costs(inputs, devices, threads, learners)
    host_lanes = resources[model.resource(inputs.host_device)].lanes if max_actors is None else max_actors
    options = [ActorOption(n, config.n_envs) for n in range(1, host_lanes + 1)]
    publish = {(a, d): s for (a, d), s in _publish_costs(inputs, devices, options, sync_s).items()
               if ("learn", d) in cost}  # a learner group learns on the host device only
    act_cost, actor_period = _actor_costs(inputs, devices, options, sync_s)
    edges, transfer = _edges(inputs, devices)
    memory = _memory(inputs, devices)
    _check_finite(cost=cost, act=act_cost, actor_period=actor_period, transfer=transfer)
    problem = Problem(list(resources.values()), [_device(profile, model, d) for d in devices],
                      model.resource(inputs.host_device), inputs.host_device, cost, act_cost,
                      inputs.steps / config.n_envs * inputs.env_side, actor_period, edges,
                      transfer, memory, prefetch=True, publish=publish, learner_threads=threads * learners,
                      learners=learners, group_comm_s=_group_seconds(inputs, learners) if learners > 1 else 0.0)
    return problem, Facts(inputs.key, inputs.steps, config.batch_size, config.n_envs, config, sync_s,
                          inputs.workload, dict(inputs.scaled))


def _device(profile: Profile, model: CostModel, d: str) -> Device:
    """The problem's device d: its resource, memory, and for a GPU slice its share and instances."""
    entry = profile.device(d)
    piece = DeviceId.parse(d).slice
    return Device(d, model.resource(d), entry.memory_bytes, share=entry.share, instances=entry.instances,
                  slicing=piece.kind if piece is not None else "")


def _devices(profile: Profile, inputs: _Inputs, algo: str) -> list[str]:
    """The devices that implement some kernel of the workload (or of the one it is scaled from); the host device
    must be among them."""
    model, key, host = inputs.model, inputs.key, inputs.host_device
    if not any(w.algo == algo for w in profile.workloads):
        raise PlanError(f"the profile has no measurements of {key} nor of any {algo} workload to scale from; run "
                        f"`pearl profile --algo {algo} --env {inputs.spec.env_id} --out PROFILE` on this machine "
                        "(it adds that workload to the profile)")
    if host not in model.devices():
        raise PlanError("the profile has no `cpu` device: environments step on the host CPU")
    devices = [d for d in model.devices() if any(inputs.can(k, d) for k in ("act", "learn", *REPLAY))]
    if host not in devices:  # the problem needs the host's resource, where the actors run
        raise PlanError(f"the profile has no kernel timings of {key} on {host}; run `pearl profile "
                        f"--algo {algo}` on this machine")
    return devices


def _resources(profile: Profile, model: CostModel, devices: list[str]) -> dict[str, Resource]:
    """One resource per physical resource of the devices: the most lanes any of its devices has, its power."""
    resources: dict[str, Resource] = {}
    for d in devices:
        r = model.resource(d)
        power = _power(model, d)
        lanes = max(profile.device(d).lanes, resources[r].lanes if r in resources else 1)
        resources[r] = Resource(r, lanes, power[0], power[1])
    return resources


def schedule_for(config: OffPolicyConfig, actors: int) -> Schedule:
    """The schedule `actors` actor processes run (the launchers' default policy lag and segment length); a
    layout that many actors cannot run is counted as one actor runs it."""
    try:
        return Schedule.for_config(config, actors)
    except ConfigError:
        return Schedule.for_config(config, 1)


def segments_per_iteration(config: OffPolicyConfig, actors: int) -> float:
    """Segments per iteration (one update): 1 ÷ the updates of a segment of the schedule `actors` run."""
    return 1.0 / max(1, schedule_for(config, actors).updates_per_segment)


def per_iteration(launcher: str, config: OffPolicyConfig, spec: EnvSpec, actors: int, **options: bool) -> Traffic:
    """The launcher's traffic statement (`pearl.traffic`) for a segment of the steady state of the schedule
    `actors` run, spread over its updates: messages, bytes, publishes and loads per iteration."""
    sched = schedule_for(config, actors)
    updates = max(1, sched.updates_per_segment)
    return {edge: _spread(t, updates) for edge, t in statement(launcher)(sched, config, spec, **options).items()}


def _spread(t: EdgeTraffic, updates: int) -> EdgeTraffic:
    """A segment's figures ÷ its updates (one division each: a segment's U samples are exactly one an update)."""
    return EdgeTraffic(t.messages / updates, t.nbytes / updates, t.publishes / updates, t.loads / updates)


def weight_syncs(config: OffPolicyConfig, spec: EnvSpec, actors: int) -> tuple[float, float]:
    """(the learner's publishes, one actor's loads) per iteration, as the host's launcher states them."""
    sched = schedule_for(config, actors)
    weights = statement(HOST_LAUNCHER)(sched, config, spec)[WEIGHTS]
    per = segments_per_iteration(config, actors)
    return weights.publishes * per, weights.loads / sched.actors * per


def _learner_costs(inputs: _Inputs, devices: list[str], threads: int = 1,
                   learners: int = 1) -> dict[tuple[str, str], float]:
    """Seconds per iteration of the replay kernels and learn on each device (the publish is apart: it depends
    on the actor option, `_publish_costs`); learn on the host device at `threads` CPU threads, beside the actors
    (CostModel.kernel_time's `beside`). A group of
    `learners` learns on the host device only: one learner's learn on its B/N rows (the first learner's, the
    longest part) and the group's communication (`CostModel.group_time`), learner 0 waiting for both."""
    model, workload, config, can, t = inputs.model, inputs.workload, inputs.config, inputs.can, inputs.t
    steps, batch, envs = inputs.steps, config.batch_size, config.n_envs
    cost: dict[tuple[str, str], float] = {}
    for d in devices:
        # the learner-side kernels as they run interleaved in the learner's iteration (see in_situ_factor)
        f = _profiled(partial(model.in_situ_factor, d, workload)) if all(can(k, d) for k in (*REPLAY, "learn")) \
            else 1.0
        if all(can(k, d) for k in REPLAY):
            cost[("replay_insert", d)] = f * (steps / envs) * t("replay_insert", d, envs)
            cost[("replay_sample", d)] = f * t(model.sample_timing(config.prioritized, d, workload), d, batch)
            cost[("priority_update", d)] = f * t("priority_update", d, batch) if config.prioritized else 0.0
        if can("learn", d) and learners == 1:  # at T > 1 threads as it runs beside the actor processes
            cost[("learn", d)] = f * (t("learn", d, batch, threads, _actors_busy(inputs, threads))
                                      if d == inputs.host_device and threads > 1 else t("learn", d, batch))
        elif can("learn", d) and d == inputs.host_device:
            cost[("learn", d)] = f * _group_learn(inputs, d, learners, threads)
    return cost


def _actors_busy(inputs: _Inputs, threads: int) -> float:
    """The share of a T-thread update the actor processes spend on the host, all of them together: one update's
    env steps at the plan's envs per actor, act on the host (at most 1; the cost model takes no more than the
    share its figure beside a stand-in was timed at)."""
    envs, host = inputs.config.n_envs, inputs.host_device
    if not inputs.can("act", host):
        return 0.0
    work = inputs.steps / envs * (inputs.env_side + inputs.t("act", host, envs))
    return min(1.0, work / inputs.t("learn", host, inputs.config.batch_size, threads))


def _group_learn(inputs: _Inputs, d: str, learners: int, threads: int) -> float:
    """Seconds of one update of a learner group of `learners` on the host device d: the profile's timing of that
    group where it has one; else its timing of two learners, with the learn of a smaller part and the further
    communication (`_group_seconds`) for more; else one learner's learn on its part plus the communication."""
    model, key, batch = inputs.model, inputs.key, inputs.config.batch_size
    measured = model.group_learn_time(key, d, learners) if threads == 1 else None
    if measured is not None:
        return measured.seconds
    part = inputs.t("learn", d, -(-batch // learners), threads)
    two = model.group_learn_time(key, d, 2) if threads == 1 else None
    if two is not None:
        return (two.seconds + part - inputs.t("learn", d, -(-batch // 2), threads)
                + _group_seconds(inputs, learners) - _group_seconds(inputs, 2))
    return part + _group_seconds(inputs, learners)


def _group_seconds(inputs: _Inputs, learners: int) -> float:
    """A learner group's communication per update on one host (`group_comm`)."""
    return group_comm(inputs.model, inputs.config, inputs.spec, learners)


def group_comm(model: CostModel, config: OffPolicyConfig, spec: EnvSpec, learners: int,
               network: tuple[float, float] | None = None) -> float:
    """A learner group's communication per update (`CostModel.group_time`, across nodes over `network`): the
    trained networks' gradients (targets apart), averaged in one all-gather (DQN) or two (an actor-critic: the
    critics', then the actor's)."""
    gradient_bytes = param_count(config, spec) * FLOAT
    averages = 1 if len(network_sizes(config, spec)) == 1 else 2
    action_bytes = 8 if spec.discrete else FLOAT * spec.action_dim
    row_bytes = 2 * FLOAT * spec.obs_dim + action_bytes + 3 * FLOAT
    return _profiled(lambda: model.group_time(learners, gradient_bytes, averages, config.batch_size, row_bytes,
                                              network).seconds)


def _publish_costs(inputs: _Inputs, devices: list[str], options: list[ActorOption], sync_s: dict[tuple, float]
                   ) -> dict[tuple[ActorOption, str], float]:
    """The learner's publishes, seconds per iteration, per actor option and learn device."""
    publish = {}
    for d in devices:
        if inputs.can("learn", d):
            for a in options:
                publishes = weight_syncs(inputs.config, inputs.spec, a.n)[0]
                publish[(a, d)] = sync_s[("learn", a, d)] = publishes * inputs.weight_sync(d)[0]
    return publish


def _actor_costs(inputs: _Inputs, devices: list[str], options: list[ActorOption], sync_s: dict[tuple, float]
                 ) -> tuple[dict[tuple[ActorOption, str], float], dict[tuple[ActorOption, str], float]]:
    """act's seconds per iteration (all actors, with their weight loads) and one actor's period, per option."""
    steps, envs = inputs.steps, inputs.config.n_envs
    side = inputs.env_side
    act_cost, actor_period = {}, {}
    for d in devices:
        if inputs.can("act", d):
            per_call, load = inputs.t("act", d, envs), inputs.weight_sync(d)[1]
            for a in options:
                loads = weight_syncs(inputs.config, inputs.spec, a.n)[1]  # one actor's, per iteration
                sync_s[("act", a, d)] = a.n * loads * load
                act_cost[(a, d)] = (steps / envs) * per_call + sync_s[("act", a, d)]
                actor_period[(a, d)] = steps / (a.n * envs) * (side + per_call) + loads * load
    return act_cost, actor_period


def _edges(inputs: _Inputs, devices: list[str]) -> tuple[list[Edge], dict[tuple[str, str, str], float]]:
    """The sampled batch to learn and the TD errors back, with their seconds between every two devices."""
    tau = inputs.tau
    edges = [Edge("batch", "replay_sample", "learn"), Edge("td_errors", "learn", "priority_update")]
    stated = per_iteration(HOST_LAUNCHER, inputs.config, inputs.spec, 1)
    carried = {"batch": (stated[SAMPLES], BATCH_ARRAYS), "td_errors": (stated[PRIORITIES], 1)}

    def per_edge(name: str, s: str, d: str) -> float:
        """Each message one copy of its arrays between the two devices."""
        t, arrays = carried[name]
        return t.messages * tau(s, d, t.nbytes / t.messages, arrays) if t.messages else 0.0

    transfer = {}
    for e in edges:
        for s in devices:
            for d in devices:
                if s != d:
                    seconds = per_edge(e.name, s, d)
                    if seconds > 0:
                        transfer[(e.name, s, d)] = seconds
    return edges, transfer


def _memory(inputs: _Inputs, devices: list[str]) -> dict[tuple[str, str], float]:
    """Replay storage, the learner's parameters (+ target, + Adam's two moments), the policy's parameters."""
    params = param_count(inputs.config, inputs.spec)
    memory = {}
    for d in devices:
        memory[("replay_insert", d)] = inputs.config.buffer_size * transition_bytes(inputs.spec)
        memory[("learn", d)] = params * FLOAT * 4
        memory[("act", d)] = inputs.policy_params * FLOAT
    return memory


def _check_finite(**tables: dict) -> None:
    for name, table in tables.items():
        for what, seconds in table.items():
            if not math.isfinite(seconds):  # e.g. a huge median times the steps of an iteration: no ILP takes it
                raise PlanError(f"the profile's figures make the {name.replace('_', ' ')} time of {what} infinite; "
                                "check its timings and bandwidths, or profile this machine again")


def _seconds(estimate: Callable[[], Estimate]) -> float:
    return _estimate(estimate).seconds


def _estimate(estimate: Callable[[], Estimate]) -> Estimate:
    """The cost model's estimate; one the profile lacks (the cost model's KeyError names it) is a PlanError."""
    try:
        return estimate()
    except KeyError as exc:
        raise PlanError(f"{exc.args[0]}; profile this machine again (`pearl profile`)") from None


def _profiled(figure: Callable[[], float]) -> float:
    """The cost model's figure; one the profile lacks (the cost model's KeyError names it) is a PlanError."""
    try:
        return figure()
    except KeyError as exc:
        raise PlanError(f"{exc.args[0]}; profile this machine again (`pearl profile`)") from None


def _power(model: CostModel, device: str) -> tuple[float, float]:
    try:
        p = model.power(device)
    except KeyError:
        return 0.0, 0.0  # unknown power: energy terms vanish; the plan reports the power source as missing
    return p.idle_w, p.busy_w


# ---------------------------------------------------------------------------------------------------------------
# a cluster of several nodes

#: the edges that cross nodes only, as the Ray launcher routes them: each actor worker's share of a segment goes
#: to the learner role, which inserts it into the replay server; the policy goes from the learner to the actors.
#: Within a node they go through host memory, which the profile's act, replay_insert and weight-sync timings
#: already hold
CLUSTER_EDGES = (Edge("transitions", "act", "learn"), Edge("inserts", "learn", "replay_insert"),
                 Edge("weights", "learn", "act"))


@dataclass(frozen=True)
class Crossing:
    """What one edge sends over a link per iteration, as the Ray launcher sends it."""

    messages: float  # each pays the link's per-message cost (transport call + latency)
    nbytes: float  # bytes per iteration, at the link's bandwidth
    arrays: int = 1
    legs: bool = False  # device → host before sending, host → device after (replay's and learn's own devices)


def crossings(config: OffPolicyConfig, spec: EnvSpec, actors: int) -> dict[str, Crossing]:
    """Messages and bytes per iteration of every edge that may cross nodes: the Ray launcher's traffic
    statement (`pearl.traffic.ray`, with the replay server, where replay sits on a node of its own) for a
    segment of the schedule `actors` run, spread over its U updates."""
    stated = per_iteration(CLUSTER_LAUNCHER, config, spec, actors, replay_server=True)

    def crossing(edge: str, arrays: int = 1, legs: bool = False) -> Crossing:
        return Crossing(stated[edge].messages, stated[edge].nbytes, arrays, legs)

    return {"transitions": crossing(TRANSITIONS), "inserts": crossing(INSERTS), "weights": crossing(WEIGHTS),
            "batch": crossing(SAMPLES, BATCH_ARRAYS, True), "td_errors": crossing(PRIORITIES, 1, True)}


def qualified(node: str, name: str) -> str:
    """A device's or resource's id in a cluster problem: NODE/NAME (a device's reads as `pearl.device.NodeDevice`
    in the plan file)."""
    return f"{node}/{name}"


def build_cluster_problem(cluster: Cluster, algo: str, spec: EnvSpec, envs: int | None = None,
                          config: OffPolicyConfig | None = None, threads: int = 1,
                          learners: int = 1) -> tuple[Problem, Facts]:
    """The problem over every node of the cluster: each node's own problem (build_problem on its profile) with
    its ids qualified NODE/DEVICE, joined by the data edges that cross nodes, each paying the link's latency and
    bandwidth (plus the devices' legs to and from their hosts). A cluster of one node is build_problem's
    problem, unqualified: it plans exactly as the host profile."""
    if len(cluster.nodes) == 1:
        profile = cluster.nodes[0].profile
        return build_problem(profile, CostModel(profile), algo, spec, envs, config, threads=threads,
                             learners=learners)
    if learners > 1 and learners != len(cluster.nodes):
        raise PlanError(f"a cluster plan's learner group has one learner on every node: {len(cluster.nodes)} "
                        f"learners, not {learners}")
    parts = []
    models = {node.name: CostModel(node.profile) for node in cluster.nodes}
    # the actor processes may spread over every node: options up to all the hosts' lanes together
    lanes = [_host_lanes(node.profile, models[node.name]) for node in cluster.nodes]
    total = sum(lanes)
    for node in cluster.nodes:
        model = models[node.name]
        problem, facts = _on_node(node.name, partial(build_problem, node.profile, model, algo, spec, envs, config,
                                                     total, threads))
        parts.append((node.name, model, problem, facts))
    for (a, *_), (b, *_) in combinations(parts, 2):
        if cluster.link(a, b) is None:
            raise PlanError(f"the cluster profile has no link between nodes {a} and {b}; merge it again with "
                            "--network DESCRIPTOR")
    merged = _merge_nodes(parts)
    facts = parts[0][3]
    sync = {key[:-1] + (qualified(name, key[-1]),): s for name, _, _, f in parts for key, s in f.weight_sync_s.items()}
    scaled = {(k, qualified(name, d)): w for name, _, _, f in parts for (k, d), w in f.scaled.items()}
    merged.edges += list(CLUSTER_EDGES)
    _cross_node_transfers(cluster, parts, merged, facts, spec, max(lanes))
    _replay_shards(cluster, parts, merged, facts, spec, max(lanes))
    if learners > 1:
        _spread_group(cluster, parts, merged, partial(build_problem, algo=algo, spec=spec, envs=envs,
                                                      max_actors=total, threads=threads), facts.config, spec,
                      threads)
    return merged, replace(facts, weight_sync_s=sync, scaled=scaled)


def _spread_group(cluster: Cluster, parts: list, problem: Problem, build: Callable[..., tuple[Problem, Facts]],
                  config: OffPolicyConfig, spec: EnvSpec, threads: int) -> None:
    """A learner group with one learner on every node (`Problem.spread_group`): learn on a device of one node
    costs the slowest node's group update on the device of that id, plus what the links add to the group's
    communication (`group_comm`: each node's `group` figure against the slowest link; gloo's messages pay the
    network's latency, not a Ray call). A node's group update is its profile's timing of a group of N on that
    device (N learner processes on its host, the nearest a profile comes to N nodes, where its host has a lane
    for each), else its learn on the B/N rows a learner takes (as `build` prices it there) plus the host's
    communication. A device whose id some node lacks cannot hold learn."""
    n = len(parts)
    part_config = config.replace(batch_size=-(-config.batch_size // n))
    links = [cluster.link(a, b) for (a, *_), (b, *_) in combinations(parts, 2)]
    network = (max(k.latency_s for k in links if k), min(k.bandwidth_bytes_per_s for k in links if k))
    update: dict[tuple[str, str], float] = {}
    for name, model, _, facts in parts:
        p, _ = _on_node(name, partial(build, cluster.node(name).profile, model, config=part_config))
        host = group_comm(model, config, spec, n)
        extra = group_comm(model, config, spec, n, network) - host
        problem.group_comm_s = max(problem.group_comm_s, host + extra)
        # a timed group of N stands for N nodes only where the host gave each learner a lane of its own
        timed_here = threads == 1 and _host_lanes(cluster.node(name).profile, model) >= n
        for d in (d for k, d in p.cost if k == "learn"):
            timed = model.group_learn_time(facts.workload, d, n) if timed_here else None
            # a timed group interleaves with the replay kernels, as `_learner_costs` counts it
            own = model.in_situ_factor(d, facts.workload) * timed.seconds if timed is not None else \
                p.cost[("learn", d)] + host
            update[(name, d)] = own + extra
    for key in [key for key in problem.cost if key[0] == "learn"]:
        device = problem.device(key[1]).local
        if all((name, device) in update for name, *_ in parts):
            problem.cost[key] = max(update[(name, device)] for name, *_ in parts)
        else:
            del problem.cost[key]
            problem.publish = {k: v for k, v in problem.publish.items() if k[1] != key[1]}
    problem.learners = n


def _host_lanes(profile: Profile, model: CostModel) -> int:
    """The lanes of a profile's host resource (its `cpu` device's, or more of a device sharing it)."""
    if HOST not in model.devices():
        return 1  # build_problem says what is missing
    host = model.resource(HOST)
    return max((profile.device(d).lanes for d in model.devices() if model.resource(d) == host), default=1)


def _on_node(name: str, build: Callable[[], tuple[Problem, Facts]]) -> tuple[Problem, Facts]:
    try:
        return build()
    except PlanError as exc:
        raise PlanError(f"node {name}: {exc}") from None


def _merge_nodes(parts: list) -> Problem:
    """The nodes' problems side by side, ids qualified."""
    q = qualified
    resources, devices, nodes = [], [], []
    cost, act_cost, actor_period, transfer, memory, publish = {}, {}, {}, {}, {}, {}
    for name, _, p, _ in parts:
        resources += [Resource(q(name, r.id), r.lanes, r.idle_w, r.busy_w) for r in p.resources]
        devices += [replace(d, id=q(name, d.id), resource=q(name, d.resource), node=name, local_id=d.id)
                    for d in p.devices]
        nodes.append(Node(name, q(name, p.host), q(name, p.host_device), p.env_cost))
        cost.update({(k, q(name, d)): t for (k, d), t in p.cost.items()})
        act_cost.update({(a, q(name, d)): t for (a, d), t in p.act_cost.items()})
        actor_period.update({(a, q(name, d)): t for (a, d), t in p.actor_period.items()})
        transfer.update({(e, q(name, d), q(name, d2)): t for (e, d, d2), t in p.transfer.items()})
        memory.update({(k, q(name, d)): m for (k, d), m in p.memory.items()})
        publish.update({(a, q(name, d)): t for (a, d), t in p.publish.items()})
    first = nodes[0]
    return Problem(resources, devices, first.host, first.host_device, cost, act_cost, first.env_cost, actor_period,
                   list(parts[0][2].edges), transfer, memory, prefetch=parts[0][2].prefetch, nodes=nodes,
                   publish=publish, learner_threads=parts[0][2].learner_threads)


def _cross_node_transfers(cluster: Cluster, parts: list, problem: Problem, facts: Facts, spec: EnvSpec,
                          actors: int) -> None:
    """transfer and nic seconds per iteration of every edge between devices of two nodes (`crossings`): each
    message pays the link's per-message cost (the transport's call and the network's latency), the bytes its
    bandwidth, and the batch and TD errors also the legs device → host on the sending node and host → device
    on the receiving one (the cost model's transfer_time to and from `cpu`). The actors are counted at the
    largest number one node offers (the count of a segment's messages grows with them; the options that
    spread the actors over nodes go beyond it, and are counted so too: one table serves every option).
    The actors' edges (transitions, weights) carry all the actors' traffic: each node's processes carry
    their share of it (accounting.py)."""
    models = {name: model for name, model, _, _ in parts}
    per_edge = crossings(facts.config, spec, actors)
    for e in problem.edges:
        c = per_edge[e.name]
        if c.messages <= 0:
            continue
        for d, d2 in product(problem.devices, problem.devices):
            if d.node == d2.node:
                continue
            link = cluster.link(d.node, d2.node)
            seconds = c.messages * link.message_s + c.nbytes / link.bandwidth_bytes_per_s
            if c.legs:
                here, there = d.local, d2.local
                out = partial(models[d.node].transfer_time, here, HOST, int(c.nbytes), c.arrays)
                into = partial(models[d2.node].transfer_time, HOST, there, int(c.nbytes), c.arrays)
                seconds += _seconds(out) + _seconds(into)
            problem.transfer[(e.name, d.id, d2.id)] = seconds
            problem.nic[(e.name, d.id, d2.id)] = c.nbytes / link.bandwidth_bytes_per_s


def _replay_shards(cluster: Cluster, parts: list, problem: Problem, facts: Facts, spec: EnvSpec,
                   actors: int) -> None:
    """The replay server sharded over K ≥ 2 nodes, as the Ray launcher runs it: each shard a ReplayShard actor
    (host numpy storage) on a node's `cpu`, holding 1/K of the buffer and doing 1/K of the inserts, samples
    and priority updates (shard_cost = cost / K). Its edges, one shard's part (`crossings` for one server):
        inserts     each worker's batch goes whole to one shard, round-robin: 1/K of the messages and bytes
        batch       every read touches every shard (a stats and a lookup round trip each): the messages of
                    one server per shard, 1/K of the bytes (sharding multiplies the batch's messages by K)
        td_errors   one message an update to every shard, 1/K of the bytes
    between nodes at the link's per-message cost and bandwidth (and the legs to and from a device), within a
    node at the transport's call per message (a shard is a process of its own, not the learner's) and the
    cost model's copy between two devices."""
    per_edge = crossings(facts.config, spec, actors)
    models = {name: model for name, model, _, _ in parts}
    hosts = [n.host_device for n in problem.nodes if all((k, n.host_device) in problem.cost for k in REPLAY)]
    for K in range(2, len(hosts) + 1):
        for d in hosts:
            problem.shard_cost.update({(k, d, K): problem.cost[(k, d)] / K for k in REPLAY})
        for e in problem.edges:
            c = per_edge.get(e.name)
            if c is None or c.messages <= 0 or not (e.src in REPLAY or e.dst in REPLAY):
                continue
            part = Crossing(c.messages / K if e.name == "inserts" else c.messages, c.nbytes / K, c.arrays, c.legs)
            for shard, other in product(hosts, problem.devices):
                src, dst = (shard, other.id) if e.src in REPLAY else (other.id, shard)
                seconds, nic = _shard_message(cluster, models, problem, part, src, dst)
                problem.shard_transfer[(e.name, src, dst, K)] = seconds
                if nic > 0:
                    problem.shard_nic[(e.name, src, dst, K)] = nic


def _shard_message(cluster: Cluster, models: dict[str, CostModel], problem: Problem, c: Crossing, src: str,
                   dst: str) -> tuple[float, float]:
    """(transfer seconds, nic seconds) of one shard's part `c` of an edge from device src to dst."""
    a, b = problem.device(src).node, problem.device(dst).node
    local = {d: problem.device(d).local for d in (src, dst)}
    if a == b:
        calls = [link.call_s for link in cluster.links if a in (link.a, link.b)]
        seconds = c.messages * min(calls, default=0.0)
        if src != dst:
            seconds += _seconds(partial(models[a].transfer_time, local[src], local[dst], int(c.nbytes), c.arrays))
        return seconds, 0.0
    link = cluster.link(a, b)
    seconds = c.messages * link.message_s + c.nbytes / link.bandwidth_bytes_per_s
    if c.legs:
        seconds += _seconds(partial(models[a].transfer_time, local[src], HOST, int(c.nbytes), c.arrays))
        seconds += _seconds(partial(models[b].transfer_time, HOST, local[dst], int(c.nbytes), c.arrays))
    return seconds, c.nbytes / link.bandwidth_bytes_per_s
