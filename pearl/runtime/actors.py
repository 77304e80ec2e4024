"""What every launcher does alike with its actors: build one, and decide whether a dead one is started again.

`build_actor` is the one construction of an actor (its act kernel with the actor's seeds, its `VectorActor`,
its `ActorShare` of the schedule), used in the learner's process (sequential launcher), in an actor process
(local launcher) and in a Ray actor worker; building it alike everywhere is what lets a seed give the same
transitions on every launcher. `RestartPolicy` counts the restarts of a launcher's actors against its limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pearl.adapters.base import Adapter
from pearl.algos.base import OffPolicyConfig
from pearl.device import DeviceId
from pearl.errors import PearlError
from pearl.kernels import Implementation
from pearl.runtime.protocol import VectorActor
from pearl.runtime.seeds import ActorSeeds
from pearl.schedule import ActorShare, Schedule
from pearl.types import EnvSpec, Params


class ActorFailed(PearlError):
    """An actor stopped with an error (its message is passed on), past the restart limit."""


class RoleLost(ActorFailed):
    """A role that holds the run's state (the learner, a learner of its group, a replay shard) died with its
    process or its node: what it held is gone, so the run can go on only from its newest checkpoint (the Ray
    launcher does, while restarts are left; the others end the run with this error)."""


def actor_adapter(device: DeviceId, descriptor: str | None) -> Adapter:
    """The adapter an actor opens in a process of its own: one CPU thread, so that actors beside each other do
    not oversubscribe the cores and a seed gives the same bits whatever their count."""
    from pearl.adapters import open_adapter  # imported here: the hardware library loads in the actor's process only

    return open_adapter(device, 1, descriptor)


def build_actor(adapter: Adapter, actor_id: int, config: OffPolicyConfig, spec: EnvSpec, policy: Params,
                seeds: ActorSeeds, schedule: Schedule, collected: int,
                implementation: Implementation | None = None) -> ActorShare:
    """Actor `actor_id` acting with `policy` on `adapter`'s device, its envs and act kernel seeded by `seeds`, at
    its transition number `collected` of the schedule; act runs as `implementation` (None: the adapter's way)."""
    act = adapter.make_act(config, spec, policy, seeds.act, implementation)
    actor = VectorActor(actor_id, spec.env_id, spec, config.n_envs, act, seeds.env)
    return ActorShare(actor, schedule, config, collected)


@dataclass
class RestartPolicy:
    """How many times a launcher starts its dead actors again (all actors together) before the run ends with
    the actor's error."""

    limit: int
    count: int = 0
    log: list[str] = field(default_factory=list)  # why each restart happened

    def check(self, actor: int, reason: str) -> None:
        """ActorFailed when no restart is left for actor `actor`, which stopped for `reason`."""
        self.check_loss(f"actor {actor} {reason}")

    def admit(self, actor: int, reason: str) -> int:
        """Count a restart of actor `actor` (ActorFailed when none is left); the run's restarts so far, this one
        included, which reseed the actor (`Seeds.actor`)."""
        return self.admit_loss(f"actor {actor} {reason}")

    def admit_loss(self, what: str) -> int:
        """Count a restart for `what` happened (ActorFailed saying it when none is left); the restarts so far."""
        self.check_loss(what)
        self.count += 1
        self.log.append(what)
        return self.count

    def check_loss(self, what: str) -> None:
        """ActorFailed saying `what` happened when no restart is left for it."""
        if self.count >= self.limit:
            raise ActorFailed(f"{what} (after {self.count} restart(s); the limit is {self.limit})")
