"""A what-if GPU's roofline against the real one: the H200 descriptor's modelled kernels beside the kernels a
quick profile measured on an H200 host (profiles/h200-quick.json, 2026-11-28). The descriptor's launch figure
is pearl's torch path's per roofline launch, fitted to that profile; with a bare CUDA launch's 5 µs the model
was 11-20× too fast for learn and up to 48× for replay inserts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pearl.descriptors import load_descriptor
from pearl.profile.format import load_profile
from pearl.profiler.whatif import add_what_if

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ratios() -> dict[str, list[float]]:
    """Per kernel, modelled ÷ measured over every (workload, batch) the H200 profile timed on cuda:0."""
    profile = load_profile(ROOT / "profiles" / "h200-quick.json")
    what_if = add_what_if(profile, load_descriptor(ROOT / "devices" / "nvidia-h200-sxm-141gb.toml"))
    measured = {(k.workload, k.kernel, k.batch): k.median_s for k in profile.kernels
                if k.device == "cuda:0" and k.threads == 1 and k.precision == "fp32"}
    out: dict[str, list[float]] = {}
    for k in profile.kernels:
        if k.device == what_if and k.precision == "fp32" and (k.workload, k.kernel, k.batch) in measured:
            out.setdefault(k.kernel, []).append(k.median_s / measured[(k.workload, k.kernel, k.batch)])
    return out


def test_the_profile_covers_every_presets_kernels_on_the_gpu(ratios) -> None:
    assert {"act", "learn", "replay_insert", "replay_sample", "priority_update"} <= set(ratios)
    assert len(ratios["learn"]) == 12  # four presets, three batches each


@pytest.mark.parametrize("kernel", ["learn", "act", "replay_sample", "priority_update"])
def test_the_what_if_h200_is_within_a_factor_of_2_5_of_the_measured_one(ratios, kernel) -> None:
    """Measured 2026-11-28: learn 0.61-1.08×, act 0.55-0.81×, replay_sample 0.68-0.83×, priority_update
    1.14-2.16×. Inserts (0.26-0.30×) and the prioritized draw (0.28-0.48×) are left out: one roofline launch
    stands for more host work in them (an insert: six host-to-device copies and five scatters) than in the others."""
    assert all(0.4 <= r <= 2.5 for r in ratios[kernel]), (kernel, ratios[kernel])


# ------------------------------------------------------------------------------------------ bf16-mixed
def _what_if(stem: str, measured: str = "h200-quick.json"):
    profile = load_profile(ROOT / "profiles" / measured)
    return profile, add_what_if(profile, load_descriptor(ROOT / "devices" / f"{stem}.toml"))


def test_a_what_if_gpu_whose_descriptor_states_bf16_throughput_has_learn_at_bf16_mixed() -> None:
    """Learn at bf16-mixed is the roofline at bf16_peak_flops (the A100's 312 TFLOPS against 19.5 at float32),
    at every batch learn has at float32; no other kernel has a bf16 figure. The slices scale it with their SMs."""
    from pearl.descriptors import load_descriptor as load
    from pearl.roofline import kernel_work, roofline_time

    profile, device = _what_if("nvidia-a100-sxm4-80gb")
    figures = load(ROOT / "devices" / "nvidia-a100-sxm4-80gb.toml").figures
    workloads = {w.key: w for w in profile.workloads}
    mine = [k for k in profile.kernels if k.device == device]
    fp32 = {(k.workload, k.batch): k.median_s for k in mine if k.kernel == "learn" and k.precision == "fp32"}
    bf16 = {(k.workload, k.batch): k.median_s for k in mine if k.kernel == "learn" and k.precision == "bf16-mixed"}
    assert fp32 and set(bf16) == set(fp32)
    for (workload, batch), seconds in bf16.items():
        work = kernel_work("learn", workloads[workload], batch)
        assert seconds == roofline_time(work, figures, "bf16-mixed") <= fp32[(workload, batch)]
    assert any(s < fp32[key] for key, s in bf16.items())  # the large batches are compute-bound, so faster
    assert {k.kernel for k in mine if k.precision != "fp32"} == {"learn"}
    assert not profile.precision_problem(device, "bf16-mixed")
    quarter = {(k.workload, k.batch): k.median_s for k in profile.kernels
               if k.device == f"{device}/mps:25" and k.kernel == "learn" and k.precision == "bf16-mixed"}
    assert set(quarter) == set(bf16) and all(quarter[key] >= bf16[key] for key in bf16)


@pytest.mark.parametrize(("stem", "why"), [
    ("amd-epyc-7763", "its descriptor (amd-epyc-7763.toml) states no bf16_peak_flops"),
    ("intel-pac-d5005", "the opencl adapter computes learn in fp32 only"),
])
def test_a_what_if_device_without_bf16_learn_says_why(stem: str, why: str) -> None:
    profile, device = _what_if(stem)
    assert profile.precision_problem(device, "bf16-mixed") == why
    assert not [k for k in profile.kernels if k.device == device and k.precision != "fp32"]


def test_a_bf16_plan_places_learn_on_the_what_if_device_that_has_it(tmp_path) -> None:
    """The 2-core reference profile timed learn in float32 only; with a what-if A100 beside it, a bf16-mixed plan
    can place learn on the A100 alone, and prices it at the A100's bf16 figure."""
    from pearl.planner.make import make_plan
    from pearl.profile.format import save_profile

    profile, device = _what_if("nvidia-a100-sxm4-80gb", "reference.json")
    path = save_profile(profile, tmp_path / "p.json")
    plan = make_plan(path, "ddpg", "Pendulum-v1", precision="bf16-mixed")
    learner = plan.mapping["learn"]
    assert plan.precision == "bf16-mixed" and learner.startswith(device)  # the A100 or one of its slices
    from pearl.costmodel import CostModel

    key = next(w.key for w in profile.workloads if w.algo == "ddpg")
    bf16 = CostModel(profile, "bf16-mixed").kernel_time("learn", learner, key, 256).seconds
    fp32 = CostModel(profile).kernel_time("learn", learner, key, 256).seconds
    assert plan.kernels["learn"] == pytest.approx(bf16, rel=1e-6) and bf16 < fp32
