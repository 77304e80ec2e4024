"""Calibration from a run: a finished run's measured times folded into a profile, so the next plan uses them.

A run record (runs/<id>/: config.json and summary.json, schema `pearl.run/1`) holds every kernel's total
seconds as the launcher ran it (`kernel_seconds`), the env steps and updates it made, and where each kernel
ran (`placement`). Divided by its calls, each total is that kernel's time per call *in situ*: with the vector
env's resets and bookkeeping, fresh samples, interleaved kernels and the processes beside it. The profile's
own figures are bare kernels timed one at a time, which is why a plan can miss (docs/MEASUREMENTS.md).

What is folded, for the run's workload (algo, env, network shapes) on the devices the run used:

    env_step         env.step seconds per env step as the actor took it  = Σ env_step / steps
    actor_step       the actor's iteration at n_envs on act's device:    = (actors × train_wall_s − their waits
                     everything its process did per step (act, the vector     for weights − loads × the profile's
                     env step, the ring write, the schedule's and the         load) / act calls, at least
                     counters' bookkeeping), less its weight loads, which     (Σ act + Σ env_step) / act calls
                     the planner prices on their own, where the launcher
                     records the actors' waits
    act              one act call on n_envs observations                  = Σ act / (steps / n_envs)
    replay_sample*   one sample of batch_size rows                        = Σ replay_sample / updates
    learn            one update at batch_size, at the run's precision     = Σ learn / updates, at one thread:
                     (its record's `precision`)                             from a run of T > 1 learner threads
                                                                            ÷ the profile's T-thread ratio at
                                                                            that precision
    priority_update  one update's priorities (prioritized replay only)    = Σ priority_update / updates
    in_situ          the learner's role per update: its wall time less     = (train_wall_s − learner_wait_s
                     its waits and its pauses for evaluations and            − learning_paused_s) / updates,
                     checkpoints (the loop, publishes and bookkeeping        at least the sum of
                     beside the kernels), where the launcher records it     its kernels per update
                     (no first iteration of a segment apart: the busy time holds the run's; from T > 1
                     threads its learn at one thread, as learn's; from a bf16-mixed run the profile's
                     float32 learn in place of the run's, as an in-situ iteration is read against float32's
                     kernels), with the run's inserts: its batches handed on
                     (`traffic.transitions.messages`) ÷ updates, of steps ÷ those rows
    (* the prioritized draw's timing when the run's replay is prioritized)

act, learn and the in-situ iteration are folded as the way the run ran them (its record's `implementations`:
eager, or captured as CUDA graphs; eager in older records), so a captured run's figures replace the profile's
captured ones and its eager figures stay.

Each replaces the profile's figure of the same (workload, kernel, device, batch) (or env, or workload and
device), or is added when the profile had none, with `source` "in-situ"; the profile's `calibrations` list
names the run and the entries it replaced. Weight syncs are not folded: a run's `weight_sync` total mixes
the learner's publishes with every actor's loads.

The figures of a run whose processes outnumbered the host's lanes (its actors and every learner's threads on the
learner's host: on a Ray cluster, the roles the record places on the learner's node) hold
the time they lost to each other, which the planner charges again with its contention rows: they are folded all
the same, and the calibration's note says so (`contended`), so `pearl profile --from-run` can warn; calibrate from
a run whose processes fit the lanes.

A run from another host (node and platform differ from the profile's), an unfinished or damaged run, or files
of another schema are refused with a `RunRecordError` naming the file; nothing is written then.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pearl.device import HOST
from pearl.algos.base import config_from_dict
from pearl.algos.registry import algorithm
from pearl.errors import ConfigError, RunRecordError
from pearl.fileio import RUN_SCHEMA, finite_number, read_json
from pearl.kernels import Implementation, Precision, sample_timing
from pearl.profile.format import (IN_SITU, ActorStepTiming, EnvStepTiming, InSituTiming, KernelTiming, Profile,
                                  Workload, workload_key)

__all__ = ["RunTimes", "calibrate", "read_run"]

FP32, EAGER = Precision.FP32.value, Implementation.EAGER.value

#: the host fields that must match: a run measured on another machine says nothing of this one
HOST_FIELDS = ("node", "platform")


@dataclass(frozen=True)
class RunTimes:
    """What a finished run measured, per call, and where."""

    run_id: str
    host: dict[str, Any]
    workload: Workload
    placement: dict[str, str]
    n_envs: int
    prioritized: bool
    steps: int
    updates: int
    kernel_seconds: dict[str, float]
    #: the learner's busy seconds (wall less its waits), when the launcher recorded its waits
    learner_busy_s: float | None = None
    #: the actors' busy seconds, all of them together (actors × wall less their waits for weights), when recorded
    actors_busy_s: float | None = None
    actors: int = 1
    threads: int = 1  # the learner's torch threads
    loads: int = 0  # weight boards the actors copied
    #: the replay inserts the learner made: the batches handed on (its record's transitions messages), else one an
    #: update (a record without traffic)
    inserts: int = 0
    #: the processes on the learner's host, a learner's threads each (`host_processes`); 0: actors + threads
    processes: int = 0
    #: learn's arithmetic in the run (its record's `precision`; fp32 where it names none)
    precision: str = Precision.FP32.value
    #: how act and learn ran (its record's `implementations`; eager where it names none)
    implementations: dict[str, str] = field(default_factory=dict)

    def way(self, kernel: str) -> str:
        """How `kernel` ran in the run: act's and learn's from the record, every other kernel eager."""
        return self.implementations.get(kernel, EAGER) if kernel in ("act", "learn") else EAGER

    def __post_init__(self) -> None:
        if self.inserts < 1:
            object.__setattr__(self, "inserts", self.updates)
        if self.processes < 1:
            object.__setattr__(self, "processes", self.actors + self.threads)

    def actor_iteration(self, load_s: float) -> float:
        """Seconds of an actor's iteration as its process ran it (the module docstring), its weight loads at
        `load_s` each taken out."""
        calls = _calls(self, "act")
        timed = self.kernel_seconds.get("act", 0.0) + self.kernel_seconds.get("env_step", 0.0)
        busy = (self.actors_busy_s or 0.0) - self.loads * load_s
        return max(timed, busy) / calls

    def per_call(self, kernel: str) -> float:
        """Seconds of one call of `kernel` in the run (the module docstring's table)."""
        total = self.kernel_seconds.get(kernel, 0.0)
        if kernel == "env_step":
            return total / self.steps
        if kernel == "act":
            return total / (self.steps / self.n_envs)
        return total / self.updates

    def learner_iteration(self) -> float:
        """Seconds of the learner's role per update: its busy time where recorded (the kernels and everything
        its loop does beside them), never less than its kernels' (insert, sample, learn, priority update)."""
        kernels = ("replay_insert", "replay_sample", "learn", "priority_update")
        timed = sum(self.kernel_seconds.get(k, 0.0) for k in kernels)
        return max(timed, self.learner_busy_s or 0.0) / self.updates


def _run_workload(algo: str, env: str, spec: dict, hyper: dict) -> Workload:
    """The workload a run record's config trained: its shapes and its learn settings."""
    config = config_from_dict(algorithm(algo).config_class, hyper)
    obs, actions, hidden, settings = int(spec["obs_dim"]), int(spec["action_dim"]), tuple(config.hidden), \
        config.learn_settings()
    return Workload(workload_key(algo, env, obs, actions, hidden, settings), algo, env, obs, actions, hidden,
                    config.batch_size, config.buffer_size, settings)


def read_run(run_dir: str | Path) -> RunTimes:
    """The run record in `run_dir`, checked: RunRecordError naming the file and what is wrong."""
    folder = Path(run_dir)
    if not folder.is_dir():
        raise RunRecordError(f"{folder}: no such run folder; pass a runs/<id> folder a finished `pearl train` wrote")
    config = _record(folder / "config.json")
    summary = _record(folder / "summary.json")
    try:
        spec, hyper = config["env_spec"], config["hyperparameters"]
        workload = _run_workload(config["algo"], config["env"], spec, hyper)
        host, placement = dict(config["host"]), {str(k): str(v) for k, v in summary["placement"].items()}
        n_envs, prioritized = int(hyper["n_envs"]), bool(hyper["prioritized"])
        steps, updates = int(summary["steps"]), int(summary["updates"])
        seconds = {str(k): finite_number(v) for k, v in summary["kernel_seconds"].items()}
        waits, wall = summary.get("waits", {}), float(summary["train_wall_s"])
        wait, actor_wait = waits.get("learner_wait_s"), waits.get("actor_weights_wait_s")
        # the learning phase's pauses (evaluations, checkpoints) are no part of an update's cost: a plan's check
        # leaves them out of the measured rate, and the figures it is checked against leave them out too
        paused = float(summary.get("learning_paused_s", 0.0))
        busy = wall - float(wait) - paused if wait is not None else None
        actors, threads = int(summary.get("actors", 1)), int(summary.get("threads", 1))
        actors_busy = actors * wall - float(actor_wait) if actor_wait is not None else None
        loads = int(summary.get("traffic", {}).get("weights", {}).get("loads", 0))
        inserts = int(summary.get("traffic", {}).get("transitions", {}).get("messages", 0))
        learners = int(summary.get("learners", 1))
        processes = host_processes(summary.get("roles") or {}, actors, threads, learners)
        precision = Precision.parse(config.get("precision") or Precision.FP32.value).value
        ways = {k: Implementation.parse(w).value for k, w in (summary.get("implementations") or {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError, ConfigError) as exc:
        raise RunRecordError(f"{folder}: config.json or summary.json lacks a usable field ({exc!r}); it is not a "
                             "finished pearl run") from None
    if any(v is None for v in seconds.values()):
        raise RunRecordError(f"{folder / 'summary.json'}: kernel_seconds holds a value that is not a time")
    if steps < 1 or updates < 1 or n_envs < 1:
        raise RunRecordError(f"{folder / 'summary.json'}: the run made {steps} env steps and {updates} updates; "
                             "calibrate from a run that learnt (steps past learning_starts)")
    if learners > 1:
        raise RunRecordError(f"{folder}: the run trained a group of {learners} learners, whose learn clock holds the "
                             "group's update, not one learner's learn; calibrate from a run of one learner")
    if actors < 1 or threads < 1:
        raise RunRecordError(f"{folder / 'summary.json'}: {actors} actor(s) and {threads} learner thread(s) is not "
                             "a run pearl made")
    return RunTimes(folder.name, host, workload, placement, n_envs, prioritized, steps, updates,
                    {k: float(v) for k, v in seconds.items() if v is not None}, busy, actors_busy, actors, threads,
                    loads, inserts, processes, precision, ways)


def host_processes(roles: dict[str, str], actors: int, threads: int, learners: int) -> int:
    """The processes a run had on its learner's host, each learner counting its threads: where the record names
    each role's node (a Ray run: `roles`, role → its node's description), the roles on learner 0's node; else
    (one host) every actor process and every learner's threads."""
    lead = roles.get("learner", roles.get("learner 0"))
    if lead is None:
        return actors + learners * threads
    return sum(threads if role.startswith("learner") else 1 for role, node in roles.items() if node == lead)


def _record(path: Path) -> dict:
    hint = "the run did not finish (summary.json is written at its end)" if path.name == "summary.json" else \
        "not a run folder"
    data = read_json(path, RunRecordError, hint)
    if not isinstance(data, dict) or data.get("schema") != RUN_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise RunRecordError(f"{path}: schema {found!r}, not {RUN_SCHEMA!r}; this pearl reads its own run records")
    return data


def calibrate(profile: Profile, run: RunTimes, profile_name: str = "the profile") -> Profile:
    """`profile` with the run's in-situ figures folded in (module docstring); RunRecordError for a run from
    another host."""
    for key in HOST_FIELDS:
        if run.host.get(key) != profile.host.get(key):
            raise RunRecordError(f"run {run.run_id} ran on {key} {run.host.get(key)!r}, {profile_name} was measured "
                                 f"on {profile.host.get(key)!r}: calibrate a profile of the machine the run used")
    w, place = run.workload, run.placement
    learn_s = run.per_call("learn")
    one_thread = learn_s / _thread_ratio(profile, w.key, place["learn"], run.threads, run.precision)
    kernels = {("act", place["act"], run.n_envs): run.per_call("act"),
               ("learn", place["learn"], w.batch_size): one_thread,
               (sample_timing(run.prioritized), place["replay_sample"], w.batch_size): run.per_call("replay_sample")}
    if run.prioritized:
        kernels[("priority_update", place["priority_update"], w.batch_size)] = run.per_call("priority_update")
    folded = [f"{k} on {d} at batch {b}" + (f" at {run.precision}" if k == "learn" and run.precision != FP32 else "")
              for k, d, b in kernels]

    def precision(kernel: str) -> str:  # learn ran at the run's precision; every other kernel in float32
        return run.precision if kernel == "learn" else FP32

    # the one-thread figures alone: the T-thread timings (and the ratio the cost model reads from them) stay
    timings = [t for t in profile.kernels if not (t.workload == w.key and (t.kernel, t.device, t.batch) in kernels
                                                  and t.threads == 1 and t.beside == 0
                                                  and t.precision == precision(t.kernel)
                                                  and t.implementation == run.way(t.kernel))]
    timings += [KernelTiming(w.key, k, d, b, s, s, s, _calls(run, k), IN_SITU, precision=precision(k),
                             implementation=run.way(k))
                for (k, d, b), s in kernels.items()]

    env_s = run.per_call("env_step")
    env_step = [e for e in profile.env_step if e.env != w.env]
    env_step.append(EnvStepTiming(w.env, env_s, env_s, env_s, run.steps, IN_SITU))
    folded.append(f"env_step of {w.env}")

    calls = _calls(run, "act")
    actor_s = run.actor_iteration(_load_s(profile, w.key, place["act"]))
    mine = (w.key, place["act"], run.n_envs)
    actor_step = [t for t in profile.actor_step if (t.workload, t.device, t.envs) != mine]
    actor_step.append(ActorStepTiming(*mine, actor_s, calls, IN_SITU))
    folded.append(f"the actor's step of {run.n_envs} env(s) on {place['act']}")

    in_situ = [t for t in profile.in_situ if (t.workload, t.device) != (w.key, place["learn"])]
    # its learn at one thread, as learn's; an in-situ iteration holds learn in float32 (the cost model reads its
    # ratio to float32's kernels), so a bf16-mixed run's is the profile's float32 learn in place of the run's
    learn_fp32 = one_thread if run.precision == FP32 else _fp32_learn(profile, w, place["learn"], one_thread,
                                                                      run.way("learn"))
    iteration = run.learner_iteration() - learn_s + learn_fp32
    in_situ.append(InSituTiming(w.key, place["learn"], iteration, run.updates, run.inserts / run.updates,
                                max(1, round(run.steps / run.inserts)), w.batch_size, run.prioritized, IN_SITU,
                                implementation=run.way("learn")))
    folded.append(f"the learner's iteration on {place['learn']}")

    workloads = profile.workloads if any(x.key == w.key for x in profile.workloads) else [*profile.workloads, w]
    note = {"run": run.run_id, "folded": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "workload": w.key, "entries": folded}
    lanes = _host_lanes(profile)
    if lanes is not None and run.processes > lanes:
        note["contended"] = (f"{run.processes} processes on the learner's host ({run.actors} actor process(es) in "
                             f"all, {run.threads} thread(s) a learner) on {lanes} lanes")
    return replace(profile, workloads=workloads, kernels=timings, env_step=env_step, in_situ=in_situ,
                   actor_step=actor_step, calibrations=[*profile.calibrations, note])


def _thread_ratio(profile: Profile, workload: str, device: str, threads: int, precision: str = "fp32") -> float:
    """learn at `precision` at `threads` threads ÷ at one, as the profile timed them side by side (the cost model's
    ratio); 1 at one thread or where the profile has no such timing."""
    if threads == 1:
        return 1.0
    timed = next((t for t in profile.kernels if (t.workload, t.kernel, t.device, t.threads, t.precision) ==
                  (workload, "learn", device, threads, precision) and t.beside == 0), None)
    if timed is None:
        return 1.0
    one = timed.one_thread_s or next((t.median_s for t in profile.kernels if t.threads == 1 and
                                      (t.workload, t.kernel, t.device, t.batch, t.precision) ==
                                      (workload, "learn", device, timed.batch, precision)), timed.median_s)
    return timed.median_s / one


def _fp32_learn(profile: Profile, workload: Workload, device: str, fallback: float, way: str = "eager") -> float:
    """The profile's float32 learn at one thread for `workload` on `device` at its batch, run `way`; `fallback`
    (the run's learn) where the profile has no such figure."""
    return next((t.median_s for t in profile.kernels if (t.workload, t.kernel, t.device, t.batch, t.threads,
                                                         t.beside, t.precision, t.implementation) ==
                 (workload.key, "learn", device, workload.batch_size, 1, 0.0, FP32, way)), fallback)


def _load_s(profile: Profile, workload: str, device: str) -> float:
    """The profile's weight load into the act kernel on `device` (0 where it has none: the loads stay in the step)."""
    return next((t.load_s for t in profile.weight_sync if (t.workload, t.device) == (workload, device)), 0.0)


def _host_lanes(profile: Profile) -> int | None:
    return next((d.lanes for d in profile.devices if d.id == HOST), None)


def _calls(run: RunTimes, kernel: str) -> int:
    return max(1, run.steps // run.n_envs) if kernel == "act" else run.updates
