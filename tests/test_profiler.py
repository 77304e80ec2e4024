"""pearl profile: what it measures, the file it writes, and every bad input it can be given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli
from pearl.descriptors import DescriptorError, load_descriptor
from pearl.device import HOST_RESOURCE, DeviceKind
from pearl.kernels import DEVICE_KERNELS, PRIORITIZED_SAMPLE
from pearl.profile.format import ProfileError, load_profile, save_profile
from pearl.profiler.power import rapl_domains
from pearl.profiler.options import ProfileOptions
from pearl.profiler.profiler import RuntimeProbes, count_measurements, run_profile


DEVICES = Path(__file__).resolve().parent.parent / "devices"


@pytest.fixture(scope="module")
def cpu_profile():
    from pearl.runtime.local import PROBES

    return run_profile(ProfileOptions(quick=True, algos=("dqn",), devices=("cpu",)), probes=PROBES)


def test_every_device_kernel_is_measured_at_every_grid_point(cpu_profile) -> None:
    kernels = {(k.kernel, k.batch) for k in cpu_profile.kernels if k.device == "cpu"}
    assert {k for k, _ in kernels} == {*DEVICE_KERNELS, PRIORITIZED_SAMPLE}
    assert {b for k, b in kernels if k == PRIORITIZED_SAMPLE} == {b for k, b in kernels if k == "replay_sample"}
    assert {b for k, b in kernels if k == "learn"} == {32, 64, 128}  # the preset's 64 halved and doubled
    for k in cpu_profile.kernels:
        assert 0 < k.p10_s <= k.median_s <= k.p90_s and k.samples >= 3 and k.source == "measured"
    assert cpu_profile.env_step[0].env == "CartPole-v1" and cpu_profile.env_step[0].median_s > 0
    assert cpu_profile.workloads[0].key == "dqn-CartPole-v1-o4-a2-h256x256"


def test_learn_is_timed_at_the_host_lanes_as_threads_too(cpu_profile) -> None:
    """On `cpu` with more than one lane, learn at the preset's batch with the lanes as torch's intra-op threads,
    and torch is back at 1 thread after it; every other timing is at 1 thread."""
    import torch

    lanes = next(d.lanes for d in cpu_profile.devices if d.id == "cpu")
    threaded = [k for k in cpu_profile.kernels if k.threads != 1]
    if lanes < 2:
        assert threaded == []
        return
    # alone, then beside a stand-in, at float32 and (where the host has bf16 units) at bf16-mixed too
    precisions = ["fp32"] if cpu_profile.precision_problem("cpu", "bf16-mixed") else ["fp32", "bf16-mixed"]
    assert [(k.kernel, k.device, k.batch, k.threads, k.beside > 0, k.precision) for k in threaded] == \
        [("learn", "cpu", 64, lanes, near, p) for p in precisions for near in (False, True)]
    for k in threaded:
        assert 0 < k.p10_s <= k.median_s <= k.p90_s and k.samples >= 3 and 0 <= k.beside <= 0.9
        assert 0 < k.one_thread_s < float("inf")  # learn at one thread, timed in the same blocks
    assert [k.one_thread_s for k in cpu_profile.kernels if k.threads == 1] == \
        [None] * (len(cpu_profile.kernels) - len(threaded))
    assert torch.get_num_threads() == 1


def test_the_learner_iteration_is_timed_in_situ(cpu_profile) -> None:
    from pearl.costmodel import CostModel
    from pearl.profiler.learner import IN_SITU_CHAIN

    [t] = cpu_profile.in_situ
    # the launchers' inserts: a segment of 256 env steps and 128 updates, inserted in one call
    assert (t.device, t.workload, t.inserts, t.insert_rows, t.batch) == ("cpu", "dqn-CartPole-v1-o4-a2-h256x256",
                                                                          1 / 128, 256, 64)
    assert t.iteration_s > 0 and t.iterations >= 5 and not t.prioritized
    assert t.iterations % IN_SITU_CHAIN == 0  # timed in chains, among the kernel grid's points
    model = CostModel(cpu_profile)
    factor = model.in_situ_factor("cpu", t.workload)
    # a ratio of two timings: positive and finite; how large it is depends on the machine's load (timing
    # never decides a test; benchmarks/costmodel_holdout.py reports it)
    assert 0 < factor < float("inf")
    # a segment's first iteration, after a pause, timed among the same points (its size is the machine's)
    assert t.first_iteration_s is not None and t.first_iteration_s > 0
    assert model.first_iteration_factor("cpu", t.workload) >= 1.0
    # the local launcher's learner loop a segment, from a collect-only run of one actor process: some time, less
    # than the run it came from (a tenth of a second at most a segment would be a loop gone wrong)
    assert t.segment_s is not None and 0 < t.segment_s < 0.1
    assert model.segment_loop_time("cpu", t.workload) == t.segment_s


def test_the_learner_loop_inserts_a_segment_in_one_call_every_segment_of_updates() -> None:
    from pearl.adapters.torch import TorchAdapter
    from pearl.algos import preset
    from pearl.envs import env_spec
    from pearl.profiler.grids import GRIDS
    from pearl.profiler.learner import LearnerLoop

    config = preset("dqn", "CartPole-v1")
    loop = LearnerLoop(TorchAdapter("cpu"), config, env_spec("CartPole-v1"), GRIDS["quick"])
    before = loop.replay.size
    calls = [loop.inserted_before(i + 1) - loop.inserted_before(i) for i in range(256)]
    for _ in range(256):
        loop.iteration()
    assert sum(calls) == 2 and set(calls) == {0, 1}  # one call of 256 rows every 128 updates
    assert loop.replay.size - before == 2 * 256


def test_the_weight_sync_is_timed_on_each_device(cpu_profile) -> None:
    [t] = cpu_profile.weight_sync
    assert (t.device, t.workload, t.source) == ("cpu", "dqn-CartPole-v1-o4-a2-h256x256", "measured")
    # 67,586 floats (270 KB) each way: a copy takes some time; how much is the machine's business
    assert 0 < t.publish_s < float("inf") and 0 < t.load_s < float("inf") and t.samples >= 5


def test_the_actor_step_is_timed_at_each_env_count_of_the_act_grid(cpu_profile) -> None:
    """On `cpu`, as an actor process runs it; the cost model reads an env side from it for every env count."""
    from pearl.costmodel import CostModel

    steps = cpu_profile.actor_step
    assert [(t.device, t.workload, t.envs) for t in steps] == [("cpu", "dqn-CartPole-v1-o4-a2-h256x256", e)
                                                               for e in (1, 8, 32)]
    assert all(0 < t.step_s < float("inf") and t.samples >= 5 and t.source == "measured" for t in steps)
    model = CostModel(cpu_profile)
    assert all(model.actor_env_time(cpu_profile.workloads[0], e).seconds > 0 for e in (1, 2, 16, 64))


def test_the_probe_runs_an_actor_process_iteration_and_empties_its_rings() -> None:
    """What the actor step times (`pearl profile` passes the probe): each call one step of the vector env through
    the process's own iteration, its rows pushed into the ring and its counters written as the learner reads
    them, the rings then emptied, and no weights loaded in between."""
    import numpy as np

    from pearl.adapters import open_adapter
    from pearl.algos import preset
    from pearl.envs import env_spec
    from pearl.runtime import shm
    from pearl.runtime.actor_process import IterationProbe

    config = preset("dqn", "CartPole-v1")
    spec = env_spec("CartPole-v1")
    probe = IterationProbe(open_adapter("cpu", 1, None), config, spec, envs=4)
    it = probe.iteration
    start, weights = it.share.collected, it.share.weights
    calls = 300
    try:
        for _ in range(calls):
            probe()
    finally:
        probe.close()
    col = {name: shm.ACTOR_INTS.index(name) for name in shm.ACTOR_INTS}
    ring, episodes = probe.rings
    rows = it.share.collected - start
    # every env's step a transition, less one at each env's reset step after an episode ends
    assert calls * 4 - it.mine[col["episodes"]] == rows
    assert int(ring.ctl[shm.HEAD]) == rows and ring.pending() == 0 and episodes.pending() == 0
    assert it.mine[col["produced"]] == it.share.collected and it.mine[col["act_calls"]] == calls
    assert it.mine[col["env_calls"]] == calls and it.mine[col["episodes"]] > 0  # CartPole ends within 300 steps
    assert it.share.weights == weights and it.mine[col["policy_version"]] == weights  # no load
    assert np.isfinite(ring.rows["obs"][:rows]).all() and ring.rows["obs"][:rows].any()
    assert it.myf[shm.ACTOR_FLOATS.index("act")] > 0 and it.myf[shm.ACTOR_FLOATS.index("weights_wait")] == 0


def test_profile_file_round_trips(cpu_profile, tmp_path) -> None:
    path = save_profile(cpu_profile, tmp_path / "p.json")
    assert load_profile(path) == cpu_profile
    assert json.loads(path.read_text())["schema"] == "pearl.profile/1"


def test_a_workloads_learn_settings_round_trip(cpu_profile, tmp_path) -> None:
    """A workload off its algorithm's default work (TD3 at policy_delay 3) keeps its settings through the file;
    a default workload is written without the field, as profiles before it were."""
    from dataclasses import replace

    from pearl.algos import TD3Config
    from pearl.envs import env_spec
    from pearl.profile.format import config_workload

    delayed = config_workload(TD3Config(policy_delay=3), env_spec("Pendulum-v1"))
    profile = replace(cpu_profile, workloads=[*cpu_profile.workloads, delayed])
    path = save_profile(profile, tmp_path / "p.json")
    assert load_profile(path).workload(delayed.key).settings == (("policy_delay", 3),)
    written = json.loads(path.read_text())["workloads"]
    assert [w.get("settings") for w in written] == [None] * len(cpu_profile.workloads) + [{"policy_delay": 3}]


def test_count_matches_what_is_measured(cpu_profile) -> None:
    labels: list[str] = []
    options = ProfileOptions(quick=True, algos=("dqn",), devices=("cpu",))
    run_profile(options, labels.append)
    assert len(labels) == count_measurements(options)
    labels.clear()
    looped = RuntimeProbes(segment_loop=lambda config, spec, seconds: 1e-4)
    run_profile(options, labels.append, probes=looped)
    assert len(labels) == count_measurements(options, looped)


def test_opencl_device_shares_the_host_cores(tmp_path) -> None:
    from opencl_support import first_opencl_device

    device = first_opencl_device()
    profile = run_profile(ProfileOptions(quick=True, algos=("dqn",), devices=("cpu", device)))
    entries = {d.id: d for d in profile.devices}
    if "cpu" in entries[device].name.lower() or entries[device].shares:
        assert entries[device].shares == entries["cpu"].shares == "host-cpu"
    assert {(k.kernel, k.device) for k in profile.kernels} >= {(k, d) for k in DEVICE_KERNELS for d in ("cpu", device)}
    directions = {t.direction for t in profile.transfers if t.device == device}
    assert directions == {"h2d", "d2h"}
    assert all(t.bandwidth_bytes_per_s > 0 for t in profile.transfers)


def test_cli_writes_the_profile_and_a_json_summary(capsys, tmp_path) -> None:
    out = tmp_path / "p.json"
    code, stdout, err = run_cli(capsys, "profile", "--quick", "--algo", "dqn", "--device", "cpu", "--out", str(out),
                                "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    profile = load_profile(out)
    bf16 = [k for k in profile.kernels if k.threads == 1 and k.precision == "bf16-mixed"]
    # 3 acts, 4 inserts, 4 × 3 batches at float32; learn at the 3 batches at bf16-mixed where the host can
    assert len(bf16) == (0 if profile.precision_problem("cpu", "bf16-mixed") else 3)
    assert summary["profile"] == str(out) and summary["kernel_measurements"] == 19 + len(bf16)
    # the progress bar's total is what the sweep does, so the bar ends full and the summary says the same count
    options = ProfileOptions(quick=True, algos=("dqn",), devices=("cpu",))
    from pearl.runtime.local import PROBES

    assert summary["timings"] == count_measurements(options, PROBES)  # the CLI lends the runtime's probes
    assert profile.mode == "quick"


@pytest.mark.parametrize(("args", "fragment"), [
    (["--algo", "ppo"], "--algo"),
    (["--device", "tpu:0"], "tpu:0"),
    (["--what-if", "no/such/descriptor.toml"], "no such device descriptor"),
    # two what-if devices would get one id: refused before the measuring, not with a traceback after it
    (["--what-if", str(Path(__file__).resolve().parent.parent / "devices" / "pocl-cpu.toml")] * 2, "two descriptors"),
])
def test_bad_arguments_are_one_line_and_write_nothing(capsys, tmp_path, args: list[str], fragment: str) -> None:
    out = tmp_path / "p.json"
    code, _, err = run_cli(capsys, "profile", "--quick", "--out", str(out), *args)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and fragment in err
    assert not out.exists()


def test_algo_is_repeatable_and_env_takes_one(capsys, tmp_path, monkeypatch) -> None:
    """`--algo dqn --algo ddpg` measures both presets (in that order, once each); `--algo all` among them, or no
    --algo, every algorithm; with --env, two algorithms are one error line (a workload is one algorithm's)."""
    import pearl.profiler.profiler as profiler
    from pearl.cli.base import ALGO_CHOICES
    from pearl.errors import ConfigError

    asked: list[tuple[str, ...]] = []

    def stop(options, *_args, **_kwargs):  # the measuring itself is not what is tested here
        asked.append(tuple(options.algos))
        raise ConfigError("stopped before measuring")

    monkeypatch.setattr(profiler, "run_profile", stop)
    out = str(tmp_path / "p.json")
    for args in (["--algo", "dqn", "--algo", "ddpg", "--algo", "dqn"], ["--algo", "sac", "--algo", "all"], []):
        assert run_cli(capsys, "profile", "--quick", "--device", "cpu", "--out", out, *args)[0] == 2
    assert asked == [("dqn", "ddpg"), tuple(ALGO_CHOICES), tuple(ALGO_CHOICES)]
    code, _, err = run_cli(capsys, "profile", "--quick", "--algo", "dqn", "--algo", "ddpg", "--env", "CartPole-v1",
                           "--out", out)
    assert code == 2 and err.count("\n") == 1 and "--env profiles one workload: pass one --algo" in err
    assert len(asked) == 3 and not (tmp_path / "p.json").exists()


def test_interrupted_write_leaves_no_file(cpu_profile, tmp_path, monkeypatch) -> None:
    import pearl.fileio as fileio

    def interrupted(*_args, **_kwargs):  # Ctrl-C after the data is written, before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(fileio.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_profile(cpu_profile, tmp_path / "p.json")
    assert list(tmp_path.iterdir()) == []


def test_interrupted_profiling_writes_nothing(capsys, tmp_path, monkeypatch) -> None:
    import pearl.profiler.profiler as profiler

    def interrupt(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(profiler, "_env_step", interrupt)
    code, _, err = run_cli(capsys, "profile", "--quick", "--algo", "dqn", "--device", "cpu",
                           "--out", str(tmp_path / "p.json"))
    assert code == 130 and "interrupted" in err
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- loading bad profile files
@pytest.fixture()
def good_file(cpu_profile, tmp_path) -> Path:
    return save_profile(cpu_profile, tmp_path / "good.json")


def rewrite(path: Path, change) -> Path:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


def test_missing_profile(tmp_path) -> None:
    with pytest.raises(ProfileError, match="no such profile"):
        load_profile(tmp_path / "nope.json")


def test_truncated_profile(good_file) -> None:
    text = good_file.read_text()
    good_file.write_text(text[: len(text) // 2])
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(good_file)


def test_not_json(good_file) -> None:
    good_file.write_bytes(b"\x89PNG\r\n")
    with pytest.raises(ProfileError):
        load_profile(good_file)


def test_wrong_schema(good_file) -> None:
    rewrite(good_file, lambda d: d.update(schema="pearl.plan/1"))
    with pytest.raises(ProfileError, match="'schema'"):
        load_profile(good_file)


def test_future_version(good_file) -> None:
    rewrite(good_file, lambda d: d.update(schema="pearl.profile/2"))
    with pytest.raises(ProfileError, match="version this pearl cannot read"):
        load_profile(good_file)


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["kernels"][0].update(median_s=-1.0), "kernels[0].median_s"),
    (lambda d: d["kernels"][0].update(device="cuda:7"), "kernels[0].device"),
    (lambda d: d["kernels"][0].update(kernel="teleport"), "kernels[0].kernel"),
    (lambda d: d["kernels"][0].pop("samples"), "kernels[0].samples"),
    (lambda d: d["devices"][0].update(lanes=0), "devices[0].lanes"),
    (lambda d: d["kernels"][0].update(source="guessed"), "kernels[0].source"),
    (lambda d: d.update(mode="slow"), "mode"),
    (lambda d: d["devices"][0].update(process_env="CUDA_VISIBLE_DEVICES=MIG-1"), "devices[0].process_env"),
    (lambda d: d["devices"][0].update(process_env={"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": 25}),
     "devices[0].process_env"),
    (lambda d: d["workloads"][0].update(settings={"policy_delay": 0}), "workloads[0].settings"),
    (lambda d: d["workloads"][0].update(settings=[["policy_delay", 3]]), "workloads[0].settings"),
])
def test_bad_fields_are_named(good_file, change, field: str) -> None:
    rewrite(good_file, change)
    with pytest.raises(ProfileError) as exc:
        load_profile(good_file)
    assert str(good_file) in str(exc.value) and f"'{field}'" in str(exc.value)


def test_a_bad_process_env_in_a_profile_is_one_error_line(capsys, good_file) -> None:
    rewrite(good_file, lambda d: d["devices"][0].update(process_env=["CUDA_VISIBLE_DEVICES"]))
    code, _, err = run_cli(capsys, "plan", "--profile", str(good_file), "--algo", "dqn", "--env", "CartPole-v1",
                           "--out", str(good_file.parent / "plan.json"))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "process_env" in lines[0], err


def test_what_if_a100_adds_modelled_cuda_entries(capsys, tmp_path) -> None:
    from pearl.adapters.torch import TorchAdapter

    out = tmp_path / "p.json"
    # a shipped descriptor by its name (a path works as well: tests/test_cli.py)
    code, _, err = run_cli(capsys, "profile", "--quick", "--algo", "dqn", "--device", "cpu", "--what-if",
                           "nvidia-a100-sxm4-80gb", "--out", str(out))
    assert code == 0, err
    profile = load_profile(out)
    device = profile.device("whatif:nvidia-a100-sxm4-80gb")
    # one vocabulary of kinds (pearl.device): the profile says what the device is, not which API runs it
    assert (device.kind, device.adapter, device.source) == (DeviceKind.GPU, "torch", "modelled")
    entries = [k for k in profile.kernels if k.device == device.id]
    assert {k.kernel for k in entries} == {*TorchAdapter.implements, PRIORITIZED_SAMPLE}
    assert all(k.source == "modelled" and k.median_s > 0 for k in entries)
    measured_batches = {(k.kernel, k.batch) for k in profile.kernels if k.device == "cpu"}
    assert {(k.kernel, k.batch) for k in entries} == measured_batches  # costed at the measured grid
    power = {p.device: p for p in profile.power}[device.id]
    assert (power.source, power.descriptor, power.scale) == ("modelled", "nvidia-a100-sxm4-80gb.toml", 1.0)
    assert power.idle_w == load_descriptor(DEVICES / "nvidia-a100-sxm4-80gb.toml").figures["idle_w"]  # unscaled


def test_cost_model_reads_a_measured_profile(cpu_profile) -> None:
    from pearl.costmodel import CostModel

    model = CostModel(cpu_profile)
    workload = cpu_profile.workloads[0].key
    for kernel in DEVICE_KERNELS:
        batches = model.batches(kernel, "cpu", workload)
        inside = model.kernel_time(kernel, "cpu", workload, batches[0] + 1)
        assert not inside.extrapolated and inside.source == "measured" and inside.seconds > 0
        beyond = model.kernel_time(kernel, "cpu", workload, batches[-1] * 4)
        assert beyond.extrapolated and beyond.seconds >= model.kernel_time(kernel, "cpu", workload, batches[-1]).seconds


def test_interleaved_rounds_visit_every_point_in_turn_and_pool_their_samples() -> None:
    from pearl.profiler.timing import Point, measure_interleaved

    log: list[tuple[str, object]] = []
    blocks: list[tuple[int, int]] = []
    points = [Point(lambda: log.append(("a", None)), lambda: None),
              Point(lambda x: log.append(("b", x)), lambda: None, prepare=lambda: 7)]
    stats = measure_interleaved(points, rounds=3, min_time=0.0, warmup=2, min_samples=5,
                                after=lambda r, i: blocks.append((r, i)))
    assert blocks == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    # an untimed round first (2 warm-up calls + a block of ceil(5 / 3) = 2 per point), then per timed block
    # one untimed call and 2 timed ones
    assert [s.samples for s in stats] == [6, 6]
    assert [name for name, _ in log] == ["a"] * 4 + ["b"] * 4 + (["a"] * 3 + ["b"] * 3) * 3
    assert all(x == 7 for name, x in log if name == "b")  # prepare's result reaches the call
    assert all(0 <= s.p10_s <= s.median_s <= s.p90_s for s in stats)
    with pytest.raises(ValueError, match="rounds"):
        measure_interleaved(points, rounds=0, min_time=0.0)


def test_a_point_s_condition_is_set_before_each_of_its_blocks() -> None:
    """`before` runs ahead of every block of its point, the untimed one too, so each call sees its own
    condition whatever the other points set (the threaded learn's threads and stand-in)."""
    from pearl.profiler.timing import Point, measure_interleaved

    state = {"threads": 0}
    seen: dict[int, set[int]] = {1: set(), 2: set()}
    points = [Point(lambda t=t: seen[t].add(state["threads"]), lambda: None, before=lambda t=t: state.update(threads=t))
              for t in (1, 2)]
    stats = measure_interleaved(points, rounds=3, min_time=0.0, warmup=1, min_samples=3)
    assert seen == {1: {1}, 2: {2}} and [s.samples for s in stats] == [3, 3]


def test_a_point_with_its_own_time_is_timed_that_long_in_each_round() -> None:
    """`min_time` on a point replaces the sweep's for it alone (the actor's iterations, 5 × a kernel point's)."""
    import time

    from pearl.profiler.timing import Point, measure_interleaved

    calls = {"short": 0, "long": 0}

    def call(name: str) -> None:
        calls[name] += 1
        time.sleep(1e-3)

    points = [Point(lambda: call("short"), lambda: None), Point(lambda: call("long"), lambda: None, min_time=0.12)]
    stats = measure_interleaved(points, rounds=3, min_time=0.0, warmup=0, min_samples=3)
    assert stats[0].samples == 3  # one timed call a block: the sweep's time is 0
    assert stats[1].samples >= 3 * 40 * 0.5  # 40 ms a block of 1 ms calls, at least half as many on a slow host
    assert calls["long"] > calls["short"]


def test_the_actor_s_iterations_are_points_of_the_kernel_grid_s_rounds() -> None:
    """So that the actor's iteration and the learner's sample the same span of the host: every round visits the
    actor's env counts among the kernels, and the progress lines say so."""
    from pearl.profiler.grids import GRIDS

    labels: list[str] = []
    options = ProfileOptions(quick=True, algos=("dqn",), devices=("cpu",))
    run_profile(options, labels.append)
    rounds = GRIDS["quick"].rounds
    for r in range(1, rounds + 1):
        in_round = [label for label in labels if label.endswith(f"(round {r}/{rounds})")]
        assert [label for label in in_round if label.startswith("actor step")] == [
            f"actor step cpu envs={n} (round {r}/{rounds})" for n in GRIDS["quick"].act]
        assert any(label.startswith("learn cpu") for label in in_round)
        assert any(label.startswith("in-situ learner iteration") for label in in_round)


def test_timed_calls_run_without_the_garbage_collector_and_it_is_restored() -> None:
    import gc

    from pearl.profiler.timing import durations

    seen: list[bool] = []
    assert gc.isenabled()
    times = durations(lambda: seen.append(gc.isenabled()), lambda: None, min_time=0.0, warmup=2, min_samples=4)
    assert len(times) == 4 and seen == [True, True, False, False, False, False]  # warm-ups are not timed
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that had it off keeps it off
        durations(lambda: None, lambda: None, min_time=0.0, warmup=0, min_samples=1)
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ZeroDivisionError):  # and a call that raises still gives it back
        durations(lambda: 1 / 0, lambda: None, min_time=0.0, warmup=0, min_samples=1)
    assert gc.isenabled()


# ---------------------------------------------------------------------------------------------- power
def test_a_cpu_descriptor_is_charged_for_the_cores_this_host_has() -> None:
    from pearl.profiler.power import from_descriptor

    generic = load_descriptor(DEVICES / "generic-x86-server-cpu.toml")
    assert generic.cores == 32 and generic.figures["idle_w"] == 60.0 and generic.figures["peak_w"] == 200.0
    two = from_descriptor(generic, lanes=2)  # the 2-core VM: 2/32 of a 32-core server's figures
    assert (two.idle_w, two.busy_w, two.scale) == (3.75, 12.5, 2 / 32)
    assert (two.source, two.method, two.descriptor) == ("modelled", "descriptor", "generic-x86-server-cpu.toml")
    whole = from_descriptor(generic, lanes=64)  # more lanes than the chip's cores (SMT): never above the chip
    assert (whole.idle_w, whole.busy_w, whole.scale) == (60.0, 200.0, 1.0)
    a100 = load_descriptor(DEVICES / "nvidia-a100-sxm4-80gb.toml")
    assert a100.cores is None and from_descriptor(a100, lanes=2).busy_w == a100.figures["peak_w"]  # no cores: as is


@pytest.mark.parametrize("cores", ["0", "-2", "2.5", "true", '"8"'])
def test_descriptor_cores_must_be_a_whole_number(tmp_path, cores) -> None:
    text = (DEVICES / "pocl-cpu.toml").read_text().replace("\ncores = 2 ", f"\ncores = {cores} ", 1)
    assert f"cores = {cores} " in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(DescriptorError, match="device.cores"):
        load_descriptor(bad)


def _host_targets(*infos):
    from pearl.profiler import profiler

    descriptors = profiler._known_descriptors(DEVICES)
    targets = []
    for info in infos:
        descriptor, matched = profiler._match(info, descriptors)
        entry = profiler.DeviceEntry(info.id, info.kind, info.adapter, info.name, info.lanes, info.memory_bytes,
                                     "measured", profiler.HOST_RESOURCE, descriptor.source.name, matched)
        targets.append(profiler._Target(info, None, entry, descriptor))
    return targets


@pytest.mark.skipif(bool(rapl_domains()),
                    reason="RAPL is readable here: the host CPU's power is measured, not taken from a descriptor")
def test_pocl_takes_its_own_descriptor_and_the_host_resource_is_charged_once() -> None:
    from pearl.adapters.base import DeviceInfo
    from pearl.profiler import profiler

    cpu = DeviceInfo("cpu", DeviceKind.CPU, "torch", "AMD EPYC", 2, 1 << 34)
    # the kind and the resource are typed fields: the note is for people, nothing reads it
    pocl = DeviceInfo("opencl:0:0", DeviceKind.CPU, "opencl", "pthread-AMD EPYC (Portable Computing Language)", 2,
                      1 << 32, note="2 compute units")
    assert (cpu.resource, pocl.resource) == (HOST_RESOURCE, HOST_RESOURCE)
    cpu_target, pocl_target = _host_targets(cpu, pocl)
    assert (cpu_target.entry.descriptor, cpu_target.entry.descriptor_matched) == ("generic-x86-server-cpu.toml", False)
    assert (pocl_target.entry.descriptor, pocl_target.entry.descriptor_matched) == ("pocl-cpu.toml", True)
    grid = profiler.GRIDS["quick"]
    # alone, the CPU gets the generic server's figures scaled to its 2 cores
    (alone,) = profiler._power([cpu_target], None, grid)
    assert (alone.idle_w, alone.busy_w, alone.descriptor) == (3.75, 12.5, "generic-x86-server-cpu.toml")
    # with PoCL beside it, the one resource carries the descriptor that matched by name (PoCL's own), on both
    both = profiler._power([cpu_target, pocl_target], None, grid)
    pocl_toml = load_descriptor(DEVICES / "pocl-cpu.toml")
    assert [(p.device, p.idle_w, p.busy_w, p.descriptor) for p in both] == [
        (d, pocl_toml.figures["idle_w"], pocl_toml.figures["peak_w"], "pocl-cpu.toml") for d in ("cpu", "opencl:0:0")]


def test_the_cpu_profile_holds_a_learner_group_figure(cpu_profile, tmp_path) -> None:
    """cpu's `group` transfer (a two-process all-gather's latency and bandwidth) and the workload's group update
    of two learners, which the planner prices learner groups with; both survive a save and a load."""
    from pearl.profile.format import load_profile, save_profile

    group = [t for t in cpu_profile.transfers if t.direction == "group"]
    assert len(group) == 1 and group[0].device == "cpu" and group[0].source == "measured"
    assert 0 < group[0].latency_s < 1.0 and group[0].bandwidth_bytes_per_s > 1e6
    again = load_profile(save_profile(cpu_profile, tmp_path / "p.json"))
    assert [t for t in again.transfers if t.direction == "group"] == group
    (update,) = cpu_profile.group_learn  # one update of a group of two, as learner 0 leads it
    assert (update.workload, update.device, update.learners) == (cpu_profile.workloads[0].key, "cpu", 2)
    assert update.update_s > 0 and again.group_learn == cpu_profile.group_learn
    assert 0 < update.comm_s < update.update_s  # learner 0's wait in the collectives, a part of the update


def test_a_host_of_one_lane_times_the_group_update_with_its_learners_sharing_the_lane() -> None:
    """`group_learn` on a host of one lane: the two learner processes share it, and the update is timed (what a
    cluster of one-lane nodes prices its group with)."""
    from dataclasses import replace

    from pearl.adapters.registry import open_adapter
    from pearl.adapters.torch.adapter import discover_cpu as discover
    from pearl.algos import preset
    from pearl.envs import env_spec
    from pearl.profiler.grids import GRIDS
    from pearl.profiler.learner import group_learn
    from pearl.profile.format import config_workload

    spec = env_spec("CartPole-v1")
    config = preset("dqn", spec.env_id)
    info = replace(next(d for d in discover()[0] if str(d.device_id) == "cpu"), lanes=1)
    workload = config_workload(config, spec)
    (update,) = group_learn(open_adapter("cpu", threads=1), info, workload, config, spec, GRIDS["quick"])
    assert (update.workload, update.device, update.learners) == (workload.key, "cpu", 2)
    assert 0 < update.comm_s < update.update_s and update.samples >= GRIDS["quick"].min_samples


def test_algorithms_that_share_an_env_time_its_steps_once(tmp_path) -> None:
    """TD3 and SAC both train on Pendulum-v1: one env_step entry, and the profile loads back."""
    from pearl.profile.format import load_profile, save_profile

    profile = run_profile(ProfileOptions(quick=True, algos=("td3", "sac"), devices=("cpu",)))
    assert [e.env for e in profile.env_step] == ["Pendulum-v1"]
    assert len(load_profile(save_profile(profile, tmp_path / "p.json")).workloads) == 2
