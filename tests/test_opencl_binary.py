"""The FPGA binary path, exercised on PoCL: build once, load through a descriptor, train; refuse bad binaries.
Also the OpenCL adapter's other user errors: each a typed exception from the API, one `error:` line from the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from opencl_support import first_opencl_device
from cli_support import run_cli
from pearl.descriptors import DescriptorError, load_descriptor

DEVICE = first_opencl_device()
from pearl.adapters.opencl import OpenCLAdapter  # noqa: E402
from pearl.adapters.opencl.binary import build_binary  # noqa: E402
from pearl.adapters.opencl.runtime import BinaryMismatch, ProgramBuildError, build_from_source  # noqa: E402
from pearl.errors import DeviceError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
POCL_DESCRIPTOR = ROOT / "devices" / "pocl-cpu.toml"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    return build_binary(DEVICE, POCL_DESCRIPTOR, tmp_path_factory.mktemp("bin") / "pearl.bin")


def edited(descriptor: Path, tmp_path: Path, **replace: str) -> Path:
    text = descriptor.read_text()
    for key, value in replace.items():
        text = re.sub(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
    out = tmp_path / "edited.toml"
    out.write_text(text)
    (tmp_path / descriptor.with_suffix("").name).write_bytes(descriptor.with_suffix("").read_bytes())
    return out


def test_binary_loads_through_its_descriptor_and_trains(capsys, built, tmp_path) -> None:
    binary, descriptor = built
    spec = load_descriptor(descriptor).binary
    assert spec.path == binary and len(spec.sha256) == 64 and spec.target
    code, out, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--device", DEVICE,
                             "--descriptor", str(descriptor), "--steps", "1200", "--eval-episodes", "1", "--json",
                             "--runs-dir", str(tmp_path))
    assert code == 0, err
    result = json.loads(out)
    # the schedule: 1,200 steps are 4 whole 256-step segments (+ 176); only the one ending at 1,024 passes
    # learning_starts (1,000), and it makes 128 updates
    assert result["device"] == DEVICE and result["updates"] == 128
    config = json.loads((Path(result["run_dir"]) / "config.json").read_text())
    assert config["descriptor"] == str(descriptor)


def test_tampered_binary_is_refused(capsys, built, tmp_path) -> None:
    binary, descriptor = built
    copy = tmp_path / binary.name
    data = bytearray(binary.read_bytes())
    data[len(data) // 2] ^= 0xFF
    copy.write_bytes(bytes(data))
    moved = tmp_path / descriptor.name
    moved.write_text(descriptor.read_text())
    with pytest.raises(BinaryMismatch, match="SHA-256"):
        OpenCLAdapter(DEVICE, load_descriptor(moved))
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--device", DEVICE,
                           "--descriptor", str(moved), "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and "refusing" in err
    assert not (tmp_path / "runs").exists()


def test_missing_binary(built, tmp_path) -> None:
    _, descriptor = built
    lonely = tmp_path / "lonely.toml"
    lonely.write_text(descriptor.read_text())
    with pytest.raises(BinaryMismatch, match="does not exist"):
        OpenCLAdapter(DEVICE, load_descriptor(lonely))


def test_binary_for_another_device(built, tmp_path) -> None:
    _, descriptor = built
    with pytest.raises(BinaryMismatch, match="built for"):
        OpenCLAdapter(DEVICE, load_descriptor(edited(descriptor, tmp_path, target='"Agilex 7"')))


def test_kernel_the_binary_lacks(built, tmp_path) -> None:
    from pearl.algos import preset
    from pearl.envs import env_spec

    _, descriptor = built
    adapter = OpenCLAdapter(DEVICE, load_descriptor(edited(descriptor, tmp_path, kernels='["act"]')))
    config, spec = preset("dqn", "CartPole-v1"), env_spec("CartPole-v1")
    with pytest.raises(BinaryMismatch, match="does not implement 'learn'"):
        adapter.make_learn(config, spec, {})


def test_float64_kernels_are_refused_on_a_binary(built) -> None:
    """A board's binary holds the float32 program only: kernels built from float64 parameters are refused,
    saying why, where a device that builds from source gets the double program."""
    import numpy as np

    from pearl.algos import preset
    from pearl.algos.params import init_params
    from pearl.envs import env_spec

    _, descriptor = built
    config, spec = preset("dqn", "CartPole-v1"), env_spec("CartPole-v1")
    params = {k: v.astype(np.float64) for k, v in init_params(config, spec, seed=0).items()}
    with pytest.raises(ValueError, match="precompiled float32 binary"):
        OpenCLAdapter(DEVICE, load_descriptor(descriptor)).make_learn(config, spec, params)
    assert OpenCLAdapter(DEVICE).make_learn(config, spec, params).get_params()["q.0.weight"].dtype == np.float64


def test_build_failure_shows_the_compiler_log() -> None:
    import pyopencl as cl

    from pearl.adapters.opencl.runtime import find_device

    ctx = cl.Context([find_device(DEVICE)])
    with pytest.raises(ProgramBuildError) as exc:
        build_from_source(ctx, "__kernel void broken(__global float *x) { x[0] = undeclared_name; }")
    assert "undeclared_name" in str(exc.value)


@pytest.mark.parametrize("device", ["opencl:0:99", "opencl:99:0", "opencl:zero"])
def test_absent_opencl_device(capsys, device: str, tmp_path) -> None:
    with pytest.raises(DeviceError):
        OpenCLAdapter(device)
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--device", device,
                           "--runs-dir", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ")


def test_descriptor_for_a_torch_device_is_refused(capsys, tmp_path) -> None:
    code, _, err = run_cli(capsys, "train", "--algo", "dqn", "--env", "CartPole-v1", "--device", "cpu",
                           "--descriptor", str(POCL_DESCRIPTOR), "--runs-dir", str(tmp_path))
    assert code == 2 and "--descriptor" in err


@pytest.mark.parametrize(("text", "field"), [
    ("", "schema"),
    ('schema = "pearl.device/1"\n', "[device]"),
    ("not toml = = =", "not valid TOML"),
])
def test_broken_descriptors_name_the_problem(tmp_path, text: str, field: str) -> None:
    path = tmp_path / "d.toml"
    path.write_text(text)
    with pytest.raises(DescriptorError) as exc:
        load_descriptor(path)
    assert str(path) in str(exc.value) and field in str(exc.value)


def test_descriptor_with_a_negative_figure(tmp_path) -> None:
    text = POCL_DESCRIPTOR.read_text().replace("peak_w = 35.0", "peak_w = -35.0")
    path = tmp_path / "neg.toml"
    path.write_text(text)
    with pytest.raises(DescriptorError, match="figures.peak_w"):
        load_descriptor(path)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("[figures]", "[figurs]", "did you mean 'figures'"),  # then [figures] is missing too; the typo is named first
    ("idle_w = 10.0", "idle_watts = 10.0\nidle_w = 10.0", "'figures.idle_watts'"),
    ("vendor = \"PoCL\"", "vendor = \"PoCL\"\nvendr = \"x\"", "did you mean 'device.vendor'"),
])
def test_misspelt_fields_are_named_not_ignored(tmp_path, old: str, new: str, message: str) -> None:
    path = tmp_path / "typo.toml"
    path.write_text(POCL_DESCRIPTOR.read_text().replace(old, new, 1))
    with pytest.raises(DescriptorError, match=message):
        load_descriptor(path)


def test_shipped_descriptors_load() -> None:
    for path in sorted((ROOT / "devices").glob("*.toml")):
        d = load_descriptor(path)
        assert d.figures["peak_w"] >= d.figures["idle_w"] > 0
    fpga = load_descriptor(ROOT / "devices" / "intel-pac-d5005.toml")
    assert fpga.kind == "fpga" and fpga.binary is not None and set(fpga.binary.kernels) >= {"act", "learn"}
