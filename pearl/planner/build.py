"""From a cost model and an algorithm preset to the numbers of the planning problem (pearl/planner/problem.py).

One iteration = one update and S = 1/ρ env steps. Per iteration, with e environments per actor (the preset's
n_envs) and B the batch size:
    act           (S/e) calls at batch e, on the act device (all actors together)
    env_step      S steps on the host
    replay_insert (S/e) calls of e transitions
    replay_sample 1 call at batch B;  learn 1 call at B;  priority_update 1 call at B (0 for uniform replay)
    actor period  (S/(n·e)) · (e · env step + act at batch e)       for n actor processes
The replay and learn kernels of a device are scaled by its in-situ factor (CostModel.in_situ_factor): the
profile's learner iteration timed as the runtime runs it ÷ the sum of those kernels timed one at a time.
Weight sync (actors are processes of their own, so the policy always goes through host memory, even with
learn and act on one device): the learner publishes every K updates, at most as often as actors read,
    publish       min(1/K, S/e) × the learn device's publish time, added to learn (the learner thread does it)
    load          per actor min(1/K, S/(n·e)) × the act device's load time, added to act and the actor period
timed by the profile (CostModel.weight_sync_time); a device it has no such figure of (an older profile, a
what-if device) is costed by its transfers of the policy's bytes, device→host and host→device.
Edges: the sampled batch to learn (its 6 arrays, one copy each) and TD errors back to replay, when those
kernels sit on different devices. Observations, actions and transitions cross no edge of their own: act and
replay_insert take and give host arrays, so the profile's timings of them hold those copies.
Memory: replay storage on the replay device; parameters (+ target, + Adam's two moments) on the learner's;
the policy's parameters on act's. This module imports no torch and no pyopencl.
"""

from __future__ import annotations

import math
from functools import cache, partial
from typing import Callable

from pearl.algos import OffPolicyConfig, preset
from pearl.algos.params import param_count, policy_net
from pearl.costmodel import CostModel, Estimate
from pearl.errors import PlanError
from pearl.planner.problem import REPLAY, ActorOption, Device, Edge, Problem, Resource
from pearl.profiling.format import Profile, Workload, workload_key
from pearl.types import EnvSpec

FLOAT = 4
#: arrays of a sampled batch that move when learn sits on another device than replay (Adapter.adopt): obs,
#: action, reward, next_obs, terminated and the importance weights
BATCH_ARRAYS = 6


def preset_workload(algo: str, spec: EnvSpec) -> tuple[OffPolicyConfig, str]:
    config = preset(algo, spec.env_id)
    return config, workload_key(algo, spec.env_id, spec.obs_dim, spec.action_dim, tuple(config.hidden))


def config_workload(config: OffPolicyConfig, spec: EnvSpec) -> Workload:
    """The workload (shapes) `config` trains on `spec`: what the cost model times, or scales when the profile
    has not measured it."""
    hidden = tuple(config.hidden)
    return Workload(workload_key(config.algo, spec.env_id, spec.obs_dim, spec.action_dim, hidden), config.algo,
                    spec.env_id, spec.obs_dim, spec.action_dim, hidden, config.batch_size, config.buffer_size)


def transition_bytes(spec: EnvSpec) -> int:
    action = 8 if spec.discrete else FLOAT * spec.action_dim
    return FLOAT * (2 * spec.obs_dim + 2) + action


def build_problem(profile: Profile, model: CostModel, algo: str, spec: EnvSpec,
                  envs: int | None = None, config: OffPolicyConfig | None = None) -> tuple[Problem, dict]:
    """The problem for actors stepping `envs` environments each (default: the config's n_envs), and facts the
    plan reports (S, B, the workload key, the host device, the kernels whose times were scaled). `config`
    defaults to the preset. A workload the profile has not measured is costed from the nearest one it has,
    scaled by their work (CostModel.kernel_time)."""
    config = config if config is not None else preset(algo, spec.env_id)
    if envs is not None:
        config = config.replace(n_envs=envs)
    workload = config_workload(config, spec)
    key = workload.key
    if not any(w.algo == algo for w in profile.workloads):
        raise PlanError(f"the profile has no measurements of {key} nor of any {algo} workload to scale from; run "
                        f"`pearl profile --algo {algo} --env {spec.env_id} --out PROFILE` on this machine (it adds "
                        "that workload to the profile)")
    host_device = "cpu"
    if host_device not in model.devices():
        raise PlanError("the profile has no `cpu` device: environments step on the host CPU")
    steps = 1.0 / config.replay_ratio
    batch, envs = config.batch_size, config.n_envs
    step_s = _seconds(lambda: model.env_step_time(spec.env_id))

    scaled: dict[tuple[str, str], str] = {}  # (kernel, device) → the workload its times were scaled from

    def t(kernel: str, device: str, size: int) -> float:
        estimate = _estimate(lambda: model.kernel_time(kernel, device, workload, size))
        if estimate.scaled_from is not None:
            scaled[(kernel, device)] = estimate.scaled_from
        return estimate.seconds

    def can(kernel: str, device: str) -> bool:
        return bool(model.batches(kernel, device, workload))

    def tau(src: str, dst: str, nbytes: float, arrays: int = 1) -> float:
        return _seconds(lambda: model.transfer_time(src, dst, int(nbytes), arrays))

    devices = [d for d in model.devices() if any(can(k, d) for k in ("act", "learn", *REPLAY))]
    if host_device not in devices:  # the problem needs the host's resource, where the actors run
        raise PlanError(f"the profile has no kernel timings of {key} on {host_device}; run `pearl profile "
                        f"--algo {algo}` on this machine")
    resources = {}
    for d in devices:
        entry = profile.device(d)
        r = model.resource(d)
        power = _power(model, d)
        lanes = max(entry.lanes, resources[r].lanes if r in resources else 1)
        resources[r] = Resource(r, lanes, power[0], power[1])
    params, policy_params = param_count(config, spec), param_count(config, spec, policy_net(algo))

    @cache  # asked for by learn's device and by act's
    def weight_sync(d: str) -> tuple[float, float]:
        """(publish, load) seconds of one weight sync on device d."""
        timed = _profiled(partial(model.weight_sync_time, d, workload))
        if timed is not None:
            return timed[0].seconds, timed[1].seconds
        return tau(d, host_device, policy_params * FLOAT), tau(host_device, d, policy_params * FLOAT)

    syncs = 1.0 / config.weight_sync_interval  # snapshots per update the learner offers
    sync_s: dict[tuple, float] = {}  # the weight-sync part of the learn and act costs, which plans report apart
    cost: dict[tuple[str, str], float] = {}
    for d in devices:
        # the learner-side kernels as they run interleaved in the learner's iteration (see in_situ_factor)
        f = _profiled(partial(model.in_situ_factor, d, workload)) if all(can(k, d) for k in (*REPLAY, "learn")) \
            else 1.0
        if all(can(k, d) for k in REPLAY):
            cost[("replay_insert", d)] = f * (steps / envs) * t("replay_insert", d, envs)
            cost[("replay_sample", d)] = f * t("replay_sample", d, batch)
            cost[("priority_update", d)] = f * t("priority_update", d, batch) if config.prioritized else 0.0
        if can("learn", d):
            sync_s[("learn", d)] = min(syncs, steps / envs) * weight_sync(d)[0]
            cost[("learn", d)] = f * t("learn", d, batch) + sync_s[("learn", d)]
    host_lanes = resources[model.resource(host_device)].lanes
    options = [ActorOption(n, envs) for n in range(1, host_lanes + 1)]
    act_cost, actor_period = {}, {}
    for d in devices:
        if can("act", d):
            per_call, load = t("act", d, envs), weight_sync(d)[1]
            for a in options:
                loads = min(syncs, steps / (a.n * envs))  # per actor and iteration: at most one per act call
                sync_s[("act", a, d)] = a.n * loads * load
                act_cost[(a, d)] = (steps / envs) * per_call + sync_s[("act", a, d)]
                actor_period[(a, d)] = steps / (a.n * envs) * (envs * step_s + per_call) + loads * load
    edges = [Edge("batch", "replay_sample", "learn"), Edge("td_errors", "learn", "priority_update")]
    per_edge = {
        "batch": lambda s, d: tau(s, d, batch * (transition_bytes(spec) + FLOAT), BATCH_ARRAYS),
        "td_errors": lambda s, d: tau(s, d, batch * FLOAT) if config.prioritized else 0.0,
    }
    transfer = {}
    for e in edges:
        for s in devices:
            for d in devices:
                if s != d:
                    seconds = per_edge[e.name](s, d)
                    if seconds > 0:
                        transfer[(e.name, s, d)] = seconds
    memory = {}
    for d in devices:
        memory[("replay_insert", d)] = config.buffer_size * transition_bytes(spec)
        memory[("learn", d)] = params * FLOAT * 4  # online + target + Adam's two moments
        memory[("act", d)] = policy_params * FLOAT
    for name, table in (("kernel", cost), ("act", act_cost), ("actor period", actor_period), ("transfer", transfer)):
        for what, seconds in table.items():
            if not math.isfinite(seconds):  # e.g. a huge median times the steps of an iteration: no ILP takes it
                raise PlanError(f"the profile's figures make the {name} time of {what} infinite; check its "
                                "timings and bandwidths, or profile this machine again")
    problem = Problem(list(resources.values()), [Device(d, model.resource(d), profile.device(d).memory_bytes)
                                                 for d in devices],
                      model.resource(host_device), host_device, cost, act_cost, steps * step_s, actor_period, edges,
                      transfer, memory, prefetch=True)
    facts = {"workload": key, "steps_per_iteration": steps, "batch_size": batch, "envs_per_actor": envs,
             "config": config, "weight_sync_s": sync_s, "scaled": scaled, "target": workload}
    return problem, facts


def _seconds(estimate: Callable[[], Estimate]) -> float:
    return _estimate(estimate).seconds


def _estimate(estimate: Callable[[], Estimate]) -> Estimate:
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
