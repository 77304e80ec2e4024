"""Build the OpenCL program for a device once, save its binary, and write a descriptor that names it.

This is the step an FPGA toolchain performs offline for a board; for a CPU or GPU OpenCL device it lets the
binary path (hash and target checks, no run-time compilation) be used and tested on any machine.
"""

from __future__ import annotations

from pathlib import Path

from pearl.adapters.opencl.runtime import build_from_source, find_device, program_binary, sha256_file
from pearl.descriptors import FIGURES, OPTIONAL_FIGURES, DeviceDescriptor, load_descriptor, toml_string
from pearl.fileio import write_atomic
from pearl.kernels import DEVICE_KERNELS


def build_binary(device_id: str, base: str | Path, out: str | Path) -> tuple[Path, Path]:
    """Compile for device_id, write the binary to out and `<out>.toml` (base's device and figures + [binary])."""
    import pyopencl as cl

    descriptor = load_descriptor(base)  # a bad descriptor fails before the compile, and writes nothing
    device = find_device(device_id)
    program = build_from_source(cl.Context([device]))
    out = Path(out).resolve()
    write_atomic(out, program_binary(program))
    descriptor_path = out.with_name(out.name + ".toml")
    write_atomic(descriptor_path, descriptor_text(descriptor, out, device.name.strip()))
    return out, descriptor_path


def descriptor_text(base: DeviceDescriptor, binary: Path, target: str) -> str:
    # TOML comments hold no control characters (a line break would end one): blank them in the names
    comment = "".join(" " if c < " " or c == "\x7f" else c
                      for c in f"Written by `pearl build-binary` from {base.source.name} for {target}.")
    lines = [f"# {comment}", 'schema = "pearl.device/1"', "", "[device]", f"kind = {toml_string(base.kind)}",
             f"vendor = {toml_string(base.vendor)}", f"model = {toml_string(base.model)}",
             "match = [" + ", ".join(toml_string(m) for m in base.match) + "]"]
    lines += [f"cores = {base.cores}"] if base.cores is not None else []
    lines += ["", "[figures]"]
    lines += [f"{name} = {base.figures[name]!r}" for name in (*FIGURES, *OPTIONAL_FIGURES) if name in base.figures]
    lines += ["", "[binary]", f"path = {toml_string(binary.name)}", f'sha256 = "{sha256_file(binary)}"',
              f"target = {toml_string(target)}", "kernels = [" + ", ".join(f'"{k}"' for k in DEVICE_KERNELS) + "]",
              ""]
    return "\n".join(lines)
