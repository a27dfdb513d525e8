"""The fused Langevin kernel equals the Langevin recursion in float64 PyTorch, and ML-MCMC's fused path equals
the plain PyTorch path (same eps draws)."""

import pytest
import torch

from ltr.ebm import build_method
from ltr.models.toy1d import Toy1DEnsemble
from ltr.regression_1d import fused_mcmc
from ltr.regression_1d.ensemble import ensemble_loss, train_ensemble, use_fused
from ltr.train_settings.regression_1d import SETTINGS
from tests.regression_1d.kernels import random_ensemble

pytestmark = pytest.mark.skipif(
    not fused_mcmc.available(), reason="no C++ compiler to build the fused kernel"
)


def _inputs(r: int, n: int, s: int, steps: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(r, n, 1, generator=g) * 6 - 3
    start = torch.randn(r, n, 1, 1, generator=g) + 0.1 * torch.randn(r, n, s, 1, generator=g)
    noise = torch.randn(steps, r, n, s, generator=g)
    return x, start, noise


def _reference(ens: Toy1DEnsemble, x, start, noise, a: float, runs=None):
    """y <- y + a^2/2 df/dy + a eps in float64 autograd on ``score_from_features``: (R, N, S, 1)."""
    ref = Toy1DEnsemble(ens.num_models).double()
    ref.load_state_dict(ens.state_dict())
    feat = ref.x_features(x.double(), runs=runs)
    y = start.double()
    for eps in noise.double():
        y = y.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(ref.score_from_features(feat, y, runs=runs).sum(), y)
        y = y + 0.5 * a * a * g + a * eps.unsqueeze(-1)
    return y.detach()


@pytest.mark.parametrize("steps", [1, 4, 16])
def test_langevin_kernel_matches_float64_recursion(steps):
    # S = 45: one full 32-lane block and a padded one; three members with different random weights.
    ens = random_ensemble(3, seed=steps)
    x, start, noise = _inputs(3, 4, 45, steps, seed=10 + steps)
    a = 0.3  # large enough that the drift moves the chains visibly
    want = _reference(ens, x, start, noise, a)
    got = fused_mcmc.langevin_steps(ens, ens.x_features(x), start, noise, a)
    assert got.shape == (3, 4, 45, 1)
    drift = want - (start.double() + a * noise.double().sum(0).unsqueeze(-1))
    assert drift.abs().max() > 0.02  # the gradient term matters, not only the noise
    torch.testing.assert_close(got.double(), want, rtol=0, atol=2e-6 * steps)


def test_langevin_kernel_with_a_member_slice():
    ens = random_ensemble(4, seed=5)
    runs = slice(1, 3)
    x, start, noise = _inputs(2, 3, 20, 4, seed=6)
    want = _reference(ens, x, start, noise, 0.2, runs=runs)
    got = fused_mcmc.langevin_steps(ens, ens.x_features(x, runs=runs), start, noise, 0.2, runs=runs)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-5)
    # members 1 and 2 of the ensemble are not members 0 and 1
    other = fused_mcmc.langevin_steps(
        ens, ens.x_features(x, runs=slice(0, 2)), start, noise, 0.2, runs=slice(0, 2)
    )
    assert (other - got).abs().max() > 1e-3


def test_zero_step_length_returns_the_start_exactly():
    ens = random_ensemble(2, seed=0)
    x, start, noise = _inputs(2, 3, 37, 5, seed=1)
    got = fused_mcmc.langevin_steps(ens, ens.x_features(x), start, noise, 0.0)
    assert torch.equal(got, start)
    got = fused_mcmc.fused_langevin(
        ens, ens.x_features(x), start, num_steps=3, step_length=0.0, generator=torch.Generator()
    )
    assert torch.equal(got, start)


def test_fused_langevin_draws_the_noise_per_step_and_chunks(monkeypatch):
    """fused_langevin = langevin_steps with eps from per-step (R*N, S, 1) draws, also when run in chunks."""
    ens = random_ensemble(2, seed=2)
    x, start, _ = _inputs(2, 3, 21, 1, seed=3)
    g = torch.Generator().manual_seed(9)
    noise = torch.stack([torch.randn((6, 21, 1), generator=g).view(2, 3, 21) for _ in range(7)])
    want = fused_mcmc.langevin_steps(ens, ens.x_features(x), start, noise, 0.1)
    monkeypatch.setattr(fused_mcmc, "NOISE_BUFFER_FLOATS", 3 * 2 * 3 * 21)  # chunks of 3, 3 and 1 steps
    got = fused_mcmc.fused_langevin(
        ens,
        ens.x_features(x),
        start,
        num_steps=7,
        step_length=0.1,
        generator=torch.Generator().manual_seed(9),
    )
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_langevin_kernel_rejects_bad_shapes():
    ens = random_ensemble(2, seed=0)
    x, start, noise = _inputs(2, 3, 8, 2, seed=0)
    with pytest.raises(ValueError, match="noise"):
        fused_mcmc.langevin_steps(ens, ens.x_features(x), start, noise[:, :1], 0.1)
    with pytest.raises(ValueError, match="num_steps"):
        fused_mcmc.fused_langevin(
            ens, ens.x_features(x), start, num_steps=-1, step_length=0.1, generator=None
        )


@pytest.mark.parametrize("steps", [1, 4])
def test_ensemble_ml_mcmc_loss_fused_equals_plain_pytorch_path(steps):
    """Same generator state -> same eps -> chains equal up to float32 rounding -> same loss and gradients."""
    assert use_fused("ml_mcmc", "cpu")
    ens = random_ensemble(3, seed=steps)
    method = build_method("ml_mcmc", num_steps=steps, step_length=0.5, num_samples=40)
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(3, 8, 1, generator=g) * 6 - 3, torch.randn(3, 8, 1, generator=g)
    out = {}
    for fused in (False, True):
        gen = torch.Generator().manual_seed(5)
        loss = ensemble_loss(ens, method, x, y, generator=gen, fused=fused)
        grads = torch.autograd.grad(loss.sum(), list(ens.parameters()), materialize_grads=True)
        out[fused] = (loss, grads, torch.randn(1, generator=gen))
    assert out[True][0].abs().min() > 1e-2  # a nonzero loss per member
    torch.testing.assert_close(out[True][0], out[False][0], rtol=0, atol=1e-6)
    for got, want in zip(out[True][1], out[False][1], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=2e-6)
    assert torch.equal(out[True][2], out[False][2])  # both paths consumed the same random numbers


def test_short_ml_mcmc_ensemble_training_is_finite_and_uses_the_kernel():
    torch.set_num_threads(1)
    config = SETTINGS["ml_mcmc_1"]().replace(
        dataset=2, epochs=2, num_train=64, num_samples=32, mcmc_steps=4, lr=3e-3
    )
    training = train_ensemble(config, 2)
    assert training.extra["fused"]
    assert training.losses.shape == (2, 2)
    assert torch.isfinite(training.losses).all()
    assert (training.losses != 0).all()
    assert all(torch.isfinite(p).all() for p in training.ensemble.parameters())
