"""Where a trained policy should serve: each device's predicted act latency, actions per second and energy per
action at the caller's batch, from a profile, and the device an objective picks.

For device d and batch B (observations answered per call), from the cost model:

    latency(d)          = act(d, B) + transfer(cpu → d, B observations) + transfer(d → cpu, B actions)
    actions/s(d)        = B / latency(d)
    energy/action(d)    = busy_w(d) · latency(d) / B

The observations arrive on the host and the actions leave from it, so a device other than `cpu` pays both
legs. "throughput" picks the lowest latency, "perf-per-watt" the lowest energy per action; ties keep the
profile's device order (the host's `cpu` first). Devices whose backend has no act kernel of the algorithm are
not candidates. Each figure keeps its label (measured, scaled, modelled), as plans do.
"""

from __future__ import annotations

from dataclasses import dataclass

from pearl.algos import algorithm
from pearl.algos.base import OffPolicyConfig
from pearl.costmodel import CostModel
from pearl.device import HOST
from pearl.errors import ConfigError, PlanError
from pearl.profile.format import config_workload, load_profile
from pearl.types import EnvSpec

SERVE_OBJECTIVES = ("throughput", "perf-per-watt")


@dataclass(frozen=True)
class ServeOption:
    """One device's figures for serving a policy at `batch` observations a call."""

    device: str
    batch: int
    latency_s: float
    actions_per_s: float
    joules_per_action: float | None  # None: the profile has no power figure of the device
    source: str  # the act time's label: measured, scaled or modelled
    power_source: str | None
    objective: str = "throughput"

    def explain(self) -> str:
        """One line: where the policy serves and why."""
        energy = (f", {self.joules_per_action * 1e3:.3g} mJ/action (power {self.power_source})"
                  if self.joules_per_action is not None else "")
        why = (f"the profile's fastest act at batch {self.batch} for throughput" if self.objective == "throughput"
               else f"the profile's least energy per action at batch {self.batch}")
        return (f"{self.device}: {why}: {self.latency_s * 1e6:,.0f} µs a call, {self.actions_per_s:,.0f} actions/s"
                f"{energy}; timings {self.source}")

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def serve_options(model: CostModel, config: OffPolicyConfig, spec: EnvSpec, batch: int) -> list[ServeOption]:
    """Every device of the profile that can act for this algorithm, with its figures at `batch`."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"--batch must be a positive integer, got {batch!r}")
    entry = algorithm(config.algo)
    workload = config_workload(config, spec)
    obs_bytes, action_bytes = 4 * spec.obs_dim * batch, 4 * entry.action_floats(spec.action_dim) * batch
    options = []
    for device in model.profile.devices:
        if device.adapter not in entry.kernels:
            continue
        try:
            act = model.kernel_time("act", device.id, workload, batch)
        except KeyError:  # the profile has no act figure of this algorithm there
            continue
        legs = 0.0
        if device.id != HOST:  # the observations arrive on the host and the actions leave from it
            legs = (model.transfer_time("cpu", device.id, obs_bytes).seconds
                    + model.transfer_time(device.id, "cpu", action_bytes).seconds)
        latency = act.seconds + legs
        try:
            power = model.power(device.id)
            joules, power_source = power.busy_w * latency / batch, power.source
        except KeyError:
            joules, power_source = None, None
        options.append(ServeOption(device.id, batch, latency, batch / latency, joules, act.source, power_source))
    return options


def pick(options: list[ServeOption], objective: str) -> ServeOption:
    """The option the objective picks (the first of a tie, in the profile's device order)."""
    if objective not in SERVE_OBJECTIVES:
        raise ConfigError(f"unknown objective {objective!r}: use one of {', '.join(SERVE_OBJECTIVES)}")
    if not options:
        raise PlanError("the profile has no act figure of this algorithm on any device; profile it "
                        "(`pearl profile --algo ALGO`)")
    if objective == "perf-per-watt":
        powered = [o for o in options if o.joules_per_action is not None]
        if not powered:
            raise PlanError("the profile has no power figures: perf-per-watt cannot choose; use throughput")
        best = min(powered, key=lambda o: o.joules_per_action)
    else:
        best = min(options, key=lambda o: o.latency_s)
    return ServeOption(**{**best.__dict__, "objective": objective})


def choose(profile_path: str, config: OffPolicyConfig, spec: EnvSpec, batch: int,
           objective: str = "throughput") -> ServeOption:
    """The device a host profile says serves this policy best at `batch`, for `objective`."""
    return pick(serve_options(CostModel(load_profile(profile_path)), config, spec, batch), objective)
