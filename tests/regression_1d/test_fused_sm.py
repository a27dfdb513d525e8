"""The fused SM kernel equals SM through PyTorch's triple backward (float64 reference)."""

import pytest
import torch

from ltr.ebm import build_method, losses
from ltr.models.toy1d import Toy1DEnsemble
from ltr.regression_1d import fused_sm
from ltr.regression_1d.ensemble import ensemble_loss, use_fused
from tests.regression_1d.kernels import assert_grads_close, random_ensemble

pytestmark = pytest.mark.skipif(not fused_sm.available(), reason="no C++ compiler to build the fused kernel")


def _reference(ens: Toy1DEnsemble, x, labels, weights, dtype, runs=None):
    """Per-example SM loss and the gradients of sum(weights * loss) via autograd, in ``dtype``."""
    ref = Toy1DEnsemble(ens.num_models).to(dtype)
    ref.load_state_dict(ens.state_dict())
    r, n, _ = labels.shape
    y = labels.to(dtype).unsqueeze(2).requires_grad_(True)
    f = ref.score_from_features(ref.x_features(x.to(dtype), runs=runs), y, runs=runs)
    (grad_y,) = torch.autograd.grad(f.sum(), y, create_graph=True)
    (hess,) = torch.autograd.grad(grad_y.sum(), y, create_graph=True)
    loss = losses.sm_loss(grad_y.reshape(r * n, 1), hess.reshape(r * n, 1), reduction="none").view(r, n)
    grads = torch.autograd.grad(
        (loss * weights.to(dtype)).sum(), list(ref.parameters()), materialize_grads=True
    )
    return loss, grads


@pytest.mark.parametrize("n", [16, 37])  # 37: not a multiple of the kernel's block of 16 examples
def test_fused_sm_loss_and_every_gradient_match_float64(n):
    ens = random_ensemble(3, seed=n)
    g = torch.Generator().manual_seed(n + 1)
    x, labels = torch.rand(3, n, 1, generator=g) * 6 - 3, torch.randn(3, n, 1, generator=g)
    weights = torch.randn(3, n, generator=g)  # per-example upstream gradient
    ref_loss, ref_grads = _reference(ens, x, labels, weights, torch.float64)
    loss = fused_sm.fused_sm_loss(ens, ens.x_features(x), labels)
    grads = torch.autograd.grad((loss * weights).sum(), list(ens.parameters()))
    assert loss.shape == (3, n)
    assert ref_loss.abs().max() > 0.5  # not a trivially small loss
    torch.testing.assert_close(loss.double(), ref_loss, rtol=1e-5, atol=1e-5)
    names = [name for name, _ in ens.named_parameters()]
    assert_grads_close(names, grads, ref_grads)
    assert all(g.abs().max() > 0 for name, g in zip(names, grads) if name != "fc4_xy_b")


def test_fused_sm_with_a_member_slice_and_without_grad():
    ens = random_ensemble(3, seed=1)
    runs = slice(2, 3)
    g = torch.Generator().manual_seed(2)
    x, labels = torch.rand(1, 5, 1, generator=g) * 6 - 3, torch.randn(1, 5, 1, generator=g)
    ref_loss, ref_grads = _reference(ens, x, labels, torch.ones(1, 5), torch.float64, runs=runs)
    loss = fused_sm.fused_sm_loss(ens, ens.x_features(x, runs=runs), labels, runs=runs)
    grads = torch.autograd.grad(loss.sum(), list(ens.parameters()))
    torch.testing.assert_close(loss.double(), ref_loss, rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, ref_grads, strict=True):
        assert got[:2].abs().max() == 0  # members outside the slice are untouched
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        loss_only = fused_sm.fused_sm_loss(ens, ens.x_features(x, runs=runs), labels, runs=runs)
    torch.testing.assert_close(loss_only, loss.detach(), rtol=0, atol=0)


def test_ensemble_sm_loss_fused_equals_plain_pytorch_path():
    assert use_fused("sm", "cpu")
    ens = Toy1DEnsemble(2, generators=[torch.Generator().manual_seed(k) for k in range(2)])
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(2, 20, 1, generator=g) * 6 - 3, torch.randn(2, 20, 1, generator=g)
    out = {}
    for fused in (False, True):
        loss = ensemble_loss(ens, build_method("sm"), x, y, generator=None, fused=fused)
        out[fused] = (loss, torch.autograd.grad(loss.sum(), list(ens.parameters()), materialize_grads=True))
    torch.testing.assert_close(out[True][0], out[False][0], rtol=1e-5, atol=1e-5)
    for got, want in zip(out[True][1], out[False][1], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
