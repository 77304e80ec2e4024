"""Scaled figures: a workload the profile has not measured, costed from the nearest measured one by their work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_support import run_cli
from pearl.costmodel import CostModel
from pearl.roofline import kernel_work
from pearl.planner.make import make_plan
from pearl.profile.format import SCHEMA, Profile, Workload, parse_profile, workload_key

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ("act", "learn", "replay_insert", "replay_sample", "priority_update")
BATCHES = (1, 32, 128, 256)
# a device whose every kernel costs exactly λ·launches + φ·flops + β·bytes
LAW = (20e-6, 1e-10, 2e-11)


def _workload(hidden: tuple[int, ...], obs: int = 6, actions: int = 3, algo: str = "dqn") -> Workload:
    return Workload(workload_key(algo, "Acrobot-v1", obs, actions, hidden), algo, "Acrobot-v1", obs, actions,
                    hidden, 128, 50_000)


def _law(kernel: str, workload: Workload, batch: int, law: tuple[float, float, float] = LAW) -> float:
    w = kernel_work(kernel, workload, batch)
    return law[0] * w.launches + law[1] * w.flops + law[2] * w.bytes


def _profile(workloads: list[Workload], *, timed=_law, modelled_device: bool = False) -> Profile:
    devices = [{"id": "cpu", "kind": "cpu", "adapter": "torch", "name": "cpu", "lanes": 2, "memory_bytes": 1 << 33,
                "shares": None, "descriptor": None, "descriptor_matched": False, "source": "measured"}]
    if modelled_device:
        devices.append({**devices[0], "id": "whatif:gpu", "kind": "opencl", "name": "gpu", "source": "modelled"})
    kernels = [{"workload": w.key, "kernel": k, "device": d["id"], "batch": b, "median_s": timed(k, w, b),
                "p10_s": timed(k, w, b), "p90_s": timed(k, w, b), "samples": 5, "source": d["source"]}
               for w in workloads for k in KERNELS for b in BATCHES for d in devices]
    data = {"schema": SCHEMA, "pearl_version": "0.1.0", "created": "2026-01-01T00:00:00+00:00", "mode": "quick",
            "host": {"node": "test"}, "devices": devices,
            "workloads": [{"key": w.key, "algo": w.algo, "env": w.env, "obs_dim": w.obs_dim,
                           "action_dim": w.action_dim, "hidden": list(w.hidden), "batch_size": w.batch_size,
                           "buffer_size": w.buffer_size, **({"settings": dict(w.settings)} if w.settings else {})}
                          for w in workloads],
            "kernels": kernels, "env_step": [], "transfers": [], "power": []}
    return parse_profile(json.loads(json.dumps(data)), "<synthetic>")


SMALL, LARGE = _workload((64, 64)), _workload((256, 256))


def test_the_fit_recovers_a_device_whose_cost_is_its_work() -> None:
    lam, phi, beta = CostModel(_profile([SMALL, LARGE])).work_coefficients("cpu")
    assert (lam, phi, beta) == pytest.approx(LAW, rel=1e-6)


@pytest.mark.parametrize("hidden", [(128, 128), (400, 300), (32,), (64, 64, 64)])
@pytest.mark.parametrize("kernel", KERNELS)
def test_scaling_is_exact_for_a_cost_proportional_to_work(hidden: tuple[int, ...], kernel: str) -> None:
    target = _workload(hidden, obs=8, actions=4)
    model = CostModel(_profile([SMALL, LARGE]))
    for batch in (1, 64, 128, 512):
        est = model.kernel_time(kernel, "cpu", target, batch)
        assert est.source == "scaled" and est.scaled_from in (SMALL.key, LARGE.key)
        assert est.seconds == pytest.approx(_law(kernel, target, batch), rel=1e-6)


def test_a_td3_learn_off_the_profiled_policy_delay_is_scaled_by_its_work() -> None:
    """A profile timed TD3 at the default policy_delay (2); a config that steps the actor every update, or
    every fourth, is another workload (its key carries the delay), costed by its own learn work."""
    from pearl.algos import TD3Config
    from pearl.envs import env_spec
    from pearl.profile.format import config_workload

    spec = env_spec("Pendulum-v1")
    timed = config_workload(TD3Config(hidden=(64, 64)), spec)
    model = CostModel(_profile([timed]))
    seconds = {}
    for delay in (1, 4):
        target = config_workload(TD3Config(hidden=(64, 64), policy_delay=delay), spec)
        est = model.kernel_time("learn", "cpu", target, 128)
        assert est.source == "scaled" and est.scaled_from == timed.key
        assert est.seconds == pytest.approx(_law("learn", target, 128), rel=1e-6)
        seconds[delay] = est.seconds
    assert seconds[1] > model.kernel_time("learn", "cpu", timed, 128).seconds > seconds[4]


def test_nearest_is_the_closest_in_work() -> None:
    model = CostModel(_profile([SMALL, LARGE]))
    assert model.nearest("learn", "cpu", _workload((250, 250)), 128) == LARGE.key
    assert model.nearest("learn", "cpu", _workload((60, 60)), 128) == SMALL.key
    # another algo is never scaled from: ddpg's networks are not dqn's
    with pytest.raises(KeyError, match="no timing of kernel 'learn'"):
        model.kernel_time("learn", "cpu", _workload((64, 64), algo="ddpg"), 128)


def test_scaling_keeps_the_shape_of_the_measured_series() -> None:
    """A device that is not the law (here: twice the law on the small net) scales the nearest's own times."""
    def timed(kernel: str, w: Workload, b: int) -> float:
        return _law(kernel, w, b) * (2.0 if w.key == SMALL.key else 1.0)

    model = CostModel(_profile([SMALL, LARGE], timed=timed))
    target = _workload((60, 60))
    measured = model.kernel_time("learn", "cpu", SMALL.key, 128).seconds
    fitted = model.work_coefficients("cpu")
    m = [fitted[0] * w.launches + fitted[1] * w.flops + fitted[2] * w.bytes
         for w in (kernel_work("learn", target, 128), kernel_work("learn", SMALL, 128))]
    assert model.kernel_time("learn", "cpu", target, 128).seconds == pytest.approx(measured * m[0] / m[1])


def test_measured_beats_scaled_beats_modelled() -> None:
    def off_law(kernel: str, w: Workload, b: int) -> float:
        return 3.0 * _law(kernel, w, b) if w.key == LARGE.key else _law(kernel, w, b)

    model = CostModel(_profile([SMALL, LARGE], timed=off_law, modelled_device=True))
    # measured: the workload's own series, even where scaling from the other would say something else
    own = model.kernel_time("learn", "cpu", LARGE, 128)
    assert own.source == "measured" and own.scaled_from is None
    assert own.seconds == pytest.approx(3.0 * _law("learn", LARGE, 128))
    # scaled: a shape the profile lacks, on a measured device
    assert model.kernel_time("learn", "cpu", _workload((100, 100)), 128).source == "scaled"
    # modelled: the same on a what-if device, whose figures were modelled to begin with
    est = model.kernel_time("learn", "whatif:gpu", _workload((100, 100)), 128)
    assert est.source == "modelled" and est.scaled_from == SMALL.key
    # a key the profile lacks (no shapes to scale by) is still a KeyError naming what there is
    with pytest.raises(KeyError, match="for 'learn' it has"):
        model.kernel_time("learn", "cpu", "dqn-Acrobot-v1-o6-a3-h9", 128)


def _reference(tmp_path: Path) -> Path:
    path = tmp_path / "profile.json"
    shutil.copy(ROOT / "profiles" / "reference.json", path)
    return path


def test_a_plan_for_an_unprofiled_shape_says_its_figures_are_scaled(tmp_path: Path) -> None:
    from pearl.algos import preset

    path = _reference(tmp_path)
    measured = make_plan(path, "dqn", "CartPole-v1")
    assert measured.predicted["source"] == "measured" and measured.predicted["scaled"] == {}
    plan = make_plan(path, "dqn", "CartPole-v1", config=preset("dqn", "CartPole-v1").replace(hidden=(64, 64)))
    p = plan.predicted
    assert p["workload"] == "dqn-CartPole-v1-o4-a2-h64x64" and p["source"] == "scaled"
    assert set(p["scaled"]) >= {"act", "learn"} and set(p["scaled"].values()) == {"dqn-CartPole-v1-o4-a2-h256x256"}
    # a network of a sixteenth of the weights learns faster than the measured one
    assert p["updates_per_s"] > measured.predicted["updates_per_s"]
    # its weight sync is the measured one's scaled down to a smaller copy, not left out
    assert 0 < plan.kernels["weight_sync"] < measured.kernels["weight_sync"]


def test_pearl_plan_set_hidden_prints_the_scaled_figures(tmp_path: Path, capsys) -> None:
    path = _reference(tmp_path)
    out = tmp_path / "plan.json"
    code, text, _ = run_cli(capsys, "plan", "--profile", str(path), "--algo", "dqn", "--env", "CartPole-v1",
                            "--set", "hidden=128,128", "--out", str(out))
    assert code == 0, text
    assert "timings scaled" in text and "scaled: the profile has not measured dqn-CartPole-v1-o4-a2-h128x128" in text
    saved = json.loads(out.read_text())
    assert saved["predicted"]["source"] == "scaled" and "learn" in saved["predicted"]["scaled"]


def test_pearl_plan_set_unknown_field_is_one_error_line(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(capsys, "plan", "--profile", str(_reference(tmp_path)), "--algo", "dqn", "--env",
                           "CartPole-v1", "--set", "hiden=64,64", "--out", str(tmp_path / "p.json"))
    assert code == 2 and err.count("error:") == 1 and "hidden" in err
