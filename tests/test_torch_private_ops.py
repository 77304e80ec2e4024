"""The two private torch calls the torch adapter makes, each checked against its public equivalent, so a torch
release that changes either fails here loudly instead of training wrongly.

Why they are kept (pearl/adapters/torch/nets.py says the same beside each call): on the 2-core EPYC VM, DQN
CartPole's Q-network (68,866 parameters, one thread), `torch._fused_adam_` on the flat parameter took 57 µs a
step against 103 µs for `torch.optim.Adam(fused=True)` on the same tensor, and `threshold_backward` 4.4 µs
against 30 µs for the mask-and-multiply spelling (64 × 256), medians of 5 alternating rounds: together about
a sixth of a 600 µs update.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pearl.adapters.torch.nets import MLP, FlatAdam, _relu_backward_  # noqa: E402


def test_flat_adam_matches_torch_optim_adam_step_for_step() -> None:
    torch.manual_seed(0)
    net = MLP([4, 32, 32, 2], torch.device("cpu"))
    net.flat.normal_()
    ours = FlatAdam(net, lr=1e-2)
    grad = net.grad  # the flat gradient FlatAdam steps with (it allocates it)
    reference = torch.nn.Parameter(net.flat.detach().clone())
    public = torch.optim.Adam([reference], lr=1e-2, betas=(0.9, 0.999), eps=1e-8)
    for step in range(6):
        grad.normal_()
        reference.grad = grad.clone()
        with torch.no_grad():
            ours.step()
        public.step()
        torch.testing.assert_close(net.flat, reference.detach(), rtol=1e-5, atol=1e-6,
                                   msg=lambda m, s=step: f"step {s}: torch._fused_adam_ changed: {m}")
    assert int(ours.step_count.item()) == 6


def test_relu_backward_matches_the_mask_spelling() -> None:
    torch.manual_seed(1)
    out = torch.relu(torch.randn(64, 256))
    grad = torch.randn(64, 256)
    expected = grad * (out > 0)
    got = _relu_backward_(grad.clone(), out)
    assert torch.equal(got, expected), "aten.threshold_backward changed its meaning"
