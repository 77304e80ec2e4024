"""pearl plan: from the committed reference profile to plan files, and every bad input to one error line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli
from pearl.algos import preset
from pearl.costmodel import CostModel
from pearl.envs import env_spec
from pearl.planner.ilp import solve
from pearl.planner.plan import PlanFileError, load_plan, save_plan
from pearl.profile.format import load_profile
from pearl.planner.problem import ActorOption

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "profiles" / "reference.json"


@pytest.fixture(scope="module")
def plans():
    from pearl.planner.make import make_plan

    return {obj: make_plan(REFERENCE, "dqn", "CartPole-v1", obj) for obj in ("throughput", "perf-per-watt")}


def test_plan_maps_every_kernel_to_a_profiled_device(plans) -> None:
    profiled = {d["id"] for d in json.loads(REFERENCE.read_text())["devices"]}
    for plan in plans.values():
        assert set(plan.mapping) == {"env_step", "act", "replay_insert", "replay_sample", "priority_update", "learn"}
        assert set(plan.mapping.values()) <= profiled and plan.mapping["env_step"] == "cpu"
        assert len({plan.mapping[k] for k in ("replay_insert", "replay_sample", "priority_update")}) == 1
        assert plan.actors >= 1 and plan.envs_per_actor == 1


def test_predicted_figures_are_consistent(plans) -> None:
    for plan in plans.values():
        p = plan.predicted
        assert p["updates_per_s"] == pytest.approx(1 / p["period_s"])
        assert p["env_steps_per_s"] == pytest.approx(2 * p["updates_per_s"])  # DQN preset: ρ = 0.5
        assert p["learner_samples_per_s"] == pytest.approx(64 * p["updates_per_s"])
        assert p["source"] == "measured" and "modelled" in p["power_source"]  # this VM has no RAPL: descriptor power
        assert plan.solver["status"] == "Optimal"


def test_objectives_order_each_other(plans) -> None:
    fast, frugal = plans["throughput"].predicted, plans["perf-per-watt"].predicted
    assert fast["period_s"] <= frugal["period_s"] * (1 + 1e-9)
    assert frugal["energy_per_iteration_j"] <= fast["energy_per_iteration_j"] * (1 + 1e-9)


def test_plan_is_at_least_as_fast_as_every_single_device_mapping(plans) -> None:
    plan = plans["throughput"]
    assert {b["device"] for b in plan.baselines} >= {"cpu", "opencl:0:0"} or {b["device"] for b in plan.baselines}
    for b in plan.baselines:
        if b["feasible"]:
            assert b["speedup"] >= 1 - 1e-9 and b["env_steps_per_s"] <= plan.predicted["env_steps_per_s"] * (1 + 1e-9)


def test_pareto_front_is_ordered(plans) -> None:
    front = plans["throughput"].pareto
    periods = [p["period_s"] for p in front]
    energies = [p["energy_per_iteration_j"] for p in front]
    assert periods == sorted(periods) and energies == sorted(energies, reverse=True)


def test_plan_file_round_trips(plans, tmp_path) -> None:
    path = save_plan(plans["throughput"], tmp_path / "plan.json")
    assert load_plan(path) == plans["throughput"]


def test_cli_writes_the_plan(capsys, tmp_path) -> None:
    out = tmp_path / "plan.json"
    code, stdout, err = run_cli(capsys, "plan", "--profile", str(REFERENCE), "--algo", "dqn", "--env", "CartPole-v1",
                                "--out", str(out))
    assert code == 0, err
    assert "bottleneck" in stdout and "env steps/s" in stdout and out.exists()
    code, stdout, _ = run_cli(capsys, "plan", "--profile", str(REFERENCE), "--algo", "ddpg", "--env", "Pendulum-v1",
                              "--objective", "perf-per-watt", "--out", str(out), "--json")
    assert code == 0 and json.loads(stdout)["schema"] == "pearl.plan/1"


@pytest.mark.parametrize(("args", "fragment"), [
    (["--profile", "no/such.json", "--algo", "dqn", "--env", "CartPole-v1"], "no such profile"),
    (["--profile", str(REFERENCE), "--algo", "dqn", "--env", "Pendulum-v1"], "discrete"),
    (["--profile", str(REFERENCE), "--algo", "dqn", "--env", "Acrobot-v1"], "pearl profile"),
    (["--profile", str(REFERENCE), "--algo", "dqn", "--env", "CartPole-v1", "--objective", "fastest"], "--objective"),
])
def test_bad_plan_requests(capsys, tmp_path, args: list[str], fragment: str) -> None:
    out = tmp_path / "plan.json"
    code, _, err = run_cli(capsys, "plan", *args, "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and fragment in err
    assert not out.exists()


def test_corrupt_profile_is_a_user_error(capsys, tmp_path) -> None:
    broken = tmp_path / "p.json"
    broken.write_text(REFERENCE.read_text()[:500])
    code, _, err = run_cli(capsys, "plan", "--profile", str(broken), "--algo", "dqn", "--env", "CartPole-v1",
                           "--out", str(tmp_path / "plan.json"))
    assert code == 2 and "not valid JSON" in err


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d.update(schema="pearl.plan/9"), "schema"),
    (lambda d: d["mapping"].pop("learn"), "mapping"),
    (lambda d: d.update(actors=0), "actors"),
    (lambda d: d["predicted"].update(period_s=-1), "predicted.period_s"),
])
def test_bad_plan_files_name_the_field(plans, tmp_path, change, field: str) -> None:
    path = save_plan(plans["throughput"], tmp_path / "plan.json")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(PlanFileError) as exc:
        load_plan(path)
    assert f"'{field}'" in str(exc.value) and str(path) in str(exc.value)


def test_json_output_of_a_real_process_is_one_json_object(tmp_path) -> None:
    """In a fresh process, as a user's pipe sees it: a solver's banner written from C to fd 1 (highspy 1.16 does
    that for the first solver object) would sit before the JSON, which capsys cannot see."""
    import subprocess
    import sys

    out = tmp_path / "plan.json"
    proc = subprocess.run([sys.executable, "-m", "pearl", "plan", "--profile", str(REFERENCE), "--algo", "dqn",
                           "--env", "CartPole-v1", "--out", str(out), "--json"], capture_output=True, text=True,
                          cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)  # the whole of stdout
    assert summary["plan"] == str(out) and summary["solver"]["status"] == "Optimal"
    assert "HiGHS" not in proc.stderr


def test_planner_imports_no_hardware_library() -> None:
    import subprocess
    import sys

    code = ("import sys; import pearl.planner.make, pearl.costmodel; "
            "bad = [m for m in ('torch', 'pyopencl') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_in_situ_factor_scales_the_learner_side_costs() -> None:
    """A profile whose learner iteration ran twice as slow in situ as its kernels alone doubles the replay and
    learn costs of that device in the problem, and leaves act alone."""
    import dataclasses

    from pearl.costmodel import CostModel
    from pearl.envs import env_spec
    from pearl.planner.build import build_problem
    from pearl.profile.format import InSituTiming, load_profile

    profile = load_profile(REFERENCE)
    spec = env_spec("CartPole-v1")
    without = dataclasses.replace(profile, in_situ=[], weight_sync=[])  # learn then holds no publish
    base, facts = build_problem(without, CostModel(without), "dqn", spec)
    key, model = facts.workload, CostModel(without)
    bare = (2 * model.kernel_time("replay_insert", "cpu", key, 1).seconds
            + model.kernel_time("replay_sample", "cpu", key, 64).seconds
            + model.kernel_time("learn", "cpu", key, 64).seconds)
    doubled = dataclasses.replace(without, in_situ=[InSituTiming(key, "cpu", 2 * bare, 100, 2, 1, 64, False,
                                                                 "measured")])
    scaled, _ = build_problem(doubled, CostModel(doubled), "dqn", spec)
    for kernel in ("replay_insert", "replay_sample", "learn"):
        assert scaled.cost[(kernel, "cpu")] == pytest.approx(2 * base.cost[(kernel, "cpu")])
    assert scaled.act_cost == base.act_cost


def test_a_segments_first_iteration_is_charged_once_a_segment() -> None:
    """A profile whose segment's first learner iteration took 1.5 × an iteration charges the learner half an
    iteration more once a segment: (1.5 − 1) × (learn + the replay kernels) ÷ the segment's updates, with the
    publishes (Problem.publish), per actor option; learn itself and the actors are left alone. DQN CartPole's
    segments hold 128 updates, so the first update costs little; one env step an update makes it 1 a segment."""
    import dataclasses

    from pearl.costmodel import CostModel
    from pearl.envs import env_spec
    from pearl.planner.build import build_problem
    from pearl.profile.format import load_profile
    from pearl.schedule import Schedule

    profile = load_profile(REFERENCE)
    spec = env_spec("CartPole-v1")
    key = build_problem(profile, CostModel(profile), "dqn", spec)[1].workload
    plain = dataclasses.replace(profile, in_situ=[dataclasses.replace(t, first_iteration_s=None)
                                                  for t in profile.in_situ])
    cpu = next(t for t in plain.in_situ if (t.workload, t.device) == (key, "cpu"))
    slow = dataclasses.replace(plain, in_situ=[dataclasses.replace(t, first_iteration_s=1.5 * t.iteration_s)
                                               if t is cpu else t for t in plain.in_situ])
    for config in (preset("dqn", "CartPole-v1"), preset("dqn", "CartPole-v1").replace(train_freq=2, gradient_steps=1,
                                                                                       n_envs=1)):
        base, _ = build_problem(plain, CostModel(plain), "dqn", spec, config=config)
        first, _ = build_problem(slow, CostModel(slow), "dqn", spec, config=config)
        iteration = base.cost[("learn", "cpu")] + sum(base.cost.get((k, "cpu"), 0.0)
                                                      for k in ("replay_insert", "replay_sample", "priority_update"))
        for a in base.actor_options():
            updates = Schedule.for_config(config, a.n).updates_per_segment
            assert first.publish[(a, "cpu")] == pytest.approx(base.publish[(a, "cpu")] + 0.5 * iteration / updates)
            assert first.publish[(a, "opencl:0:0")] == base.publish[(a, "opencl:0:0")]  # its own figure: none
        assert first.cost == base.cost and first.actor_period == base.actor_period


def test_the_learners_segment_loop_is_charged_once_a_segment() -> None:
    """A profile whose learner loop costs 80 µs a segment beyond its kernels charges the learner 80 µs ÷ the
    segment's updates with its publishes (Problem.publish), per actor option and for every learn device (the loop
    is the host's work); learn itself and the actors are left alone."""
    import dataclasses

    from pearl.costmodel import CostModel
    from pearl.envs import env_spec
    from pearl.planner.build import build_problem
    from pearl.profile.format import load_profile
    from pearl.schedule import Schedule

    profile = load_profile(REFERENCE)
    spec = env_spec("CartPole-v1")
    key = build_problem(profile, CostModel(profile), "dqn", spec)[1].workload
    plain = dataclasses.replace(profile, in_situ=[dataclasses.replace(t, segment_s=None) for t in profile.in_situ])
    looped = dataclasses.replace(plain, in_situ=[dataclasses.replace(t, segment_s=80e-6)
                                                 if (t.workload, t.device) == (key, "cpu") else t
                                                 for t in plain.in_situ])
    for config in (preset("dqn", "CartPole-v1"), preset("dqn", "CartPole-v1").replace(train_freq=2, gradient_steps=1,
                                                                                       n_envs=1)):
        base, _ = build_problem(plain, CostModel(plain), "dqn", spec, config=config)
        loop, _ = build_problem(looped, CostModel(looped), "dqn", spec, config=config)
        for a in base.actor_options():
            updates = Schedule.for_config(config, a.n).updates_per_segment
            for d in ("cpu", "opencl:0:0"):
                assert loop.publish[(a, d)] == pytest.approx(base.publish[(a, d)] + 80e-6 / updates)
        assert loop.cost == base.cost and loop.actor_period == base.actor_period


def test_a_prioritized_config_pays_the_prioritized_draw() -> None:
    """replay_sample of a prioritized config is priced by the profile's replay_sample_prioritized timing, the
    uniform config's by replay_sample; a profile without the prioritized timing prices both by the uniform one."""
    import dataclasses

    from pearl.algos.presets import preset
    from pearl.costmodel import CostModel
    from pearl.envs import env_spec
    from pearl.kernels import PRIORITIZED_SAMPLE
    from pearl.planner.build import build_problem
    from pearl.profile.format import load_profile

    spec = env_spec("CartPole-v1")
    uniform, prioritized = preset("dqn", "CartPole-v1"), preset("dqn", "CartPole-v1").replace(prioritized=True)
    old = dataclasses.replace(load_profile(REFERENCE), in_situ=[])
    assert not [k for k in old.kernels if k.kernel == PRIORITIZED_SAMPLE]

    def sample_cost(profile, config) -> float:
        problem, _ = build_problem(profile, CostModel(profile), "dqn", spec, config=config)
        return problem.cost[("replay_sample", "cpu")]

    assert sample_cost(old, prioritized) == sample_cost(old, uniform) > 0
    tree = [dataclasses.replace(k, kernel=PRIORITIZED_SAMPLE, median_s=3 * k.median_s, p10_s=3 * k.p10_s,
                                p90_s=3 * k.p90_s) for k in old.kernels if k.kernel == "replay_sample"]
    new = dataclasses.replace(old, kernels=[*old.kernels, *tree])
    assert sample_cost(new, prioritized) == pytest.approx(3 * sample_cost(old, uniform))
    assert sample_cost(new, uniform) == sample_cost(old, uniform)


def test_weight_sync_is_costed_on_the_learner_and_each_actor() -> None:
    """With the profile's weight-sync timing, the learner's publishes go with learn (Problem.publish) and each
    actor's loads with act and the actor period, as often as the schedule makes them: one publish, and one load
    per actor, a segment of U updates; a plan reports them apart as weight_sync."""
    import dataclasses

    from pearl.costmodel import CostModel
    from pearl.envs import env_spec
    from pearl.planner.build import build_problem
    from pearl.planner.ilp import solve
    from pearl.planner.make import _kernel_seconds
    from pearl.profile.format import WeightSyncTiming, load_profile
    from pearl.schedule import Schedule

    profile = dataclasses.replace(load_profile(REFERENCE), weight_sync=[])
    spec = env_spec("CartPole-v1")
    base, facts = build_problem(profile, CostModel(profile), "dqn", spec)
    assert all(e.name != "weights" for e in base.edges)  # the sync is no edge: it always crosses processes
    one = ActorOption(1, 1)
    assert facts.weight_sync_s[("learn", one, "cpu")] == 0.0  # cpu without a timing: host to host, no transfer
    # PoCL without a timing: its d2h of the policy (4-256-256-2: 67,586 floats), once a segment of 128 updates
    pocl_d2h = CostModel(profile).transfer_time("opencl:0:0", "cpu", 67_586 * 4).seconds
    assert pocl_d2h > 0 and facts.weight_sync_s[("learn", one, "opencl:0:0")] == pytest.approx(pocl_d2h / 128)
    key = facts.workload
    timed = dataclasses.replace(profile, weight_sync=[WeightSyncTiming(key, d, 20e-6, 50e-6, 100, "measured")
                                                      for d in ("cpu", "opencl:0:0")])
    synced, facts2 = build_problem(timed, CostModel(timed), "dqn", spec)
    old = facts.weight_sync_s  # what the base problem counted for the loads (transfers alone)
    for d in ("cpu", "opencl:0:0"):
        assert synced.cost[("learn", d)] == base.cost[("learn", d)]  # learn alone: the publishes are apart
        for a in synced.actor_options():
            updates = Schedule.for_config(preset("dqn", "CartPole-v1"), a.n).updates_per_segment
            assert updates == 128  # DQN CartPole: a segment of 256 env steps and 128 updates
            assert synced.publish[(a, d)] == pytest.approx(20e-6 / updates)
            loads = 1 / updates  # per actor and iteration
            bare_period = base.actor_period[(a, d)] - old[("act", a, d)] / a.n
            assert synced.actor_period[(a, d)] == pytest.approx(bare_period + loads * 50e-6)
            bare_act = base.act_cost[(a, d)] - old[("act", a, d)]
            assert synced.act_cost[(a, d)] == pytest.approx(bare_act + a.n * loads * 50e-6)
    solution = solve(synced)
    kernels = _kernel_seconds(synced, facts2, solution)
    n = solution.actors.n
    assert kernels["weight_sync"] == pytest.approx((20e-6 + n * 50e-6) / 128)
    assert kernels["learn"] == pytest.approx(synced.cost[("learn", solution.placement["learn"])])


def test_the_actors_env_side_is_the_profiles_actor_step_less_act() -> None:
    """With actor steps in the profile, the env stepping the host carries (env_cost) and each actor's period
    charge the actor's env side as its process runs it (the actor step less act), not bare env steps; without
    them, the bare env steps."""
    import dataclasses

    from pearl.costmodel import CostModel
    from pearl.envs import env_spec
    from pearl.planner.build import build_problem
    from pearl.profile.format import ActorStepTiming, load_profile

    profile = dataclasses.replace(load_profile(REFERENCE), actor_step=[])
    spec = env_spec("CartPole-v1")
    bare, facts = build_problem(profile, CostModel(profile), "dqn", spec)
    model = CostModel(profile)
    env_s = model.env_step_time("CartPole-v1").seconds
    steps, envs = facts.steps_per_iteration, facts.envs_per_actor
    assert bare.env_cost == pytest.approx(steps * env_s)
    act = model.kernel_time("act", "cpu", facts.workload, envs).seconds
    timed = dataclasses.replace(profile, actor_step=[ActorStepTiming(facts.workload, "cpu", envs, act + 70e-6, 50,
                                                                     "measured")])
    sided, _ = build_problem(timed, CostModel(timed), "dqn", spec)
    assert sided.env_cost == pytest.approx(steps / envs * 70e-6)
    for a in sided.actor_options():
        extra = steps / (a.n * envs) * (70e-6 - envs * env_s)
        assert sided.actor_period[(a, "cpu")] == pytest.approx(bare.actor_period[(a, "cpu")] + extra)


@pytest.mark.parametrize(("algo", "env"), [("dqn", "CartPole-v1"), ("ddpg", "Pendulum-v1")])
def test_weight_syncs_are_priced_once_a_segment_from_the_schedule(algo, env) -> None:
    """The weight-sync seconds an iteration is charged: the learn device's publish time × 1 publish a segment ÷
    the segment's updates, and each actor's load time × 1 load a segment ÷ the updates, from the schedule of
    that many actors (DQN CartPole: 128 updates a segment, where a publish an update was once charged; DDPG
    Pendulum: a segment of 2 updates for 2 actors)."""
    from pearl.costmodel import CostModel
    from pearl.envs import env_spec
    from pearl.planner.build import build_problem
    from pearl.profile.format import load_profile
    from pearl.schedule import Schedule

    profile = load_profile(REFERENCE)
    model = CostModel(profile)
    problem, facts = build_problem(profile, model, algo, env_spec(env))
    for d in ("cpu", "opencl:0:0"):
        publish, load = (t.seconds for t in model.weight_sync_time(d, facts.workload))
        for a in problem.actor_options():
            updates = Schedule.for_config(preset(algo, env), a.n).updates_per_segment
            assert facts.weight_sync_s[("learn", a, d)] == pytest.approx(publish / updates)
            assert problem.publish[(a, d)] == pytest.approx(publish / updates)
            assert facts.weight_sync_s[("act", a, d)] == pytest.approx(a.n * load / updates)
    if algo == "dqn":
        assert problem.publish[(ActorOption(1, 1), "cpu")] == pytest.approx(
            model.weight_sync_time("cpu", facts.workload)[0].seconds / 128)
    else:
        assert problem.publish[(ActorOption(2, 1), "cpu")] == pytest.approx(
            problem.publish[(ActorOption(1, 1), "cpu")] / 2)


def test_envs_auto_keeps_the_best_choice_and_merges_the_fronts() -> None:
    from pearl.costmodel import CostModel
    from pearl.planner.make import ENV_CHOICES, make_plan
    from pearl.profile.format import load_profile

    largest = max(CostModel(load_profile(REFERENCE)).batches("act", "cpu", "dqn-CartPole-v1-o4-a2-h256x256"))
    choices = [e for e in ENV_CHOICES if e <= largest]
    assert len(choices) > 1
    for objective, figure, second in (("throughput", "period_s", "energy_per_iteration_j"),
                                      ("perf-per-watt", "energy_per_iteration_j", "period_s")):
        each = {e: make_plan(REFERENCE, "dqn", "CartPole-v1", objective, envs=e) for e in choices}
        auto = make_plan(REFERENCE, "dqn", "CartPole-v1", objective, envs="auto")
        best = min(each.values(), key=lambda p: p.predicted[figure])
        assert auto.predicted[figure] == pytest.approx(best.predicted[figure])
        # lexicographic: a tie on the objective's figure goes to the other figure (a learner-bound period does
        # not change with the envs per actor, the energy does)
        assert auto.envs_per_actor == min(each, key=lambda e: (each[e].predicted[figure], each[e].predicted[second]))
        front = auto.pareto
        assert all(p["envs_per_actor"] in choices for p in front)
        assert all(a["period_s"] < b["period_s"] and a["energy_per_iteration_j"] > b["energy_per_iteration_j"]
                   for a, b in zip(front, front[1:]))
        fastest = min(p.predicted["period_s"] for p in each.values())
        assert front[0]["period_s"] == pytest.approx(fastest)  # the merged front starts at the fastest of all
    assert make_plan(REFERENCE, "dqn", "CartPole-v1").envs_per_actor == 1  # the preset's by default
    from pearl.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown objective"):
        make_plan(REFERENCE, "dqn", "CartPole-v1", "fastest")


def test_envs_per_actor_set_the_act_costs_and_inserts_are_the_launchers() -> None:
    """Act: S/e calls at batch e. Inserts: as the launchers make them, an actor's share of a segment in one call
    (DQN CartPole-v1: the 256 env steps of a segment of 128 updates), whatever the envs per actor."""
    from pearl.costmodel import CostModel
    from pearl.envs import env_spec
    from pearl.planner.build import build_problem
    from pearl.profile.format import load_profile

    profile = load_profile(REFERENCE)
    model, spec = CostModel(profile), env_spec("CartPole-v1")
    problem, facts = build_problem(profile, model, "dqn", spec, envs=8)
    key, steps = facts.workload, facts.steps_per_iteration
    assert facts.envs_per_actor == 8 and {a.envs for a in problem.actor_options()} == {8}
    insert = model.in_situ_factor("cpu", key) * model.kernel_time("replay_insert", "cpu", key, 256).seconds / 128
    assert problem.cost[("replay_insert", "cpu")] == pytest.approx(insert)
    for a in problem.actor_options():
        act = (steps / 8) * model.kernel_time("act", "cpu", key, 8).seconds
        assert problem.act_cost[(a, "cpu")] == pytest.approx(act + facts.weight_sync_s[("act", a, "cpu")])


def test_envs_per_actor_option_is_checked(capsys, tmp_path) -> None:
    for bad, fragment in (("many", "a number of environments or auto"), ("0", "from 1 to 4096")):
        code, _, err = run_cli(capsys, "plan", "--profile", str(REFERENCE), "--algo", "dqn", "--env", "CartPole-v1",
                               "--envs-per-actor", bad, "--out", str(tmp_path / "p.json"))
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and fragment in err
    assert not (tmp_path / "p.json").exists()


def test_plan_records_where_each_power_figure_came_from(tmp_path) -> None:
    from pearl.planner.make import make_plan

    data = json.loads(REFERENCE.read_text())
    for p in data["power"]:  # as a profile of this version records them
        p.update(descriptor="pocl-cpu.toml", scale=1.0) if p["device"] != "cpu" else \
            p.update(descriptor="generic-x86-server-cpu.toml", scale=0.0625)
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(data))
    plan = make_plan(profile, "dqn", "CartPole-v1", "perf-per-watt")
    expected = {p["device"]: p for p in data["power"]}
    assert set(plan.power) == set(expected)
    for device, figures in plan.power.items():
        for key in ("idle_w", "busy_w", "source", "method", "descriptor", "scale"):
            assert figures[key] == expected[device][key]
    assert plan.power["cpu"]["resource"] == "host-cpu"
    assert load_plan(save_plan(plan, tmp_path / "plan.json")).power == plan.power
    # older profiles carry no descriptor name: the plan says so rather than guessing
    old = make_plan(REFERENCE, "dqn", "CartPole-v1", "perf-per-watt")
    assert all(f["descriptor"] is None and f["scale"] == 1.0 for f in old.power.values())


@pytest.mark.parametrize("hidden", [None, (128, 128)])
def test_two_actors_on_two_lanes_are_slower_than_one(hidden) -> None:
    """The 2-core VM's own profile: 2 actor processes and the learner's are three processes on two lanes, and
    each loses a quarter of the others' host work to time slicing (contention[...]), so a plan of 2 actors
    predicts fewer env steps/s than 1, and the planner picks 1. Measured on that VM (docs/MEASUREMENTS.md,
    `pearl train --algo dqn --env CartPole-v0 --set hidden=128,128 --actors A`): 6,107 and 6,000 env steps/s
    with 1 actor, 4,643 and 5,100 with 2. DQN CartPole-v1 as the preset, and the defaults with hidden=128,128
    as in that run (the profile times CartPole-v1, whose dynamics are CartPole-v0's)."""
    from pearl.algos.registry import algorithm
    from pearl.costmodel import CostModel
    from pearl.envs import env_spec
    from pearl.planner.build import build_problem
    from pearl.planner.ilp import evaluate, solve
    from pearl.profile.format import load_profile

    profile = load_profile(REFERENCE)
    assert profile.host["cores"] == 2 and profile.device("cpu").lanes == 2
    config = None if hidden is None else algorithm("dqn").config_class().replace(hidden=hidden)
    problem, facts = build_problem(profile, CostModel(profile), "dqn", env_spec("CartPole-v1"), config=config)
    on_cpu = dict.fromkeys(("act", "replay_insert", "replay_sample", "priority_update", "learn"), "cpu")
    one, two = (evaluate(problem, on_cpu, ActorOption(n, 1)) for n in (1, 2))
    rate = {n: facts.steps_per_iteration / r[0] for n, r in ((1, one), (2, two))}
    assert rate[2] < rate[1] and two[2].startswith("contention[")
    assert one[2] == "process[learner]"  # 2 processes on 2 lanes: no contention
    plan = solve(problem, "throughput")
    assert plan.actors.n == 1


def _with_threaded_learn(tmp_path: Path, factor: float, beside: float | None = None, busy: float = 0.01) -> Path:
    """The reference profile (2 lanes) with DDPG's learn on cpu timed at 2 threads at `factor` × its 1-thread
    figure at the preset's batch (and, with `beside`, at that × it beside a stand-in actor busy `busy` of each
    update)."""
    from dataclasses import replace

    from pearl.profile.format import load_profile, save_profile

    profile = load_profile(REFERENCE)
    workload = next(w for w in profile.workloads if w.algo == "ddpg")
    one = next(k for k in profile.kernels if (k.workload, k.kernel, k.device, k.batch) ==
               (workload.key, "learn", "cpu", workload.batch_size))
    for f, near in ((factor, False), (beside, True)):
        if f is not None:
            profile.kernels.append(replace(one, median_s=one.median_s * f, p10_s=one.p10_s * f,
                                           p90_s=one.p90_s * f, threads=2, beside=busy if near else 0.0))
    return save_profile(profile, tmp_path / f"threads-{factor}-{beside}-{busy}.json")


def test_the_learner_threads_are_priced_as_they_run_beside_the_actors(tmp_path) -> None:
    """2 threads fast alone (0.3 × 1 thread) but slow beside a stand-in actor busy 1 % of each update (1.2 ×):
    the T = 2 program prices learn at the figure beside (DDPG's actors are busier than that beside its learn,
    as on the local and Ray launchers), so the plan keeps 1 thread; the sequential launcher's choice, where the
    roles run in turn, still reads the figure alone. With the stand-in timed busy half of each update, the
    actors' fewer seconds move learn only part of the way: one env per actor more than 32."""
    from pearl.planner.accounting import fastest_threads
    from pearl.planner.build import build_problem
    from pearl.planner.make import make_plan

    path = _with_threaded_learn(tmp_path, 0.3, beside=1.2)
    assert make_plan(path, "ddpg", "Pendulum-v1").threads == 1
    assert make_plan(_with_threaded_learn(tmp_path, 0.3, beside=0.5), "ddpg", "Pendulum-v1").threads == 2
    profile = load_profile(path)
    model = CostModel(profile)
    spec, config = env_spec("Pendulum-v1"), preset("ddpg", "Pendulum-v1")
    one, _ = build_problem(profile, model, "ddpg", spec, config=config)
    two, _ = build_problem(profile, model, "ddpg", spec, config=config, threads=2)
    assert two.cost[("learn", "cpu")] == pytest.approx(1.2 * one.cost[("learn", "cpu")])
    workload = next(w for w in profile.workloads if w.algo == "ddpg")
    alone = {t: model.kernel_time("learn", "cpu", workload.key, workload.batch_size, t).seconds for t in (1, 2)}
    assert fastest_threads(2, alone) == 2
    half = load_profile(_with_threaded_learn(tmp_path, 0.3, beside=1.2, busy=0.5))
    learn = {e: build_problem(half, CostModel(half), "ddpg", spec, envs=e, config=config, threads=2)[0]
             .cost[("learn", "cpu")] for e in (1, 32)}
    assert 0.3 * one.cost[("learn", "cpu")] < learn[32] < learn[1] < 1.2 * one.cost[("learn", "cpu")]


ON_CPU = dict.fromkeys(("act", "replay_insert", "replay_sample", "priority_update", "learn"), "cpu")


def test_the_sequential_launcher_is_chosen_where_the_roles_run_faster_in_turn(tmp_path) -> None:
    """2 threads fast alone (0.3 × 1 thread) but slow beside an actor (1.2 ×): side by side the learner keeps 1
    thread, in turn it has 2 at its figure alone, and the in-turn period (every role's work once) is the least,
    so `default_launch` takes the sequential launcher at 2 threads and says both predictions. Where 2 threads
    are no faster anywhere (the reference profile) the overlap wins: local, 1 thread."""
    from pearl.planner.make import default_launch, launch_periods

    spec, config = env_spec("Pendulum-v1"), preset("ddpg", "Pendulum-v1")
    crowded = load_profile(_with_threaded_learn(tmp_path, 0.3, beside=1.2))
    periods = launch_periods(crowded, config, spec, ON_CPU, 1, in_turn=True)
    assert periods[("sequential", 2)] < periods[("local", 1)] < periods[("local", 2)]
    chosen = default_launch(crowded, config, spec, ON_CPU, 1)
    assert (chosen.launcher, chosen.threads) == ("sequential", 2)
    assert chosen.period_s == periods[("sequential", 2)]
    assert "local" in chosen.why and "sequential" in chosen.why
    plain = default_launch(load_profile(REFERENCE), config, spec, ON_CPU, 1)
    assert (plain.launcher, plain.threads) == ("local", 1)
    assert default_launch(crowded, config, spec, ON_CPU, 1, threads=1).threads == 1  # a T the run names is kept


@pytest.mark.parametrize("algo, env_id", [("dqn", "CartPole-v1"), ("ddpg", "Pendulum-v1")])
def test_side_by_side_never_loses_to_in_turn_when_nothing_is_crowded(algo, env_id) -> None:
    """With a one-thread learner and one actor on a 2-lane host nothing shares a lane, so the local launcher's
    period (the rows of accounting.py) is at most the sequential launcher's (accounting.in_turn), whatever the
    envs per actor; and in turn, the period is at least each role's own work."""
    from pearl.planner.accounting import in_turn
    from pearl.planner.build import build_problem
    from pearl.planner.ilp import evaluate

    profile = load_profile(REFERENCE)
    for envs in (1, 8, 32):
        problem, _ = build_problem(profile, CostModel(profile), algo, env_spec(env_id), envs=envs,
                                   beside_actors=False)
        option = ActorOption(1, envs)
        sequential = in_turn(problem, ON_CPU, option)
        local = evaluate(problem, ON_CPU, option)
        assert local is not None and local[0] <= sequential * (1 + 1e-12)
        assert sequential >= problem.actor_period[(option, "cpu")] and sequential >= problem.cost[("learn", "cpu")]


def test_the_learner_threads_are_a_plan_decision(capsys, tmp_path) -> None:
    """Where learn on cpu runs far faster at 2 threads the plan takes 2 (crowding priced: its prediction is
    the T = 2 program's, contention included); where 2 threads are no faster it keeps 1 (ties keep fewer);
    a profile without a multi-thread figure plans 1 thread."""
    from pearl.planner.make import make_plan

    fast = make_plan(_with_threaded_learn(tmp_path, 0.3), "ddpg", "Pendulum-v1")
    same = make_plan(_with_threaded_learn(tmp_path, 1.0), "ddpg", "Pendulum-v1")
    plain = make_plan(REFERENCE, "ddpg", "Pendulum-v1")
    assert (fast.threads, same.threads, plain.threads) == (2, 1, 1)
    assert fast.mapping["learn"] == "cpu"
    assert fast.predicted["period_s"] < plain.predicted["period_s"]
    assert same.predicted["period_s"] == pytest.approx(plain.predicted["period_s"])
    assert load_plan(save_plan(fast, tmp_path / "plan.json")).threads == 2
    assert fast.lanes["cpu"] == fast.actors + 2 and plain.lanes["cpu"] == plain.actors + 1  # the threads' lanes
    code, stdout, err = run_cli(capsys, "plan", "--profile", str(tmp_path / "threads-0.3-None-0.01.json"),
                                "--algo", "ddpg", "--env", "Pendulum-v1", "--out", str(tmp_path / "cli.json"))
    assert code == 0, err
    assert "1 learner(s) × 2 thread(s)" in stdout


def _with_group(tmp_path: Path, latency_s: float, bandwidth: float) -> Path:
    """The reference profile with a learner-group figure (`group` transfer of cpu) as given."""
    from pearl.profile.format import Transfer, load_profile, save_profile

    profile = load_profile(REFERENCE)
    profile.transfers.append(Transfer("cpu", "group", latency_s, bandwidth, "measured"))
    return save_profile(profile, tmp_path / f"group-{latency_s}.json")


def test_the_learner_group_is_a_plan_decision(capsys, tmp_path) -> None:
    """With a cheap all-gather a learning-bound workload (DDPG, hidden 1024-1024, batch 1024) plans 2 learners,
    the least period of the programs for 1 and 2 learners, and says why; the DQN preset keeps 1; a dear
    all-gather keeps 1; a profile without a group figure plans 1 and says so."""
    from pearl.planner.build import build_problem
    from pearl.planner.make import make_plan

    large = preset("ddpg", "Pendulum-v1").with_text({"hidden": "1024,1024", "batch_size": "1024"})
    cheap, dear = _with_group(tmp_path, 1.5e-4, 1.5e9), _with_group(tmp_path, 5e-2, 1e7)
    plan = make_plan(cheap, "ddpg", "Pendulum-v1", config=large)
    assert (plan.learners, plan.threads, plan.mapping["learn"]) == (2, 1, "cpu")
    assert plan.learners_why.startswith("2 learner(s): the least predicted period")
    assert "1 learners'" in plan.learners_why
    profile = load_profile(cheap)
    periods = {n: solve(build_problem(profile, CostModel(profile), "ddpg", env_spec("Pendulum-v1"), config=large,
                                      learners=n)[0]).period_s for n in (1, 2)}
    assert periods[2] < periods[1] and plan.predicted["period_s"] == pytest.approx(periods[2])
    assert load_plan(save_plan(plan, tmp_path / "plan.json")).learners == 2
    assert make_plan(cheap, "dqn", "CartPole-v1").learners == 1
    assert make_plan(dear, "ddpg", "Pendulum-v1", config=large).learners == 1
    plain = make_plan(REFERENCE, "ddpg", "Pendulum-v1", config=large)
    assert plain.learners == 1 and "no learner group was planned" in plain.learners_why
    code, stdout, err = run_cli(capsys, "plan", "--profile", str(cheap), "--algo", "ddpg", "--env", "Pendulum-v1",
                                "--set", "hidden=1024,1024", "--set", "batch_size=1024", "--out",
                                str(tmp_path / "cli.json"))
    assert code == 0, err
    assert "2 learner(s) × 1 thread(s)" in stdout and "learners: 2 learner(s)" in stdout


def test_a_timed_group_update_outweighs_the_communication_figure(tmp_path) -> None:
    """Where the profile timed the workload's group of two (`group_learn`), the plan prices it with that: a
    cheap all-gather figure alone plans 2 learners for DDPG Pendulum, a timed group update slower than one
    learner's learn keeps 1, and its predicted period is the timing's."""
    from dataclasses import replace

    from pearl.planner.build import build_problem
    from pearl.planner.make import make_plan
    from pearl.profile.format import GroupLearnTiming, save_profile

    cheap = _with_group(tmp_path, 1e-5, 1e10)
    assert make_plan(cheap, "ddpg", "Pendulum-v1").learners == 2
    profile = load_profile(cheap)
    workload = next(w for w in profile.workloads if w.algo == "ddpg")
    one = next(k for k in profile.kernels if (k.workload, k.kernel, k.device, k.batch, k.threads) ==
               (workload.key, "learn", "cpu", workload.batch_size, 1))
    slow = replace(profile, group_learn=[GroupLearnTiming(workload.key, "cpu", 2, 2 * one.median_s, 5, "measured")])
    plan = make_plan(save_profile(slow, tmp_path / "slow.json"), "ddpg", "Pendulum-v1")
    assert plan.learners == 1 and "2 learners' " in plan.learners_why
    fast = replace(profile, group_learn=[GroupLearnTiming(workload.key, "cpu", 2, 0.3 * one.median_s, 5, "measured")])
    problem, _ = build_problem(fast, CostModel(fast), "ddpg", env_spec("Pendulum-v1"), learners=2)
    assert problem.cost[("learn", "cpu")] == pytest.approx(CostModel(fast).in_situ_factor("cpu", workload.key)
                                                           * 0.3 * one.median_s)


def test_learner_0s_wait_in_the_collectives_is_the_timed_one_else_the_update_beyond_its_part(tmp_path) -> None:
    """The plan's `group_comm` (learner 0's seconds an update in the group's collectives): the profile's timing
    of that wait where it has one; a timing without it (an older profile) leaves the group's update less
    learner 0's own part, the learn of its B/2 rows; with no timed group, `group_time`'s figure."""
    from dataclasses import replace

    from pearl.planner.build import build_problem
    from pearl.profile.format import GroupLearnTiming

    profile = load_profile(_with_group(tmp_path, 1.5e-4, 1.5e9))
    workload = next(w for w in profile.workloads if w.algo == "ddpg")
    model = CostModel(profile)
    part = model.kernel_time("learn", "cpu", workload.key, workload.batch_size // 2).seconds
    spec = env_spec("Pendulum-v1")

    def wait(*timings: GroupLearnTiming) -> float:
        timed = replace(profile, group_learn=list(timings))
        return build_problem(timed, CostModel(timed), "ddpg", spec, learners=2)[0].group_comm_s["cpu"]

    untimed = wait()
    assert untimed == pytest.approx(build_problem(profile, model, "ddpg", spec, learners=2)[0].cost[("learn", "cpu")]
                                    / model.in_situ_factor("cpu", workload.key) - part)
    update = 8 * part
    assert wait(GroupLearnTiming(workload.key, "cpu", 2, update, 5, "measured")) == pytest.approx(update - part)
    assert wait(GroupLearnTiming(workload.key, "cpu", 2, update, 5, "measured", 0.5 * update)) == \
        pytest.approx(0.5 * update)


def test_two_nodes_of_one_lane_price_their_group_with_the_group_timed_on_one_lane(capsys, tmp_path) -> None:
    """Nodes of one lane each, whose profile timed the group of two on that lane (its learners sharing it): the
    cluster's group of one learner a node costs that timing (as the learner's iteration interleaves it), and
    its `group_comm` is the timed wait, where the link adds nothing to the host's figure."""
    from dataclasses import replace

    from pearl.planner.make import make_plan
    from pearl.profile.format import GroupLearnTiming, save_profile

    profile = load_profile(_with_group(tmp_path, 1.5e-4, 1.5e9))
    profile.devices = [replace(d, lanes=1) if d.id == "cpu" else d for d in profile.devices]
    workload = next(w for w in profile.workloads if w.algo == "dqn" and w.env == "CartPole-v1")
    update, wait = 4.0e-3, 2.5e-3
    profile.group_learn = [GroupLearnTiming(workload.key, "cpu", 2, update, 50, "measured", wait)]
    host = save_profile(profile, tmp_path / "one-lane.json")
    two = tmp_path / "two.json"
    code, _, err = run_cli(capsys, "profile", "merge", f"a={host}", f"b={host}", "--network", "40gbe", "--out",
                           str(two))
    assert code == 0, err
    plan = make_plan(two, "dqn", "CartPole-v1", learners=2)
    assert plan.mapping["learn"].endswith("/cpu")
    assert plan.kernels["learn"] == pytest.approx(CostModel(profile).in_situ_factor("cpu", workload.key) * update)
    assert plan.kernels["group_comm"] == pytest.approx(wait)


def test_a_cluster_plans_a_learner_group_with_one_learner_on_every_node(capsys, tmp_path) -> None:
    """Two nodes of a profile with a group figure: `--learners 2` plans one learner on each node, learn priced as
    the group's update (its B/2 rows, plus the communication over the slower of the host's gloo figure and the
    link), the plan's kernels predict the group's communication apart, and the launcher reads learner 1's node
    from the plan; another group size is one error line naming the sizes the cluster offers."""
    from pearl.planner.make import make_plan
    from pearl.training.plan_checks import role_nodes

    host = _with_group(tmp_path, 1.5e-4, 1.5e9)
    two = tmp_path / "two.json"
    code, _, err = run_cli(capsys, "profile", "merge", f"a={host}", f"b={host}", "--network", "1gbe", "--out",
                           str(two))
    assert code == 0, err
    large = preset("ddpg", "Pendulum-v1").with_text({"hidden": "1024,1024", "batch_size": "1024"})
    alone = make_plan(two, "ddpg", "Pendulum-v1", config=large, learners=1)
    group = make_plan(two, "ddpg", "Pendulum-v1", config=large, learners=2)
    assert (group.learners, group.threads) == (2, 1) and group.learners_why == "2 learner(s): as asked (--learners 2)"
    learner_node = group.mapping["learn"].split("/")[0]
    assert role_nodes(group).learners == ({"a": "b", "b": "a"}[learner_node],)
    # 1 GbE's bandwidth is below the host's 1.5 GB/s: the link prices the gradients' bytes (one copy received)
    from pearl.algos.params import param_count
    from pearl.profile.cluster import load_cluster

    link = load_cluster(two).links[0]
    gradient_bytes = 4 * param_count(large, env_spec("Pendulum-v1"))
    assert gradient_bytes / link.bandwidth_bytes_per_s < group.kernels["group_comm"] < \
        2 * gradient_bytes / link.bandwidth_bytes_per_s
    assert "group_comm" not in alone.kernels
    assert group.kernels["learn"] > group.kernels["group_comm"]
    assert load_plan(save_plan(group, tmp_path / "g.json")).kernels["group_comm"] == group.kernels["group_comm"]
    code, _, err = run_cli(capsys, "plan", "--profile", str(two), "--algo", "dqn", "--env", "CartPole-v1",
                           "--learners", "4", "--out", str(tmp_path / "x.json"))
    assert code == 2 and err.count("error:") == 1
    assert "--learners 4: this profile offers 1, 2 learner(s) (a cluster plan's group has one learner on each" in err


@pytest.mark.parametrize("algo, env", [("dqn", "CartPole-v1"), ("ddpg", "Pendulum-v1")])
def test_act_on_a_gpu_is_one_actor_process_with_its_envs_batched(algo: str, env: str) -> None:
    """Each process that acts on a GPU opens a context there, and contexts take the GPU in turns (16 actor
    processes on the H200 each acted at 26× their profiled time): the planner offers act on a whole GPU to one
    actor process only, and prices the rest as before."""
    from pearl.planner.build import build_problem
    from pearl.planner.ilp import evaluate
    from pearl.planner.make import fixed_plans
    from pearl.planner.problem import PLACED

    h200 = ROOT / "profiles" / "h200-quick.json"
    profile = load_profile(h200)
    problem, _ = build_problem(profile, CostModel(profile), algo, env_spec(env))
    on_gpu = {k: ("cuda:0" if k == "act" else "cpu") for k in PLACED}
    on_cpu = {k: "cpu" for k in PLACED}
    options = problem.actor_options()
    assert max(a.n for a in options) > 1  # the host offers several actor processes
    for a in options:
        assert (evaluate(problem, on_gpu, a) is not None) == (a.n == 1)
        assert evaluate(problem, on_cpu, a) is not None
    all_on_gpu = fixed_plans(h200, algo, env)["all on cuda:0"]
    assert all_on_gpu.mapping["act"] == "cuda:0" and all_on_gpu.actors == 1
