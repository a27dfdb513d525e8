"""DiMP's steepest-descent Gauss-Newton filter optimizer with learned label, target mask and spatial weight.

For features x (S, B, C, H, W), filters w (B, C, k, k) and the per-sequence target centre, one step is::

    s   = w (*) x                                 scores, (S, B, H', W')
    act = (1 - m)/2 |s| + (1 + m)/2 s             target mask m in [0, 1]: linear where m = 1, ReLU where 0
    r   = v (act - y)                             y = label map, v = sample weight x spatial weight
    g   = J^T r + lambda w                        gradient of 1/2 |r|^2 + lambda/2 |w|^2
    alpha = |g|^2 / (|J g|^2 + lambda |g|^2)      exact line search of the Gauss-Newton model
    w  <- w - exp(log_step) alpha g

with J = v * act'(s) * (d s / d w) and act'(s) = (1 - m)/2 sign(s) + (1 + m)/2 (sign of the detached score).
y, m and the spatial weight are 1x1 convs over a soft one-hot encoding of each cell's distance to the target
centre (``num_bins`` bins, ``bin_displacement`` feature cells apart; the last bin collects all larger
distances).

Initial values (bin distance d in feature cells):
    label  y(d) = exp(-d^2 / (2 sigma^2)) - min_d exp(-d^2 / (2 sigma^2)), sigma = ``label_init_sigma``
           cells (a Gaussian shifted so that its tail is 0)
    mask   m(d) = sigmoid(mask_init_factor * tanh(2 - d))
    weight v(d) = 1
    step length exp(log_step) = ``init_step_length`` (0.9);
    regularisation lambda = ``init_filter_reg``^2 (0.01).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ltr.models.target_classifier.filter_ops import apply_filter, apply_filter_transpose, score_map_size


def distance_bins(center_yx: Tensor, size: tuple[int, int], num_bins: int, bin_displacement: float) -> Tensor:
    """Soft one-hot encoding of each cell's distance to a centre.

    Args:
        center_yx: (N, 2) centres (row, column) in score-map cells.
        size: (H, W) of the map.
        num_bins, bin_displacement: bin ``i`` stands for distance ``i * bin_displacement``.

    Returns:
        (N, num_bins, H, W): linear interpolation between the two nearest bins (entries sum to 1 per
        cell); the last bin is 1 for every distance beyond its own.
    """
    rows = torch.arange(size[0], device=center_yx.device, dtype=center_yx.dtype)
    cols = torch.arange(size[1], device=center_yx.device, dtype=center_yx.dtype)
    dy = rows[None, :, None] - center_yx[:, 0, None, None]
    dx = cols[None, None, :] - center_yx[:, 1, None, None]
    dist = torch.sqrt(dy * dy + dx * dx)  # (N, H, W)
    bins = torch.arange(num_bins, device=center_yx.device, dtype=center_yx.dtype)
    diff = dist[:, None] / bin_displacement - bins[None, :, None, None]  # (N, num_bins, H, W)
    inner = F.relu(1.0 - diff[:, :-1].abs())
    last = (1.0 + diff[:, -1:]).clamp(0.0, 1.0)
    return torch.cat([inner, last], dim=1)


def bin_distances(num_bins: int, bin_displacement: float) -> Tensor:
    """(num_bins,) distance in feature cells that each bin stands for."""
    return torch.arange(num_bins, dtype=torch.float32) * bin_displacement


class OptimizerResult(NamedTuple):
    """filters: the final filter (B, C, k, k); iterates: [initial, step 1, ..., step n] filters;
    losses: (n + 1,) objective 1/2 (|r|^2 + lambda |w|^2) per iterate, averaged over sequences (detached),
    or None when not asked for."""

    filters: Tensor
    iterates: list[Tensor]
    losses: Tensor | None


class FilterOptimizer(nn.Module):
    """The call interface both filter optimizers share (DiMP's :class:`SteepestDescentGN`, PrDiMP's
    ``SteepestDescentNewtonKL``): ``forward`` checks the shapes and runs the subclass's ``_run`` in (at least)
    float32 with autocast off (the step length divides sums of squares); ``num_iter`` defaults to
    ``self.num_iter``. ``softmax_reg`` is the extra logit of the scores' softmax (None for DiMP).

    Both learn a log step length and a filter regulariser (the sqrt of lambda, clamped below by
    ``min_filter_reg``), created here from their initial values.
    """

    softmax_reg: float | None = None

    def __init__(
        self,
        *,
        num_iter: int,
        feature_stride: int,
        init_step_length: float,
        init_filter_reg: float,
        min_filter_reg: float,
    ) -> None:
        super().__init__()
        self.num_iter = num_iter
        self.feature_stride = feature_stride
        self.min_filter_reg = min_filter_reg
        self.log_step_length = nn.Parameter(torch.full((1,), math.log(init_step_length)))
        self.filter_reg = nn.Parameter(torch.full((1,), float(init_filter_reg)))

    def forward(
        self,
        filters: Tensor,
        features: Tensor,
        boxes_xywh: Tensor,
        *,
        sample_weight: Tensor | None = None,
        num_iter: int | None = None,
        compute_losses: bool = False,
    ) -> OptimizerResult:
        """Run ``num_iter`` steps.

        Args:
            filters: (B, C, k, k) initial filters.
            features: (S, B, C, H, W) classification features of the S train images.
            boxes_xywh: (S, B, 4) target boxes in those images, xywh image pixels.
            sample_weight: optional (S, B) or (S, 1) non-negative image weights (the tracker's sample memory);
                default 1/S each.
            num_iter: steps to take (default the constructor's).
            compute_losses: also return the objective at every iterate.
        """
        name = type(self).__name__
        if features.dim() != 5 or filters.dim() != 4 or filters.shape[0] != features.shape[1]:
            raise ValueError(
                f"{name}: features (S, B, C, H, W) and filters (B, C, k, k) must agree on B, got "
                f"{tuple(features.shape)} and {tuple(filters.shape)}"
            )
        if tuple(boxes_xywh.shape) != (*features.shape[:2], 4):
            raise ValueError(
                f"{name}: boxes must be ({features.shape[0]}, {features.shape[1]}, 4) xywh, "
                f"got {tuple(boxes_xywh.shape)}"
            )
        num_iter = self.num_iter if num_iter is None else num_iter
        dtype = torch.promote_types(features.dtype, torch.float32)
        with torch.autocast(device_type=features.device.type, enabled=False):
            return self._run(
                filters.to(dtype),
                features.to(dtype),
                boxes_xywh.to(dtype),
                None if sample_weight is None else sample_weight.to(dtype),
                num_iter,
                compute_losses,
            )

    def _run(
        self,
        filters: Tensor,
        features: Tensor,
        boxes_xywh: Tensor,
        sample_weight: Tensor | None,
        num_iter: int,
        compute_losses: bool,
    ) -> OptimizerResult:
        raise NotImplementedError


class SteepestDescentGN(FilterOptimizer):
    """The filter optimizer: ``forward(filters, features, boxes) -> OptimizerResult`` (see module docstring).

    Args:
        num_iter: default number of steps (5 in training).
        feature_stride: image pixels per feature cell; boxes come in image pixels.
        init_step_length: initial exp(log_step).
        init_filter_reg: initial (learned) sqrt of lambda; lambda is clamped below by ``min_filter_reg^2``.
        num_bins, bin_displacement: distance encoding.
        label_init_sigma: width of the initial label Gaussian, in feature cells.
        mask_init_factor: the 3 in 3 tanh(2 - d).
    """

    def __init__(
        self,
        *,
        num_iter: int = 5,
        feature_stride: int = 16,
        init_step_length: float = 0.9,
        init_filter_reg: float = 0.1,
        min_filter_reg: float = 1e-3,
        num_bins: int = 100,
        bin_displacement: float = 0.1,
        label_init_sigma: float = 1.0,
        mask_init_factor: float = 3.0,
    ) -> None:
        if num_bins < 2:
            raise ValueError(f"num_bins must be at least 2, got {num_bins}")
        super().__init__(
            num_iter=num_iter,
            feature_stride=feature_stride,
            init_step_length=init_step_length,
            init_filter_reg=init_filter_reg,
            min_filter_reg=min_filter_reg,
        )
        self.num_bins = num_bins
        self.bin_displacement = bin_displacement
        self.label_predictor = nn.Conv2d(num_bins, 1, kernel_size=1, bias=False)
        self.mask_predictor = nn.Conv2d(num_bins, 1, kernel_size=1, bias=False)
        self.weight_predictor = nn.Conv2d(num_bins, 1, kernel_size=1, bias=False)
        d = bin_distances(num_bins, bin_displacement)
        gauss = torch.exp(-0.5 * (d / label_init_sigma) ** 2)
        with torch.no_grad():
            self.label_predictor.weight.copy_((gauss - gauss.min()).reshape(1, -1, 1, 1))
            self.mask_predictor.weight.copy_((mask_init_factor * torch.tanh(2.0 - d)).reshape(1, -1, 1, 1))
            self.weight_predictor.weight.fill_(1.0)

    def maps(
        self, boxes_xywh: Tensor, size: tuple[int, int], filter_size: int
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Label y, target mask m and spatial weight v for target boxes.

        Args:
            boxes_xywh: (S, B, 4) xywh image pixels.
            size: (H', W') of the score map.
            filter_size: k (an even k shifts the score grid by half a cell).

        Returns:
            three (S, B, H', W') maps.
        """
        s, b = boxes_xywh.shape[:2]
        centre_xy = (boxes_xywh[..., :2] + 0.5 * boxes_xywh[..., 2:]) / self.feature_stride
        # score cell j is centred at feature position j - 1/2 for even filters, j for odd ones
        centre_xy = centre_xy - 0.5 * (filter_size % 2)
        dist = distance_bins(centre_xy.reshape(-1, 2).flip(-1), size, self.num_bins, self.bin_displacement)
        label = self.label_predictor(dist).reshape(s, b, *size)
        mask = torch.sigmoid(self.mask_predictor(dist)).reshape(s, b, *size)
        weight = self.weight_predictor(dist).reshape(s, b, *size)
        return label, mask, weight

    def _run(
        self,
        filters: Tensor,
        features: Tensor,
        boxes_xywh: Tensor,
        sample_weight: Tensor | None,
        num_iter: int,
        compute_losses: bool,
    ) -> OptimizerResult:
        s, b = features.shape[:2]
        k = filters.shape[-1]
        size = score_map_size(tuple(features.shape[-2:]), k)
        label, mask, spatial = self.maps(boxes_xywh, size, k)
        if sample_weight is None:
            v = spatial * math.sqrt(1.0 / s)
        else:
            if sample_weight.dim() != 2 or sample_weight.shape[0] != s:
                raise ValueError(
                    f"sample_weight must be ({s}, B) or ({s}, 1), got {tuple(sample_weight.shape)}"
                )
            v = spatial * sample_weight.sqrt()[..., None, None]
        step = torch.exp(self.log_step_length)
        reg = (self.filter_reg * self.filter_reg).clamp(min=self.min_filter_reg**2)
        iterates = [filters]
        losses = []
        w = filters
        for _ in range(num_iter):
            scores = apply_filter(features, w)
            act = 0.5 * (1.0 - mask) * scores.abs() + 0.5 * (1.0 + mask) * scores
            act_grad = 0.5 * (1.0 - mask) * torch.sign(scores.detach()) + 0.5 * (1.0 + mask)
            residual = v * (act - label)
            if compute_losses:
                losses.append(self._objective(residual, w, reg))
            grad = apply_filter_transpose(features, act_grad * v * residual, k) + reg * w
            jg = v * act_grad * apply_filter(features, grad)  # J g, (S, B, H', W')
            grad_sq = (grad * grad).sum(dim=(1, 2, 3))  # (B,)
            denom = (jg * jg).sum(dim=(0, 2, 3)) + reg * grad_sq
            alpha = grad_sq / denom.clamp(min=1e-8)
            w = w - (step * alpha).reshape(-1, 1, 1, 1) * grad
            iterates.append(w)
        if compute_losses:
            scores = apply_filter(features, w)
            act = 0.5 * (1.0 - mask) * scores.abs() + 0.5 * (1.0 + mask) * scores
            losses.append(self._objective(v * (act - label), w, reg))
        return OptimizerResult(w, iterates, torch.stack(losses) if compute_losses else None)

    @staticmethod
    def _objective(residual: Tensor, w: Tensor, reg: Tensor) -> Tensor:
        num_seq = w.shape[0]
        return (0.5 * ((residual * residual).sum() + reg * (w * w).sum()) / num_seq).detach().reshape(())
