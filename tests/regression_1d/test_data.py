"""The generated datasets follow the stated densities; the true densities are normalised."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from ltr.regression_1d import data


def test_generation_is_seeded_and_in_range():
    x1, y1 = data.generate(2, data_seed=0)
    x2, y2 = data.generate(2, data_seed=0)
    x3, _ = data.generate(2, data_seed=1)
    assert x1.shape == (2000, 1) and y1.shape == (2000, 1) and x1.dtype == torch.float32
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(x1, x3)
    assert x1.min() >= -3 and x1.max() <= 3
    # the two datasets differ for the same seed
    assert not torch.equal(data.generate(1)[1], y1)


def test_dataset2_residual_moments():
    x, y = data.generate(2, num=200_000, data_seed=3)
    z = ((y - torch.sin(x)) / data.dataset2_sigma(x)).squeeze(1).double()
    assert abs(z.mean().item()) < 0.01
    assert abs(z.std().item() - 1.0) < 0.01
    assert abs(stats.kurtosis(z.numpy())) < 0.05  # Gaussian


def test_dataset1_lognormal_branch_and_mixture_weights():
    x, y = data.generate(1, num=200_000, data_seed=4)
    x, y = x.squeeze(1).double().numpy(), y.squeeze(1).double().numpy()
    pos = x >= 0
    log_z = np.log(y[pos] + 1.0)
    assert abs(log_z.mean()) < 0.005
    assert abs(log_z.std() - 0.25) < 0.005
    # x < 0: 80% around +sin x, 20% around -sin x, std 0.075; use x where the modes are well apart
    far = (x < -0.5) & (x > -2.6)
    near_plus = np.abs(y[far] - np.sin(x[far])) < 0.3
    assert abs(near_plus.mean() - 0.8) < 0.01
    resid = (y[far] - np.sin(x[far]))[near_plus]
    assert abs(resid.std() - 0.075) < 0.002


def test_true_pdf_matches_scipy_and_integrates_to_one():
    y = np.linspace(-3, 3, 20001)
    dy = y[1] - y[0]
    for x in (-2.5, -0.7, 0.3, 2.0):
        for d in (1, 2):
            p = data.true_pdf(d, np.full_like(y, x), y)
            assert abs(p.sum() * dy - 1.0) < 1e-3, (d, x)
    p = data.true_pdf(1, 1.0, y)
    ref = stats.lognorm.pdf(y + 1, s=0.25)
    np.testing.assert_allclose(p, ref, rtol=1e-10, atol=1e-300)
    p = data.true_pdf(1, -1.0, y)
    ref = 0.8 * stats.norm.pdf(y, math.sin(-1.0), 0.075) + 0.2 * stats.norm.pdf(y, -math.sin(-1.0), 0.075)
    np.testing.assert_allclose(p, ref, rtol=1e-10)


def test_bad_dataset_is_rejected():
    with pytest.raises(ValueError, match="dataset"):
        data.generate(3)
