"""From a cost model and an algorithm preset to the numbers of the planning problem (pearl/planner/problem.py).

One iteration = one update and S = 1/ρ env steps. Per iteration, with e environments per actor (the preset's
n_envs) and B the batch size:
    act           (S/e) calls at batch e, on the act device (all actors together)
    env_step      S steps on the host
    replay_insert the launchers' inserts: each actor's share of a segment of G env steps and U updates is one
                  call (pearl.traffic.insert_shape), so 1/U calls of G rows for one actor (priced at one
                  actor's schedule: n actors' n smaller calls of a segment are left out)
    replay_sample 1 call at batch B;  learn 1 call at B;  priority_update 1 call at B (0 for uniform replay)
    env side      (S/e) actor iterations' env side on the host: e envs stepped with their resets and bookkeeping
                  and the transitions written, the profile's actor step less act at e (CostModel.actor_env_time;
                  e bare env steps for a profile without actor steps)
    actor period  (S/(n·e)) · (env side + act at batch e)       for n actor processes
Act on a GPU (a whole one, or one MIG instance) is offered to one actor process only, its e envs batched into
each call: every process acting there opens a context of its own, and contexts take the GPU in turns
(`_one_context`). An MPS share's processes are counted by the slices rows instead.
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
                  (terms.kernel_terms); each actor's loads per iteration × the act device's load time,
                  added to act (n of them) and to the actor period (one). Times are the profile's
                  (CostModel.weight_sync_time); a device it has no such figure of (an older profile, a what-if
                  device) is costed by its transfers of the policy's bytes, device→host and host→device
    first update  a segment's first learner iteration runs after the learner waited for the actors' shares, slower
                  than the rest (CostModel.first_iteration_factor, f): (f − 1) × the learner's iteration on the
                  learn device (its replay kernels and learn there, in-situ factor included) once a segment, so
                  × segments per iteration (1 ÷ the updates of a segment of option a's schedule); work of the
                  learner's thread, added to its publishes (Problem.publish), as often as they come
    segment loop  the learner's loop beyond its kernels once a segment (CostModel.segment_loop_time: taking the
                  actors' shares out of their rings, waking them, the loop's bookkeeping, timed by the profiler
                  as the local launcher runs it; the Ray learner role's, not profiled, is taken as the same),
                  × segments per iteration, added to its publishes as the first update is
    batch, td_errors   the statement's samples (replay → learn) and priorities (learn → replay), each message
                  one copy of its arrays, when those kernels sit on different devices
    cluster edges the Ray launcher's transitions, inserts, weights, and its replay server's reads and TD errors,
                  crossing nodes at the link's per-message cost and bandwidth (`cluster_problem.crossings`)
Observations, actions and transitions cross no edge on one host: act and replay_insert take and give host
arrays, so the profile's timings of them hold those copies.
Memory: replay storage on the replay device; parameters (+ target, + Adam's two moments) on the learner's;
the policy's parameters on act's. This module imports no torch and no pyopencl. What the program does with
these numbers is stated in pearl/planner/ilp.py's docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Callable

from pearl.algos import OffPolicyConfig, preset
from pearl.algos.params import network_sizes, param_count, policy_net
from pearl.costmodel import CostModel, Estimate
from pearl.costmodel.model import HOST
from pearl.device import DeviceId, DeviceKind
from pearl.errors import ConfigError, PlanError
from pearl.planner.problem import REPLAY, ActorOption, Device, Edge, Problem, Resource
from pearl.profile.format import Profile, Workload, config_workload
from pearl.schedule import Schedule  # pure segment arithmetic
from pearl.traffic import (BATCH_ARRAYS, FLOAT, PRIORITIES, SAMPLES, WEIGHTS, EdgeTraffic, InsertShape,
                           Traffic, launcher_inserts, statement, transition_bytes)
from pearl.types import EnvSpec

#: the launcher whose traffic statement prices a host profile's plan, and a cluster's
HOST_LAUNCHER, CLUSTER_LAUNCHER = "local", "ray"


def preset_workload(algo: str, spec: EnvSpec) -> tuple[OffPolicyConfig, str]:
    config = preset(algo, spec.env_id)
    return config, config_workload(config, spec).key


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
    #: (kernel, device) -> the way the figure the problem holds runs (eager, captured), where the profile times
    #: that kernel on that device more than one way
    implementations: dict[tuple[str, str], str] = field(default_factory=dict)


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
    #: (kernel, device) -> the implementation its figure is of (where the profile times more than one)
    implementations: dict[tuple[str, str], str] = field(default_factory=dict)
    #: (kernel, device) -> the share of its figure the device itself is busy (where timed by its clock)
    shares: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.workload.key

    def t(self, kernel: str, device: str, size: int, threads: int = 1, beside: float = 0.0) -> float:
        estimate = _estimate(lambda: self.model.kernel_time(kernel, device, self.workload, size, threads, beside))
        if estimate.scaled_from is not None:
            self.scaled[(kernel, device)] = estimate.scaled_from
        if estimate.implementation is not None:
            self.implementations[(kernel, device)] = estimate.implementation
        if estimate.device_share is not None:
            self.shares[(kernel, device)] = estimate.device_share
        return estimate.seconds

    def can(self, kernel: str, device: str) -> bool:
        return bool(self.model.batches(kernel, device, self.workload))

    def tau(self, src: str, dst: str, nbytes: float, arrays: int = 1) -> float:
        return estimate_seconds(lambda: self.model.transfer_time(src, dst, int(nbytes), arrays))

    @property
    def steps(self) -> float:
        return 1.0 / self.config.replay_ratio

    @cached_property
    def inserts(self) -> InsertShape:
        """The replay inserts an update, as the launchers make them (one actor's schedule: more actors split
        a segment into more, smaller inserts, whose extra calls are left out)."""
        return launcher_inserts(self.config)

    @cached_property
    def env_side(self) -> float:
        """Seconds of one actor iteration's env side (e envs stepped, reset, bookkept and written): the profile's
        actor step less act (CostModel.actor_env_time), else e bare env steps (a profile without actor steps)."""
        envs = self.config.n_envs
        timed = _profiled(partial(self.model.actor_env_time, self.workload, envs))
        if timed is not None:
            return timed.seconds
        return envs * estimate_seconds(lambda: self.model.env_step_time(self.spec.env_id))

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
                  max_actors: int | None = None, threads: int = 1, learners: int = 1,
                  beside_actors: bool = True) -> tuple[Problem, Facts]:
    """The problem for actors stepping `envs` environments each (default: the config's n_envs), and facts the
    plan reports (S, B, the workload key, the weight-sync seconds, the kernels whose times were scaled).
    `config` defaults to the preset. A workload the profile has not measured is costed from the nearest one it
    has, scaled by their work (CostModel.kernel_time). The actor options go from 1 to `max_actors` processes
    (default: the host's lanes; a cluster offers every node's lanes together, its nodes share them out).
    `threads`: the learner's CPU threads, T (Problem.learner_threads): learn on `cpu` at its T-thread figure.
    `learners`: a learner group of N processes of T threads on the host (Problem.learners). `beside_actors`:
    learn's T-thread figure as it runs beside the actor processes (the local and Ray launchers); False: alone on
    the host, as the sequential launcher runs it (its roles in turn: accounting.in_turn)."""
    config = config if config is not None else preset(algo, spec.env_id)
    if envs is not None:
        config = config.replace(n_envs=envs)
    inputs = _Inputs(model, config, spec, config_workload(config, spec), HOST)
    devices = _devices(profile, inputs, algo)
    resources = _resources(profile, model, devices)
    sync_s: dict[tuple, float] = {}
    cost = _learner_costs(inputs, devices, threads, learners, beside_actors)
    host_lanes = resources[model.resource(inputs.host_device)].lanes if max_actors is None else max_actors
    options = [ActorOption(n, config.n_envs) for n in range(1, host_lanes + 1)]
    first = _segment_costs(inputs, cost, options)
    publish = {(a, d): s + first.get((a, d), 0.0) for (a, d), s in _publish_costs(inputs, devices, options,
                                                                                  sync_s).items()
               if ("learn", d) in cost}  # a learner group learns on the host device only
    act_cost, actor_period = _actor_costs(inputs, devices, options, sync_s, _one_context(profile, devices))
    edges, transfer = _edges(inputs, devices)
    memory = _memory(inputs, devices)
    _check_finite(cost=cost, act=act_cost, actor_period=actor_period, transfer=transfer)
    host = inputs.host_device
    waits = {host: _group_update(inputs, host, learners, threads)[1]} if learners > 1 else {}
    problem = Problem(list(resources.values()), [_device(profile, model, d) for d in devices],
                      model.resource(inputs.host_device), inputs.host_device, cost, act_cost,
                      inputs.steps / config.n_envs * inputs.env_side, actor_period, edges,
                      transfer, memory, prefetch=True, publish=publish, learner_threads=threads * learners,
                      learners=learners, group_comm_s=waits, device_share=dict(inputs.shares))
    return problem, Facts(inputs.key, inputs.steps, config.batch_size, config.n_envs, config, sync_s,
                          inputs.workload, dict(inputs.scaled), dict(inputs.implementations))


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


def _learner_costs(inputs: _Inputs, devices: list[str], threads: int = 1, learners: int = 1,
                   beside_actors: bool = True) -> dict[tuple[str, str], float]:
    """Seconds per iteration of the replay kernels and learn on each device (the publish is apart: it depends
    on the actor option, `_publish_costs`); learn on the host device at `threads` CPU threads, beside the actors
    (CostModel.kernel_time's `beside`) unless `beside_actors` is False. A group of
    `learners` learns on the host device only: one learner's learn on its B/N rows (the first learner's, the
    longest part) and the group's communication (`CostModel.group_time`), learner 0 waiting for both."""
    model, workload, config, can, t = inputs.model, inputs.workload, inputs.config, inputs.can, inputs.t
    batch = config.batch_size
    cost: dict[tuple[str, str], float] = {}
    for d in devices:
        # the learner-side kernels as they run interleaved in the learner's iteration (see in_situ_factor)
        f = _profiled(partial(model.in_situ_factor, d, workload)) if all(can(k, d) for k in (*REPLAY, "learn")) \
            else 1.0
        if all(can(k, d) for k in REPLAY):
            cost[("replay_insert", d)] = f * inputs.inserts.per_update * t("replay_insert", d, inputs.inserts.rows)
            cost[("replay_sample", d)] = f * t(model.sample_timing(config.prioritized, d, workload), d, batch)
            cost[("priority_update", d)] = f * t("priority_update", d, batch) if config.prioritized else 0.0
        if can("learn", d) and learners == 1:  # at T > 1 threads as it runs beside the actor processes
            on_host_threads = d == inputs.host_device and threads > 1
            busy = _actors_busy(inputs, threads) if beside_actors and on_host_threads else 0.0
            cost[("learn", d)] = f * (t("learn", d, batch, threads, busy) if on_host_threads else t("learn", d, batch))
        elif can("learn", d) and d == inputs.host_device:
            cost[("learn", d)] = f * _group_update(inputs, d, learners, threads)[0]
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


def _group_update(inputs: _Inputs, d: str, learners: int, threads: int) -> tuple[float, float]:
    """(seconds of one update of a learner group of `learners` on the host device d, learner 0's part of it in the
    group's collectives: what a run's `group_comm` clock holds). The update: the profile's timing of that group
    where it has one; else its timing of two learners, with the learn of a smaller part and the further
    communication (`_group_seconds`) for more; else one learner's learn on its part plus the communication. The
    wait: the timing's own (with the further communication for more), else the update less learner 0's part, the
    learn of its B/N rows. The latency and bandwidth figures alone leave out the waits for the other learners, so
    they predict well under what learner 0 of a run waits (measured: see docs/MEASUREMENTS.md, "A learner group
    across two nodes")."""
    model, key, batch = inputs.model, inputs.key, inputs.config.batch_size

    def part(n: int) -> float:
        return inputs.t("learn", d, -(-batch // n), threads)

    def timed(n: int) -> tuple[Estimate | None, Estimate | None]:
        return (model.group_learn_time(key, d, n), model.group_wait_time(key, d, n)) if threads == 1 else (None, None)

    update, wait = timed(learners)
    if update is not None:
        return update.seconds, wait.seconds if wait is not None else update.seconds - part(learners)
    update, wait = timed(2)
    if update is not None:
        more = _group_seconds(inputs, learners) - _group_seconds(inputs, 2)
        total = update.seconds + part(learners) - part(2) + more
        return total, wait.seconds + more if wait is not None else total - part(learners)
    comm = _group_seconds(inputs, learners)
    return part(learners) + comm, comm


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


def _segment_costs(inputs: _Inputs, cost: dict[tuple[str, str], float], options: list[ActorOption]
                   ) -> dict[tuple[ActorOption, str], float]:
    """What the learner's thread does once a segment beyond its kernels and publish, seconds per iteration, per
    actor option and learn device: a segment's first iteration's surplus and the segment loop (the module
    docstring's "first update" and "segment loop")."""
    out = {}
    for (kernel, d), learn in cost.items():
        if kernel != "learn":
            continue
        f = _profiled(partial(inputs.model.first_iteration_factor, d, inputs.workload))
        loop = inputs.model.segment_loop_time(d, inputs.workload)
        iteration = learn + sum(cost.get((k, d), 0.0) for k in REPLAY)
        for a in options:
            out[(a, d)] = ((f - 1.0) * iteration + loop) * segments_per_iteration(inputs.config, a.n)
    return out


def _one_context(profile: Profile, devices: list[str]) -> set[str]:
    """The GPUs one actor process at most acts on: a whole GPU or one MIG instance (an MPS share's processes are
    its `instances`, which the slices rows count). Each actor process that acts on a GPU opens a context of its
    own there, and the contexts of many processes take the GPU in turns: 16 actor processes acting on an H200
    each ran 26× its profiled act (docs/MEASUREMENTS.md). One process batches all its envs into each act."""
    return {d for d in devices if profile.device(d).kind is DeviceKind.GPU and profile.device(d).instances == 1}


def _actor_costs(inputs: _Inputs, devices: list[str], options: list[ActorOption], sync_s: dict[tuple, float],
                 one_context: set[str]
                 ) -> tuple[dict[tuple[ActorOption, str], float], dict[tuple[ActorOption, str], float]]:
    """act's seconds per iteration (all actors, with their weight loads) and one actor's period, per option;
    on a device of `one_context`, only the options of one actor process."""
    steps, envs = inputs.steps, inputs.config.n_envs
    side = inputs.env_side
    act_cost, actor_period = {}, {}
    for d in devices:
        if inputs.can("act", d):
            per_call, load = inputs.t("act", d, envs), inputs.weight_sync(d)[1]
            for a in options:
                if a.n > 1 and d in one_context:
                    continue
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


def estimate_seconds(estimate: Callable[[], Estimate]) -> float:
    """The estimate's seconds; PlanError naming what the profile lacks when the cost model cannot make it."""
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
