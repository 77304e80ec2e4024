"""Calibration from a run (`pearl profile --from-run`) and the warning a plan's run gives when it departs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_support import run_cli
from pearl.profile.format import IN_SITU, load_profile
from pearl.training.plan_checks import DEPARTURE, plan_departure


@pytest.fixture(scope="module")
def planned_run(tmp_path_factory) -> dict:
    """A quick profile of this machine, a plan from it, and a short run trained with the plan."""
    from pearl.planner.make import make_plan
    from pearl.planner.plan import save_plan
    from pearl.profile.format import save_profile
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.profiler import run_profile
    from pearl.training import train

    folder = tmp_path_factory.mktemp("cal")
    profile = save_profile(run_profile(ProfileOptions(quick=True, algos=("dqn",), devices=("cpu",))),
                           folder / "profile.json")
    plan = save_plan(make_plan(profile, "dqn", "CartPole-v1"), folder / "plan.json")
    result = train(plan=str(plan), steps=3000, eval_episodes=0, runs_dir=str(folder / "runs"))
    return {"folder": folder, "profile": profile, "plan": plan, "result": result}


def _fold(capsys, run_dir: str, out: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "profile", "--from-run", run_dir, "--out", str(out), "--json", *extra)


def test_a_run_folds_into_the_profile_as_its_per_call_times(capsys, planned_run, tmp_path) -> None:
    result = planned_run["result"]
    out = tmp_path / "calibrated.json"
    code, stdout, err = _fold(capsys, result.run_dir, out)  # the base profile is the one its plan was made from
    assert code == 0, err
    assert json.loads(stdout)["from"] == str(planned_run["profile"])
    calibrated, base = load_profile(out), load_profile(planned_run["profile"])
    key = next(w.key for w in base.workloads if w.env == "CartPole-v1" and w.algo == "dqn")
    learn = [t for t in calibrated.kernels if (t.workload, t.kernel, t.device, t.batch) == (key, "learn", "cpu", 64)
             and t.threads == 1 and t.beside == 0 and t.precision == "fp32"]  # the run's learn ran in float32
    assert len(learn) == 1 and learn[0].source == IN_SITU
    # a bf16-mixed learn the profile timed (on a CPU with bf16 units) is another precision's figure: kept
    assert all(t in calibrated.kernels for t in base.kernels if t.precision != "fp32")
    # the timings at the host's lanes as threads stay: the cost model's thread ratio is read from them
    assert all(t in calibrated.kernels for t in base.kernels if t.threads > 1 or t.beside > 0)
    assert learn[0].median_s == pytest.approx(result.kernel_seconds["learn"] / result.updates, rel=1e-12)
    act = [t for t in calibrated.kernels if (t.workload, t.kernel, t.device, t.batch) == (key, "act", "cpu", 1)]
    assert act[0].median_s == pytest.approx(result.kernel_seconds["act"] / result.steps, rel=1e-12)
    env = [e for e in calibrated.env_step if e.env == "CartPole-v1"]
    assert len(env) == 1 and env[0].median_s == pytest.approx(result.kernel_seconds["env_step"] / result.steps)
    in_situ = [t for t in calibrated.in_situ if (t.workload, t.device) == (key, "cpu")]
    kernels = sum(result.kernel_seconds[k] for k in ("replay_insert", "replay_sample", "learn", "priority_update"))
    # the role: its kernels and its loop around them, its pauses for in-training evaluations left out
    busy = result.train_wall_s - result.waits["learner_wait_s"] - result.learning_paused_s
    assert result.learning_paused_s > 0  # the run's evaluations are inside its wall, and left out here
    assert len(in_situ) == 1 and in_situ[0].iteration_s == pytest.approx(max(kernels, busy) / result.updates)
    steps = [t for t in calibrated.actor_step if (t.workload, t.device) == (key, "cpu")]
    one = [t for t in steps if t.envs == 1]  # the plan's actors step one env each: that entry is the run's
    acts = result.steps  # one env an act call
    assert len(one) == 1 and one[0].source == IN_SITU
    # the actors' whole iterations as their processes ran them, their weight loads at the profile's figure taken out
    summary = json.loads((Path(result.run_dir) / "summary.json").read_text())
    [sync] = [t for t in base.weight_sync if (t.workload, t.device) == (key, "cpu")]
    busy = (summary["actors"] * summary["train_wall_s"] - summary["waits"]["actor_weights_wait_s"]
            - summary["traffic"]["weights"]["loads"] * sync.load_s)
    timed = result.kernel_seconds["act"] + result.kernel_seconds["env_step"]
    assert one[0].step_s == pytest.approx(max(busy, timed) / acts)
    assert busy > timed  # the ring writes and the bookkeeping beside act and the env step
    assert all(t in calibrated.actor_step for t in base.actor_step if t.envs != 1)  # the other counts kept
    assert calibrated.calibrations[-1]["run"] == Path(result.run_dir).name
    # what was not folded is the base profile's, figure for figure
    untouched = [t for t in base.kernels if t.workload != key or t.kernel not in ("learn", "act", "replay_sample")
                 or t.threads > 1 or t.beside > 0]
    assert all(t in calibrated.kernels for t in untouched)


def test_calibration_moves_the_next_plans_prediction_toward_the_run(capsys, planned_run, tmp_path) -> None:
    from pearl.planner.make import make_plan

    result = planned_run["result"]
    out = tmp_path / "calibrated.json"
    assert _fold(capsys, result.run_dir, out)[0] == 0
    before, after = load_profile_plan(planned_run["plan"]), make_plan(out, "dqn", "CartPole-v1")
    measured = result.plan_check["measured"]["env_steps_per_s"]
    assert (after.actors, after.envs_per_actor, after.mapping) == (before.actors, before.envs_per_actor,
                                                                    before.mapping)
    off_before = abs(before.predicted["env_steps_per_s"] - measured)
    off_after = abs(after.predicted["env_steps_per_s"] - measured)
    # closer, or already as close as one run of this machine repeats (runs of one layout differ ~10 %)
    assert off_after < off_before or off_after <= 0.10 * measured, (before.predicted, after.predicted, measured)


def test_a_run_of_several_threads_folds_learn_at_one(capsys, planned_run, tmp_path) -> None:
    """learn timed at T threads in the run is folded as its one-thread figure, ÷ the profile's T-thread ratio, and
    the learner's iteration with it, so the planner's thread factor is not applied twice."""
    base = load_profile(planned_run["profile"])
    key = next(w.key for w in base.workloads if w.env == "CartPole-v1" and w.algo == "dqn")
    threaded = [t for t in base.kernels if (t.workload, t.kernel, t.threads > 1, t.beside, t.precision) ==
                (key, "learn", True, 0, "fp32")]  # the run's precision's: a bf16 learn has its own ratio
    if not threaded:
        pytest.skip("a one-lane host: the profile times learn at one thread only")
    [timed] = threaded
    run = _copy_run(planned_run, tmp_path)
    _edit(run / "summary.json", lambda d: d.update(threads=timed.threads))
    out = tmp_path / "calibrated.json"
    assert _fold(capsys, str(run), out, "--profile", str(planned_run["profile"]))[0] == 0
    calibrated, result = load_profile(out), planned_run["result"]
    ratio = timed.median_s / timed.one_thread_s
    learn_t = result.kernel_seconds["learn"] / result.updates
    [learn] = [t for t in calibrated.kernels if (t.workload, t.kernel, t.device, t.batch, t.threads, t.precision) ==
               (key, "learn", "cpu", 64, 1, "fp32")]
    assert learn.median_s == pytest.approx(learn_t / ratio, rel=1e-12)
    [in_situ] = [t for t in calibrated.in_situ if (t.workload, t.device) == (key, "cpu")]
    kernels = sum(result.kernel_seconds[k] for k in ("replay_insert", "replay_sample", "learn", "priority_update"))
    busy = result.train_wall_s - result.waits["learner_wait_s"] - result.learning_paused_s
    assert in_situ.iteration_s == pytest.approx(max(kernels, busy) / result.updates - learn_t + learn_t / ratio)
    assert timed in calibrated.kernels  # the T-thread timing, and so the ratio, kept


def test_a_bf16_mixed_run_folds_learn_at_its_precision_and_leaves_float32s(capsys, planned_run, tmp_path) -> None:
    """learn from a run at bf16-mixed is that precision's figure (its own thread ratio); the float32 learn stays,
    and the in-situ iteration, read against float32's kernels, holds the profile's float32 learn."""
    base = load_profile(planned_run["profile"])
    key = next(w.key for w in base.workloads if w.env == "CartPole-v1" and w.algo == "dqn")
    run = _copy_run(planned_run, tmp_path)
    _edit(run / "config.json", lambda d: d.update(precision="bf16-mixed"))  # as a run at bf16-mixed records it
    out = tmp_path / "calibrated.json"
    assert _fold(capsys, str(run), out, "--profile", str(planned_run["profile"]))[0] == 0
    calibrated, result = load_profile(out), planned_run["result"]

    def learn(profile, precision: str) -> list:
        return [t for t in profile.kernels if (t.workload, t.kernel, t.device, t.batch, t.threads, t.beside,
                                               t.precision) == (key, "learn", "cpu", 64, 1, 0.0, precision)]

    [folded] = learn(calibrated, "bf16-mixed")
    assert folded.source == IN_SITU
    assert folded.median_s == pytest.approx(result.kernel_seconds["learn"] / result.updates, rel=1e-12)
    assert learn(calibrated, "fp32") == learn(base, "fp32")  # float32's figure untouched
    [in_situ] = [t for t in calibrated.in_situ if (t.workload, t.device) == (key, "cpu")]
    kernels = sum(result.kernel_seconds[k] for k in ("replay_insert", "replay_sample", "learn", "priority_update"))
    busy = result.train_wall_s - result.waits["learner_wait_s"] - result.learning_paused_s
    [fp32] = learn(base, "fp32")
    assert in_situ.iteration_s == pytest.approx(max(kernels, busy) / result.updates - folded.median_s + fp32.median_s)
    assert "learn on cpu at batch 64 at bf16-mixed" in calibrated.calibrations[-1]["entries"]


def test_a_run_whose_processes_outnumber_the_lanes_is_folded_with_a_warning(capsys, planned_run, tmp_path) -> None:
    base = load_profile(planned_run["profile"])
    lanes = next(d.lanes for d in base.devices if d.id == "cpu")
    run = _copy_run(planned_run, tmp_path)
    _edit(run / "summary.json", lambda d: d.update(actors=lanes, threads=1))  # lanes actors + the learner
    out = tmp_path / "calibrated.json"
    code, stdout, err = _fold(capsys, str(run), out, "--profile", str(planned_run["profile"]))
    assert code == 0 and out.exists()
    assert err.startswith("warning: ") and err.count("\n") == 1 and f"on {lanes} lanes" in err, err
    assert json.loads(stdout)["contended"] == \
        f"{lanes + 1} processes on the learner's host ({lanes} actor process(es) in all, 1 thread(s) a learner) " \
        f"on {lanes} lanes"
    real = json.loads((Path(planned_run["result"].run_dir) / "summary.json").read_text())
    note = load_profile(_fold_plain(capsys, planned_run, tmp_path)).calibrations[-1]
    assert ("contended" in note) == (real["actors"] + real["threads"] > lanes)


def test_the_processes_on_the_learners_host_are_those_the_record_places_there() -> None:
    """A Ray run's record names each role's node: the learner's host holds the roles on learner 0's node (a
    learner counting its threads); a record without nodes (one host) holds every actor and learner thread."""
    from pearl.profile.calibrate import host_processes

    a, b = "node 87628d5e (192.0.2.2, plan node a)", "node 8ca2413d (192.0.2.2, plan node b)"
    assert host_processes({"learner": a, "actor worker 0": b}, 1, 1, 1) == 1
    assert host_processes({"learner": a, "actor worker 0": a, "actor worker 1": b}, 2, 2, 1) == 3
    assert host_processes({"learner 0": a, "learner 1": b, "actor worker 0": b, "replay shard 0": a}, 1, 1, 2) == 2
    assert host_processes({}, 2, 1, 1) == 3 and host_processes({}, 1, 1, 2) == 3


def _fold_plain(capsys, planned_run, tmp_path: Path) -> Path:
    out = tmp_path / "plain.json"
    assert _fold(capsys, planned_run["result"].run_dir, out)[0] == 0
    return out


def load_profile_plan(path: Path):
    from pearl.planner.plan import load_plan

    return load_plan(path)


def _copy_run(planned_run, tmp_path: Path) -> Path:
    return Path(shutil.copytree(planned_run["result"].run_dir, tmp_path / "run"))


@pytest.mark.parametrize("damage, fragment", [
    (lambda run: shutil.rmtree(run), "no such run folder"),
    (lambda run: (run / "summary.json").unlink(), "did not finish"),
    (lambda run: (run / "summary.json").write_text('{"schema": "pearl.run/1", "steps": '), "not valid JSON"),
    (lambda run: _edit(run / "config.json", lambda d: d.update(schema="pearl.run/9")), "schema 'pearl.run/9'"),
    (lambda run: _edit(run / "summary.json", lambda d: d.pop("kernel_seconds")), "lacks a usable field"),
    (lambda run: _edit(run / "config.json", lambda d: d["host"].update(node="elsewhere")), "ran on node"),
    (lambda run: _edit(run / "summary.json", lambda d: d.update(learners=2)), "a group of 2 learners"),
])
def test_a_bad_run_is_one_error_line_and_nothing_written(capsys, planned_run, tmp_path, damage, fragment) -> None:
    run = _copy_run(planned_run, tmp_path)
    damage(run)
    out = tmp_path / "calibrated.json"
    code, _, err = _fold(capsys, str(run), out, "--profile", str(planned_run["profile"]))
    assert code == 2 and err.startswith("error: ") and fragment in err and err.count("\n") == 1, err
    assert not out.exists()


def test_a_run_planned_from_a_cluster_profile_needs_its_nodes_profile_named(capsys, planned_run, tmp_path) -> None:
    """A run whose plan was made from a cluster profile: the profile to fold it into is one node's, which
    --profile names; without it, one error line saying so, nothing written."""
    run = _copy_run(planned_run, tmp_path)
    cluster = tmp_path / "two.json"
    host = str(planned_run["profile"])
    assert run_cli(capsys, "profile", "merge", f"a={host}", f"b={host}", "--network", "40gbe", "--out",
                   str(cluster))[0] == 0
    _edit(run / "plan.json", lambda d: d["profile"].update(path=str(cluster)))
    out = tmp_path / "calibrated.json"
    code, _, err = _fold(capsys, str(run), out)
    assert code == 2 and err.count("\n") == 1 and "planned from cluster profile" in err and "--profile" in err, err
    assert not out.exists()
    assert _fold(capsys, str(run), out, "--profile", host)[0] == 0 and out.exists()


def test_a_run_without_a_plan_needs_a_profile_named(capsys, planned_run, tmp_path) -> None:
    run = _copy_run(planned_run, tmp_path)
    (run / "plan.json").unlink()
    code, _, err = _fold(capsys, str(run), tmp_path / "c.json")
    assert code == 2 and "pass --profile FILE" in err and not (tmp_path / "c.json").exists()


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _check(predicted: float, measured: float, kernels: dict[str, tuple[float, float]]) -> dict:
    return {"predicted": {"env_steps_per_s": predicted}, "measured": {"env_steps_per_s": measured},
            "kernels": {k: {"device": "cpu", "predicted_s": p, "measured_s": m} for k, (p, m) in kernels.items()}}


def test_the_departure_names_the_kernel_that_cost_the_most_time() -> None:
    # act departs most as a ratio (10×) but env_step costs more seconds per iteration: env_step is named
    kernels = {"act": (1e-6, 1e-5), "env_step": (1e-4, 5e-4), "learn": (1e-3, 1.1e-3)}
    line = plan_departure(_check(1000.0, 500.0, kernels), "runs/x")
    assert line is not None and "env_step on cpu departed most" in line and "-50%" in line
    assert "pearl profile --from-run runs/x --out FILE" in line
    assert plan_departure(_check(1000.0, 1000.0 / (1 + DEPARTURE) + 1, kernels), "runs/x") is None
    assert plan_departure(_check(1000.0, 1000.0 / (1 + DEPARTURE) - 1, kernels), "runs/x") is not None


def test_a_run_that_never_learnt_is_not_set_against_its_plan() -> None:
    """Its speed is collection's (no learner): the line says the learning phase was never reached, names no
    kernel, and comes whatever the figures (here collection ran at the predicted speed)."""
    check = _check(1000.0, 1000.0, {"learn": (1e-3, 0.0)})
    check["measured"]["phase"] = "whole run"
    line = plan_departure(check, "runs/x")
    assert line is not None and "made no update" in line and "learning_starts" in line
    assert "departed most" not in line and "--from-run" not in line


def test_a_run_far_from_its_plan_ends_with_one_warning_line(capsys, planned_run, tmp_path) -> None:
    data = json.loads(planned_run["plan"].read_text())
    data["predicted"]["env_steps_per_s"] *= 100  # no run of this machine comes within 25 % of that
    plan = tmp_path / "optimistic.json"
    plan.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "train", "--plan", str(plan), "--steps", "1500", "--eval-episodes", "0",
                           "--runs-dir", str(tmp_path / "runs"))
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "departed most" in warnings[0] and "--from-run" in warnings[0]
