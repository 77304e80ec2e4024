"""A device that cannot work is named and left out: every device is probed before use (a tiny OpenCL kernel
built, run and its result checked; a tiny torch op), `pearl devices` lists a failing one under its own heading,
a profile leaves it out with one warning and records why, and only a device the user names turns the failure
into one `error:` line. OpenCL drivers that pip installed into the environment are made visible to the loader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cli_support import run_cli
from pearl.adapters import DeviceInfo
from pearl.adapters.opencl import icd
from pearl.adapters.registry import Discovery, discover
from pearl.device import DeviceKind
from pearl.errors import DeviceError
from pearl.profiler.options import ProfileOptions
from pearl.profiler.profiler import plan_devices, run_profile

#: what PoCL 3.0 (LLVM 14) printed building any kernel on a Zen 5 CPU, as pyopencl raised it
POCL_ZEN5_LOG = ("clBuildProgram failed: BUILD_PROGRAM_FAILURE - clBuildProgram failed: BUILD_PROGRAM_FAILURE\n\n"
                 "Build on <pyopencl.Device 'pthread-AMD EPYC' on 'Portable Computing Language'>:\n\n"
                 "error: unknown target CPU 'generic'\nDevice pthread-AMD EPYC failed to build the program\n")


def _opencl():
    from opencl_support import first_opencl_device

    device_id = first_opencl_device()
    from pearl.adapters.opencl.probe import PROBE, ProbeKernel, probe_device
    from pearl.adapters.opencl.runtime import find_device

    return device_id, find_device(device_id), probe_device, PROBE, ProbeKernel


def test_a_working_opencl_device_passes_its_probe() -> None:
    device_id, device, probe_device, _, _ = _opencl()
    assert probe_device(device) == ""
    assert next(d for d in discover().devices if d.id == device_id).usable


def test_a_kernel_that_does_not_build_names_the_compiler_error() -> None:
    _, device, probe_device, _, ProbeKernel = _opencl()
    broken = ProbeKernel("__kernel void probe(__global float *x) { x[0] = undeclared_name; }", lambda x: x)
    why = probe_device(device, broken)
    assert why.startswith("the OpenCL compiler failed to build a test kernel: ")
    assert "undeclared_name" in why and "\n" not in why


def test_a_device_that_computes_wrong_results_is_caught() -> None:
    _, device, probe_device, PROBE, ProbeKernel = _opencl()
    wrong = ProbeKernel(PROBE.source.replace("2.0f", "3.0f"), PROBE.expect)  # the device does x*3+1, asked x*2+1
    why = probe_device(device, wrong)
    assert "wrong results (63 of 64 values" in why  # element 0 is 1 either way
    assert "element 1 is 4.0, expected 3.0" in why


def test_the_pocl_build_log_is_cut_to_its_cause_with_what_to_do() -> None:
    pytest.importorskip("pyopencl")
    from pearl.adapters.opencl.probe import build_advice, build_cause

    assert build_cause(POCL_ZEN5_LOG) == "unknown target CPU 'generic'"
    assert 'pip install "pearl[opencl-cpu]"' in build_advice(POCL_ZEN5_LOG)
    assert build_cause("something odd\nmore") == "something odd"


def test_torch_probe_runs_a_tiny_op() -> None:
    from pearl.adapters.torch.adapter import torch_problem

    assert torch_problem("cpu") == ""
    assert torch_problem("cuda:97").startswith("a test op failed on it: ")  # no such GPU, or no CUDA at all


def _broken_opencl(monkeypatch) -> DeviceInfo:
    """The first working OpenCL device, made to fail its probe for real: the probe's kernel does not compile."""
    device_id, _, _, PROBE, ProbeKernel = _opencl()
    from pearl.adapters.opencl import discovery
    from pearl.adapters.opencl import probe

    monkeypatch.setattr(probe, "PROBE", ProbeKernel("__kernel void probe(__global float *x) { x[0] = nope; }",
                                                    PROBE.expect))
    monkeypatch.setattr(discovery, "_PROBED", {})
    broken = next(d for d in discover().devices if d.id == device_id)
    assert not broken.usable and "failed to build a test kernel" in broken.problem
    return broken


def test_devices_lists_a_failing_device_under_its_own_heading(capsys, monkeypatch) -> None:
    broken = _broken_opencl(monkeypatch)
    code, out, _ = run_cli(capsys, "devices")
    assert code in (0, None)
    found, rest = out.split("found, unusable (left out of profiles and plans):\n")
    assert f"  {broken.id} " not in found and "  cpu " in found
    assert f"  {broken.id} " in rest and "unusable: the OpenCL compiler failed to build a test kernel" in rest
    code, out, _ = run_cli(capsys, "devices", "--json")
    entry = next(d for d in json.loads(out)["devices"] if d["id"] == broken.id)
    assert entry["usable"] is False and "nope" in entry["problem"]


def test_a_named_failing_device_is_one_error_line(capsys, monkeypatch, tmp_path) -> None:
    broken = _broken_opencl(monkeypatch)
    for args in (["profile", "--quick", "--algo", "dqn", "--device", broken.id, "--out", str(tmp_path / "p.json")],
                 ["train", "--algo", "dqn", "--env", "CartPole-v1", "--device", broken.id, "--steps", "100",
                  "--runs-dir", str(tmp_path / "runs")]):
        code, _, err = run_cli(capsys, *args)
        assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and broken.id in err, args
        assert "failed to build a test kernel" in err
    assert not (tmp_path / "p.json").exists()


def test_plan_devices_leaves_out_the_unusable_and_refuses_a_named_one() -> None:
    cpu = DeviceInfo("cpu", DeviceKind.CPU, "torch", "a CPU", 2, 1 << 30)
    bad = DeviceInfo("opencl:0:0", DeviceKind.CPU, "opencl", "a driver", 2, 1 << 30, problem="it broke; fix it")
    assert plan_devices(ProfileOptions(quick=True), [cpu, bad]) == [cpu]
    with pytest.raises(DeviceError, match=r"cannot profile opencl:0:0 \(a driver\): it broke; fix it"):
        plan_devices(ProfileOptions(quick=True, devices=("opencl:0:0",)), [cpu, bad])


def test_a_profile_leaves_out_a_failing_device_with_one_warning() -> None:
    """The discovery holds the host's cpu and an OpenCL device whose probe failed: the profile measures the cpu,
    records the other as unusable with its reason, and warns once."""
    found = discover()
    bad = DeviceInfo("opencl:7:0", DeviceKind.CPU, "opencl", "a driver", 2, 1 << 30,
                     problem="the OpenCL compiler failed to build a test kernel: unknown target CPU 'generic'")
    warnings: list[str] = []
    profile = run_profile(ProfileOptions(quick=True, algos=("dqn",)), warn=warnings.append,
                          found=Discovery([d for d in found.devices if d.id == "cpu"] + [bad]))
    assert warnings == [f"opencl:7:0 (a driver) left out: {bad.problem}"]
    assert [d.id for d in profile.devices] == ["cpu"]
    assert [(u.id, u.reason) for u in profile.unusable] == [("opencl:7:0", bad.problem)]
    from pearl.profile.format import parse_profile

    assert parse_profile(json.loads(json.dumps(profile.to_dict())), "x").unusable == profile.unusable


def test_a_device_that_fails_mid_profile_is_left_out_whole(monkeypatch) -> None:
    """The OpenCL device's learn kernel dies on first use (as a device that vanishes would): its figures go, the
    cpu's stay, and the profile says why."""
    device_id, _, _, _, _ = _opencl()
    from pearl.adapters.opencl import OpenCLAdapter
    from pearl.profiler import profiler

    class Vanishing(OpenCLAdapter):
        def make_learn(self, *args, **kwargs):
            raise RuntimeError("clEnqueueNDRangeKernel failed: DEVICE_NOT_AVAILABLE\nmore detail")

    real = profiler.open_adapter
    monkeypatch.setattr(profiler, "open_adapter",
                        lambda d, **kw: Vanishing(d) if str(d) == device_id else real(d, **kw))
    warnings: list[str] = []
    profile = run_profile(ProfileOptions(quick=True, algos=("dqn",), devices=("cpu", device_id)),
                          warn=warnings.append)
    assert len(warnings) == 1 and warnings[0].startswith(f"{device_id} (")
    assert warnings[0].endswith("left out: it failed while being measured: clEnqueueNDRangeKernel failed: "
                                "DEVICE_NOT_AVAILABLE")
    assert [d.id for d in profile.devices] == ["cpu"]
    for name in ("kernels", "in_situ", "weight_sync", "actor_step", "transfers", "power"):
        assert all(t.device != device_id for t in getattr(profile, name)), name
    assert {k.kernel for k in profile.kernels if k.device == "cpu"} >= {"act", "learn", "replay_sample"}
    assert next(u for u in profile.unusable if u.id == device_id).reason.startswith("it failed while being measured")


def test_a_broken_driver_file_is_reported_and_the_rest_goes_on(tmp_path) -> None:
    vendors = tmp_path / "vendors"
    vendors.mkdir()
    (vendors / "gone.icd").write_text("/nonexistent/libgone.so\n")
    env = {**os.environ, "OCL_ICD_VENDORS": str(vendors)}
    done = subprocess.run([sys.executable, "-m", "pearl", "devices"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"driver file {vendors / 'gone.icd'} is skipped: it names /nonexistent/libgone.so, which does not exist" \
        in done.stdout
    assert "  cpu " in done.stdout


def test_a_pip_installed_driver_is_exposed_to_the_loader(tmp_path) -> None:
    prefix = tmp_path / "venv"
    (prefix / "etc" / "OpenCL" / "vendors").mkdir(parents=True)
    (prefix / "lib").mkdir()
    (prefix / "lib" / "libdriver.so").write_bytes(b"")
    # as the package ships it: a path of the machine it was built on; and an optional part it did not install
    (prefix / "etc" / "OpenCL" / "vendors" / "driver.icd").write_text("/opt/builder/lib/libdriver.so\n")
    (prefix / "etc" / "OpenCL" / "vendors" / "absent.icd").write_text("/opt/builder/lib/libabsent.so\n")
    env: dict[str, str] = {}
    folder = icd.expose_environment_icds(env, prefix, cache=tmp_path / "cache")
    assert folder is not None and env["OCL_ICD_VENDORS"] == str(folder)
    written = {i.name: i.library for i in icd.read_icds(folder)}
    assert written["driver.icd"] == str(prefix / "lib" / "libdriver.so") and "absent.icd" not in written
    assert icd.expose_environment_icds(env, prefix, cache=tmp_path / "cache") is None  # set already: untouched
    chosen = {"OCL_ICD_VENDORS": "/my/vendors"}
    assert icd.expose_environment_icds(chosen, prefix, cache=tmp_path / "cache") is None
    assert chosen == {"OCL_ICD_VENDORS": "/my/vendors"}
    assert icd.expose_environment_icds({}, tmp_path / "empty", cache=tmp_path / "cache") is None  # none installed


def test_an_unusable_device_points_to_one_that_works() -> None:
    from pearl.adapters.opencl.discovery import _point_to_working

    good = DeviceInfo("opencl:0:0", DeviceKind.CPU, "opencl", "Intel", 2, 1)
    bad = DeviceInfo("opencl:1:0", DeviceKind.CPU, "opencl", "PoCL", 2, 1,
                     problem="the OpenCL compiler failed to build a test kernel: x; install something")
    out = _point_to_working([good, bad])
    assert out[1].problem == "the OpenCL compiler failed to build a test kernel: x; use opencl:0:0 (Intel) instead"
    assert _point_to_working([bad]) == [bad] and replace(out[0]) == good


def test_plan_warns_of_the_devices_its_profile_left_out(capsys, tmp_path) -> None:
    from pearl.profile.format import UnusableDevice, load_profile, save_profile

    source = Path(__file__).resolve().parent.parent / "profiles"
    profile_file = next(iter(sorted(source.glob("*quick*.json"))), None)
    if profile_file is None:
        pytest.skip("no shipped quick profile")
    profile = load_profile(profile_file)
    profile.unusable = [UnusableDevice("opencl:9:0", "a driver", "it broke; fix it")]
    path = save_profile(profile, tmp_path / "p.json")
    algo = profile.workloads[0].algo
    code, _, err = run_cli(capsys, "plan", "--profile", str(path), "--algo", algo, "--env", profile.workloads[0].env,
                           "--out", str(tmp_path / "plan.json"))
    assert code in (0, None)
    assert "warning: opencl:9:0 (a driver) left out: it broke; fix it\n" in err
