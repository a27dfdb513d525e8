import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from ltr.ebm import GaussianMixture


def test_log_prob_matches_scipy_mixture_with_per_dimension_sigmas():
    sig = [[0.1, 0.3], [0.8, 0.5]]
    q = GaussianMixture(sig)
    labels = torch.tensor([[0.5, -1.0], [2.0, 0.0]], dtype=torch.float64)
    samples = torch.tensor([[[0.4, -1.2], [1.5, 0.0]], [[2.0, 0.0], [-1.0, 3.0]]], dtype=torch.float64)
    got = q.log_prob(samples, labels).numpy()
    for i in range(2):
        for m in range(2):
            dens = np.mean(
                [
                    multivariate_normal(labels[i].numpy(), np.diag(np.square(s))).pdf(samples[i, m].numpy())
                    for s in sig
                ]
            )
            assert got[i, m] == pytest.approx(math.log(dens), rel=1e-10)


def test_samples_have_mixture_moments_and_components_equally_weighted():
    q = GaussianMixture([0.2, 1.6])
    g = torch.Generator().manual_seed(0)
    labels = torch.tensor([[1.0], [-2.0]], dtype=torch.float64)
    y = q.sample(labels, 200_000, generator=g)
    off = y - labels.unsqueeze(1)
    assert off.mean().abs() < 0.01
    # mixture variance = mean of the component variances
    assert off.var().item() == pytest.approx((0.2**2 + 1.6**2) / 2, rel=0.02)
    # half the mass sits in the narrow component: P(|off| < 0.4) = 0.5*0.9545 + 0.5*0.197
    frac = (off.abs() < 0.4).double().mean().item()
    assert frac == pytest.approx(0.5 * 0.9545 + 0.5 * 0.1974, abs=0.01)


def test_shared_offsets_are_identical_across_examples_and_independent_otherwise():
    q = GaussianMixture([0.5])
    labels = torch.zeros(3, 2)
    shared = q.sample(labels, 5, shared=True, generator=torch.Generator().manual_seed(1))
    assert torch.equal(shared[0], shared[1]) and torch.equal(shared[1], shared[2])
    indep = q.sample(labels, 5, generator=torch.Generator().manual_seed(1))
    assert not torch.equal(indep[0], indep[1])


@pytest.mark.parametrize("mode,factor", [("std", 0.1), ("variance", math.sqrt(0.1))])
def test_beta_scaling_modes(mode, factor):
    q = GaussianMixture([[0.05, 0.5]])
    pb = q.scaled(0.1, mode=mode)
    assert torch.allclose(
        pb.sigmas(2, dtype=torch.float64), torch.tensor([[0.05, 0.5]], dtype=torch.float64) * factor
    )


def test_invalid_sigmas_and_beta_are_rejected():
    with pytest.raises(ValueError, match="positive"):
        GaussianMixture([0.1, -1.0])
    with pytest.raises(ValueError, match="beta"):
        GaussianMixture([0.1]).scaled(0.0)
    with pytest.raises(ValueError, match="beta mode"):
        GaussianMixture([0.1]).scaled(0.1, mode="var")
    with pytest.raises(ValueError, match="columns"):
        GaussianMixture([[0.1, 0.2, 0.3]]).sigmas(2)
