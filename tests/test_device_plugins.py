"""Device kinds from other packages (the `pearl.devices` entry-point group, pearl/backends.py): a kind installed
from outside pearl is found by `pearl devices`, profiled, planned on and trained on, with no edit to pearl. The
test kind `sim:N` is an accelerator simulated on the host's cores by torch's kernels: its adapter is the torch
adapter answering to another id, so every stage meets an id family it has never been told about. Broken plugins
are left out and say why; the registry refuses kinds that do not hold together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pearl.backends import Backend, DeviceKind, backends, find, register, unregister
from pearl.device import DeviceId
from pearl.errors import DeviceError

ROOT = Path(__file__).resolve().parent.parent

#: the kind's registration: importing it imports no torch, as pearl's own kinds' registrations do not
KIND = '''
from pearl.backends import Backend, DeviceKind

SIM = Backend(family="sim", adapter="torch", id_form="sim:N", index_parts=1, requires="`pip install torch`",
              discover="pearl_sim.adapter:discover", open="pearl_sim.adapter:open_sim", collective="gloo",
              what_if_kinds=(DeviceKind.GPU,))
'''

#: its adapter: torch's kernels on the host's cores; a GPU of its own resource, so a plan may offload to it
ADAPTER = '''
import torch

from pearl.adapters.base import Adapter, DeviceInfo
from pearl.adapters.torch.adapter import TorchAdapter
from pearl.device import DeviceKind


class SimAdapter(TorchAdapter):
    def __init__(self, device, threads=None):
        Adapter.__init__(self, str(device))
        self.device = torch.device("cpu")
        if threads is not None:
            torch.set_num_threads(threads)


def discover():
    return [DeviceInfo("sim:0", DeviceKind.GPU, "torch", "simulated accelerator", 1, 1 << 30)], []


def open_sim(device, threads, descriptor):
    if device.index[0] != 0:
        from pearl.errors import DeviceError

        raise DeviceError(f"{device} does not exist: this machine has sim:0")
    return SimAdapter(device, threads)
'''

#: a short DQN run: 600 env steps, 40 updates
SHORT = ("--steps", "600", "--set", "learning_starts=200", "--set", "train_freq=50", "--set", "gradient_steps=5",
         "--eval-episodes", "1", "--eval-every", "0")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder on the path holding an installed distribution with three `pearl.devices` entry points: the sim
    kind, one whose attribute does not exist, and one whose entry's name is not its family."""
    folder = tmp_path_factory.mktemp("site")
    package = folder / "pearl_sim"
    package.mkdir()
    (package / "__init__.py").write_text(KIND)
    (package / "adapter.py").write_text(ADAPTER)
    info = folder / "pearl_sim-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pearl-sim\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pearl.devices]\nsim = pearl_sim:SIM\nghost = pearl_sim:NOPE\n"
                                           "other = pearl_sim:SIM\n")
    return folder


def _pearl(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m pearl args` with pearl and `site` on PYTHONPATH, as an installed plugin would be."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)]), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "pearl", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=900)


@pytest.fixture(scope="module")
def planned(site, tmp_path_factory) -> tuple[Path, dict, dict]:
    """A quick DQN profile of cpu and sim:0, and a throughput plan from it."""
    folder = tmp_path_factory.mktemp("planned")
    done = _pearl(site, folder, "profile", "--quick", "--device", "cpu", "--device", "sim:0", "--algo", "dqn",
                  "--out", "profile.json")
    assert done.returncode == 0, done.stderr[-2000:]
    done = _pearl(site, folder, "plan", "--profile", "profile.json", "--algo", "dqn", "--env", "CartPole-v1",
                  "--out", "plan.json")
    assert done.returncode == 0, done.stderr[-2000:]
    return folder, json.loads((folder / "profile.json").read_text()), json.loads((folder / "plan.json").read_text())


def _record(runs: Path) -> tuple[dict, dict]:
    [run] = runs.iterdir()
    return json.loads((run / "config.json").read_text()), json.loads((run / "summary.json").read_text())


def test_devices_lists_the_plugins_kind_and_says_why_the_broken_ones_are_left_out(site, tmp_path) -> None:
    done = _pearl(site, tmp_path, "devices")
    assert done.returncode == 0, done.stderr
    found, missing = done.stdout.split("missing:\n")
    assert "  sim:0 " in found and "simulated accelerator" in found
    assert "ghost" in missing and "pearl_sim:NOPE failed to load (AttributeError" in missing
    assert "other" in missing and "registers family 'sim', not its entry's name" in missing


def test_the_profile_measures_the_plugins_device_and_the_planner_weighs_it(planned) -> None:
    _, profile, plan = planned
    [entry] = [d for d in profile["devices"] if d["id"] == "sim:0"]
    assert entry["adapter"] == "torch" and entry["kind"] == "gpu" and entry["source"] == "measured"
    timed = {k["kernel"] for k in profile["kernels"] if k["device"] == "sim:0" and k["median_s"] > 0
             and k["source"] == "measured"}
    assert {"act", "learn", "replay_insert", "replay_sample"} <= timed
    assert {b["device"] for b in plan["baselines"]} == {"cpu", "sim:0"}  # all-on-sim:0 is priced beside all-on-cpu
    assert set(plan["mapping"].values()) <= {"cpu", "sim:0"} and plan["mapping"]["env_step"] == "cpu"


def test_the_plan_trains_with_actor_processes_that_load_the_plugin(site, planned) -> None:
    folder, _, plan = planned
    done = _pearl(site, folder, "train", "--plan", "plan.json", *SHORT, "--runs-dir", "runs")
    assert done.returncode == 0, done.stderr[-2000:]
    config, summary = _record(folder / "runs")
    assert config["placement"] == plan["mapping"] and summary["updates"] > 0


def test_every_kernel_trains_on_the_plugins_device(site, tmp_path) -> None:
    done = _pearl(site, tmp_path, "train", "--algo", "dqn", "--env", "CartPole-v1", "--device", "sim:0",
                  "--actors", "2", *SHORT, "--runs-dir", "runs")
    assert done.returncode == 0, done.stderr[-2000:]
    config, summary = _record(tmp_path / "runs")
    assert set(config["placement"].values()) == {"sim:0", "cpu"} and config["placement"]["learn"] == "sim:0"
    assert summary["updates"] > 0


def test_an_id_of_the_plugins_kind_that_is_not_there_is_one_error_line(site, tmp_path) -> None:
    done = _pearl(site, tmp_path, "train", "--algo", "dqn", "--env", "CartPole-v1", "--device", "sim:3", *SHORT,
                  "--runs-dir", "runs")
    assert done.returncode == 2 and done.stderr.splitlines() == ["error: sim:3 does not exist: this machine has sim:0"]
    done = _pearl(site, tmp_path, "train", "--algo", "dqn", "--env", "CartPole-v1", "--device", "sim:0:1", *SHORT)
    assert done.returncode == 2 and done.stderr.startswith(
        "error: --device: unknown device 'sim:0:1': a sim id reads sim:N; ")


# ------------------------------------------------------------------------------------- the registry in-process
def test_a_kind_registered_at_run_time_reads_its_ids_and_is_asked_for_what_it_can_do() -> None:
    kind = register(Backend(family="tpu", adapter="torch", id_form="tpu:N:C", index_parts=2,
                            open="pearl_tpu:open", gpu=True))
    try:
        device = DeviceId.parse("tpu:1:3")
        assert device.index == (1, 3) and str(device) == "tpu:1:3" and device.backend is kind
        assert device.backend.gpu and not device.backend.collective and not device.is_what_if
        assert find("tpu") is kind and kind in backends()
        for bad in ("tpu", "tpu:1", "tpu:1:3/mps:50"):
            with pytest.raises(DeviceError):
                DeviceId.parse(bad)
        with pytest.raises(ValueError, match="already registered"):
            register(kind)
    finally:
        unregister("tpu")
    with pytest.raises(DeviceError, match="unknown device 'tpu:1:3'"):
        DeviceId.parse("tpu:1:3")


@pytest.mark.parametrize("fields, why", [
    ({"family": "Big-TPU"}, "lowercase letters and digits"),
    ({"named": True}, "integers or in a name, not both"),
    ({"open": ""}, "names its adapter and its open function"),
])
def test_a_kind_that_does_not_hold_together_is_refused(fields: dict, why: str) -> None:
    values = {"family": "tpu", "adapter": "torch", "id_form": "tpu:N", "index_parts": 1, "open": "m:f", **fields}
    with pytest.raises(ValueError, match=why):
        Backend(**values)


def test_pearls_own_kinds_answer_for_themselves() -> None:
    """What the stages ask, answered by the kinds' registrations rather than by their names."""
    cpu, cuda, opencl, whatif = (DeviceId.parse(t).backend for t in ("cpu", "cuda:0", "opencl:0:0", "whatif:x"))
    assert (cpu.gpu, cuda.gpu, opencl.gpu) == (False, True, False)
    assert (bool(cpu.collective), bool(cuda.collective), bool(opencl.collective)) == (True, True, False)
    assert (cpu.binaries, opencl.binaries, opencl.emulates, cuda.slices, cpu.slices) == (False, True, True, True, False)
    assert whatif.modelled and not cpu.modelled and DeviceId.parse("cuda") == DeviceId.parse("cuda:0")
    assert {cpu.adapter, cuda.adapter, opencl.adapter} == {"torch", "opencl"}
    assert DeviceKind.FPGA in opencl.what_if_kinds and DeviceKind.GPU in cuda.what_if_kinds
