"""What every off-policy algorithm shares: the hyperparameters that shape the replay loop.

Configs are plain dataclasses with no torch import, so the cost model and the planner can read batch sizes,
network shapes and the replay ratio on a machine without torch. `Algorithm` is the shape of one registry entry
(pearl/algos/registry.py): everything a stage needs to know about an algorithm besides its hyperparameters.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pearl.backends import id_forms
from pearl.errors import ConfigError, DeviceError

@dataclass
class OffPolicyConfig:
    """Hyperparameters of the collect → replay → learn loop, common to every algorithm."""

    algo: ClassVar[str] = ""
    #: hyperparameters besides the shapes that change what one learn call computes (TD3: policy_delay); a
    #: workload carries those that differ from their defaults (`learn_settings`), so its key and its roofline
    #: work follow them
    LEARN_SETTINGS: ClassVar[tuple[str, ...]] = ()

    total_steps: int = 100_000
    """Environment steps to train for (summed over every environment of every actor)."""
    learning_rate: float = 1e-3
    """Adam step size, of every network the algorithm trains (and of SAC's log α)."""
    gamma: float = 0.99
    """Discount factor of the TD target."""
    batch_size: int = 256
    """Transitions per gradient update."""
    buffer_size: int = 100_000
    """Replay capacity in transitions; the oldest are overwritten first."""
    learning_starts: int = 1_000
    """Env steps collected with uniformly random actions before the first update."""
    train_freq: int = 1
    """Env steps between two rounds of updates."""
    gradient_steps: int = 1
    """Updates per round; the replay ratio is gradient_steps / train_freq updates per env step."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of every MLP (ReLU between layers): the Q-network, the actor and each critic."""
    n_envs: int = 1
    """Environments each actor steps in lockstep; `act` runs batched over them."""
    weight_sync_interval: int = 1
    """K: the fewest updates between two weight publishes. The learner publishes once per segment, and the schedule
    makes every segment hold at least K updates (pearl/schedule.py)."""
    prioritized: bool = False
    """Proportional prioritized replay (sum tree) instead of uniform sampling."""
    alpha: float = 0.6
    """Priority exponent: P(i) ∝ (|δ_i| + eps)^alpha."""
    beta0: float = 0.4
    """Initial importance-sampling exponent, annealed linearly to 1 over the run."""
    priority_eps: float = 1e-6
    """Added to |δ| so no transition's priority is zero."""

    @property
    def replay_ratio(self) -> float:
        """Updates per env step (ρ), which the runtime holds fixed."""
        return self.gradient_steps / self.train_freq

    def exploration(self, step: int) -> float:
        """The exploration parameter `act` gets after `step` env steps (ε for DQN, σ for DDPG)."""
        raise NotImplementedError

    def validate(self) -> None:
        """Raise ConfigError naming the first field that is of the wrong kind or out of range."""
        self._check_kinds()
        positive_ints = ("total_steps", "batch_size", "buffer_size", "train_freq", "gradient_steps", "n_envs",
                         "weight_sync_interval")
        for name in positive_ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.learning_starts < 0:
            raise ConfigError(f"learning_starts must be >= 0, got {self.learning_starts}")
        if not 0.0 < self.learning_rate:
            raise ConfigError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ConfigError(f"gamma must be in [0, 1], got {self.gamma}")
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise ConfigError(f"hidden must list positive layer widths, got {self.hidden!r}")
        if self.alpha < 0 or not 0.0 <= self.beta0 <= 1.0 or self.priority_eps <= 0:
            raise ConfigError("prioritized replay needs alpha >= 0, 0 <= beta0 <= 1 and priority_eps > 0")

    def _check_kinds(self) -> None:
        """Every field holds the kind of value its default has (a config read back from a hand-edited run
        record can hold anything): ints are not bools, floats are finite numbers, layer widths are ints."""
        for f in dataclasses.fields(self):
            value, default = getattr(self, f.name), f.default
            if default is dataclasses.MISSING:
                continue
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, int):
                ok = isinstance(value, int) and not isinstance(value, bool)
            elif isinstance(default, float):
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            elif isinstance(default, tuple):
                ok = isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            else:
                ok = isinstance(value, type(default))
            if not ok:
                raise ConfigError(f"{f.name} must be {_kind_name(default)}, got {value!r}")

    def learn_settings(self) -> tuple[tuple[str, float], ...]:
        """(name, value) of each of `LEARN_SETTINGS` that differs from its default, in declared order: () for
        a config whose learn does the default work."""
        defaults = type(self)()
        return tuple((name, getattr(self, name)) for name in self.LEARN_SETTINGS
                     if getattr(self, name) != getattr(defaults, name))

    def replace(self, **changes: Any) -> "OffPolicyConfig":
        """A copy with some fields changed (unknown field names are a ConfigError)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown {self.algo} hyperparameter(s): {', '.join(unknown)}{hint}; the "
                              f"hyperparameters are: {', '.join(sorted(known))}")
        return dataclasses.replace(self, **changes)

    def with_text(self, settings: dict[str, str]) -> "OffPolicyConfig":
        """A copy with fields set from text (`--set name=value`): each parsed as the kind of value its
        default has (true/false, an integer, a number, or comma-separated integers for hidden), then
        validated like any config."""
        self.replace(**{name: None for name in settings})  # unknown names first, with the nearest one
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        parsed = {name: _parse(name, text, defaults[name]) for name, text in settings.items()}
        changed = self.replace(**parsed)
        changed.validate()
        return changed

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["hidden"] = list(self.hidden)
        out["algo"] = self.algo
        return out


@dataclass
class ActorCriticConfig(OffPolicyConfig):
    """What the actor-critic algorithms (DDPG, TD3, SAC) share: Stable-Baselines3's defaults for them, and the
    Polyak-averaged targets. Not an algorithm itself (no registry entry names it)."""

    buffer_size: int = 1_000_000
    learning_starts: int = 100
    hidden: tuple[int, ...] = (400, 300)
    tau: float = 0.005
    """Polyak coefficient of the target networks (1 would copy them outright)."""

    def validate(self) -> None:
        super().validate()
        if not 0.0 < self.tau <= 1.0:
            raise ConfigError(f"tau must be in (0, 1], got {self.tau}")


def _parse(name: str, text: str, default: Any) -> Any:
    """`text` as the kind of value `default` is; ConfigError naming the field when it is not one."""
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return text.lower() in ("true", "1")
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
        if isinstance(default, tuple):
            return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"{name} must be {_kind_name(default)}, got {text!r}") from None
    return text


def _kind_name(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int):
        return "an integer"
    if isinstance(default, float):
        return "a finite number"
    if isinstance(default, tuple):
        return "a list of integers"
    return f"a {type(default).__name__}"


def config_from_dict(cls: type[OffPolicyConfig], data: dict[str, Any]) -> OffPolicyConfig:
    """Rebuild a config written by `to_dict` (the algo key is dropped, lists become tuples)."""
    values = {k: v for k, v in data.items() if k != "algo"}
    if "hidden" in values:
        values["hidden"] = tuple(values["hidden"]) if isinstance(values["hidden"], list) else values["hidden"]
    return cls().replace(**values)


ACTION_KINDS = ("discrete", "continuous")  # pearl.types.EnvSpec.action_kind


@dataclass(frozen=True)
class LearnWork:
    """What one `learn` call does, in the roofline's building blocks (pearl/roofline.py), so the
    what-if model costs any registered algorithm without knowing its name.

    forward_passes: (network, count) in forward-pass equivalents over the batch: a forward pass counts 1, a
    backward pass 2 (weight and input gradients), an input-only backward 1; a target network counts under the
    network it copies (same shape). adam: networks with one Adam step each. polyak: networks whose target is
    Polyak-averaged each update (a hard copy every so many updates is not counted).

    Counts are per update on average, so they may be fractional: work done every k-th update counts 1/k of it
    (TD3's actor step every second update is 0.5 of its passes). `adam` and `polyak` entries are a network's
    name (every update) or (name, fraction of updates)."""

    forward_passes: tuple[tuple[str, float], ...]
    adam: tuple[str | tuple[str, float], ...]
    polyak: tuple[str | tuple[str, float], ...] = ()

    def names(self) -> set[str]:
        """Every network this work names."""
        return {n for n, _ in self.forward_passes} | {n for n, _ in _rated(self.adam)} | \
            {n for n, _ in _rated(self.polyak)}

    def adam_steps(self) -> tuple[tuple[str, float], ...]:
        """(network, Adam steps per update) of each optimised network."""
        return _rated(self.adam)

    def polyak_steps(self) -> tuple[tuple[str, float], ...]:
        """(network, Polyak updates per update) of each averaged target."""
        return _rated(self.polyak)


def _rated(entries: tuple[str | tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    return tuple((e, 1.0) if isinstance(e, str) else (e[0], float(e[1])) for e in entries)


@dataclass(frozen=True)
class LearnState:
    """What a learn kernel's state holds beyond its networks, as the registry entry declares it: what the
    checkpoint writes (`LearnKernel.state_dict`, names in `Algorithm.state_shapes`).

    targets: the networks that have a target copy (None: every network). extras: learned arrays that are no
    network, by name and shape (SAC's log α, shape ()); each has its own Adam. Every network is trained by one
    Adam of its own (a joint optimiser over several networks is the same maths: Adam is elementwise)."""

    targets: tuple[str, ...] | None = None
    extras: tuple[tuple[str, tuple[int, ...]], ...] = ()


#: the greedy action from the policy network's output (`Algorithm.policy_head`); "" for none declared
POLICY_HEADS = ("", "argmax", "tanh", "tanh-mean")


@dataclass(frozen=True)
class Algorithm:
    """One algorithm as every stage of pearl sees it: its registry entry (pearl/algos/registry.py).

    Stages ask the entry instead of comparing names: the CLI's --algo choices, presets and config files
    (config_class), the env check (action_kind), parameters and network shapes (networks, policy_net), the
    roofline (networks, learn_work, action_kind), the profiler (profile_env, config.exploration) and each
    adapter (kernels[backend])."""

    name: str
    """The --algo value, `config_class.algo`, and the algo of profiles, plans and run records."""
    title: str
    """The name in messages ("DQN")."""
    config_class: type[OffPolicyConfig]
    """Its hyperparameters; the defaults are what an env without a preset trains with."""
    action_kind: str
    """The action space it needs: "discrete" (actions are indices) or "continuous" (a flat bounded Box)."""
    networks: Callable[[int, int, tuple[int, ...]], dict[str, list[int]]]
    """(obs_dim, action_dim, hidden) → layer widths, input first, of each trained network (targets have the
    same shapes), in the order parameters are initialised."""
    policy_net: str
    """The network `act` runs (what weight sync copies to the actors)."""
    learn_work: LearnWork | Callable[[Any], LearnWork]
    """One learn call in roofline building blocks; or, where that work depends on hyperparameters besides the
    shapes (`OffPolicyConfig.LEARN_SETTINGS`), a function from the algorithm's config to it (`work_of`)."""
    profile_env: str
    """The environment whose preset `pearl profile` measures for this algorithm."""
    kernels: Mapping[str, str] = field(default_factory=dict)
    """Backend ("torch", "opencl") → "module:attribute" of that backend's kernel factories for this algorithm
    (a pearl.adapters.base.AlgoKernels). Named as text and imported only when an adapter builds a kernel, so
    the registry imports no adapter and no hardware library, and adapters stay below it in the flow."""
    state: LearnState = field(default_factory=LearnState)
    """Target networks and extra learned arrays: with `networks`, what its learn kernel's state (and so a
    checkpoint) holds."""
    policy_head: str = ""
    """How the policy network's output becomes the greedy action, for an exported policy (`pearl export`):
    "argmax" (an index), "tanh" (tanh on the output, in [-1, 1]), "tanh-mean" (tanh on the first half of the
    outputs, the mean); "" where the algorithm declares none, which `pearl export` then refuses."""

    def __post_init__(self) -> None:
        if self.config_class.algo != self.name:
            raise ValueError(f"algorithm {self.name!r}: its config class says algo {self.config_class.algo!r}")
        if self.action_kind not in ACTION_KINDS:
            raise ValueError(f"algorithm {self.name!r}: action_kind must be one of {ACTION_KINDS}")
        if self.policy_head not in POLICY_HEADS:
            raise ValueError(f"algorithm {self.name!r}: policy_head must be one of {POLICY_HEADS}")
        nets = self.networks(1, 1, (1,))
        used = {self.policy_net, *self.work_of().names(), *(self.state.targets or ())}
        if not used <= set(nets):
            raise ValueError(f"algorithm {self.name!r} names networks it lacks: {sorted(used - set(nets))}")
        self._check_extras(set(nets))

    def _check_extras(self, nets: set[str]) -> None:
        """Each extra learned array (`LearnState.extras`) once, with a shape of non-negative ints, and named
        apart from every other array of the state: a checkpoint holds them all under their names."""
        names = [name for name, _ in self.state.extras]
        taken = {"updates", "adam", *nets, *(f"{net}_target" for net in nets)}
        clashing = sorted({n for n in names if not isinstance(n, str) or n.split(".")[0] in taken or
                           names.count(n) > 1}, key=str)
        if clashing:
            raise ValueError(f"algorithm {self.name!r} declares extra state {clashing} twice or under the name of "
                             "a network, its target, its Adam state or the update count")
        bad = [name for name, shape in self.state.extras
               if not isinstance(shape, (tuple, list)) or not all(isinstance(d, int) and d >= 0 for d in shape)]
        if bad:
            raise ValueError(f"algorithm {self.name!r} declares extra state {bad} whose shape is no tuple of "
                             "non-negative ints")

    def work_of(self, settings: tuple[tuple[str, float], ...] = ()) -> LearnWork:
        """The learn work of a workload whose learn settings (`Workload.settings`) are `settings`; the
        defaults for every setting not named. ConfigError for a setting the config does not have or rejects."""
        if isinstance(self.learn_work, LearnWork):
            return self.learn_work
        unknown = sorted({name for name, _ in settings} - set(self.config_class.LEARN_SETTINGS))
        if unknown:
            raise ConfigError(f"{self.title}'s learn work has no setting {', '.join(unknown)}; its settings are "
                              f"{', '.join(self.config_class.LEARN_SETTINGS) or 'none'}")
        config = self.config_class().replace(**dict(settings))
        config.validate()
        return self.learn_work(config)

    def network_sizes(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> dict[str, list[int]]:
        return self.networks(obs_dim, action_dim, tuple(hidden))

    def action_floats(self, action_dim: int) -> int:
        """Floats one stored action takes: one index for discrete actions, action_dim for continuous ones."""
        return 1 if self.action_kind == "discrete" else action_dim

    def target_nets(self, nets: Mapping[str, Any]) -> list[str]:
        """The networks of `nets` that have a target copy, in `nets`' order."""
        declared = self.state.targets
        return [n for n in nets if declared is None or n in declared]

    def state_shapes(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
        """Every array of the learn kernel's state (what a checkpoint's ``learn/`` holds), name → shape: each
        network and target's layers, each Adam's moments and step (one Adam per network and per extra), the
        extras, and the update count. The same on every adapter."""
        nets = self.network_sizes(obs_dim, action_dim, hidden)
        layers: dict[str, dict[str, tuple[int, ...]]] = {}
        for net, sizes in nets.items():
            layers[net] = {}
            for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
                layers[net][f"{net}.{i}.weight"], layers[net][f"{net}.{i}.bias"] = (fan_out, fan_in), (fan_out,)
        out: dict[str, tuple[int, ...]] = {"updates": ()}
        for net in nets:
            out.update(layers[net])
        for net in self.target_nets(nets):
            out.update({name.replace(f"{net}.", f"{net}_target.", 1): shape for name, shape in layers[net].items()})
        for net in nets:
            out[f"adam.step.{net}"] = ()
            for key in ("exp_avg", "exp_avg_sq"):
                out.update({f"adam.{key}.{name}": shape for name, shape in layers[net].items()})
        for name, shape in self.state.extras:
            out[name] = tuple(shape)
            out[f"adam.step.{name}"] = ()
            out.update({f"adam.{key}.{name}": tuple(shape) for key in ("exp_avg", "exp_avg_sq")})
        return out

    def backends(self) -> tuple[str, ...]:
        """The backends it has kernels for ("torch", "opencl")."""
        return tuple(sorted(self.kernels))

    def check_backend(self, backend: str) -> None:
        """DeviceError when the entry names no kernels for backend, saying which backends it has."""
        if backend not in self.kernels:
            have = ", ".join(self.backends()) or "none"
            devices = " or ".join(f"--device {id_forms(b)}" for b in self.backends())
            raise DeviceError(f"{self.title} has no {backend} kernels (its registry entry names kernels for: "
                              f"{have}); run it on a device of those backends ({devices})")

    def kernel_factories(self, backend: str) -> Any:
        """The backend's kernel factories for this algorithm; DeviceError when the entry names none."""
        self.check_backend(backend)
        module, _, attribute = self.kernels[backend].partition(":")
        return getattr(importlib.import_module(module), attribute)
