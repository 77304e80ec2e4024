"""The cpu and cuda device kinds, as the backend registry (`pearl.backends`) knows them. Imports no torch: the
functions named here are imported when a device of the kind is found or opened."""

from __future__ import annotations

from pearl.backends import Backend
from pearl.device import DeviceKind

#: learn in float32 or bf16-mixed; bf16 only where a bfloat16 product is at least as fast as a float32 one
PRECISIONS, CHECK = ("fp32", "bf16-mixed"), "pearl.adapters.torch.adapter:device_precision_problem"

#: the host's cores; RAPL reads its power and energy where the kernel exposes them
CPU = Backend(family="cpu", adapter="torch", id_form="cpu", requires="`pip install torch`",
              discover="pearl.adapters.torch.adapter:discover_cpu", open="pearl.adapters.torch.open:open_torch",
              collective="gloo", power="rapl", energy="pearl.adapters.energy:cpu_counter",
              what_if_kinds=(DeviceKind.CPU,), precisions=PRECISIONS,
              precision_check=CHECK)

#: an NVIDIA GPU (``cuda`` alone is ``cuda:0``) and its MIG instances and MPS shares; NVML reads its power
#: and its board's total energy; its act and learn run eagerly or captured as CUDA graphs
CUDA = Backend(family="cuda", adapter="torch", id_form="cuda:N", index_parts=1, default_index=(0,), slices=True,
               requires="`pip install torch` (a CUDA build)", discover="pearl.adapters.torch.adapter:discover_cuda",
               open="pearl.adapters.torch.open:open_torch", gpu=True, collective="gloo", power="nvml",
               energy="pearl.adapters.energy:cuda_counter",
               what_if_kinds=(DeviceKind.GPU,), precisions=PRECISIONS, precision_check=CHECK,
               implementations=("eager", "captured"))
