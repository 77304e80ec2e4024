"""Build the OpenCL program for a device once, save its binary, and write a descriptor that names it.

This is the step an FPGA toolchain performs offline for a board; for a CPU or GPU OpenCL device it lets the
binary path (hash and target checks, no run-time compilation) be used and tested on any machine.
"""

from __future__ import annotations

from pathlib import Path

from pearl.adapters.opencl.runtime import build_from_source, find_device, program_binary, sha256_file
from pearl.descriptors import FIGURES, DeviceDescriptor, load_descriptor
from pearl.fileio import write_atomic
from pearl.kernels import DEVICE_KERNELS


def build_binary(device_id: str, base: str | Path, out: str | Path) -> tuple[Path, Path]:
    """Compile for device_id, write the binary to out and `<out>.toml` (base's device and figures + [binary])."""
    import pyopencl as cl

    device = find_device(device_id)
    program = build_from_source(cl.Context([device]))
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, program_binary(program))
    descriptor_path = out.with_name(out.name + ".toml")
    write_atomic(descriptor_path, descriptor_text(load_descriptor(base), out, device.name.strip()))
    return out, descriptor_path


def descriptor_text(base: DeviceDescriptor, binary: Path, target: str) -> str:
    lines = [f"# Written by `pearl build-binary` from {base.source.name} for {target}.",
             'schema = "pearl.device/1"', "", "[device]", f'kind = "{base.kind}"', f'vendor = "{base.vendor}"',
             f'model = "{base.model}"', "match = [" + ", ".join(f'"{m}"' for m in base.match) + "]", "",
             "[figures]"]
    lines += [f"{name} = {base.figures[name]!r}" for name in FIGURES]
    lines += ["", "[binary]", f'path = "{binary.name}"', f'sha256 = "{sha256_file(binary)}"', f'target = "{target}"',
              "kernels = [" + ", ".join(f'"{k}"' for k in DEVICE_KERNELS) + "]", ""]
    return "\n".join(lines)
