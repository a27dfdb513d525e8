"""The fused DSM kernel equals DSM through PyTorch's double backward (float64 reference and the trainer's path)."""

import pytest
import torch

from ltr.ebm import build_method, losses
from ltr.models.toy1d import Toy1DEnsemble
from ltr.regression_1d import fused_dsm
from ltr.regression_1d.ensemble import ensemble_loss, use_fused
from tests.regression_1d.kernels import assert_grads_close, random_ensemble

pytestmark = pytest.mark.skipif(not fused_dsm.available(), reason="no C++ compiler to build the fused kernel")

SIGMA = 0.2


def _inputs(r: int, n: int, m: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(r, n, 1, generator=g) * 6 - 3
    labels = torch.randn(r, n, 1, generator=g)
    noisy = labels.unsqueeze(2) + SIGMA * torch.randn(r, n, m, 1, generator=g)
    return x, labels, noisy


def _reference(ens: Toy1DEnsemble, x, labels, noisy, weights, dtype, runs=None):
    """Per-example DSM loss and the gradients of sum(weights * loss) via double backward, in ``dtype``."""
    ref = Toy1DEnsemble(ens.num_models).to(dtype)
    ref.load_state_dict(ens.state_dict())
    r, n, m, _ = noisy.shape
    y = noisy.to(dtype).requires_grad_(True)
    f = ref.score_from_features(ref.x_features(x.to(dtype), runs=runs), y, runs=runs)
    (grad_y,) = torch.autograd.grad(f.sum(), y, create_graph=True)
    loss = losses.dsm_loss(
        grad_y.reshape(r * n, m, 1),
        noisy.to(dtype).reshape(r * n, m, 1),
        labels.to(dtype).reshape(r * n, 1),
        SIGMA,
        reduction="none",
    ).view(r, n)
    grads = torch.autograd.grad(
        (loss * weights.to(dtype)).sum(), list(ref.parameters()), materialize_grads=True
    )
    return loss, grads


@pytest.mark.parametrize("m", [37, 64])  # 37: not a multiple of the kernel's block of 16
def test_fused_dsm_loss_and_every_gradient_match_float64(m):
    ens = random_ensemble(3, seed=m)
    x, labels, noisy = _inputs(3, 5, m, seed=m + 1)
    weights = torch.randn(3, 5, generator=torch.Generator().manual_seed(7))  # per-example upstream gradient
    ref_loss, ref_grads = _reference(ens, x, labels, noisy, weights, torch.float64)
    loss = fused_dsm.fused_dsm_loss(ens, ens.x_features(x), noisy, labels, SIGMA)
    grads = torch.autograd.grad((loss * weights).sum(), list(ens.parameters()))
    assert loss.shape == (3, 5)
    assert ref_loss.abs().max() > 1.0  # not a trivially small loss
    torch.testing.assert_close(loss.double(), ref_loss, rtol=2e-5, atol=1e-5)
    names = [name for name, _ in ens.named_parameters()]
    assert_grads_close(names, grads, ref_grads)
    # every parameter that f's y-derivative depends on gets a nonzero gradient (fc4_xy_b alone does not)
    assert all(g.abs().max() > 0 for name, g in zip(names, grads) if name != "fc4_xy_b")


def test_fused_dsm_with_a_member_slice_and_without_grad():
    ens = random_ensemble(4, seed=3)
    runs = slice(1, 3)
    x, labels, noisy = _inputs(2, 3, 20, seed=4)
    weights = torch.ones(2, 3)
    ref_loss, ref_grads = _reference(ens, x, labels, noisy, weights, torch.float64, runs=runs)
    loss = fused_dsm.fused_dsm_loss(ens, ens.x_features(x, runs=runs), noisy, labels, SIGMA, runs=runs)
    grads = torch.autograd.grad(loss.sum(), list(ens.parameters()))
    torch.testing.assert_close(loss.double(), ref_loss, rtol=2e-5, atol=1e-5)
    for got, want in zip(grads, ref_grads, strict=True):
        assert got[[0, 3]].abs().max() == 0  # members outside the slice are untouched
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        loss_only = fused_dsm.fused_dsm_loss(
            ens, ens.x_features(x, runs=runs), noisy, labels, SIGMA, runs=runs
        )
    torch.testing.assert_close(loss_only, loss.detach(), rtol=0, atol=0)


def test_fused_dsm_refuses_gradients_w_r_t_the_samples():
    ens = random_ensemble(1, seed=0)
    x, labels, noisy = _inputs(1, 2, 16, seed=0)
    with pytest.raises(ValueError, match="not differentiable"):
        fused_dsm.fused_dsm_loss(ens, ens.x_features(x), noisy.requires_grad_(True), labels, SIGMA)


def test_ensemble_dsm_loss_fused_equals_plain_pytorch_path():
    """Same generator state -> same noise draws -> same per-member loss and gradients on both paths."""
    assert use_fused("dsm", "cpu")
    ens = Toy1DEnsemble(3, generators=[torch.Generator().manual_seed(k) for k in range(3)])
    method = build_method("dsm", sigma=0.075, num_samples=50)
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(3, 8, 1, generator=g) * 6 - 3, torch.randn(3, 8, 1, generator=g)
    out = {}
    for fused in (False, True):
        loss = ensemble_loss(ens, method, x, y, generator=torch.Generator().manual_seed(5), fused=fused)
        out[fused] = (loss, torch.autograd.grad(loss.sum(), list(ens.parameters()), materialize_grads=True))
    torch.testing.assert_close(out[True][0], out[False][0], rtol=1e-5, atol=1e-4)
    for got, want in zip(out[True][1], out[False][1], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
