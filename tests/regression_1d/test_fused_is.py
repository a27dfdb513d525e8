"""The fused sampling-loss kernel equals the ltr.ebm densities and losses, and the ensemble path using it
sees the same candidates and gives the same losses and gradients as the plain PyTorch path."""

import pytest
import torch

from ltr.ebm import losses
from ltr.ebm.densities import GaussianMixture
from ltr.models.toy1d import Toy1DEnsemble
from ltr.regression_1d import fused, fused_is
from ltr.regression_1d.data import generator
from ltr.regression_1d.ensemble import ensemble_loss
from ltr.train_settings.regression_1d import SETTINGS

pytestmark = pytest.mark.skipif(not fused_is.available(), reason="no C++ compiler to build the fused kernel")

SIGMAS = (0.2, 1.6)


def _offsets(n: int = 6, s: int = 37) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    off = torch.randn(n, s, generator=g) * 1.6
    off[:, 0] = 0.0
    off[0, 1:4] = torch.tensor([12.0, -30.0, 1e-4])  # far tails (narrow component underflows) and ~0
    return off


def test_mixture_log_prob_matches_gaussian_mixture():
    off = _offsets()
    ref = GaussianMixture(SIGMAS).log_prob_offsets(off.double().unsqueeze(-1))
    got = fused_is.mixture_log_prob(off, torch.tensor(SIGMAS))
    assert torch.allclose(got.double(), ref, rtol=2e-6, atol=2e-6), (got.double() - ref).abs().max()
    # three components, one of them wide
    three = (0.05, 0.3, 4.0)
    ref3 = GaussianMixture(three).log_prob_offsets(off.double().unsqueeze(-1))
    got3 = fused_is.mixture_log_prob(off, torch.tensor(three))
    assert torch.allclose(got3.double(), ref3, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("mode", [fused_is.LABEL, fused_is.POSITIVE, fused_is.KLD])
def test_is_loss_and_gradient_match_ebm_losses(mode):
    off = _offsets()
    scores = torch.randn(off.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 3
    weights = torch.linspace(-1.0, 2.0, off.shape[0], dtype=torch.float64)
    ref_scores = scores.clone().requires_grad_(True)
    log_q = GaussianMixture(SIGMAS).log_prob_offsets(off.double().unsqueeze(-1))
    if mode == fused_is.LABEL:
        ref = losses.ml_is_loss(ref_scores[:, 0], ref_scores[:, 1:], log_q[:, 1:], reduction="none")
    elif mode == fused_is.POSITIVE:
        ref = losses.nce_loss(ref_scores, log_q, reduction="none")
    else:
        log_p = GaussianMixture([0.025]).log_prob_offsets(off.double().unsqueeze(-1))
        ref = losses.kld_is_loss(ref_scores, log_q, log_p, reduction="none")
    (ref * weights).sum().backward()
    got_scores = scores.float().requires_grad_(True)
    start = 1 if mode == fused_is.LABEL else 0
    got = fused_is.is_loss(got_scores, off, torch.tensor(SIGMAS), mode=mode, start=start, label_sigma=0.025)
    (got * weights.float()).sum().backward()
    assert torch.allclose(got.double(), ref.detach(), rtol=1e-5, atol=1e-5)
    assert torch.allclose(got_scores.grad.double(), ref_scores.grad, rtol=1e-5, atol=1e-6)


def test_is_loss_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\(N, S\)"):
        fused_is.is_loss(torch.zeros(2, 3), torch.zeros(2, 4), torch.tensor(SIGMAS), mode=fused_is.POSITIVE)


@pytest.mark.skipif(not fused.available(), reason="no C++ compiler to build the fused kernel")
@pytest.mark.parametrize("setting", ["ml_is", "kld_is", "nce", "nce_plus"])
@pytest.mark.parametrize("shared", [False, True])
def test_fused_ensemble_loss_equals_pytorch_path(setting, shared):
    """Same generator state -> same candidates -> same per-member loss and parameter gradients."""
    config = SETTINGS[setting]().replace(dataset=1, num_samples=40, shared_samples=shared)
    method = config.build_method()
    x = torch.rand(3, 8, 1, generator=torch.Generator().manual_seed(2)) * 6 - 3
    y = torch.sin(x)
    results = []
    for use_fused in (False, True):
        ens = Toy1DEnsemble(3, generators=[generator(0, r, "init") for r in range(3)])
        loss = ensemble_loss(
            ens,
            method,
            x,
            y,
            generator=torch.Generator().manual_seed(5),
            shared_samples=shared,
            fused=use_fused,
        )
        loss.sum().backward()
        results.append((loss.detach(), torch.cat([p.grad.reshape(-1) for p in ens.parameters()])))
    (l_ref, g_ref), (l_got, g_got) = results
    assert torch.allclose(l_got, l_ref, rtol=1e-5, atol=1e-5), (l_got, l_ref)
    assert torch.allclose(g_got, g_ref, rtol=1e-4, atol=1e-6), (g_got - g_ref).abs().max()


@pytest.mark.parametrize("shared", [False, True])
def test_assemble_candidates(shared):
    g = torch.Generator().manual_seed(3)
    labels = torch.randn(4, generator=g)
    rows = 1 if shared else 4
    comp = torch.randint(2, (rows, 9), generator=g)
    eps = torch.randn(rows, 9, generator=g)
    sig = torch.tensor(SIGMAS)
    first = torch.randn(4, generator=g)
    off, cand = fused_is.assemble_candidates(labels, comp, eps, sig, first=first, first_column=True)
    expect = (eps * sig[comp]).expand(4, 9)
    assert torch.equal(off[:, 1:], expect) and torch.equal(off[:, 0], first)
    assert torch.equal(cand, labels[:, None] + off)
    off0, cand0 = fused_is.assemble_candidates(labels, comp, eps, sig, first=None, first_column=False)
    assert torch.equal(off0, expect) and torch.equal(cand0, labels[:, None] + expect)
    with pytest.raises(ValueError, match="component indices"):
        fused_is.assemble_candidates(labels, comp + 2, eps, sig, first=None, first_column=False)
