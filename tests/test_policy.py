"""The trained policy as a product: `pearl.load` reads a run back, `predict` gives the actions the run's
evaluation stepped the env with, `pearl evaluate` reproduces the run's reported return, `pearl export` writes a
graph that agrees with `predict`, and `pearl plan --serve` says where the policy should act. Short runs of each
algorithm (a few hundred steps) are enough: the claims are about reading, acting and exporting, not learning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import pearl
from cli_support import run_cli
from pearl.algos import preset
from pearl.errors import PearlError
from pearl.policy import Policy, PolicyError, export, load, read_policy

ENVS = {"dqn": "CartPole-v1", "ddpg": "Pendulum-v1", "td3": "Pendulum-v1", "sac": "Pendulum-v1"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A finished short run of each algorithm, with in-training evaluations (so a best policy is kept)."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for algo, env in ENVS.items():
        config = preset(algo, env).replace(total_steps=700, learning_starts=200, hidden=(32, 32), buffer_size=2000)
        if algo == "dqn":
            config = config.replace(train_freq=50, gradient_steps=20, target_update_interval=20)
        result = pearl.train(options=pearl.RunOptions.of(algo=algo, env=env, config=config, seed=3, device="cpu",
                                                         launcher="sequential", eval_every=250, eval_episodes=3,
                                                         runs_dir=str(root)))
        out[algo] = Path(result.run_dir)
    return out


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


@pytest.mark.parametrize("algo", list(ENVS))
def test_evaluate_reproduces_the_run_s_reported_returns(runs, algo: str) -> None:
    run, summary = runs[algo], _summary(runs[algo])
    for which in ("best", "final"):
        if which not in summary:
            continue
        policy = load(run, policy=which)
        assert policy.evaluate() == summary[which]["returns"], which  # the run's seed and episodes: exactly
    headline = load(run)
    assert headline.spec.policy == summary["headline"]
    assert headline.evaluate() == summary["eval_returns"]


@pytest.mark.parametrize("algo", list(ENVS))
def test_predict_gives_the_env_s_actions_for_one_observation_or_a_batch(runs, algo: str) -> None:
    import gymnasium as gym

    policy = load(runs[algo])
    env = gym.make(ENVS[algo])
    env.observation_space.seed(1)
    obs = np.stack([env.observation_space.sample() for _ in range(16)])
    batch = policy.predict(obs)
    assert batch.shape[0] == 16
    # one row through the network against a batch: the same maths, summed in another order by the GEMM
    np.testing.assert_allclose(policy.predict(obs[3]), batch[3], atol=1e-6, rtol=0)
    for a in batch:
        assert env.action_space.contains(np.asarray(a, dtype=env.action_space.dtype))
    if algo == "dqn":
        assert batch.dtype.kind == "i"
    else:
        low, high = env.action_space.low, env.action_space.high
        assert np.all(batch >= low - 1e-6) and np.all(batch <= high + 1e-6)
    assert policy.spec.algo == algo and policy.spec.env == ENVS[algo] and policy.spec.run == str(runs[algo])


@pytest.mark.parametrize("algo", ["dqn", "ddpg"])
def test_a_policy_trained_on_cpu_serves_on_opencl(runs, algo: str) -> None:
    from opencl_support import first_opencl_device

    device = first_opencl_device()
    on_cpu, on_cl = load(runs[algo]), load(runs[algo], device=device)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, on_cpu.spec.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(on_cl.predict(obs), on_cpu.predict(obs), atol=1e-4)


@pytest.mark.parametrize("algo", list(ENVS))
@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_an_exported_policy_agrees_with_predict(runs, tmp_path, algo: str, fmt: str) -> None:
    if fmt == "onnx":
        pytest.importorskip("onnxscript")
        pytest.importorskip("onnxruntime")
    from pearl.adapters.torch.export import run_file

    out = tmp_path / f"policy.{fmt}"
    result = export(runs[algo], fmt, out)
    assert out.exists() and result.checked == 1000 and result.mismatches == 0
    assert result.max_abs_diff <= 1e-5
    policy = load(runs[algo])
    obs = np.random.default_rng(5).normal(size=(1000, policy.spec.obs_dim)).astype(np.float32)
    got, want = run_file(fmt, out, obs), policy.predict(obs)
    if algo == "dqn":
        assert np.array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_export_and_evaluate_on_the_command_line(runs, capsys, tmp_path) -> None:
    run = runs["dqn"]
    code, out, _ = run_cli(capsys, "evaluate", str(run), "--json")
    assert code in (0, None)
    got = json.loads(out)
    assert got["returns"] == _summary(run)["eval_returns"] and got["reported_return_mean"] == got["return_mean"]
    code, out, _ = run_cli(capsys, "export", str(run), "--format", "torchscript", "--out", str(tmp_path / "p.pt"))
    assert code in (0, None) and "parity with predict on 1,000 observations: every action the same" in out


def test_the_final_policy_is_the_run_s_last_checkpoint(runs) -> None:
    run = runs["sac"]
    final = read_policy(run, "final")
    assert Path(final.spec.source).parent.name == "checkpoints"
    from_checkpoint = read_policy(final.spec.source)
    assert from_checkpoint.spec.policy == "final"
    assert all(np.array_equal(final.params[k], from_checkpoint.params[k]) for k in final.params)


# --------------------------------------------------------------------------- where it serves
def _profile(tmp_path: Path, loaded, accel_act: dict[int, float]) -> Path:
    """A profile of the loaded policy's workload with cpu (act 20 µs a call plus 1 µs a row) and a GPU whose act
    takes `accel_act` seconds at batches 1 and 256; the GPU's transfers cost 5 µs a leg."""
    from pearl.profile.format import SCHEMA, config_workload

    w = config_workload(loaded.config, loaded.env_spec)

    def timing(device: str, batch: int, seconds: float) -> dict:
        return {"workload": w.key, "kernel": "act", "device": device, "batch": batch, "median_s": seconds,
                "p10_s": seconds, "p90_s": seconds, "samples": 5, "source": "measured"}

    def device(id_: str, kind: str, shares: str | None) -> dict:
        return {"id": id_, "kind": kind, "adapter": "torch", "name": id_, "lanes": 1, "memory_bytes": 1 << 30,
                "shares": shares, "descriptor": None, "descriptor_matched": False, "source": "measured"}

    data = {"schema": SCHEMA, "pearl_version": "0.1.0", "created": "2026-12-01T00:00:00+00:00", "mode": "quick",
            "host": {"node": "test"}, "devices": [device("cpu", "cpu", "host-cpu"), device("cuda:0", "gpu", None)],
            "workloads": [{"key": w.key, "algo": w.algo, "env": w.env, "obs_dim": w.obs_dim,
                           "action_dim": w.action_dim, "hidden": list(w.hidden), "batch_size": w.batch_size,
                           "buffer_size": w.buffer_size}],
            "kernels": [timing("cpu", b, 20e-6 + 1e-6 * b) for b in (1, 256)]
            + [timing("cuda:0", b, s) for b, s in accel_act.items()],
            "env_step": [], "power": [{"device": d, "idle_w": 10.0, "busy_w": 50.0, "source": "modelled",
                                       "method": "descriptor", "descriptor": None} for d in ("cpu", "cuda:0")],
            "transfers": [{"device": "cuda:0", "direction": d, "latency_s": 5e-6, "bandwidth_bytes_per_s": 1e10,
                           "source": "measured"} for d in ("h2d", "d2h")]}
    path = tmp_path / "serve-profile.json"
    path.write_text(json.dumps(data))
    return path


def test_serving_picks_the_accelerator_only_where_its_act_is_faster(runs, tmp_path) -> None:
    from pearl.costmodel import CostModel
    from pearl.planner.serve import pick, serve_options
    from pearl.profile.format import load_profile

    loaded = read_policy(runs["dqn"])
    path = _profile(tmp_path, loaded, {1: 200e-6, 256: 60e-6})
    model = CostModel(load_profile(path))
    at_1 = pick(serve_options(model, loaded.config, loaded.env_spec, 1), "throughput")
    at_256 = pick(serve_options(model, loaded.config, loaded.env_spec, 256), "throughput")
    assert at_1.device == "cpu" and at_256.device == "cuda:0"
    assert "cuda:0: the profile's fastest act at batch 256" in at_256.explain()
    assert load(runs["dqn"], device="auto", profile=str(path), batch=1).placement.startswith("cpu: ")


def test_plan_serve_prints_each_device_and_the_choice(runs, capsys, tmp_path) -> None:
    path = _profile(tmp_path, read_policy(runs["dqn"]), {1: 200e-6, 256: 60e-6})
    code, out, _ = run_cli(capsys, "plan", "--serve", "--profile", str(path), "--run", str(runs["dqn"]),
                           "--batch", "256")
    assert code in (0, None)
    lines = out.splitlines()
    assert any(line.strip().startswith("cuda:0") and line.endswith("<- chosen") for line in lines)
    assert any(line.strip().startswith("cpu ") and "actions/s" in line for line in lines)


# --------------------------------------------------------------------------- bad input
def _opencl_id() -> str:
    from opencl_support import first_opencl_device

    return first_opencl_device()


def test_bad_inputs_are_one_error_line(runs, capsys, tmp_path) -> None:
    unfinished = tmp_path / "unfinished"
    shutil.copytree(runs["dqn"], unfinished)
    (unfinished / "summary.json").unlink()
    no_best = tmp_path / "no_best"
    shutil.copytree(runs["dqn"], no_best)
    (no_best / "best_policy.npz").unlink()
    other_schema = tmp_path / "profile.npz"
    np.savez(other_schema, x=np.zeros(3))
    profile_json = tmp_path / "a-profile.json"
    profile_json.write_text(json.dumps({"schema": "pearl.profile/1"}))
    cases = [
        (["evaluate", str(tmp_path / "nothing")], "no such run folder or file"),
        (["evaluate", str(tmp_path)], "no config.json"),
        (["evaluate", str(unfinished)], "the run never finished"),
        (["evaluate", str(no_best), "--policy", "best"], "no best_policy.npz"),
        (["evaluate", str(other_schema)], "needs its run's config.json beside it"),
        (["evaluate", str(profile_json)], "not a pearl policy file"),
        (["evaluate", str(runs["sac"]), "--device", _opencl_id()], "no SAC act kernel"),
        (["evaluate", str(runs["dqn"]), "--device", "cuda:7"], "cuda:7"),
        (["evaluate", str(runs["dqn"]), "--episodes", "0"], "--episodes"),
        (["export", str(runs["dqn"]), "--format", "onnx", "--out", str(tmp_path)], "folder"),
        (["plan", "--serve", "--profile", str(tmp_path / "none.json")], "--run"),
    ]
    for args, fragment in cases:
        code, _, err = run_cli(capsys, *args)
        assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), (args, err)
        assert fragment in err, (args, err)


def test_a_checkpoint_of_an_unregistered_algorithm_names_it(runs, tmp_path) -> None:
    from pearl.runtime.checkpoint import read_checkpoint, write_checkpoint

    final = read_policy(runs["dqn"], "final")
    checkpoint = read_checkpoint(final.spec.source)
    path = write_checkpoint(tmp_path, {**checkpoint.meta, "algo": "rainbow", "replay": False}, checkpoint.learn, None)
    with pytest.raises(PearlError, match="rainbow"):
        read_policy(path)


def test_an_env_that_no_longer_resolves_is_named(runs, tmp_path) -> None:
    run = tmp_path / "renamed"
    shutil.copytree(runs["dqn"], run)
    config = json.loads((run / "config.json").read_text())
    config["env"] = config["env_spec"]["env_id"] = "CartPole-v99"
    (run / "config.json").write_text(json.dumps(config))
    with pytest.raises(PearlError, match="CartPole-v99"):
        export(run, "torchscript", tmp_path / "p.pt")
    assert not (tmp_path / "p.pt").exists()


@pytest.mark.parametrize("obs", [np.zeros(3), np.zeros((2, 5)), np.array(["a", "b", "c", "d"]), np.zeros((0, 4))])
def test_predict_refuses_observations_of_another_shape_or_dtype(runs, obs) -> None:
    with pytest.raises(PolicyError, match="predict takes"):
        load(runs["dqn"]).predict(obs)


def test_onnx_without_its_packages_says_what_to_install(runs, tmp_path, monkeypatch) -> None:
    import builtins

    real = builtins.__import__

    def without_onnx(name, *args, **kwargs):
        if name in ("onnx", "onnxscript"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_onnx)
    with pytest.raises(PearlError, match=r'pip install "pearl\[onnx\]"'):
        export(runs["dqn"], "onnx", tmp_path / "p.onnx")
    assert not (tmp_path / "p.onnx").exists()


def test_video_records_each_episode_or_says_what_to_install(runs, tmp_path) -> None:
    from pearl.policy import record_videos

    policy = load(runs["dqn"])
    try:
        import moviepy  # noqa: F401
        import pygame  # noqa: F401
    except ImportError:
        with pytest.raises(PearlError, match=r'pip install "pearl\[video\]"'):
            record_videos(policy, tmp_path / "videos", episodes=1)
        return
    returns, files = record_videos(policy, tmp_path / "videos", episodes=2)
    assert len(files) == 2 and all(Path(f).stat().st_size > 0 for f in files)
    assert returns == policy.evaluate(episodes=2)  # the same episodes, one at a time


def test_policy_is_public_api() -> None:
    assert pearl.load is load and pearl.Policy is Policy
