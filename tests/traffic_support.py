"""A short real run of a launcher, and its counted traffic beside its launcher's statement (pearl.traffic)."""

from __future__ import annotations

from pearl import traffic
from pearl.algos import DDPGConfig, DQNConfig
from pearl.runtime.launcher import LoopStats, SegmentLauncher

SMALL = dict(hidden=(16, 16), batch_size=16, learning_rate=1e-3)

#: (algo config, env): total steps not a multiple of the segment (a short last segment), learning starting a few
#: segments in, several envs an actor (a step straddles two segments)
CASES = {
    "dqn-uniform": (DQNConfig(total_steps=1000, learning_starts=200, train_freq=64, gradient_steps=32, n_envs=3,
                              target_update_interval=64, **SMALL), "CartPole-v1"),
    "dqn-prioritized": (DQNConfig(total_steps=1000, learning_starts=200, train_freq=64, gradient_steps=32, n_envs=3,
                                  target_update_interval=64, prioritized=True, **SMALL), "CartPole-v1"),
    "ddpg": (DDPGConfig(total_steps=300, learning_starts=100, train_freq=8, gradient_steps=8, n_envs=1,
                        buffer_size=10_000, **SMALL), "Pendulum-v1"),
}


def counted(stats: LoopStats) -> dict[str, traffic.EdgeTraffic]:
    return {edge: traffic.EdgeTraffic(**c) for edge, c in stats.traffic.items() if any(c.values())}


def stated(launcher: SegmentLauncher) -> dict[str, traffic.EdgeTraffic]:
    """The launcher's statement summed over the segments its run collected."""
    name = type(launcher).capabilities.traffic
    total = traffic.over_run(name, launcher.schedule, launcher.config, launcher.spec, launcher.first_segment,
                             launcher.job.learn)
    return {edge: t for edge, t in total.items() if any(t.to_dict().values())}
