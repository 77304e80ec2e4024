"""Replay storage in torch tensors on the adapter's device, with the host-side `ReplayIndex` choosing slots.

The index (ring position, sum tree, priorities) is small bookkeeping and stays on the host in numpy; the
transitions live on the device, so a sampled batch is gathered where `learn` will read it. Only B slot
indices go host → device per sample, and only B TD errors come back for a priority update (none at all for
uniform replay). On the CPU the tensors are views of numpy arrays, so inserts are plain numpy writes. On a CUDA
device the gather is captured as a CUDA graph per batch size (`graphs.CapturedGather`), and its batches are
fixed buffers (`SampleBatch.fixed`) that a captured learn reads where they are.
"""

from __future__ import annotations

import numpy as np
import torch

from pearl.adapters.base import ReplayKernels, check_state, decode_json, encode_json, host_array
from pearl.adapters.torch.graphs import captured_gather, gather_eagerly
from pearl.algos.base import OffPolicyConfig
from pearl.replay import ReplayIndex
from pearl.types import EnvSpec, Params, PriorityUpdate, SampleBatch, TransitionBatch

FIELDS = ("obs", "action", "reward", "next_obs", "terminated")


class TorchReplay(ReplayKernels):
    def __init__(self, config: OffPolicyConfig, spec: EnvSpec, device: torch.device, device_id: str,
                 seed: int) -> None:
        cap = config.buffer_size
        self.device, self.device_id = device, device_id
        self.index = ReplayIndex(cap, prioritized=config.prioritized, alpha=config.alpha, eps=config.priority_eps)
        self.rng = np.random.default_rng(seed)
        shapes = {"obs": ((cap, spec.obs_dim), np.float32), "action": ((cap, *spec.action_shape), spec.action_dtype),
                  "reward": ((cap,), np.float32), "next_obs": ((cap, spec.obs_dim), np.float32),
                  "terminated": ((cap,), np.float32)}
        if device.type == "cpu":
            self._host = {k: np.zeros(shape, dtype=dt) for k, (shape, dt) in shapes.items()}
            self.store = {k: torch.from_numpy(v) for k, v in self._host.items()}
        else:
            self._host = None
            self.store = {k: torch.zeros(shape, dtype=_torch_dtype(dt), device=device)
                          for k, (shape, dt) in shapes.items()}
        # on a CUDA device the gather is a graph per batch size, into fixed buffers (graphs.CapturedGather)
        self.captured = captured_gather(self.store, FIELDS, config.prioritized, device)

    @property
    def size(self) -> int:
        return self.index.size

    def insert(self, batch: TransitionBatch) -> None:
        slots = self.index.reserve(len(batch))
        keep = slice(max(0, len(slots) - self.index.capacity), None)  # only the newest `capacity` survive
        slots = slots[keep]
        if self._host is not None:
            for name in FIELDS:
                self._host[name][slots] = getattr(batch, name)[keep]
            return
        where = torch.from_numpy(slots).to(self.device)
        for name in FIELDS:
            self.store[name][where] = torch.as_tensor(getattr(batch, name)[keep], device=self.device)

    def sample(self, batch_size: int, beta: float) -> SampleBatch:
        picked = self.index.sample(batch_size, self.rng, beta)
        if self.captured is not None:
            got, weights, fixed = self.captured(picked.indices, picked.weights)
        else:
            got, weights = gather_eagerly(self.store, FIELDS, picked.indices, picked.weights, self.device)
            fixed = False
        return SampleBatch(picked.indices, got["obs"], got["action"], got["reward"], got["next_obs"],
                           got["terminated"], weights, self.device_id, fixed)

    def update_priorities(self, update: PriorityUpdate) -> None:
        if self.index.prioritized:  # uniform replay: skip the device → host copy entirely
            self.index.update_priorities(update.indices, host_array(update.td_errors))


    def state_dict(self) -> Params:
        n = self.index.size
        out: Params = {name: host_array(self.store[name][:n]).copy() for name in FIELDS}
        out.update({f"index.{k}": np.asarray(v) for k, v in self.index.state_dict().items()})
        out["sampler"] = encode_json(self.rng.bit_generator.state)
        return out

    def load_state_dict(self, state: Params) -> None:
        if "index.size" not in state or "sampler" not in state:
            raise ValueError("replay state lacks 'index.size' or 'sampler'")
        n = int(state["index.size"])
        check_state(state, {name: (n, *self.store[name].shape[1:]) for name in FIELDS}, "replay")
        sampler = decode_json(state["sampler"])
        # the index checks its own fields (capacity, kind of replay, position) before it changes anything
        self.index.load_state_dict({k[len("index."):]: v for k, v in state.items() if k.startswith("index.")})
        self.rng.bit_generator.state = sampler
        for name in FIELDS:
            self.store[name][:n] = torch.as_tensor(np.asarray(state[name]), device=self.device,
                                                   dtype=self.store[name].dtype)


def _torch_dtype(dt: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dt)).dtype
