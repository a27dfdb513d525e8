"""PrDiMP's filter optimizer: steepest descent on a KL objective with a Newton step length, and its softmax.

PrDiMP reads a score map ``s`` (H' x W' cells) as a probability of the target centre,
``p = softmax_reg(s)``: ``p_j = exp(s_j) / (sum_k exp(s_k) + exp(r))`` with an optional regulariser ``r``
(an extra "no target here" logit; ``r = None`` is the plain softmax). The filter minimises, per sequence b,
the KL divergence of ``p`` from a Gaussian label density ``y`` (up to a constant), summed over the train
images with sample weights ``g_i``::

    L(w) = sum_i g_i (log(sum_k exp(s_ik) + exp(r)) - <y_i, s_i>) + lambda/2 |w|^2,    s_i = w (*) x_i

One step, with ``J`` the correlation with the features (d s / d w)::

    grad  = J^T (g (p - y)) + lambda w
    q     = J grad                                            scores of the gradient, per image
    H     = sum_i g_i max(0, q_i^T (diag(p_i) - p_i p_i^T) q_i)  the softmax Hessian along grad
    alpha = |grad|^2 / max(H + (lambda + alpha_eps) |grad|^2, 1e-8)
    w    <- w - exp(log_step) alpha grad

The label density ``y`` of a target centred at ``(cy, cx)`` cells (DiMP's score-map convention, see
:mod:`ltr.models.target_classifier.filter_ops`) is the Gaussian ``exp(-d^2 / (2 sigma^2)) / (2 pi sigma^2)``
(or a one-hot at the nearest cell for ``sigma = 0``), zeroed where it is not above ``label_threshold``,
optionally normalised to sum 1, then mixed with a uniform map (``uniform_weight``) and scaled by
``1 - label_shrink``. Learned parameters: ``log_step_length`` and ``filter_reg`` (``lambda`` =
``max(filter_reg^2, min_filter_reg^2)``), the same names as :class:`SteepestDescentGN`'s.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ltr.models.target_classifier.filter_ops import apply_filter, apply_filter_transpose, score_map_size
from ltr.models.target_classifier.optimizer import FilterOptimizer, OptimizerResult


def softmax_reg(x: Tensor, dim: int | tuple[int, ...] = -1, reg: float | None = None) -> Tensor:
    """Softmax over ``dim`` with an extra constant logit ``reg`` in the denominator (plain softmax for None).

    ``exp(x_j) / (sum_k exp(x_k) + exp(reg))``; ``dim`` may be a tuple (e.g. ``(-2, -1)`` for the cells of a
    score map). Same shape as ``x``. With ``reg`` the outputs sum to less than 1: the rest is the probability
    that the target is in no cell.
    """
    if reg is None:
        if isinstance(dim, int):
            return torch.softmax(x, dim=dim)
        return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))
    log_norm = torch.logaddexp(torch.logsumexp(x, dim=dim, keepdim=True), x.new_tensor(float(reg)))
    return torch.exp(x - log_norm)


def _log_partition(scores: Tensor, reg: float | None) -> Tensor:
    """log(sum_cells exp(s) + exp(reg)) of (S, B, H', W') scores -> (S, B)."""
    lse = torch.logsumexp(scores, dim=(-2, -1))
    return lse if reg is None else torch.logaddexp(lse, lse.new_tensor(float(reg)))


class SteepestDescentNewtonKL(FilterOptimizer):
    """PrDiMP's filter optimizer: ``forward(filters, features, boxes) -> OptimizerResult`` (module docstring).

    The call interface is :class:`SteepestDescentGN`'s, so the classifier and the tracker use either.

    Args:
        num_iter: default number of steps (5 in training).
        feature_stride: image pixels per feature cell; boxes come in image pixels.
        init_step_length: initial exp(log_step) (learned).
        init_filter_reg: initial (learned) sqrt of lambda; lambda is clamped below by ``min_filter_reg^2``.
        label_sigma: std of the label density in score cells (0: one-hot at the nearest cell).
        alpha_eps: added to lambda in the step length's denominator (damping).
        normalize_label: scale the (thresholded) Gaussian to sum 1 (+1e-8 in the denominator).
        label_threshold: Gaussian values not above it become 0.
        label_shrink: the label density is scaled by ``1 - label_shrink``.
        uniform_weight: weight of the uniform density mixed into the label.
        softmax_reg: ``r`` of :func:`softmax_reg` (None: plain softmax); the tracker's score preprocessing uses
            the same value.
    """

    def __init__(
        self,
        *,
        num_iter: int = 5,
        feature_stride: int = 16,
        init_step_length: float = 1.0,
        init_filter_reg: float = 0.05,
        min_filter_reg: float = 0.05,
        label_sigma: float = 0.9,
        alpha_eps: float = 0.05,
        normalize_label: bool = True,
        label_threshold: float = 0.0,
        label_shrink: float = 0.0,
        uniform_weight: float = 0.0,
        softmax_reg: float | None = None,
    ) -> None:
        if label_sigma < 0:
            raise ValueError(f"label_sigma must be >= 0, got {label_sigma}")
        super().__init__(
            num_iter=num_iter,
            feature_stride=feature_stride,
            init_step_length=init_step_length,
            init_filter_reg=init_filter_reg,
            min_filter_reg=min_filter_reg,
        )
        self.label_sigma = label_sigma
        self.alpha_eps = alpha_eps
        self.normalize_label = normalize_label
        self.label_threshold = label_threshold
        self.label_shrink = label_shrink
        self.uniform_weight = uniform_weight
        self.softmax_reg = softmax_reg

    def label_density(self, boxes_xywh: Tensor, size: tuple[int, int], filter_size: int) -> Tensor:
        """Label density y (S, B, H', W') of (S, B, 4) xywh image-pixel target boxes on an (H', W') score map."""
        centre_xy = (boxes_xywh[..., :2] + 0.5 * boxes_xywh[..., 2:]) / self.feature_stride
        centre_yx = (centre_xy - 0.5 * (filter_size % 2)).flip(-1)  # odd filters: cell j at feature j + 1/2
        rows = torch.arange(size[0], device=boxes_xywh.device, dtype=boxes_xywh.dtype)
        cols = torch.arange(size[1], device=boxes_xywh.device, dtype=boxes_xywh.dtype)
        dy2 = (rows - centre_yx[..., 0, None]) ** 2  # (S, B, H')
        dx2 = (cols - centre_yx[..., 1, None]) ** 2  # (S, B, W')
        if self.label_sigma == 0:
            gy = nn.functional.one_hot(dy2.argmin(-1), size[0]).to(dy2.dtype)
            gx = nn.functional.one_hot(dx2.argmin(-1), size[1]).to(dx2.dtype)
            gauss = gy[..., :, None] * gx[..., None, :]
        else:
            var = self.label_sigma**2
            gy = torch.exp(dy2 * (-0.5 / var)) / (2.0 * math.pi * var)
            gx = torch.exp(dx2 * (-0.5 / var))
            gauss = gy[..., :, None] * gx[..., None, :]
        gauss = torch.where(gauss > self.label_threshold, gauss, torch.zeros_like(gauss))
        if self.normalize_label:
            gauss = gauss / (gauss.sum(dim=(-2, -1), keepdim=True) + 1e-8)
        uniform = self.uniform_weight / (size[0] * size[1])
        return (1.0 - self.label_shrink) * ((1.0 - self.uniform_weight) * gauss + uniform)

    def _run(
        self,
        filters: Tensor,
        features: Tensor,
        boxes_xywh: Tensor,
        sample_weight: Tensor | None,
        num_iter: int,
        compute_losses: bool,
    ) -> OptimizerResult:
        s = features.shape[0]
        k = filters.shape[-1]
        size = score_map_size(tuple(features.shape[-2:]), k)
        label = self.label_density(boxes_xywh, size, k)
        if sample_weight is None:
            g = features.new_full((s, 1), 1.0 / s)
        elif sample_weight.dim() != 2 or sample_weight.shape[0] != s:
            raise ValueError(f"sample_weight must be ({s}, B) or ({s}, 1), got {tuple(sample_weight.shape)}")
        else:
            g = sample_weight
        step = torch.exp(self.log_step_length)
        reg = (self.filter_reg * self.filter_reg).clamp(min=self.min_filter_reg**2)
        iterates = [filters]
        losses = []
        w = filters
        for _ in range(num_iter):
            scores = apply_filter(features, w)
            if compute_losses:
                losses.append(self._objective(scores, label, g, w, reg))
            prob = softmax_reg(scores, dim=(-2, -1), reg=self.softmax_reg)
            grad = apply_filter_transpose(features, g[..., None, None] * (prob - label), k) + reg * w
            q = apply_filter(features, grad)  # (S, B, H', W')
            pq = prob * q
            curvature = ((pq * q).sum(dim=(-2, -1)) - pq.sum(dim=(-2, -1)) ** 2).clamp(min=0.0)  # (S, B)
            grad_sq = (grad * grad).sum(dim=(1, 2, 3))  # (B,)
            denom = (g * curvature).sum(dim=0) + (reg + self.alpha_eps) * grad_sq
            alpha = grad_sq / denom.clamp(min=1e-8)
            w = w - (step * alpha).reshape(-1, 1, 1, 1) * grad
            iterates.append(w)
        if compute_losses:
            losses.append(self._objective(apply_filter(features, w), label, g, w, reg))
        return OptimizerResult(w, iterates, torch.stack(losses) if compute_losses else None)

    def _objective(self, scores: Tensor, label: Tensor, g: Tensor, w: Tensor, reg: Tensor) -> Tensor:
        num_seq = w.shape[0]
        data = g * (_log_partition(scores, self.softmax_reg) - (label * scores).sum(dim=(-2, -1)))
        return ((data.sum() + 0.5 * reg * (w * w).sum()) / num_seq).detach().reshape(())
