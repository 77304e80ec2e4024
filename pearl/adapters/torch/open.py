"""Opening a torch device: whole, or a GPU slice entered before CUDA starts in this process."""

from __future__ import annotations

from pathlib import Path

from pearl.adapters.base import Adapter
from pearl.device import DeviceId


def open_torch(device: DeviceId, threads: int | None, descriptor: str | Path | None) -> Adapter:
    from pearl.adapters.torch.adapter import TorchAdapter

    if device.slice is not None:
        from pearl.adapters.registry import check_slice_exists
        from pearl.adapters.slices import enter_slice, in_slice_env

        if not in_slice_env(device):  # a role's process the launcher started on it was checked there
            check_slice_exists(device)
            enter_slice(device)
    return TorchAdapter(device, threads)
