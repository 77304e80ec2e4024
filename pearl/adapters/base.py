"""The adapter contract: how pearl runs kernels on one device.

An adapter owns one device (``cpu``, ``cuda:0``, ``opencl:0:0``) and builds three groups of kernels for an
algorithm and its shapes, one per role:

- `ActKernel`      — ``act``: policy forward + exploration on a batch of observations;
- `ReplayKernels`  — ``replay_insert``, ``replay_sample``, ``priority_update`` on storage that lives on the
                     device;
- `LearnKernel`    — ``learn``: one gradient update, target update included, returning TD errors; in two
                     halves, ``grads`` (every gradient, no parameter moves) then ``apply`` (the optimiser
                     steps and target updates), so something (an all-reduce) can stand between them.

Numpy arrays are the boundary: parameters move in and out as ``dict[str, np.ndarray]`` (so every adapter
can start from the same seeded weights), observations enter and actions leave as numpy. Within a role,
arrays stay native to the device; a `SampleBatch` names the device its arrays live on, and `host_array`
brings any adapter's array back to numpy.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from abc import ABC, abstractmethod
from dataclasses import dataclass
from collections.abc import Iterator
from typing import Any, Callable, ClassVar, TypeVar

import numpy as np

from pearl.algos.base import OffPolicyConfig
from pearl.device import HOST_RESOURCE, DeviceId, DeviceKind
from pearl.errors import DeviceError
from pearl.algos.registry import algorithm
from pearl.kernels import Implementation, Precision
from pearl.types import (EnvSpec, Gradients, GroupShare, LearnResult, Params, PriorityUpdate, SampleBatch,
                         TransitionBatch)


@dataclass(frozen=True)
class DeviceInfo:
    """A device an adapter can run on, as `pearl devices` lists it. `kind` and `resource` are what the
    profiler, cost model and planner read; `note` is for people only."""

    id: str
    kind: DeviceKind
    adapter: str  # "torch" or "opencl"
    name: str
    lanes: int  # cores for a CPU; 1 for a GPU or an FPGA
    memory_bytes: int
    #: the physical resource it runs on: HOST_RESOURCE for the host's cores, the GPU's id for a GPU and its
    #: slices, else its own id
    resource: str = ""
    #: the fraction of its resource's compute it has: 1 for a whole device, a MIG instance's SMs ÷ the GPU's,
    #: an MPS share's percentage ÷ 100
    share: float = 1.0
    note: str = ""
    #: why the device is found but cannot work (its probe failed: the step, the cause, what to do); '' when it works
    problem: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", DeviceKind(self.kind))
        if not self.resource:
            own = HOST_RESOURCE if self.kind is DeviceKind.CPU else str(self.device_id.whole)
            object.__setattr__(self, "resource", own)

    @property
    def device_id(self) -> DeviceId:
        return DeviceId.parse(self.id)

    @property
    def usable(self) -> bool:
        return not self.problem


def host_array(x: Any) -> np.ndarray:
    """Any adapter's array as a host numpy array (duck-typed, so this module imports no backend)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # torch.Tensor
        return x.detach().cpu().numpy()
    if hasattr(x, "get"):  # pyopencl.array.Array
        return x.get()
    return np.asarray(x)


def check_state(state: Params, expected: dict[str, tuple[int, ...]], what: str) -> None:
    """ValueError naming the first array of a state dict that is missing or has another shape than expected."""
    for name, shape in expected.items():
        if name not in state:
            raise ValueError(f"{what} state lacks {name!r}")
        got = tuple(np.shape(state[name]))
        if got != tuple(shape):
            raise ValueError(f"{what} state has {name} of shape {got}, expected {tuple(shape)}")


def check_gradients(gradients: Gradients, expected: dict[str, tuple[int, ...]]) -> None:
    """ValueError naming the first gradient an `apply` needs that `gradients` lacks or has in another shape."""
    for name, shape in expected.items():
        if name not in gradients.arrays:
            raise ValueError(f"gradients lack {name!r}, which this update steps")
        got = tuple(gradients.arrays[name].shape)
        if got != tuple(shape):
            raise ValueError(f"gradient {name} has shape {got}, its parameter {tuple(shape)}")


def encode_json(obj: Any) -> np.ndarray:
    """A JSON-able object (a random generator's state) as a uint8 array, so a state dict holds arrays only."""
    return np.frombuffer(json.dumps(obj).encode("utf-8"), dtype=np.uint8).copy()


def decode_json(array: np.ndarray) -> Any:
    """The object `encode_json` stored (ValueError when the bytes are not that)."""
    try:
        return json.loads(np.asarray(array, dtype=np.uint8).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"a state's JSON field is unreadable: {exc}") from None


class ActKernel(ABC):
    """``act``: choose actions for a batch of observations."""

    @abstractmethod
    def act(self, obs: np.ndarray, explore: float) -> np.ndarray:
        """Actions for obs (N, obs_dim). explore is ε (DQN) or σ (DDPG); 0 acts deterministically.

        DQN returns int64 action indices (N,); DDPG returns float32 actions in [-1, 1], shape (N, act_dim).
        """

    #: how it runs on its device (`pearl.kernels.Implementation`); a kernel that can be captured says so
    implementation: Implementation = Implementation.EAGER

    def eager(self) -> "ActKernel":
        """This kernel running eagerly (itself when it does; a captured one gives up its graphs)."""
        return self

    @abstractmethod
    def set_params(self, params: Params) -> None:
        """Load the policy network's parameters (the names `init_params` gives)."""

    def new_episodes(self, rows: np.ndarray) -> None:
        """rows: a boolean mask over the rows `act` gets, True where that row's env starts a new episode at
        its next act. Exploration that lives for an episode (DDPG's Ornstein–Uhlenbeck process) starts again
        there; stateless exploration (ε-greedy, Gaussian noise) has nothing to do."""
        return None


class LearnKernel(ABC):
    """``learn``: one gradient update on a sampled batch, which is ``grads`` then ``apply``.

    `grads` computes every gradient the update's optimisers need (each network's, an extra's such as SAC's
    log α) and the TD errors, changing no parameter, optimiser state or update count; `apply` runs the optimiser
    steps (gradient clipping included) and the target updates, and counts the update. `learn` may fuse the two
    where that is faster, but gives the same bits as `apply(grads(batch))`.

    An actor-critic's actor gradient is taken through the critic as its Adam step in this update leaves it
    (DDPG's, TD3's and SAC's order, as Stable-Baselines3 and CleanRL have it: critic step, then actor). `grads`
    gets it without moving the critic by stepping a scratch copy of the critic and its Adam moments with the
    critic gradient it just computed; `apply` then steps the critic itself with the gradient it is given. So
    when those gradients are changed between the halves, the actor's gradient is still through the critic
    this learner's own gradient would give. In a learner group `grads` is given its `GroupShare` and averages
    each gradient across the group as soon as it has it, so the critic the actor's gradient goes through is the
    one the group's averaged gradient steps, as one learner on the whole batch would have it."""

    updates: int
    #: how it runs on its device (`pearl.kernels.Implementation`); a captured kernel says so
    implementation: Implementation = Implementation.EAGER

    def eager(self) -> "LearnKernel":
        """This kernel running eagerly (itself when it does; a captured one, the kernel it replays)."""
        return self

    def learn(self, batch: SampleBatch) -> LearnResult:
        """Update the networks on batch (arrays native to this device) and return the TD errors."""
        return self.apply(self.grads(batch))

    @abstractmethod
    def grads(self, batch: SampleBatch, share: GroupShare | None = None) -> Gradients:
        """Every gradient of one update on batch, and its TD errors and metrics; no parameter changes. `share`:
        this learner's part of the update in a learner group (its gradients come back averaged over the group);
        None for a learner on its own."""

    @abstractmethod
    def apply(self, gradients: Gradients) -> LearnResult:
        """The optimiser steps and target updates of the update `grads` computed (in the same order of updates:
        each `grads` is followed by its `apply` before the next `grads`); ValueError when a gradient the
        update steps is missing or has another shape than its parameter."""

    def get_params(self) -> Params:
        """Every network's parameters, targets included, as host arrays."""
        out: Params = {}
        for name, net in self._nets().items():
            out.update(net.dump(name))
        return out

    def write_policy(self, out: Params) -> None:
        """Copy the policy's parameters into the arrays of out (the names and shapes `policy_params` gives).
        Adapters override it to copy straight from the device, without an intermediate host array."""
        for name, value in self.policy_params().items():
            out[name][...] = value

    @abstractmethod
    def policy_params(self) -> Params:
        """The parameters `act` needs (what weight_sync copies)."""

    @abstractmethod
    def _nets(self) -> dict[str, Any]:
        """Every network by its name (targets included): objects with `dump(name)` and `load(params, name)`."""

    @abstractmethod
    def _optimizers(self) -> dict[str, Any]:
        """Each trained network's optimiser by the network's name: objects with `state(net, name)` and
        `load_state(state, net, name)`."""

    def state_dict(self) -> Params:
        """Everything a resumed run needs, as host arrays: every network's parameters (targets included, the
        names `get_params` gives), each optimiser's state (`adam.exp_avg.<param>`, `adam.exp_avg_sq.<param>`,
        `adam.step.<net>`) and `updates`. The names and shapes are the same on every adapter."""
        nets = self._nets()
        out: Params = {"updates": np.asarray(self.updates, dtype=np.int64), **self.get_params()}
        for name, optimizer in self._optimizers().items():
            out.update(optimizer.state(nets[name], name))
        return out

    def load_state_dict(self, state: Params) -> None:
        """Restore a `state_dict` of a kernel of the same algorithm and shapes (names and shapes checked first,
        so a state that does not fit changes nothing)."""
        check_state(state, {k: np.shape(v) for k, v in self.state_dict().items()}, "learn")
        nets = self._nets()
        for name, net in nets.items():
            net.load(state, name)
        for name, optimizer in self._optimizers().items():
            optimizer.load_state(state, nets[name], name)
        self.updates = int(state["updates"])


class CriticFirstLearn(LearnKernel):
    """DDPG's fused update in the order `LearnKernel` states, written once for every backend: the critic's
    gradient and step, the actor's gradient through the critic just stepped, then the actor's step and the
    targets. A backend supplies the three parts and the critic's optimiser (`critic_opt`)."""

    critic: Any
    critic_opt: Any

    def learn(self, batch: SampleBatch) -> LearnResult:
        td, metrics = self._critic_grad(batch)
        self.critic_opt.step()
        metrics["losses/actor_loss"] = self._actor_grad(batch, self.critic)
        self._step_actor_and_targets()
        return LearnResult(td, metrics)

    @abstractmethod
    def _critic_grad(self, batch: SampleBatch) -> tuple[Any, dict[str, Any]]:
        """The critic's gradient on batch into its gradient buffers; the TD errors and the critic's metrics."""

    @abstractmethod
    def _actor_grad(self, batch: SampleBatch, critic: Any) -> Any:
        """The actor's gradient through `critic` into its gradient buffers; the actor's loss."""

    @abstractmethod
    def _step_actor_and_targets(self) -> None:
        """The actor's optimiser step and the targets' update; counts the update."""


class DeviceClock(ABC):
    """Times work on a device by the device's own clock: `start()` before a call, `stop()` after it (both queue
    a mark on the device and return at once), `seconds()` once the device has done both (after a sync): the
    device's time from mark to mark. A captured call's kernels run back to back, so that is the time it keeps
    the device busy; an eager call's includes the gaps its host's launches leave, so it stays near the wall
    time (a bound that never counts the device's load short)."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def seconds(self) -> float: ...


#: an act or learn kernel (what `Adapter.implemented` hands back as it got it)
K = TypeVar("K", ActKernel, LearnKernel)


class ReplayKernels(ABC):
    """``replay_insert``, ``replay_sample`` and ``priority_update`` on storage resident on the device."""

    @property
    @abstractmethod
    def size(self) -> int:
        """Transitions stored."""

    @abstractmethod
    def insert(self, batch: TransitionBatch) -> None:
        """Write the transitions (overwriting the oldest) with the current max priority."""

    @abstractmethod
    def sample(self, batch_size: int, beta: float) -> SampleBatch:
        """Draw batch_size transitions (proportional to priority when prioritized) with IS weights."""

    def samples(self, count: int, batch_size: int, beta: float) -> Iterator[SampleBatch]:
        """`count` batches in turn, each drawn when the caller asks for the next (so a prioritized caller's
        priority update lands before the next draw). A replay that lives elsewhere overrides this to fetch
        uniform batches in one go; either way the batches are those of `count` successive `sample` calls."""
        for _ in range(count):
            yield self.sample(batch_size, beta)

    @abstractmethod
    def update_priorities(self, update: PriorityUpdate) -> None:
        """Priorities of the sampled slots ← (|δ| + eps)^α (a no-op for uniform replay)."""

    @abstractmethod
    def state_dict(self) -> Params:
        """The stored transitions (`obs`, `action`, `reward`, `next_obs`, `terminated`: the first `size`
        rows), the ring position and size, the slot priorities when prioritized, and the sampler's random
        state, as host arrays: what a resumed run needs to sample as this one would have."""

    @abstractmethod
    def load_state_dict(self, state: Params) -> None:
        """Restore a `state_dict` taken from replay of the same capacity and shapes on this adapter."""


Networks = dict[str, list[int]]  # layer widths of each network, as the registry entry's `networks` gives them


@dataclass(frozen=True)
class AlgoKernels:
    """How one backend builds one algorithm's kernels: what an algorithm's registry entry names per backend
    (`Algorithm.kernels`). `handle` is the backend's own (a torch.device, an OpenCL runtime); `nets` the
    layer widths of every network of the algorithm."""

    act: Callable[[Any, OffPolicyConfig, Networks, Params, int], ActKernel]
    """(handle, config, nets, params, seed) → an act kernel holding the policy network."""
    learn: Callable[..., LearnKernel]
    """(handle, config, nets, params, seed) → a learn kernel holding every network, its target and optimiser.
    A learn with a stochastic target (TD3's smoothing noise, SAC's sampled actions) draws it from the counter-based
    key (seed, update index) (pearl/rng.py), so it repeats bit for bit on every launcher and after a resume;
    a deterministic learn ignores the seed. For a precision of `precisions` other than fp32 it is called with
    precision=<Precision> as a keyword too (`build_learn`)."""
    precisions: tuple[Precision, ...] = (Precision.FP32,)
    """The precisions its learn computes in. fp32 is every learn's, and `learn` is called without the keyword
    for it, so a factory of five arguments (an algorithm plugin's) needs no change."""

    def build_learn(self, handle: Any, config: OffPolicyConfig, nets: Networks, params: Params, seed: int,
                    precision: Precision, device_id: str) -> LearnKernel:
        """`learn` in precision; DeviceError naming the device and the precisions it has when it lacks it."""
        if precision is Precision.FP32:
            return self.learn(handle, config, nets, params, seed)
        if precision not in self.precisions:
            have = ", ".join(p.value for p in self.precisions)
            raise DeviceError(f"{device_id}: {config.algo}'s learn has no {precision.value} kernels here "
                              f"(its precisions: {have})")
        return self.learn(handle, config, nets, params, seed, precision=precision)


class GroupComm(ABC):
    """One learner's end of a learner group's communication (`pearl.runtime.learner_group`): learner 0 posts each
    command, with every learner's rows of an update's batch; the learners average their gradients through
    `share().average` and learner 0 gathers their TD errors and losses. An adapter that can train in a group
    makes one (`Adapter.host_group`, `Adapter.join_group`)."""

    UPDATE, DIGEST, STOP = 1, 2, 3  # the commands learner 0 posts
    rank: int
    world: int
    #: seconds this learner has spent in the group's collectives, waiting for the others included: what the
    #: group's communication costs it (learner 0's is recorded as the run's `group_comm`)
    comm_s: float = 0.0

    @abstractmethod
    def share(self) -> GroupShare:
        """This learner's part of every update (its rows, and the group's average)."""

    @abstractmethod
    def post(self, command: int, batch: SampleBatch | None = None) -> SampleBatch | None:
        """Learner 0: send `command` to the others (and, for UPDATE, each its rows of batch); learner 0's rows."""

    @abstractmethod
    def receive(self) -> tuple[int, SampleBatch | None]:
        """The other learners: learner 0's next command, and for UPDATE this learner's rows on its device."""

    @abstractmethod
    def gather(self, td_errors: Any, metrics: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Learner 0: every learner's TD errors in batch order and the losses averaged over the batch; the
        others: (None, {})."""

    @abstractmethod
    def differing(self, state: Params) -> list[int]:
        """Learner 0: the learners whose learn state is not its own bit for bit; the others: []."""

    @abstractmethod
    def close(self) -> None:
        """Leave the group (safe to call twice)."""


class Adapter(ABC):
    """Runs kernels on one device."""

    #: Backend name: "torch" or "opencl".
    backend: ClassVar[str]
    #: Kernels of the catalogue this adapter implements.
    implements: ClassVar[frozenset[str]]

    def __init__(self, device_id: str) -> None:
        self.device_id = device_id

    def algo_kernels(self, config: OffPolicyConfig) -> AlgoKernels:
        """This backend's kernel factories for config's algorithm, from its registry entry: ConfigError for an
        algorithm the registry does not know, DeviceError for one without kernels on this backend."""
        return algorithm(config.algo).kernel_factories(self.backend)

    @abstractmethod
    def make_act(self, config: OffPolicyConfig, spec: EnvSpec, params: Params, seed: int,
                 implementation: Implementation | None = None) -> ActKernel:
        """An `act` kernel holding the policy network, with its own seeded exploration randomness;
        `implementation`: how it runs (`implemented`), None for the adapter's own choice."""

    @abstractmethod
    def make_learn(self, config: OffPolicyConfig, spec: EnvSpec, params: Params, seed: int = 0,
                   precision: Precision = Precision.FP32,
                   implementation: Implementation | None = None) -> LearnKernel:
        """A `learn` kernel holding every network, its target and its optimizer state; seed keys the random draws
        of a stochastic target (the run's seed: see `AlgoKernels.learn`); precision is the arithmetic it
        computes in (`pearl.kernels.Precision`): DeviceError where this adapter or the algorithm lacks it;
        `implementation`: how it runs (`implemented`), None for the adapter's own choice."""

    def implemented(self, kernel: K, implementation: Implementation | str | None, what: str) -> K:
        """`kernel` run as `implementation`: None keeps the adapter's choice, eager gives up a capture, and
        captured on a kernel that cannot be is a DeviceError naming the device and why (`what`: the kernel,
        for the message: "dqn's learn")."""
        if implementation is None:
            return kernel
        wanted = Implementation.parse(implementation)
        if wanted is Implementation.EAGER:
            return kernel.eager()
        if kernel.implementation is not wanted:
            raise DeviceError(f"{self.device_id}: {what} cannot run {wanted.value} here (it runs "
                              f"{kernel.implementation.value}; CUDA graphs capture torch kernels on cuda:N, "
                              "unless PEARL_CUDA_GRAPHS=0)")
        return kernel

    @abstractmethod
    def make_replay(self, config: OffPolicyConfig, spec: EnvSpec, seed: int) -> ReplayKernels:
        """Replay storage of config.buffer_size transitions on this device, with its sampler."""

    @abstractmethod
    def from_host(self, x: np.ndarray) -> Any:
        """A host array as this device's native array."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait until queued work on the device is done (timing needs it)."""

    def to_host(self, x: Any) -> np.ndarray:
        return host_array(x)

    def acting(self) -> AbstractContextManager[None]:
        """Where a process that also learns (the sequential launcher's) runs act as an actor process runs it
        (`runtime.actors.actor_adapter`: one intra-op thread), so that act's bits never depend on the launcher.
        Nothing to do for a backend whose threads are not the process's."""
        return nullcontext()

    def host_group(self, learners: int, spec: EnvSpec, batch_size: int,
                   start_others: Callable[[int], None], host: str = "127.0.0.1") -> GroupComm:
        """Learner 0's end of a group of `learners`: it opens the group on a port of this host's address `host`,
        calls `start_others(port)` and waits until every learner has joined."""
        raise DeviceError(f"{self.device_id}: the {self.backend} adapter cannot train in a learner group; "
                          "learn on cpu or cuda:N")

    def join_group(self, rank: int, learners: int, port: int, spec: EnvSpec, batch_size: int,
                   host: str = "127.0.0.1") -> GroupComm:
        """Learner `rank`'s end of the group learner 0 opened at host:port."""
        raise DeviceError(f"{self.device_id}: the {self.backend} adapter cannot train in a learner group")

    def device_clock(self) -> DeviceClock | None:
        """A clock of the device's own busy time (a GPU's events), for the profiler: a kernel's wall time on a
        GPU holds its host's launches, which leave the device idle; None where wall time is the device's."""
        return None

    def saturating_load(self) -> Callable[[], None] | None:
        """Work that keeps every unit of the device busy while it runs, for the profiler's busy-power window;
        None where a learn update already does (the profiler then loads the device with the DQN preset's learn).
        A GPU needs one: a small update is bound by its host's launches and leaves the board near idle."""
        return None

    def time_group(self, sizes: tuple[int, ...], repeats: int) -> list[tuple[int, float]] | None:
        """(bytes, median seconds) of a learner group's gradient average between two processes on this host, for
        each size: what the profiler records as this device's `group` transfer; None where its adapter cannot
        train in a group."""
        return None

    def adopt(self, batch: SampleBatch) -> SampleBatch:
        """The batch with its arrays on this device (a no-op when they already are)."""
        if batch.device == self.device_id:
            return batch
        move = lambda a: self.from_host(host_array(a))  # noqa: E731 - a one-line converter
        return SampleBatch(batch.indices, move(batch.obs), move(batch.action), move(batch.reward),
                           move(batch.next_obs), move(batch.terminated), move(batch.weights), self.device_id)
