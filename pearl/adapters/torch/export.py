"""A trained policy as a standalone graph: raw observation in, the env's action out (`pearl export`).

The module is the policy network (Linear layers, ReLU between them) with the algorithm's greedy head
(`Algorithm.policy_head`: argmax, tanh, or tanh of the mean half of the outputs) and the evaluation's action
mapping folded in: low + (a + 1) / 2 · (high − low) for Box actions (pearl.envs.to_env_action), so the file
needs nothing of pearl to act. Observations are cast to float32, as the act kernels cast them. Written as
TorchScript (`torch.jit.trace`, loaded with `torch.jit.load`) or ONNX (torch's exporter; run with onnxruntime),
with the batch dimension left free.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path

import numpy as np
import torch

from pearl.errors import BackendMissing, ConfigError
from pearl.types import EnvSpec, Params

FORMATS = ("onnx", "torchscript")


class PolicyModule(torch.nn.Module):
    """obs (n, obs_dim) → actions (n,) int64 indices, or (n, action_dim) float64 env actions."""

    def __init__(self, params: Params, net: str, head: str, spec: EnvSpec) -> None:
        super().__init__()
        layers = []
        i = 0
        while f"{net}.{i}.weight" in params:
            w, b = params[f"{net}.{i}.weight"], params[f"{net}.{i}.bias"]
            layer = torch.nn.Linear(w.shape[1], w.shape[0])
            with torch.no_grad():
                layer.weight.copy_(torch.as_tensor(np.asarray(w, dtype=np.float32)))
                layer.bias.copy_(torch.as_tensor(np.asarray(b, dtype=np.float32)))
            layers.append(layer)
            i += 1
        self.layers = torch.nn.ModuleList(layers)
        self.head = head
        self.discrete = spec.discrete
        low = np.asarray(spec.action_low, dtype=np.float64) if not spec.discrete else np.zeros(1)
        high = np.asarray(spec.action_high, dtype=np.float64) if not spec.discrete else np.zeros(1)
        self.register_buffer("low", torch.as_tensor(low))
        self.register_buffer("span", torch.as_tensor(high - low))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.to(torch.float32)
        for k, layer in enumerate(self.layers):
            x = layer(x)
            if k < len(self.layers) - 1:
                x = torch.relu(x)
        if self.head == "argmax":
            return torch.argmax(x, dim=1)
        if self.head == "tanh-mean":
            x = x[:, : x.shape[1] // 2]
        a = torch.tanh(x).to(torch.float64)
        return self.low + 0.5 * (a + 1.0) * self.span


def policy_module(params: Params, net: str, head: str, spec: EnvSpec) -> PolicyModule:
    if head not in ("argmax", "tanh", "tanh-mean"):
        raise ConfigError("this algorithm declares no policy head (Algorithm.policy_head): it cannot be exported")
    return PolicyModule(params, net, head, spec).eval()


def write(module: PolicyModule, fmt: str, path: Path, obs_dim: int) -> None:
    """The module as a TorchScript or ONNX file at path (the batch dimension free). BackendMissing, with the
    install hint, when ONNX's exporter packages are absent."""
    example = torch.zeros(2, obs_dim, dtype=torch.float32)
    if fmt == "torchscript":
        with torch.no_grad(), warnings.catch_warnings():  # torch 2.10+ marks TorchScript deprecated; it still works
            warnings.simplefilter("ignore", DeprecationWarning)
            traced = torch.jit.trace(module, (example,), check_trace=False)
            traced.save(str(path))
        return
    if fmt != "onnx":
        raise ConfigError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
    for needed in ("onnx", "onnxscript"):
        try:
            __import__(needed)
        except ImportError:
            raise BackendMissing(f"--format onnx needs the {needed} package, which is not installed; "
                                 "`pip install \"pearl[onnx]\"` adds it (and onnxruntime to run the file)") from None
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:  # the exporter reports its progress on stdout and warns of things that do not concern this graph
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            program = torch.onnx.export(module, (example,), input_names=["obs"], output_names=["action"],
                                        dynamic_shapes=({0: torch.export.Dim("batch")},), dynamo=True)
        program.save(str(path))
    finally:
        quiet.setLevel(level)


def run_file(fmt: str, path: Path, obs: np.ndarray) -> np.ndarray:
    """The exported file's actions for a batch of observations, run as a user would: torch.jit.load, or an
    onnxruntime session (BackendMissing with the hint when onnxruntime is absent)."""
    batch = np.ascontiguousarray(obs, dtype=np.float32)
    if fmt == "torchscript":
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.load(str(path))(torch.as_tensor(batch)).numpy()
    try:
        import onnxruntime
    except ImportError:
        raise BackendMissing("checking an ONNX file needs onnxruntime, which is not installed; "
                             "`pip install \"pearl[onnx]\"` adds it") from None
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"obs": batch})[0]
