"""D_KL on the grid equals a hand computation."""

import math

import numpy as np
import torch

from ltr.models.toy1d import Toy1DNet
from ltr.regression_1d import evaluate


def _constant_model(value: float = 0.3) -> Toy1DNet:
    model = Toy1DNet(generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model.fc4_xy.weight.zero_()
        model.fc4_xy.bias.fill_(value)
    return model


def test_dkl_of_uniform_model_on_tiny_grid_matches_hand_computation():
    g = 6
    axis = np.linspace(-3, 3, g)
    expected = []
    for x in axis:
        sigma = 0.15 / (1 + math.exp(-x))
        pdf = np.array(
            [
                math.exp(-0.5 * ((y - math.sin(x)) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
                for y in axis
            ]
        )
        p = (pdf + 1e-30) / (pdf + 1e-30).sum()
        q = np.full(g, 1.0 / g)  # softmax of a constant
        expected.append(sum(pi * math.log(pi / qi) for pi, qi in zip(p, q)))
    expected = float(np.mean(expected))
    dkl, log_density = evaluate.evaluate_model(_constant_model(), dataset=2, grid=g)
    assert abs(dkl - expected) < 1e-9
    assert torch.allclose(log_density, torch.full((g, g), -math.log(g), dtype=torch.float64))


def test_dkl_from_log_model_is_zero_for_the_truth_and_positive_otherwise():
    p = evaluate.true_distribution(1, 64)
    assert torch.allclose(p.sum(1), torch.ones(64, dtype=torch.float64))
    assert abs(float(evaluate.dkl_from_log_model(p, torch.log(p)))) < 1e-12
    other = torch.log_softmax(torch.randn(64, 64, dtype=torch.float64), -1)
    assert float(evaluate.dkl_from_log_model(p, other)) > 0.1


def test_grid_is_the_papers():
    axis = evaluate.grid_axis()
    assert axis.shape == (2048,) and axis[0] == -3 and axis[-1] == 3
