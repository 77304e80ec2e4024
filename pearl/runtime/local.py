"""The sequential launcher: one or more actors, one replay manager, one learner, driven in turn.

It reproduces the sequential schedule of the published presets exactly: collect `train_freq` env steps,
then run `gradient_steps` updates (once more than `learning_starts` steps have been collected), so the
replay ratio is gradient_steps / train_freq. Each role runs on the device the placement gives it; a batch
that crosses devices is moved by the learner's adapter. With several actors (a plan's actor count) they
step in turn, each with its own environments and `act` kernel: the same roles a concurrent launcher would
run, one at a time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from pearl.adapters import open_adapter
from pearl.algos.base import OffPolicyConfig
from pearl.algos.params import init_params
from pearl.replay import linear_beta
from pearl.runtime.checkpoint import Checkpoint, Checkpointer, actor_seed, learning_resumes_at, restore
from pearl.runtime.protocol import Actor, Episode, Learner, ReplayManager, merge_clocks
from pearl.runtime.record import RunRecord
from pearl.types import EnvSpec, Params


@dataclass(frozen=True)
class Placement:
    """Device of each role's kernels. The replay kernels share one device: their storage lives there."""

    act: str
    replay: str
    learn: str

    @classmethod
    def single(cls, device: str) -> "Placement":
        return cls(device, device, device)

    def devices(self) -> list[str]:
        return sorted({self.act, self.replay, self.learn})

    def to_dict(self) -> dict[str, str]:
        return {"act": self.act, "replay_insert": self.replay, "replay_sample": self.replay,
                "priority_update": self.replay, "learn": self.learn, "env_step": "cpu"}


@dataclass
class LoopStats:
    steps: int = 0
    updates: int = 0
    wall_s: float = 0.0
    learn_start_s: float | None = None
    learn_start_steps: int = 0
    episodes: list[Episode] = field(default_factory=list)
    kernel_seconds: dict[str, float] = field(default_factory=dict)
    kernel_calls: dict[str, int] = field(default_factory=dict)
    final_params: Params = field(default_factory=dict)
    dropped_steps: int = 0  # env steps produced past total_steps and not inserted (parallel actors)
    waits: dict[str, float] = field(default_factory=dict)  # seconds each side waited (parallel launcher)
    restarts: int = 0  # actor processes started again after dying (parallel launcher)
    lost_steps_max: int = 0  # at most this many transitions were lost with them (one step of n_envs each)
    start_steps: int = 0  # env steps and updates a resumed run started from (0 for a fresh run)
    start_updates: int = 0
    checkpoints: list[str] = field(default_factory=list)  # files written, oldest first
    checkpoint_s: float = 0.0  # time spent writing them (inside wall_s)


class LocalLauncher:
    def __init__(self, config: OffPolicyConfig, spec: EnvSpec, placement: Placement, seed: int,
                 threads: int | None = None, descriptor: str | None = None, actors: int = 1,
                 learn: bool = True, resume: Checkpoint | None = None,
                 checkpointer: Checkpointer | None = None) -> None:
        """descriptor: a device descriptor whose kernel binary the placement's OpenCL device loads;
        learn=False collects only (no updates). resume: a checkpoint to go on from; checkpointer: writes
        checkpoints every so many updates and at the end."""
        self.config, self.spec, self.placement, self.seed, self.learn = config, spec, placement, seed, learn
        self.resume, self.checkpointer = resume, checkpointer
        self.adapters = {d: open_adapter(d, threads, descriptor if d.startswith("opencl") else None)
                         for d in placement.devices()}
        adapters = self.adapters
        params = init_params(config, spec, seed)
        self.replay = ReplayManager(adapters[placement.replay].make_replay(config, spec, seed + 2), config.batch_size)
        self.learner = Learner(adapters[placement.learn].make_learn(config, spec, params),
                               adapters[placement.learn], config)
        start = self._steps = 0  # env steps in replay so far (what checkpoint_now saves)
        if resume is not None:
            restore(resume, self.learner.kernel, self.replay.kernels)
            self.learner.published_version = self.learner.updates
            params, start = self.learner.kernel.policy_params(), resume.steps
        # actor i: its own env seeds and exploration key, so actors explore differently
        self.actors = [Actor(i, spec.env_id, spec, config.n_envs,
                             adapters[placement.act].make_act(config, spec, params, actor_seed(seed, i, start) + 1),
                             actor_seed(seed, i, start)) for i in range(actors)]

    def run(self, record: RunRecord | None = None, progress: Callable[[int], None] | None = None,
            max_seconds: float | None = None) -> LoopStats:
        """Train for config.total_steps env steps, or until max_seconds of wall time when given."""
        cfg, replay, learner, checkpointer = self.config, self.replay, self.learner, self.checkpointer
        stats = LoopStats()
        if self.resume is not None:
            stats.steps = stats.start_steps = self.resume.steps
            stats.start_updates = learner.updates
        learn_after = learning_resumes_at(cfg.learning_starts, self.resume)
        next_train = (stats.steps // cfg.train_freq + 1) * cfg.train_freq  # the schedule's next round
        start = last_log = time.perf_counter()
        logged = LogState(steps=stats.steps, updates=learner.updates)
        turn = 0
        while stats.steps < cfg.total_steps:
            actor = self.actors[turn % len(self.actors)]
            turn += 1
            batch = actor.step(cfg.exploration(stats.steps), random=stats.steps < cfg.learning_starts)
            replay.insert(batch)
            stats.steps += len(batch)
            self._steps = stats.steps
            while stats.steps >= next_train:  # a round of updates every train_freq env steps
                next_train += cfg.train_freq
                if self.learn and stats.steps > learn_after:
                    if stats.learn_start_s is None:
                        stats.learn_start_s = time.perf_counter() - start
                        stats.learn_start_steps = stats.steps
                    beta = linear_beta(cfg.beta0, stats.steps, cfg.total_steps)
                    for _ in range(cfg.gradient_steps):
                        replay.update_priorities(learner.update(replay.sample(beta)))
                    if checkpointer is not None and checkpointer.due(learner.updates):
                        self._checkpoint(stats.steps)
            if learner.snapshot_due():
                snapshot = learner.snapshot()
                for each in self.actors:
                    each.load_weights(snapshot)
            stats.episodes += (done := actor.drain_episodes())
            logged.episodes += done
            now = time.perf_counter()
            out_of_time = max_seconds is not None and now - start >= max_seconds
            if now - last_log >= 1.0 or stats.steps >= cfg.total_steps or out_of_time:
                if record is not None:
                    record.log(logged.line(cfg, stats.steps, learner.updates, learner, replay.size, now - start,
                                           now - last_log))
                last_log = now
                if progress is not None:
                    progress(stats.steps)
            if out_of_time:
                break
        if checkpointer is not None:
            self._checkpoint(stats.steps)  # the end of the run, or of its max_seconds
            stats.checkpoints = [str(p) for p in checkpointer.written]
            stats.checkpoint_s = checkpointer.seconds
        stats.wall_s = time.perf_counter() - start
        stats.updates = learner.updates
        stats.kernel_seconds, stats.kernel_calls = merge_clocks(
            (*(a.clock for a in self.actors), replay.clock, learner.clock))
        stats.final_params = learner.kernel.policy_params()
        for actor in self.actors:
            actor.close()
        return stats


    def checkpoint_now(self) -> str | None:
        """A checkpoint of where an interrupted run stopped (Ctrl-C, an error); the path, or None without a
        checkpointer or before any env step."""
        if self.checkpointer is None or self._steps == 0 or (self.resume and self._steps == self.resume.steps):
            return None
        self._checkpoint(self._steps)
        return str(self.checkpointer.written[-1])

    def _checkpoint(self, steps: int) -> None:
        assert self.checkpointer is not None
        self.checkpointer.save(steps, self.learner.updates, self.learner.kernel.state_dict(),
                               self.replay.kernels.state_dict() if self.checkpointer.include_replay else None)


@dataclass
class LogState:
    """Counters since the previous metrics line, so each line reports rates over its own interval."""

    steps: int = 0
    updates: int = 0
    episodes: list[Episode] = field(default_factory=list)

    def line(self, cfg: OffPolicyConfig, steps: int, updates: int, learner: Learner, replay_size: int,
             elapsed: float, interval: float) -> dict:
        interval = max(interval, 1e-9)
        line = {"global_step": steps, "time": round(elapsed, 3),
                "charts/SPS": (steps - self.steps) / interval,
                "charts/updates_per_s": (updates - self.updates) / interval,
                "charts/learner_samples_per_s": (updates - self.updates) * cfg.batch_size / interval,
                "charts/exploration": cfg.exploration(steps), "charts/updates": updates,
                "replay/size": replay_size}
        if steps > cfg.learning_starts:  # cumulative updates per env step since learning started
            line["charts/replay_ratio"] = updates / (steps - cfg.learning_starts)
        if self.episodes:
            returns = [e.ret for e in self.episodes]
            line["charts/episodic_return"] = float(np.mean(returns))
            line["charts/episodic_length"] = float(np.mean([e.length for e in self.episodes]))
            line["charts/episodes"] = len(self.episodes)
        if learner.last_metrics:
            line.update(learner.read_metrics())
        self.steps, self.updates, self.episodes = steps, updates, []
        return line
