"""The EBM training losses, written on scores.

Each function takes the network outputs f(x_i, y) it needs (and, for importance sampling / NCE, the log
densities of the samples) and returns per-example losses (N,) when ``reduction="none"`` or their mean.
Scores are (N, M) for M candidates of each of N examples. All sums over candidates use logsumexp.

The method objectives in :mod:`ltr.ebm.methods` draw the samples, evaluate the network and call these.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

Reduction = Literal["mean", "none"]


def _reduce(per_example: Tensor, reduction: Reduction) -> Tensor:
    if reduction == "mean":
        return per_example.mean()
    if reduction == "none":
        return per_example
    raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")


def log_partition_is(scores: Tensor, log_q: Tensor) -> Tensor:
    """Importance-sampling estimate of log Z: log(1/M sum_m exp(s_m) / q_m). (N, M) -> (N,)."""
    return torch.logsumexp(scores - log_q, dim=-1) - math.log(scores.shape[-1])


def ml_is_loss(
    score_label: Tensor, scores: Tensor, log_q: Tensor, *, reduction: Reduction = "mean"
) -> Tensor:
    """ML-IS (paper eq. 5): log(1/M sum exp(s_m)/q_m) - f(x, y_i).

    Args:
        score_label: (N,) f at the label.
        scores: (N, M) f at samples drawn from q(.|y_i).
        log_q: (N, M) log q of those samples.
    """
    return _reduce(log_partition_is(scores, log_q) - score_label, reduction)


def kld_is_loss(scores: Tensor, log_q: Tensor, log_p: Tensor, *, reduction: Reduction = "mean") -> Tensor:
    """KLD-IS (paper eq. 7): log(1/M sum exp(s_m)/q_m) - 1/M sum s_m p_m / q_m.

    Args:
        scores: (N, M) f at samples drawn from q(.|y_i).
        log_q: (N, M) proposal log density of the samples.
        log_p: (N, M) log p(y_m | y_i), the assumed label-noise density.
    """
    weights = torch.exp(log_p - log_q)
    return _reduce(log_partition_is(scores, log_q) - (scores * weights).mean(-1), reduction)


def nce_loss(scores: Tensor, log_q: Tensor, *, reduction: Reduction = "mean") -> Tensor:
    """Ranking NCE (paper eqs. 12, 14): softmax cross-entropy with logits s_m - log q_m, candidate 0 positive.

    The same loss serves NCE (candidate 0 is the label) and NCE+ (candidate 0 is the label plus p_beta noise);
    they differ only in how the candidates are drawn.

    Args:
        scores: (N, 1 + M) f at the positive (column 0) and M noise samples.
        log_q: (N, 1 + M) noise log density of every candidate, the positive included.
    """
    logits = scores - log_q
    return _reduce(torch.logsumexp(logits, dim=-1) - logits[:, 0], reduction)


def ml_mcmc_loss(score_label: Tensor, scores_model: Tensor, *, reduction: Reduction = "mean") -> Tensor:
    """ML-MCMC (paper eq. 10): 1/M sum f(x, y_m) - f(x, y_i), y_m drawn (detached) from the model by MCMC.

    Args:
        score_label: (N,) f at the label.
        scores_model: (N, M) f at the MCMC samples.
    """
    return _reduce(scores_model.mean(-1) - score_label, reduction)


def sm_loss(grad_y: Tensor, hess_diag: Tensor, *, reduction: Reduction = "mean") -> Tensor:
    """Score matching (paper eq. 11): tr(d2f/dy2) + 1/2 |df/dy|^2 at the label.

    Args:
        grad_y: (N, D) gradient of f w.r.t. y at the label.
        hess_diag: (N, D) diagonal of the Hessian of f w.r.t. y at the label.
    """
    return _reduce(hess_diag.sum(-1) + 0.5 * (grad_y * grad_y).sum(-1), reduction)


def dsm_loss(
    grad_y: Tensor, noisy: Tensor, labels: Tensor, sigma: float | Tensor, *, reduction: Reduction = "mean"
) -> Tensor:
    """Denoising score matching (paper eq. 12): 1/M sum |df/dy(y~_m) + (y~_m - y_i)/sigma^2|^2.

    Args:
        grad_y: (N, M, D) gradient of f w.r.t. y at the noisy samples.
        noisy: (N, M, D) samples y~ ~ N(y_i, sigma^2 I).
        labels: (N, D).
        sigma: the noise std (a float or a (D,) tensor).
    """
    sigma_t = torch.as_tensor(sigma, dtype=noisy.dtype, device=noisy.device)
    residual = grad_y + (noisy - labels.unsqueeze(1)) / sigma_t**2
    return _reduce((residual * residual).sum(-1).mean(-1), reduction)
