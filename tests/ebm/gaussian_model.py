"""A model family whose partition function is known: f(y) = -sum_d (y_d - mu_d)^2 / (2 s_d^2).

Z = prod_d sqrt(2 pi) s_d, so p(y; mu, s) is exactly N(mu, diag(s^2)) and every EBM loss can be compared
with the exact negative log-likelihood.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


class GaussianEBM(torch.nn.Module):
    def __init__(self, mu: list[float], log_s: list[float]) -> None:
        super().__init__()
        self.mu = torch.nn.Parameter(torch.tensor(mu, dtype=torch.float64))
        self.log_s = torch.nn.Parameter(torch.tensor(log_s, dtype=torch.float64))

    def score(self, y: Tensor) -> Tensor:
        """(N, S, D) -> (N, S)."""
        s = torch.exp(self.log_s)
        return -(((y - self.mu) / s) ** 2).sum(-1) / 2

    def log_z(self) -> Tensor:
        return self.log_s.sum() + 0.5 * self.mu.numel() * math.log(2 * math.pi)

    def exact_nll(self, labels: Tensor) -> Tensor:
        """Mean over labels (N, D) of -log p(y_i)."""
        return (self.log_z() - self.score(labels.unsqueeze(1))[:, 0]).mean()

    def exact_kld(self, labels: Tensor, label_sigma: float) -> Tensor:
        """Mean over labels of KL(N(y_i, label_sigma^2) || p) up to its theta-independent constant."""
        s2 = torch.exp(2 * self.log_s)
        expected_f = -((labels - self.mu) ** 2 + label_sigma**2) / (2 * s2)
        return (self.log_z() - expected_f.sum(-1)).mean()


def grad_of(model: GaussianEBM, loss: Tensor) -> Tensor:
    g_mu, g_ls = torch.autograd.grad(loss, [model.mu, model.log_s])
    return torch.cat([g_mu, g_ls])
