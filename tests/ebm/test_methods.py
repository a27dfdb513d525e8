"""Every training method against a model family with a closed-form partition function."""

import pytest
import torch

from ltr.ebm import DSM, KLDIS, MLIS, MLMCMC, NCE, SM, NCEPlus, build_method, nce_loss
from ltr.ebm.losses import kld_is_loss, ml_is_loss

from .gaussian_model import GaussianEBM, grad_of

TRUE_MU, TRUE_S = 0.3, 0.5


def _labels(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return TRUE_MU + TRUE_S * torch.randn(n, 1, generator=g, dtype=torch.float64)


def _mean_grad(method, labels, seeds=8):
    model = GaussianEBM([0.0], [0.8 - 1.0])  # mu=0, s=exp(-0.2): away from the data's parameters
    grads = []
    for seed in range(seeds):
        res = method(model.score, labels, generator=torch.Generator().manual_seed(seed))
        grads.append(grad_of(model, res.loss))
    return model, torch.stack(grads).mean(0)


@pytest.mark.parametrize(
    "make",
    [
        lambda m: MLIS(sigmas=(0.2, 1.6), num_samples=m),
        lambda m: NCE(sigmas=(0.1, 0.8), num_samples=m),
        lambda m: NCEPlus(sigmas=(0.1, 0.8), num_samples=m, beta=1e-3),
    ],
    ids=["ml_is", "nce", "nce_plus"],
)
def test_gradient_approaches_exact_nll_gradient_as_m_grows(make):
    labels = _labels(64)
    errors = []
    for m in (2, 32, 1024):
        model, g = _mean_grad(make(m), labels)
        exact = grad_of(model, model.exact_nll(labels))
        errors.append((g - exact).norm().item() / exact.norm().item())
    assert errors[2] < 0.05, errors
    assert errors[2] < errors[0] / 4, errors


def test_kld_is_gradient_approaches_exact_kl_gradient():
    labels = _labels(64)
    errors = []
    for m in (4, 4096):
        model, g = _mean_grad(KLDIS(sigmas=(0.2, 1.6), label_sigma=0.3, num_samples=m), labels)
        exact = grad_of(model, model.exact_kld(labels, 0.3))
        errors.append((g - exact).norm().item() / exact.norm().item())
    assert errors[1] < 0.05 and errors[1] < errors[0] / 4, errors


def test_ml_mcmc_gradient_approaches_exact_nll_gradient_with_long_chains():
    labels = _labels(64)
    short_model, g_short = _mean_grad(MLMCMC(num_steps=1, step_length=0.05, num_samples=256), labels, seeds=4)
    long_model, g_long = _mean_grad(MLMCMC(num_steps=150, step_length=0.15, num_samples=128), labels, seeds=4)
    exact = grad_of(long_model, long_model.exact_nll(labels))
    err_long = (g_long - exact).norm() / exact.norm()
    err_short = (g_short - exact).norm() / exact.norm()
    assert err_long < 0.1 and err_short > 3 * err_long, (err_short, err_long)


def _train(method, n=500):
    labels = _labels(n, seed=1)
    model = GaussianEBM([-0.5], [0.0])
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(2)
    for step in range(250):
        if step == 150:
            for group in opt.param_groups:
                group["lr"] = 0.01
        opt.zero_grad()
        method(model.score, labels, generator=g).loss.backward()
        opt.step()
    return model.mu.item(), torch.exp(model.log_s).item(), labels.mean().item(), labels.std().item()


@pytest.mark.parametrize(
    "method,extra_var",
    [
        (MLIS(num_samples=64), 0.0),
        (NCE(num_samples=64), 0.0),
        (NCEPlus(num_samples=64, beta=0.025), 0.0),
        # chains start at the data, which the converged model matches, so short chains suffice here
        (MLMCMC(num_steps=20, step_length=0.2, num_samples=16), 0.0),
        (SM(), 0.0),
        # KLD-IS fits the data convolved with the label noise, DSM the data convolved with its noise.
        (KLDIS(num_samples=64, label_sigma=0.3), 0.3**2),
        (DSM(sigma=0.3, num_samples=16), 0.3**2),
    ],
    ids=["ml_is", "nce", "nce_plus", "ml_mcmc", "sm", "kld_is", "dsm"],
)
def test_training_recovers_the_true_parameters(method, extra_var):
    mu, s, data_mu, data_s = _train(method)
    assert mu == pytest.approx(data_mu, abs=0.03)
    assert s == pytest.approx((data_s**2 + extra_var) ** 0.5, abs=0.03)


def test_nce_plus_with_vanishing_beta_equals_nce():
    model = GaussianEBM([0.1, -0.2], [0.0, -0.5])
    labels = torch.randn(16, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    nce = NCE(num_samples=64)(model.score, labels, generator=torch.Generator().manual_seed(3)).loss
    plus = NCEPlus(num_samples=64, beta=1e-9)(
        model.score, labels, generator=torch.Generator().manual_seed(3)
    ).loss
    assert plus.item() == pytest.approx(nce.item(), rel=1e-7)
    far = NCEPlus(num_samples=64, beta=0.5)(
        model.score, labels, generator=torch.Generator().manual_seed(3)
    ).loss
    assert abs(far.item() - nce.item()) > 1e-3


def test_sampling_methods_split_into_sample_and_loss_from_scores():
    model = GaussianEBM([0.0], [0.0])
    labels = _labels(8)
    for method in (MLIS(num_samples=16), KLDIS(num_samples=16), NCE(num_samples=16), NCEPlus(num_samples=16)):
        cand = method.sample(labels, generator=torch.Generator().manual_seed(5))
        split = method.loss_from_scores(model.score(cand.y), cand).loss
        joint = method(model.score, labels, generator=torch.Generator().manual_seed(5)).loss
        assert torch.equal(split, joint)


def test_losses_are_stable_for_huge_scores():
    scores = torch.tensor([[1e4, -1e4, 5e3]], dtype=torch.float32)
    log_q = torch.zeros_like(scores)
    assert torch.isfinite(nce_loss(scores, log_q))
    assert torch.isfinite(ml_is_loss(scores[:, 0], scores[:, 1:], log_q[:, 1:]))
    assert torch.isfinite(kld_is_loss(scores, log_q, log_q - 10))
    assert nce_loss(scores, log_q).item() == pytest.approx(0.0, abs=1e-6)


def test_reduction_none_gives_per_example_losses_whose_mean_is_the_loss():
    model = GaussianEBM([0.0], [0.0])
    labels = _labels(10)
    per = MLIS(num_samples=32)(
        model.score, labels, generator=torch.Generator().manual_seed(0), reduction="none"
    )
    mean = MLIS(num_samples=32)(model.score, labels, generator=torch.Generator().manual_seed(0))
    assert per.loss.shape == (10,)
    assert per.loss.mean().item() == pytest.approx(mean.loss.item())


def test_build_method_rejects_unknown_names_and_hyperparameters():
    assert isinstance(build_method("nce_plus", beta=0.1, num_samples=127), NCEPlus)
    with pytest.raises(ValueError, match="unknown EBM training method"):
        build_method("mle")
    with pytest.raises(ValueError, match="no hyperparameter"):
        build_method("nce", beta=0.1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_methods_run_on_cuda():
    model = GaussianEBM([0.0], [0.0]).cuda()
    labels = _labels(8).cuda()
    for name in ("ml_is", "kld_is", "nce", "nce_plus", "ml_mcmc", "sm", "dsm"):
        loss = build_method(name)(model.score, labels).loss
        assert loss.is_cuda and torch.isfinite(loss)
