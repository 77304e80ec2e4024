"""Checks of a run's placement before any work (a plan for this work and this machine, its emulated and cluster
devices, GPU slices, backends the algorithm has kernels for) and, after the run, the plan's prediction against
what was measured."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pearl.algos import OffPolicyConfig, algorithm
from pearl.backends import kinds_with
from pearl.device import HOST_DEVICE, DeviceId, check_slice_use
from pearl.errors import ConfigError, DeviceError, PlanError
from pearl.kernels import GROUP_COMM
from pearl.runtime.job import Placement, RoleNodes
from pearl.training.launchers import launcher_capabilities
from pearl.training.result import TrainResult
from pearl.types import EnvSpec

if TYPE_CHECKING:
    from pearl.planner.plan import Plan

def checked_plan(path: str, algo: str | None, env_id: str | None, device: str | None,
                 emulate: dict[DeviceId, DeviceId] | None = None, launcher: str = "sequential") -> "Plan":
    """The plan, refused with the reason when it is for other work than algo/env (when given), another
    machine, or absent devices that `emulate` (`emulated`: --emulate's ids) does not map to an OpenCL device of
    this machine."""
    from pearl.hostinfo import cpu_lanes, cpu_name
    from pearl.planner.plan import load_plan

    if device is not None:
        raise ConfigError("--plan places every kernel itself; drop --device (or drop --plan)")
    plan = load_plan(path)
    for name, given, planned in (("--algo", algo, plan.algo), ("--env", env_id, plan.env)):
        if given is not None and given != planned:
            raise ConfigError(f"{path} is a plan for {plan.algo} on {plan.env}, but {name} says {given}; drop "
                              f"{name} (the plan names it) or make a plan with `pearl plan --algo "
                              f"{algo or plan.algo} --env {env_id or plan.env}`")
    if plan.is_cluster:  # a plan of a cluster profile: its nodes are checked when Ray runs (plan_node_ids)
        _check_cluster_plan(path, plan, launcher, emulate or {})
        return plan
    here = (cpu_name(), cpu_lanes())
    there = (plan.profile.get("cpu"), plan.profile.get("cores"))
    if here != there:
        raise PlanError(f"{path} was planned from a profile of another machine ({there[0]}, {there[1]} cores); "
                        f"this one is {here[0]}, {here[1]} cores: run `pearl profile` here and plan again")
    emulate = emulate or {}
    _check_emulation(path, plan, emulate)
    absent = sorted({str(at.device) for at in plan.devices.values()
                     if at.device.is_what_if and at.device not in emulate})
    if absent:
        raise PlanError(f"{path} places kernels on {', '.join(absent)}, a device modelled from its descriptor "
                        "that this machine does not have; plan without --what-if devices to train, or run those "
                        f"kernels on an OpenCL device of this machine with --emulate {absent[0]}=opencl:0:0")
    return plan


def emulated(emulate: dict[str, str]) -> dict[DeviceId, DeviceId]:
    """--emulate's ABSENT=EMULATOR pairs as device ids; ConfigError naming a pair that is not two device ids."""
    out = {}
    for absent, emulator in sorted(emulate.items()):
        try:
            out[DeviceId.parse(absent)] = DeviceId.parse(emulator)
        except DeviceError as exc:
            raise ConfigError(f"--emulate {absent}={emulator}: {exc}") from None
    return out


def _check_emulation(path: str, plan: "Plan", emulate: dict[DeviceId, DeviceId]) -> None:
    planned = {at.device for at in plan.devices.values()}
    for absent, emulator in sorted(emulate.items(), key=str):
        if absent not in planned:
            raise ConfigError(f"--emulate names {absent}, which {path} places no kernel on (it uses "
                              f"{', '.join(sorted(map(str, planned)))})")
        if not absent.is_what_if:
            raise ConfigError(f"--emulate stands in for a device this machine lacks (a whatif: device of the plan); "
                              f"{absent} is one of this machine's own")
        if not emulator.backend.emulates:
            raise ConfigError(f"--emulate runs {absent}'s kernels on a {kinds_with('emulates')} device (see `pearl "
                              f"devices`); {emulator} is not one")


def _check_cluster_plan(path: str, plan: "Plan", launcher: str, emulate: dict[DeviceId, DeviceId]) -> None:
    nodes = ", ".join(plan.profile["nodes"])
    if not launcher_capabilities(launcher).cluster_plans:
        raise PlanError(f"{path} places roles on the nodes {nodes} of a cluster; run it with --launcher ray "
                        "(and --ray-address of a cluster whose nodes carry pearl_node_NAME resources), not "
                        f"--launcher {launcher}")
    if emulate:
        raise ConfigError(f"--emulate stands in for a device of this machine; {path} is a cluster plan, whose "
                          "devices are its nodes' own")
    devices = plan.devices
    absent = sorted({str(at) for at in [*devices.values(), *plan.actor_spread] if at.device.is_what_if})
    if absent:
        raise PlanError(f"{path} places kernels on {', '.join(absent)}, a device modelled from its descriptor; a "
                        "cluster plan runs on its nodes' own devices: plan without --what-if devices to train")
    if devices["replay_insert"].node != devices["learn"].node and devices["replay_insert"].device != HOST_DEVICE:
        raise PlanError(f"{path} places the replay server on {devices['replay_insert']}, away from the "
                        "learner; a replay server of its own node keeps replay on that node's cpu in this pearl")
    shard_devices = sorted(str(at) for at in plan.shard_devices if at.device != HOST_DEVICE)
    if shard_devices:
        raise PlanError(f"{path}: field 'replay_shards' puts a shard on {shard_devices[0]}; a replay shard keeps its "
                        "table in its node's host memory (cpu) in this pearl")


def role_nodes(plan: "Plan") -> RoleNodes:
    """The plan node of each role of a cluster plan, and each actor worker's node and act device: the plan's
    `actor_devices` dealt out in order of device id (workers 0 .. m−1 on the first, and so on). The schedule
    gives worker i its share and seed whatever its node, so where the workers run changes no learned bit as
    long as their act devices compute alike (cpu on every node)."""
    node = {k: at.node for k, at in plan.devices.items()}
    spread = sorted(plan.actor_spread.items(), key=lambda item: str(item[0]))
    workers = tuple((at.node, at.device) for at, n in spread for _ in range(n))
    shards = tuple(at.node for at, n in sorted(plan.shard_devices.items(), key=lambda item: str(item[0]))
                   for _ in range(n))
    # a cluster plan's learner group has one learner on every node: learner 0 on learn's, the others in order
    members = tuple(name for name in plan.profile["nodes"] if name != node["learn"]) if plan.learners > 1 else ()
    return RoleNodes(actors=node["act"], replay=node["replay_insert"], learner=node["learn"],
                     workers=workers if len(spread) > 1 else (), shards=shards, learners=members)


def local_devices(plan: "Plan") -> dict[str, DeviceId]:
    """A plan's mapping as the device each kernel's node opens (a cluster device NODE/DEVICE's DEVICE)."""
    return {k: at.device for k, at in plan.devices.items()}


def check_planned_workload(path: str, plan: "Plan", config: OffPolicyConfig, spec: EnvSpec) -> None:
    """A plan costs one network shape: training another one with it would compare its predictions with a
    different workload. Plans older than the "workload" field are not checked."""
    from pearl.profile.format import config_workload

    planned = plan.predicted.get("workload")
    key = config_workload(config, spec).key
    if planned is not None and planned != key:
        raise ConfigError(f"{path} was planned for workload {planned}, but these hyperparameters train {key}; "
                          "give `pearl train` the --set/--config you gave `pearl plan`, or plan again")


def check_slices(placement: Placement, actors: int, launcher: str) -> None:
    """DeviceError when the placement's GPU slices cannot be held at once (pearl.device.check_slice_use), or
    name a slice this machine lacks (a MIG instance, an MPS share without a daemon): before any process starts."""
    devices = [d for d in placement.devices() if d.slice is not None]
    if not devices:
        return
    # a launcher that runs the roles in turn runs act in the learner's process too
    check_slice_use(placement.act, (placement.replay, placement.learn), actors,
                    not launcher_capabilities(launcher).concurrent_roles)
    from pearl.adapters.registry import check_slice_exists

    for d in devices:
        check_slice_exists(d)


def role_slices(placement: Placement, actors: int) -> dict[str, dict]:
    """Which slice each role's processes run on, with the environment they start with (config.json)."""
    from pearl.adapters.slices import slice_env

    out = {}
    for role, device, processes in (("actors", placement.act, actors), ("learner", placement.learn, 1)):
        if device.slice is not None:
            out[role] = {"device": str(device), "processes": processes, "env": slice_env(device)}
    return out


def check_backends(algo: str, placement: Placement) -> None:
    """DeviceError, before any work, when act or learn is placed on a backend the algorithm's registry entry names
    no kernels for (SAC on an OpenCL device)."""
    entry = algorithm(algo)
    for device in (placement.act, placement.learn):
        if not device.is_what_if:
            entry.check_backend(device.backend.adapter)


def check_implementations(placement: Placement) -> None:
    """DeviceError, before any process starts, when the placement runs act or learn in a way its device's kind
    cannot (a plan made on a machine with a GPU that captures, trained where that device runs eagerly)."""
    for kernel, device, way in (("act", placement.act, placement.act_way), ("learn", placement.learn,
                                                                          placement.learn_way)):
        if way is not None and not device.is_what_if and way.value not in device.backend.implementations:
            raise DeviceError(f"the plan runs {kernel} {way.value} on {device}, which runs it "
                              f"{' or '.join(device.backend.implementations)} only; plan again for this machine")


def plan_check(plan: "Plan", stats, config: OffPolicyConfig, result: TrainResult,
               emulate: dict[DeviceId, DeviceId] | None = None) -> dict:
    """Predicted against measured, overall and per kernel (seconds per iteration = one update). Kernels of an
    emulated device carry `emulated_on`: their measured time is the emulator's, not the planned device's."""
    emulate = emulate or {}
    steps_per_iteration = 1.0 / config.replay_ratio
    measured: dict[str, dict] = {}
    for kernel, predicted in plan.kernels.items():
        seconds = stats.kernel_seconds.get(kernel, 0.0)
        actor_side = kernel in ("env_step", "act", "replay_insert")
        per_iteration = (seconds / max(stats.steps, 1) * steps_per_iteration if actor_side
                         else seconds / max(stats.updates, 1))
        device = plan.mapping.get(kernel) or (plan.mapping["learn"] if kernel == GROUP_COMM else
                                              f"{plan.mapping['learn']}>{plan.mapping['act']}")  # weight_sync
        measured[kernel] = {"device": device, "predicted_s": predicted, "measured_s": per_iteration,
                            "ratio": per_iteration / predicted if predicted > 0 else None}
        emulator = emulate.get(plan.devices[kernel].device) if kernel in plan.devices else None
        if emulator is not None:
            measured[kernel]["emulated_on"] = str(emulator)
    figures = ("env_steps_per_s", "updates_per_s", "learner_samples_per_s")
    return {"predicted": {k: plan.predicted[k] for k in figures}, "precision": plan.precision,
            "implementations": dict(plan.implementations),
            "measured": learning_phase_rates(result, config.batch_size),
            "kernels": measured,
            "note": (f"the {result.launcher} launcher runs actors, replay and learner concurrently, as the plan "
                     "assumes" if launcher_capabilities(result.launcher).concurrent_roles else
                     "the sequential launcher runs the roles in turn; the plan predicts them running concurrently")
            + "".join(f"; {a}'s kernels ran on {e} (emulated: measured is {e}, predicted is {a})"
                      for a, e in sorted(emulate.items(), key=str)
                      if any(at.device == a for at in plan.devices.values()))}


#: how far measured env steps/s may depart from the plan's prediction before `pearl train` warns
DEPARTURE = 0.25


def plan_departure(check: dict, run_dir: str) -> str | None:
    """One warning line when the measured speed departs from the plan's by more than DEPARTURE, naming the
    kernel whose seconds per iteration departed most and how to fold the run into the profile, or when the run
    never reached the learning phase the plan predicts (saying so, comparing nothing); else None."""
    predicted, measured = check["predicted"]["env_steps_per_s"], check["measured"]["env_steps_per_s"]
    if check["measured"].get("phase", "learning") != "learning":  # its speed is collection's, not the plan's
        return (f"the run made no update (it ended before learning_starts): the plan's {predicted:,.0f} env steps/s "
                "are for the learning phase, which it never reached; train past learning_starts to compare")
    if measured <= 0 or abs(predicted - measured) / measured <= DEPARTURE:
        return None
    kernel, k = max(check["kernels"].items(), key=lambda item: abs(item[1]["measured_s"] - item[1]["predicted_s"]))
    return (f"measured {measured:,.0f} env steps/s, the plan predicted {predicted:,.0f} "
            f"({(measured - predicted) / predicted:+.0%}); {kernel} on {k['device']} departed most "
            f"({k['measured_s'] * 1e6:,.1f} µs per iteration against {k['predicted_s'] * 1e6:,.1f}); "
            f"`pearl profile --from-run {run_dir} --out FILE` folds this run into a profile for the next plan")


def learning_phase_rates(result: TrainResult, batch_size: int) -> dict[str, float]:
    """The measured rates a plan's prediction compares with: over the learning phase (after learning_starts,
    when actors and learner both run, as the plan models), or over the whole run when it never learnt."""
    steps = result.learning_env_steps_per_s
    updates = result.learning_updates_per_s
    if steps is None or updates is None:
        steps, updates = result.env_steps_per_s, result.updates_per_s
    return {"env_steps_per_s": steps, "updates_per_s": updates, "learner_samples_per_s": updates * batch_size,
            "phase": "learning" if result.learning_env_steps_per_s is not None else "whole run"}
