"""A plain numpy re-statement of the DQN and DDPG updates, in float64 with hand-written backprop and Adam.

It shares no code with the adapters: it is the maths as the algorithm docstrings state it, written out once
more, so the adapters' `learn` can be checked against it from the same weights on the same batches.
"""

from __future__ import annotations

import numpy as np


def n_layers(params: dict, net: str) -> int:
    return sum(1 for k in params if k.startswith(f"{net}.") and k.endswith(".weight"))


def forward(params: dict, net: str, x: np.ndarray, tanh_out: bool = False):
    """Output and the cache backward needs: inputs of every layer and pre-activations."""
    h, inputs, pre = x, [], []
    count = n_layers(params, net)
    for i in range(count):
        inputs.append(h)
        z = h @ params[f"{net}.{i}.weight"].T + params[f"{net}.{i}.bias"]
        pre.append(z)
        h = np.maximum(z, 0.0) if i < count - 1 else (np.tanh(z) if tanh_out else z)
    return h, (inputs, pre, h)


def backward(params: dict, net: str, cache, grad_out: np.ndarray, tanh_out: bool = False):
    """Gradients of every parameter of `net`, and the gradient with respect to the input."""
    inputs, pre, out = cache
    g = grad_out * (1.0 - out**2) if tanh_out else grad_out
    grads = {}
    for i in reversed(range(len(inputs))):
        grads[f"{net}.{i}.weight"] = g.T @ inputs[i]
        grads[f"{net}.{i}.bias"] = g.sum(axis=0)
        g = g @ params[f"{net}.{i}.weight"]
        if i > 0:
            g = g * (pre[i - 1] > 0)
    return grads, g


class Adam:
    def __init__(self, lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> None:
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps
        self.m: dict = {}
        self.v: dict = {}
        self.t = 0

    def step(self, params: dict, grads: dict) -> None:
        self.t += 1
        for k, g in grads.items():
            self.m[k] = self.b1 * self.m.get(k, 0.0) + (1 - self.b1) * g
            self.v[k] = self.b2 * self.v.get(k, 0.0) + (1 - self.b2) * g * g
            m_hat = self.m[k] / (1 - self.b1**self.t)
            v_hat = self.v[k] / (1 - self.b2**self.t)
            params[k] = params[k] - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


def clip_global_norm(grads: dict, max_norm: float) -> dict:
    total = np.sqrt(sum(float(np.sum(g * g)) for g in grads.values()))
    scale = min(1.0, max_norm / (total + 1e-6))
    return {k: g * scale for k, g in grads.items()}


class DQNReference:
    def __init__(self, params: dict, lr: float, gamma: float, target_every: int, max_grad_norm: float, huber: bool):
        self.p = {k: v.astype(np.float64) for k, v in params.items()}
        self.opt = Adam(lr)
        self.gamma, self.target_every, self.max_grad_norm, self.huber = gamma, target_every, max_grad_norm, huber
        self.updates = 0

    def learn(self, obs, action, reward, next_obs, terminated, weights) -> np.ndarray:
        target = {k.replace("q_target.", "q."): v for k, v in self.p.items() if k.startswith("q_target.")}
        next_q, _ = forward(target, "q", next_obs)
        y = reward + self.gamma * (1.0 - terminated) * next_q.max(axis=1)
        out, cache = forward(self.p, "q", obs)
        rows = np.arange(len(action))
        q = out[rows, action]
        diff = q - y
        dloss_dq = np.clip(diff, -1.0, 1.0) if self.huber else 2.0 * diff
        grad_out = np.zeros_like(out)
        grad_out[rows, action] = weights * dloss_dq / len(action)
        grads, _ = backward(self.p, "q", cache, grad_out)
        if self.max_grad_norm > 0:
            grads = clip_global_norm(grads, self.max_grad_norm)
        self.opt.step(self.p, grads)
        self.updates += 1
        if self.updates % self.target_every == 0:
            for k in list(self.p):
                if k.startswith("q."):
                    self.p[k.replace("q.", "q_target.", 1)] = self.p[k].copy()
        return y - q


class DDPGReference:
    def __init__(self, params: dict, lr: float, gamma: float, tau: float):
        self.p = {k: v.astype(np.float64) for k, v in params.items()}
        self.actor_opt, self.critic_opt = Adam(lr), Adam(lr)
        self.gamma, self.tau = gamma, tau

    def _net(self, name: str, as_name: str) -> dict:
        return {k.replace(f"{name}.", f"{as_name}.", 1): v for k, v in self.p.items() if k.startswith(f"{name}.")}

    def learn(self, obs, action, reward, next_obs, terminated, weights) -> np.ndarray:
        b, obs_dim = obs.shape
        next_a, _ = forward(self._net("actor_target", "actor"), "actor", next_obs, tanh_out=True)
        next_q, _ = forward(self._net("critic_target", "critic"), "critic", np.concatenate([next_obs, next_a], 1))
        y = reward + self.gamma * (1.0 - terminated) * next_q[:, 0]
        q_out, cache = forward(self.p, "critic", np.concatenate([obs, action], 1))
        q = q_out[:, 0]
        grads, _ = backward(self.p, "critic", cache, (2.0 * weights * (q - y) / b)[:, None])
        self.critic_opt.step(self.p, grads)

        a, actor_cache = forward(self.p, "actor", obs, tanh_out=True)
        _, critic_cache = forward(self.p, "critic", np.concatenate([obs, a], 1))
        _, d_input = backward(self.p, "critic", critic_cache, np.full((b, 1), -1.0 / b))
        actor_grads, _ = backward(self.p, "actor", actor_cache, d_input[:, obs_dim:], tanh_out=True)
        self.actor_opt.step(self.p, actor_grads)

        for net in ("actor", "critic"):
            for k in [k for k in self.p if k.startswith(f"{net}.")]:
                t = k.replace(f"{net}.", f"{net}_target.", 1)
                self.p[t] = self.p[t] + self.tau * (self.p[k] - self.p[t])
        return y - q
