"""Whether an OpenCL device can work: a tiny kernel built from source, run, and its result checked.

A driver can list a device it cannot compile for (PoCL 3.0's LLVM 14 names a CPU newer than it knows
"generic" and then rejects that name) or one that computes wrong numbers; either way the device is found but
unusable, and pearl leaves it out with the reason instead of failing at its first kernel. Boards that run
precompiled binaries only (type ACCELERATOR) build nothing from source and are not probed here: their binary is
checked against its descriptor when it loads.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyopencl as cl

PROBE_N = 64


@dataclass(frozen=True)
class ProbeKernel:
    """The probe: OpenCL C source with a kernel `probe(__global float *x)` over PROBE_N floats, and the result it
    must leave, from the input arange(PROBE_N)."""

    source: str
    expect: Callable[[np.ndarray], np.ndarray]


#: exact in float32 for these inputs, so any difference is a wrong result, not rounding
PROBE = ProbeKernel("__kernel void probe(__global float *x) { int i = get_global_id(0); x[i] = x[i] * 2.0f + 1.0f; }",
                    lambda x: x * 2 + 1)


def probe_device(device: cl.Device, kernel: ProbeKernel | None = None) -> str:
    """'' when the device builds and runs the probe kernel and gets its result; else the step that failed and
    the library's message cut to its cause, and what to do."""
    kernel = kernel or PROBE
    try:
        ctx = cl.Context([device])
        queue = cl.CommandQueue(ctx)
    except cl.Error as exc:
        return f"no context or queue could be made on it: {_first_line(str(exc))}"
    try:
        with warnings.catch_warnings():  # a driver's chatty build log ("Compilation started") is no failure
            warnings.simplefilter("ignore", cl.CompilerWarning)
            program = cl.Program(ctx, kernel.source).build()
    except cl.Error as exc:
        return f"the OpenCL compiler failed to build a test kernel: {build_cause(str(exc))}; {build_advice(str(exc))}"
    x = np.arange(PROBE_N, dtype=np.float32)
    try:
        buffer = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
        program.probe(queue, (PROBE_N,), None, buffer)
        out = np.empty_like(x)
        cl.enqueue_copy(queue, out, buffer)
        queue.finish()
    except cl.Error as exc:
        return f"a test kernel failed to run: {_first_line(str(exc))}; update or replace the OpenCL driver"
    want = kernel.expect(np.arange(PROBE_N, dtype=np.float32))
    wrong = int(np.count_nonzero(out != want))
    if wrong:
        first = int(np.flatnonzero(out != want)[0])
        return (f"a test kernel computed wrong results ({wrong} of {PROBE_N} values; element {first} is "
                f"{float(out[first])}, expected {float(want[first])}); update or replace the OpenCL driver")
    return ""


_ERROR_LINE = re.compile(r"error:\s*(.+)")


def build_cause(log: str) -> str:
    """The compiler's first error in a build log (`unknown target CPU 'generic'`), else its first line."""
    for line in log.splitlines():
        match = _ERROR_LINE.search(line)
        if match:
            return match.group(1).strip()
    return _first_line(log)


def build_advice(log: str) -> str:
    """What to do about a build that failed."""
    if "unknown target CPU" in log:
        return ("this OpenCL driver's compiler (LLVM) is older than this CPU; `pip install \"pearl[opencl-cpu]\"` "
                "adds Intel's OpenCL CPU runtime, which builds for it")
    return "this OpenCL driver cannot compile for this device; update it, or install another"


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "no message"
