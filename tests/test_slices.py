"""Device identity and GPU slices: ids, MIG instances from (synthetic) NVML answers, MPS detection, the
environment a slice's process starts with, and the errors of slices that do not exist."""

from __future__ import annotations

import types

import pytest

from cli_support import run_cli
from pearl.adapters.base import DeviceInfo
from pearl.adapters.slices import (DEFAULT_MPS_PIPE_DIR, MigInstance, MpsDaemon, check_slice, mig_instances,
                                   mps_daemon, open_nvml, slice_devices, slice_env)
from pearl.device import HOST_RESOURCE, DeviceId, DeviceKind, Slice
from pearl.errors import DeviceError

D = DeviceId.parse


@pytest.mark.parametrize("text", ["cpu", "cuda:0", "cuda:3", "opencl:0:1", "whatif:nvidia-h100-sxm5-80gb",
                                  "cuda:0/mps:25", "cuda:1/mig:MIG-4a1f0c2e-9b7d-5e3a-8c6f-0123456789ab",
                                  "whatif:nvidia-h100-sxm5-80gb/mig:1g.10gb"])
def test_device_ids_round_trip(text: str) -> None:
    assert str(DeviceId.parse(text)) == text


def test_device_id_fields() -> None:
    assert DeviceId.parse("cuda") == DeviceId("cuda", (0,))
    mps = DeviceId.parse("cuda:1/mps:07")
    assert (mps.family, mps.index, mps.slice, mps.slice.mps_percent, str(mps.whole)) == \
        ("cuda", (1,), Slice("mps", "7"), 7, "cuda:1")
    assert DeviceId.parse("opencl:2:3").index == (2, 3) and DeviceId.parse("cpu").is_host


@pytest.mark.parametrize(("text", "fragment"), [
    ("cuda:0/mps:0", "from 1 to 100"), ("cuda:0/mps:101", "from 1 to 100"), ("cuda:0/mps:half", "from 1 to 100"),
    ("cpu/mps:5", "only a GPU"), ("opencl:0:0/mig:MIG-1", "only a GPU"), ("cuda:0/tpc:3", "a slice is"),
    ("tpu:0", "device ids look like"), ("cuda:x", "device ids look like"), ("opencl:0", "device ids look like")])
def test_bad_device_ids_say_what_ids_look_like(text: str, fragment: str) -> None:
    with pytest.raises(DeviceError, match=fragment):
        DeviceId.parse(text)


def test_device_info_reports_kind_and_resource_as_fields() -> None:
    cpu = DeviceInfo("cpu", "cpu", "torch", "EPYC", 2, 1 << 30)
    gpu = DeviceInfo("cuda:0", DeviceKind.GPU, "torch", "H100", 1, 80 << 30)
    fpga = DeviceInfo("opencl:1:0", DeviceKind.FPGA, "opencl", "PAC", 1, 8 << 30)
    assert cpu.kind is DeviceKind.CPU and (cpu.resource, gpu.resource, fpga.resource) == \
        (HOST_RESOURCE, "cuda:0", "opencl:1:0")


class FakeNvml:
    """NVML's answers for one GPU with MIG instances in some slots (pynvml's function names)."""

    NVML_DEVICE_MIG_ENABLE = 1

    class NVMLError(Exception):
        pass

    def __init__(self, mode: int, slots: dict[int, tuple[str, str, int, int]]) -> None:
        self.mode, self.slots, self.asked = mode, slots, []

    def nvmlDeviceGetHandleByUUID(self, uuid):  # noqa: N802 - NVML's names
        self.asked.append(uuid)
        return "gpu"

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        self.asked.append(index)
        return "gpu"

    def nvmlDeviceGetMigMode(self, handle):  # noqa: N802
        if self.mode < 0:
            raise self.NVMLError("Not Supported")
        return [self.mode, self.mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):  # noqa: N802
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, i):  # noqa: N802
        if i not in self.slots:
            raise self.NVMLError("Not Found")
        return i

    def nvmlDeviceGetUUID(self, mig):  # noqa: N802
        return self.slots[mig][0].encode()  # older pynvml answers bytes

    def nvmlDeviceGetName(self, mig):  # noqa: N802
        return self.slots[mig][1]

    def nvmlDeviceGetAttributes(self, mig):  # noqa: N802
        _, _, sms, mb = self.slots[mig]
        return types.SimpleNamespace(multiprocessorCount=sms, memorySizeMB=mb)


H100_SLOTS = {0: ("MIG-aaaa", "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 60, 40_192),
              3: ("MIG-bbbb", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 16, 9_984)}


def test_mig_instances_from_nvml_answers() -> None:
    nvml = FakeNvml(1, H100_SLOTS)
    found, why = mig_instances(nvml, "GPU-1234", 0)
    assert why == "" and nvml.asked == ["GPU-1234"]
    assert found == [MigInstance("MIG-aaaa", "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 60, 40_192 << 20),
                     MigInstance("MIG-bbbb", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 16, 9_984 << 20)]
    gpu = DeviceInfo("cuda:0", DeviceKind.GPU, "torch", "NVIDIA H100 80GB HBM3", 1, 80 << 30)
    slices = slice_devices(gpu, 132, found, MpsDaemon("/tmp/mps", ""))
    assert [(d.id, d.resource, round(d.share, 3)) for d in slices] == [
        ("cuda:0/mig:MIG-aaaa", "cuda:0", round(60 / 132, 3)), ("cuda:0/mig:MIG-bbbb", "cuda:0", round(16 / 132, 3))]
    assert slices[1].memory_bytes == 9_984 << 20 and slices[1].kind is DeviceKind.GPU


@pytest.mark.parametrize(("mode", "slots", "fragment"), [
    (0, {}, "MIG mode is off"), (1, {}, "no MIG instance exists"), (-1, {}, "no MIG mode")])
def test_no_mig_instances_says_why(mode: int, slots: dict, fragment: str) -> None:
    found, why = mig_instances(FakeNvml(mode, slots), None, 0)
    assert found == [] and fragment in why


def test_nvml_on_this_machine_answers_or_says_why() -> None:
    nvml, why = open_nvml()
    assert (nvml is None) == bool(why)
    if nvml is not None:
        nvml.nvmlShutdown()


def test_mps_daemon_is_detected_from_its_pipe_directory_without_starting_anything() -> None:
    pipes = {"/run/mine/control"}
    found = mps_daemon({"CUDA_MPS_PIPE_DIRECTORY": "/run/mine"}, pipes.__contains__, lambda _: "/usr/bin/x")
    assert found == MpsDaemon("/run/mine", "")
    assert mps_daemon({}, {f"{DEFAULT_MPS_PIPE_DIR}/control"}.__contains__, lambda _: None).pipe_dir == \
        DEFAULT_MPS_PIPE_DIR
    idle = mps_daemon({}, lambda _: False, lambda _: "/usr/bin/nvidia-cuda-mps-control")
    assert idle.pipe_dir is None and "not running" in idle.reason
    absent = mps_daemon({}, lambda _: False, lambda _: None)
    assert absent.pipe_dir is None and "not installed" in absent.reason
    gpu = DeviceInfo("cuda:0", DeviceKind.GPU, "torch", "H100", 1, 80 << 30)
    shares = slice_devices(gpu, 132, [], MpsDaemon("/run/mine", ""))
    assert [(d.id, d.share) for d in shares] == [("cuda:0/mps:25", 0.25), ("cuda:0/mps:50", 0.5)]
    assert slice_devices(gpu, 132, [], idle) == []


def test_inside_its_process_a_slice_is_the_device_cuda_shows_it_as() -> None:
    from pearl.adapters.slices import inner_device

    assert inner_device(D("cuda:1/mig:MIG-aaaa")) == D("cuda:0")  # CUDA_VISIBLE_DEVICES leaves the instance alone
    assert inner_device(D("cuda:1/mps:25")) == D("cuda:1")  # an MPS client sees the GPU, limited to its share
    assert inner_device(D("cuda:1")) == D("cuda:1") and inner_device(D("cpu")) == D("cpu")


def test_slice_env_names_the_mig_instance_or_the_mps_share() -> None:
    assert slice_env(D("cuda:0")) == {} and slice_env(D("cpu")) == {}
    assert slice_env(D("cuda:0/mig:MIG-aaaa"), {}) == {"CUDA_VISIBLE_DEVICES": "MIG-aaaa"}
    env = {"CUDA_MPS_PIPE_DIRECTORY": "/run/mine", "CUDA_MPS_LOG_DIRECTORY": "/run/mine-log"}
    assert slice_env(D("cuda:1/mps:30"), env) == {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30",
                                               "CUDA_MPS_PIPE_DIRECTORY": "/run/mine",
                                               "CUDA_MPS_LOG_DIRECTORY": "/run/mine-log"}


def test_check_slice_refuses_what_the_machine_lacks() -> None:
    present = [D(d) for d in ("cpu", "cuda:0", "cuda:0/mig:MIG-aaaa", "cuda:1", "cuda:1/mps:25", "cuda:1/mps:50")]
    check_slice(D("cuda:0/mig:MIG-aaaa"), present, [])
    check_slice(D("cuda:1/mps:30"), present, [])  # the daemon runs: any percentage
    with pytest.raises(DeviceError, match="cuda:0/mig:MIG-zzzz does not exist.*MIG mode"):
        check_slice(D("cuda:0/mig:MIG-zzzz"), present, ["mig: MIG mode is off"])
    with pytest.raises(DeviceError, match="cuda:0/mps:30 does not exist"):
        check_slice(D("cuda:0/mps:30"), present, [])


@pytest.mark.parametrize(("device", "fragment"), [
    ("cuda:0/mps:101", "from 1 to 100"), ("cuda:0/mps:0", "from 1 to 100"),
    ("cuda:0/mig:MIG-0000", "does not exist on this machine")])
def test_cli_refuses_bad_slices(capsys, device: str, fragment: str) -> None:
    import torch

    if device.endswith("MIG-0000") and torch.cuda.is_available():
        pytest.skip("a GPU machine might list slices: the error is tested with synthetic answers above")
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "100",
                             "--device", device)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0]


def test_devices_says_why_there_are_no_slices(capsys) -> None:
    import torch

    code, out, _ = run_cli(capsys, "devices")
    assert code == 0
    missing = out.split("missing:", 1)[1] if "missing:" in out else ""
    if not torch.cuda.is_available():  # no GPU: the slices line says there is none to slice
        assert "slices" in missing and "slices of a CUDA GPU, and there is none" in missing
    elif "/mig:" not in out:  # a GPU without MIG instances: NVML's answer, or why NVML cannot give one
        assert "mig " in missing or "mig\t" in missing or "  mig" in missing


# --------------------------------------------------------------------------- descriptors and what-if slices
def test_gpu_descriptors_list_their_mig_profiles() -> None:
    from pearl.descriptors import DEVICES_DIR, MigProfile, load_descriptor

    h100 = load_descriptor(DEVICES_DIR / "nvidia-h100-sxm5-80gb.toml")
    assert h100.gpu_sms == 132 and h100.mig[0] == MigProfile("1g.10gb", 16, 1, 7)
    assert [m.name for m in h100.mig] == ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    a100 = load_descriptor(DEVICES_DIR / "nvidia-a100-pcie-40gb.toml")
    assert (a100.gpu_sms, a100.mig[0], a100.mig[-1].sms) == (108, MigProfile("1g.5gb", 14, 1, 7), 98)
    assert load_descriptor(DEVICES_DIR / "nvidia-h200-sxm-141gb.toml").mig[0].name == "1g.18gb"
    assert load_descriptor(DEVICES_DIR / "amd-epyc-7763.toml").mig == ()


@pytest.mark.parametrize(("mig", "fragment"), [
    ('gpu_sms = 132\nprofiles = [{ name = "1g", sms = 16, memory_eighths = 1, instances = 7 }]', "like 1g.10gb"),
    ('gpu_sms = 132\nprofiles = [{ name = "1g.10gb", sms = 200, memory_eighths = 1, instances = 7 }]',
     "sms' must be a whole number from 1 to 132"),
    ('gpu_sms = 132\nprofiles = [{ name = "1g.10gb", sms = 16, memory_eighths = 9, instances = 7 }]',
     "memory_eighths"),
    ("gpu_sms = 132\nprofiles = []", "must list"), ('gpu_sms = 132\nprofile = []', "did you mean")])
def test_bad_mig_tables_name_the_field(tmp_path, mig: str, fragment: str) -> None:
    from pearl.descriptors import DEVICES_DIR, DescriptorError, load_descriptor

    text = (DEVICES_DIR / "nvidia-h100-sxm5-80gb.toml").read_text().split("\n[mig]")[0]
    path = tmp_path / "gpu.toml"
    path.write_text(text + "\n[mig]\n" + mig + "\n")
    with pytest.raises(DescriptorError, match=fragment):
        load_descriptor(path)


def test_what_if_gpu_offers_its_slices_modelled_from_the_whole() -> None:
    from pearl.roofline import kernel_work, roofline_time
    from pearl.descriptors import DEVICES_DIR, load_descriptor
    from pearl.profile.format import Profile, Workload, parse_profile, workload_key
    from pearl.profiler.whatif import MPS_SHARES, add_what_if

    h100 = load_descriptor(DEVICES_DIR / "nvidia-h100-sxm5-80gb.toml")
    key = workload_key("dqn", "CartPole-v1", 4, 2, (256, 256))
    profile = Profile("0", "2026-01-01T00:00:00+00:00", "quick", {"cpu": "x", "cores": 2})
    profile.workloads = [Workload(key, "dqn", "CartPole-v1", 4, 2, (256, 256), 64, 100_000)]
    whole = add_what_if(profile, h100)
    ids = [d.id for d in profile.devices]
    # 7g.80gb is all of the H100 (132 SMs, 8 eighths): the whole device stands for it
    assert ids == [whole, *(f"{whole}/mig:{m.name}" for m in h100.mig[:-1]), *(f"{whole}/mps:{p}" for p in MPS_SHARES)]
    small = profile.device(f"{whole}/mig:1g.10gb")
    assert (small.shares, small.share, small.instances, small.source) == (whole, 16 / 132, 7, "modelled")
    assert small.memory_bytes == h100.figures["memory_bytes"] // 8
    timing = {(k.device, k.kernel, k.batch): k.median_s for k in profile.kernels}
    work = kernel_work("learn", profile.workloads[0], 64)
    f = h100.figures
    expect = work.launches * f["launch_latency_s"] + max(work.flops / (f["fp32_peak_flops"] * 16 / 132),
                                                         work.bytes / (f["memory_bandwidth_bytes_per_s"] / 8))
    assert timing[(small.id, "learn", 64)] == pytest.approx(expect)
    assert timing[(small.id, "learn", 64)] > timing[(whole, "learn", 64)] == roofline_time(work, f)
    # the slices survive a round trip through the file
    again = parse_profile(profile.to_dict(), "p.json")
    assert again.device(small.id) == small and again.device(f"{whole}/mps:25").instances == 4


# --------------------------------------------------------------------------- running on slices
def test_actor_processes_start_with_their_slice_environment() -> None:
    from pearl.runtime.actor_process import process_env

    base = {"PATH": "/bin", "CUDA_MPS_PIPE_DIRECTORY": "/run/mine"}
    assert process_env(D("cpu"), base) == base
    mig = process_env(D("cuda:0/mig:MIG-aaaa"), base)
    assert mig["CUDA_VISIBLE_DEVICES"] == "MIG-aaaa" and mig["PATH"] == "/bin"
    mps = process_env(D("cuda:0/mps:10"), base)
    assert (mps["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], mps["CUDA_MPS_PIPE_DIRECTORY"]) == ("10", "/run/mine")
    assert "CUDA_VISIBLE_DEVICES" not in mps  # an MPS client sees the GPU itself, limited to its share


def test_the_run_record_names_each_roles_slice() -> None:
    from pearl.runtime.job import Placement
    from pearl.training.plan_checks import role_slices

    assert role_slices(Placement.single(D("cpu")), 4) == {}
    record = role_slices(Placement(D("cuda:0/mps:10"), D("cuda:0/mps:50"), D("cuda:0/mps:50")), 4)
    assert record["actors"]["device"] == "cuda:0/mps:10" and record["actors"]["processes"] == 4
    assert record["actors"]["env"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "10"
    assert record["learner"]["env"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"


@pytest.mark.parametrize(("act", "learner", "actors", "sequential", "fragment"), [
    ("cuda:0/mps:30", ("cuda:0/mps:50", "cuda:0/mps:50"), 2, False, "sum to 110 %"),
    ("cuda:0/mps:25", ("cuda:0/mps:25", "cuda:0/mps:25"), 4, False, "sum to 125 %"),
    ("cpu", ("cuda:0/mps:50", "cuda:0/mig:MIG-a"), 1, False, "holds one slice"),
    ("cuda:0/mps:20", ("cuda:0/mps:50", "cuda:0/mps:50"), 1, True, "holds one slice"),
])
def test_slices_that_cannot_be_held_at_once_are_refused(act, learner, actors, sequential, fragment) -> None:
    from pearl.device import check_slice_use

    with pytest.raises(DeviceError, match=fragment):
        check_slice_use(D(act), tuple(map(D, learner)), actors, sequential)


def test_slices_that_fit_are_accepted() -> None:
    from pearl.device import check_slice_use

    check_slice_use(D("cuda:0/mps:10"), (D("cuda:0/mps:50"), D("cuda:0/mps:50")), 5)  # 5 × 10 + 50
    check_slice_use(D("cuda:0/mig:MIG-a"), (D("cuda:0/mig:MIG-b"), D("cuda:0/mig:MIG-b")), 8)
    check_slice_use(D("cuda:0/mps:25"), (D("cpu"), D("cpu")), 4)


def test_a_plan_on_slices_is_checked_before_training(capsys, tmp_path) -> None:
    import json

    from pearl.hostinfo import cpu_lanes, cpu_name
    from pearl.planner.plan import MAPPED

    mapping = {k: "cuda:0/mps:40" for k in MAPPED} | {"env_step": "cpu"}
    plan = {"schema": "pearl.plan/1", "pearl_version": "0", "created": "2026-01-01T00:00:00+00:00",
            "algo": "dqn", "env": "CartPole-v1", "objective": "throughput", "mapping": mapping,
            "profile": {"cpu": cpu_name(), "cores": cpu_lanes()},
            "actors": 2, "envs_per_actor": 1, "bottleneck": "role[learner]", "lanes": {},
            "predicted": {"env_steps_per_s": 1.0, "updates_per_s": 1.0, "learner_samples_per_s": 1.0,
                          "period_s": 1.0}}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    code, _, err = run_cli(capsys, "train", "--plan", str(path), "--steps", "100")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and "120 %" in lines[0], err
    mapping["act"] = "cuda:0/mig:MIG-00000000-0000-0000-0000-000000000000"
    mapping.update({k: "cpu" for k in ("replay_insert", "replay_sample", "priority_update", "learn")})
    path.write_text(json.dumps(plan))
    code, _, err = run_cli(capsys, "train", "--plan", str(path), "--steps", "100")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "does not exist on this machine" in lines[0], err


def test_a_slice_of_a_measured_gpu_is_modelled_from_its_timings() -> None:
    from pearl.roofline import kernel_work
    from pearl.profile.format import (DeviceEntry, KernelTiming, Power, Profile, Transfer, WeightSyncTiming,
                                      Workload, workload_key)
    from pearl.profiler.whatif import add_slice_of

    key = workload_key("dqn", "CartPole-v1", 4, 2, (256, 256))
    workload = Workload(key, "dqn", "CartPole-v1", 4, 2, (256, 256), 64, 100_000)
    gpu = DeviceEntry("cuda:0", DeviceKind.GPU, "torch", "NVIDIA H100 80GB HBM3", 1, 80 << 30, "measured")
    profile = Profile("0", "2026-01-01T00:00:00+00:00", "quick", {"cpu": "x", "cores": 2}, [gpu], [workload])
    profile.kernels = [KernelTiming(key, "learn", "cuda:0", 64, 1e-3, 1e-3, 1e-3, 5, "measured"),
                       KernelTiming(key, "act", "cuda:0", 1, 1e-5, 1e-5, 1e-5, 5, "measured")]
    profile.transfers = [Transfer("cuda:0", "h2d", 1e-5, 2e10, "measured")]
    profile.power = [Power("cuda:0", 70.0, 700.0, "measured", "nvml")]
    profile.weight_sync = [WeightSyncTiming(key, "cuda:0", 1e-4, 1e-4, 5, "measured")]
    entry = add_slice_of(profile, gpu, "cuda:0/mps:25", "H100 MPS 25 %", 80 << 30, 0.25, 5e-6)
    assert (entry.shares, entry.share, entry.source, entry.resource) == ("cuda:0", 0.25, "modelled", "cuda:0")
    times = {k.kernel: k.median_s for k in profile.kernels if k.device == entry.id}
    fixed = kernel_work("learn", workload, 64).launches * 5e-6
    assert times["learn"] == pytest.approx(fixed + (1e-3 - fixed) / 0.25)
    assert times["act"] >= 1e-5  # launch-bound: never faster than on the whole GPU
    assert all(k.source == "modelled" for k in profile.kernels if k.device == entry.id)
    assert [t.device for t in profile.transfers] == ["cuda:0", entry.id]
    assert [(p.device, p.source) for p in profile.power] == [("cuda:0", "measured"), (entry.id, "modelled")]


# --------------------------------------------------------------------------- profiling slices
def _synthetic_gpu_profile(gpus: tuple[str, ...]):
    """A profile of one DQN workload with measured whole GPUs `gpus` (a learn and an act timing, a transfer,
    power), as `pearl profile` has it when it comes to the slices."""
    from pearl.profile.format import DeviceEntry, KernelTiming, Power, Profile, Transfer, Workload, workload_key

    key = workload_key("dqn", "CartPole-v1", 4, 2, (256, 256))
    profile = Profile("0", "2026-01-01T00:00:00+00:00", "quick", {"cpu": "x", "cores": 2})
    profile.workloads = [Workload(key, "dqn", "CartPole-v1", 4, 2, (256, 256), 64, 100_000)]
    for gpu in gpus:
        profile.devices.append(DeviceEntry(gpu, DeviceKind.GPU, "torch", "NVIDIA H100 80GB HBM3", 1, 80 << 30,
                                           "measured"))
        profile.kernels += [KernelTiming(key, "learn", gpu, 64, 1e-3, 1e-3, 1e-3, 5, "measured"),
                            KernelTiming(key, "act", gpu, 1, 1e-5, 1e-5, 1e-5, 5, "measured")]
        profile.transfers.append(Transfer(gpu, "h2d", 1e-5, 2e10, "measured"))
        profile.power.append(Power(gpu, 70.0, 700.0, "measured", "nvml"))
    return profile


@pytest.fixture(scope="module")
def child_profile():
    """The cpu profiled by a real child process, started with a variable this process does not have."""
    import os
    import uuid

    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.slices import profile_in_child

    token = uuid.uuid4().hex
    assert "PEARL_TEST_CHILD_PROBE" not in os.environ
    return token, profile_in_child("cpu", {"PEARL_TEST_CHILD_PROBE": token},
                                   ProfileOptions(quick=True, algos=("dqn",), what_if=("nvidia-h100-sxm5-80gb",)))


def test_a_device_is_profiled_in_a_child_process_started_with_the_environment_given(child_profile) -> None:
    from pearl.kernels import DEVICE_KERNELS, PRIORITIZED_SAMPLE

    token, child = child_profile
    [entry] = child.devices
    # the child read the variable from its own environment (this process never had it) into its entry
    assert entry.id == "cpu" and entry.process_env == (("PEARL_TEST_CHILD_PROBE", token),)
    assert {k.kernel for k in child.kernels} == {*DEVICE_KERNELS, PRIORITIZED_SAMPLE}
    assert all(k.device == "cpu" and k.source == "measured" and k.median_s > 0 for k in child.kernels)
    assert [t.device for t in child.in_situ] == [t.device for t in child.weight_sync] == ["cpu"]
    # the parent keeps env steps, power, slices and what-if devices: the child measures none of them
    assert child.env_step == [] and child.power == [] and [d.id for d in child.devices] == ["cpu"]


def test_a_childs_figures_are_stored_under_the_slice_labelled_measured(child_profile) -> None:
    from pearl.profile.format import parse_profile
    from pearl.profiler.slices import adopt

    token, child = child_profile
    profile = _synthetic_gpu_profile(("cuda:0",))
    whole = profile.device("cuda:0")
    info = DeviceInfo("cuda:0/mps:25", DeviceKind.GPU, "torch", "NVIDIA H100 80GB HBM3", 1, 80 << 30,
                      share=0.25)
    entry = adopt(profile, child, "cpu", info, whole)
    assert (entry.source, entry.shares, entry.share, entry.instances) == ("measured", "cuda:0", 0.25, 4)
    assert dict(entry.process_env) == {"PEARL_TEST_CHILD_PROBE": token}
    mine = {(k.kernel, k.batch): (k.median_s, k.source) for k in profile.kernels if k.device == info.id}
    assert mine == {(k.kernel, k.batch): (k.median_s, "measured") for k in child.kernels}
    assert [t.device for t in profile.in_situ] == [t.device for t in profile.weight_sync] == [info.id]
    assert [(p.device, p.source) for p in profile.power] == [("cuda:0", "measured"), (info.id, "measured")]
    again = parse_profile(profile.to_dict(), "p.json")  # process_env survives the file
    assert again.device(info.id) == entry and again.device("cuda:0").process_env == ()


def test_slices_that_exist_are_measured_and_one_that_cannot_be_is_modelled_saying_why() -> None:
    """MIG instances from synthetic NVML answers on two GPUs: each is measured in a real child process, which
    on a machine without that instance fails; the slice of the GPU with a descriptor is then modelled from the
    GPU (labelled so), the other left out, and both reasons are told."""
    from pearl.descriptors import DEVICES_DIR, load_descriptor
    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.slices import add_slices, slices_to_profile

    found = []
    for index, slots in ((0, {3: H100_SLOTS[3]}), (1, {0: ("MIG-cccc", "H100 MIG 3g.40gb", 60, 40_192)})):
        gpu = DeviceInfo(f"cuda:{index}", DeviceKind.GPU, "torch", "NVIDIA H100 80GB HBM3", 1, 80 << 30)
        migs, _ = mig_instances(FakeNvml(1, slots), None, index)
        found += [gpu, *slice_devices(gpu, 132, migs, MpsDaemon(None, "not running"))]
    found.append(DeviceInfo("cpu", DeviceKind.CPU, "torch", "EPYC", 2, 1 << 30))
    # which slices: those of a measured GPU that --device (when given) names
    assert [d.id for d in slices_to_profile(found, ["cuda:0", "cuda:1", "cpu"], None)] == \
        ["cuda:0/mig:MIG-bbbb", "cuda:1/mig:MIG-cccc"]
    assert [d.id for d in slices_to_profile(found, ["cuda:1", "cpu"], None)] == ["cuda:1/mig:MIG-cccc"]
    assert slices_to_profile(found, ["cuda:0", "cuda:1", "cpu"], ("cpu", "cuda:1"))[0].id == "cuda:1/mig:MIG-cccc"
    assert slices_to_profile(found, ["cpu"], ("cpu",)) == []

    profile = _synthetic_gpu_profile(("cuda:0", "cuda:1"))
    h100 = load_descriptor(DEVICES_DIR / "nvidia-h100-sxm5-80gb.toml")
    wholes = {"cuda:0": (profile.device("cuda:0"), h100), "cuda:1": (profile.device("cuda:1"), None)}
    warnings, labels = [], []
    add_slices(profile, wholes, slices_to_profile(found, list(wholes), None),
               ProfileOptions(quick=True, algos=("dqn",)), labels.append, warnings.append)
    assert labels == ["slice cuda:0/mig:MIG-bbbb", "slice cuda:1/mig:MIG-cccc"]
    modelled = profile.device("cuda:0/mig:MIG-bbbb")
    assert (modelled.source, modelled.instances, modelled.memory_bytes) == ("modelled", 1, 9_984 << 20)
    assert {k.source for k in profile.kernels if k.device == modelled.id} == {"modelled"}
    assert "cuda:1/mig:MIG-cccc" not in {d.id for d in profile.devices}
    first, second = warnings
    # the child's own reason: it started with CUDA_VISIBLE_DEVICES=MIG-bbbb, where no cuda:0 exists
    assert first.startswith("cuda:0/mig:MIG-bbbb was not measured (its process exited with status 2: cannot "
                            "profile cuda:0") and "modelled from cuda:0's measurements" in first
    assert second.startswith("cuda:1/mig:MIG-cccc was not measured") and "left out" in second


@pytest.mark.cuda
def test_a_slice_of_this_gpu_is_measured_in_its_own_process() -> None:
    """On a GPU: the GPU profiled by a child limited by the MPS variable (CUDA ignores it without a daemon,
    and a daemon, when one runs, limits the child), the figures stored as a slice, labelled measured."""
    import torch

    from pearl.profiler.options import ProfileOptions
    from pearl.profiler.slices import adopt, profile_in_child

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    env = slice_env(D("cuda:0/mps:50"))
    child = profile_in_child("cuda:0", env, ProfileOptions(quick=True, algos=("dqn",)))
    assert dict(child.device("cuda:0").process_env) == env
    profile = _synthetic_gpu_profile(("cuda:0",))
    info = DeviceInfo("cuda:0/mps:50", DeviceKind.GPU, "torch", "GPU", 1, 80 << 30, share=0.5)
    entry = adopt(profile, child, "cuda:0", info, profile.device("cuda:0"))
    assert entry.source == "measured" and {k.source for k in profile.kernels if k.device == entry.id} == {"measured"}
