"""Precise RoI Pooling (Jiang et al., ECCV 2018) in closed form, in pure PyTorch.

The feature map is read as samples at integer coordinates of a continuous surface: ``F[b, c, i, j]`` sits at
``(x, y) = (j, i)`` and the surface between samples is the bilinear interpolation

    f(x, y) = sum_ij F[i, j] * k(y - i) * k(x - j),    k(t) = max(0, 1 - |t|),

which is zero beyond one cell outside the map. A pooled bin is the integral of ``f`` over the bin divided
by the bin area. Because ``f`` is a sum of separable tents, that integral separates: with ``K`` the
antiderivative of ``k`` (piecewise quadratic), the weight of column ``j`` for the bin ``[x1, x2]`` is
``K(x2 - j) - K(x1 - j)`` and likewise for rows, so a pooled bin is
``(row weights) @ F @ (column weights)^T / area``. This is exact (no sampling), differentiable with respect to
the features and the box coordinates by plain autograd, and the same code runs on every device.

Pixel convention: a box coordinate ``x`` (image pixels) lands at ``x * spatial_scale`` on the feature grid,
with no half-pixel shift. That is what the original PrRoIPool does and what the DiMP/ATOM IoU heads were
designed and trained with, so a network ported from them sees the same geometry. With
``spatial_scale = 1 / stride``, feature sample ``j`` then stands for the image point ``x = j * stride``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["PrRoIPool", "prroi_pool"]


def _pair(output_size: int | tuple[int, int]) -> tuple[int, int]:
    """Normalise ``output_size`` to ``(out_h, out_w)`` and check it."""
    if isinstance(output_size, int) and not isinstance(output_size, bool):
        size = (output_size, output_size)
    elif (
        isinstance(output_size, (tuple, list))
        and len(output_size) == 2
        and all(isinstance(s, int) and not isinstance(s, bool) for s in output_size)
    ):
        size = (int(output_size[0]), int(output_size[1]))
    else:
        raise TypeError(f"prroi_pool: output_size must be an int or a pair of ints, got {output_size!r}")
    if size[0] <= 0 or size[1] <= 0:
        raise ValueError(f"prroi_pool: output_size must be positive, got {output_size!r}")
    return size


def _tent_antiderivative(t: Tensor) -> Tensor:
    """``K(t)``: integral of the tent ``k(s) = max(0, 1 - |s|)`` from -inf to ``t``.

    ``K = 0`` for ``t <= -1``, ``(1 + t)^2 / 2`` on ``[-1, 0]``, ``1 - (1 - t)^2 / 2`` on ``[0, 1]`` and
    ``1`` after; written as one expression in the clamped argument so that autograd gives ``K' = k``.
    """
    u = t.clamp(-1.0, 1.0)
    return 0.5 + u - 0.5 * u * u.abs()


def _bin_weights(start: Tensor, length: Tensor, bins: int, size: int) -> Tensor:
    """Mean of each grid tent over each bin along one axis.

    Args:
        start: (N,) box start on the feature grid.
        length: (N,) box length on the feature grid, >= 0.
        bins: number of output bins along the axis.
        size: number of feature samples along the axis.

    Returns:
        (N, bins, size): ``w[n, p, j] = (K(e[p+1] - j) - K(e[p] - j)) / (e[p+1] - e[p])`` with the bin edges
        ``e[p] = start + length * p / bins``; zero for boxes of zero length.
    """
    steps = torch.arange(bins + 1, device=start.device, dtype=start.dtype) / bins
    edges = start[:, None] + length[:, None] * steps  # (N, bins + 1)
    grid = torch.arange(size, device=start.device, dtype=start.dtype)
    cumulative = _tent_antiderivative(edges[:, :, None] - grid)  # (N, bins + 1, size)
    integral = cumulative[:, 1:] - cumulative[:, :-1]  # (N, bins, size)
    bin_length = length / bins
    valid = bin_length > 0
    safe = torch.where(valid, bin_length, torch.ones_like(bin_length))
    scale = valid.to(start.dtype) / safe  # 0 for empty boxes, so their values and gradients are exactly 0
    return integral * scale[:, None, None]


def _check_inputs(features: Tensor, rois: Tensor, spatial_scale: float) -> None:
    if not isinstance(features, Tensor) or features.dim() != 4:
        raise ValueError(
            f"prroi_pool: features must be a (B, C, H, W) tensor, got "
            f"{tuple(features.shape) if isinstance(features, Tensor) else type(features).__name__}"
        )
    if not features.is_floating_point():
        raise TypeError(f"prroi_pool: features must be floating point, got {features.dtype}")
    if not isinstance(rois, Tensor) or rois.dim() != 2 or rois.shape[1] != 5:
        raise ValueError(
            "prroi_pool: rois must be a (N, 5) tensor of (batch index, x1, y1, x2, y2), got "
            f"{tuple(rois.shape) if isinstance(rois, Tensor) else type(rois).__name__}"
        )
    if not rois.is_floating_point():
        raise TypeError(f"prroi_pool: rois must be floating point, got {rois.dtype}")
    if rois.device != features.device:
        raise ValueError(f"prroi_pool: rois are on {rois.device} but features on {features.device}")
    if not (isinstance(spatial_scale, (int, float)) and spatial_scale > 0 and spatial_scale != float("inf")):
        raise ValueError(f"prroi_pool: spatial_scale must be a positive finite number, got {spatial_scale!r}")


def _group_by_image(batch_index: Tensor, num_images: int) -> tuple[Tensor, list[int], bool]:
    """Check the batch-index column (N,) and group the rois by image.

    Returns the permutation that sorts the rois by image (stable), the number of rois per image and whether
    the rois are already sorted (the permutation is the identity). One host synchronisation in all.
    """
    index = batch_index.long()
    bad = (index.to(batch_index.dtype) != batch_index) | (index < 0) | (index >= num_images)
    counts = torch.bincount(index.clamp(0, num_images - 1), minlength=num_images)
    unsorted = (index[1:] < index[:-1]).any()
    summary = torch.cat([counts, bad.any().view(1), unsorted.view(1)]).tolist()
    if summary[-2]:
        first = int(torch.nonzero(bad)[0, 0])
        raise ValueError(
            f"prroi_pool: rois[{first}, 0] = {batch_index[first].item()} is not an image index in "
            f"[0, {num_images - 1}]"
        )
    order = torch.argsort(index, stable=True)
    return order, summary[:-2], not summary[-1]


def _pool_sorted(features: Tensor, weights_x: Tensor, weights_y: Tensor, counts: list[int]) -> Tensor:
    """Pool rois sorted by image.

    Args:
        features: (B, C, H, W).
        weights_x: (N, out_w, W) column weights, rois sorted by image.
        weights_y: (N, out_h, H) row weights, same order.
        counts: B numbers of rois per image, summing to N.

    Returns:
        (N, out_w, C, out_h) pooled bins in the order of the weights.
    """
    num_images, channels, height, width = features.shape
    num_rois, out_w, _ = weights_x.shape
    out_h = weights_y.shape[1]
    if min(counts) == max(counts):
        # As many rois per image (the usual training batch): two batched products, no per-image loop.
        per_image = counts[0]
        # Columns first: (B, n * out_w, W) @ (B, W, C * H) -> (B, n * out_w, C * H).
        cols = torch.matmul(
            weights_x.reshape(num_images, per_image * out_w, width),
            features.reshape(num_images, channels * height, width).transpose(1, 2),
        )
        # Then rows, per roi: (N, out_w * C, H) @ (N, H, out_h).
        bins = torch.matmul(cols.view(num_rois, out_w * channels, height), weights_y.transpose(1, 2))
        return bins.view(num_rois, out_w, channels, out_h)
    pieces = []
    groups = zip(features.unbind(0), weights_x.split(counts), weights_y.split(counts), strict=True)
    for feature, wx, wy in groups:
        n = wx.shape[0]
        if n == 0:
            continue
        # One product for all rois of this image: (n * out_w, W) @ (W, C * H), then rows per roi.
        cols = torch.matmul(wx.reshape(n * out_w, width), feature.reshape(channels * height, width).t())
        bins = torch.matmul(cols.view(n, out_w * channels, height), wy.transpose(1, 2))
        pieces.append(bins.view(n, out_w, channels, out_h))
    return torch.cat(pieces, dim=0)


def prroi_pool(
    features: Tensor,
    rois: Tensor,
    output_size: int | tuple[int, int],
    spatial_scale: float,
) -> Tensor:
    """Precise RoI pooling: the mean of the bilinearly interpolated feature surface over each bin.

    Args:
        features: (B, C, H, W) float tensor (float32, float64, float16 or bfloat16).
        rois: (N, 5) tensor of ``(batch index, x1, y1, x2, y2)``: boxes in xyxy image pixels, the batch
            index (an integer stored as float) selecting the feature map. Boxes with ``x2 <= x1`` or
            ``y2 <= y1`` pool to zeros, with zero gradients.
        output_size: ``out`` or ``(out_h, out_w)`` bins per box.
        spatial_scale: feature-grid units per image pixel (``1 / stride``); a box coordinate ``x`` lands at
            ``x * spatial_scale`` with no half-pixel shift (see the module docstring).

    Returns:
        (N, C, out_h, out_w) tensor in the dtype and on the device of ``features``, differentiable with
        respect to ``features`` and ``rois[:, 1:]``.
    """
    _check_inputs(features, rois, spatial_scale)
    out_h, out_w = _pair(output_size)
    num_images, channels, height, width = features.shape
    num_rois = rois.shape[0]
    if num_rois == 0:
        return features.new_zeros((0, channels, out_h, out_w))

    # Geometry in float32 at least: image-pixel coordinates lose sub-cell precision in half precision.
    compute_dtype = torch.float64 if torch.float64 in (features.dtype, rois.dtype) else torch.float32
    order, counts, is_sorted = _group_by_image(rois[:, 0].detach(), num_images)
    boxes = rois[:, 1:] if is_sorted else rois[order, 1:]
    boxes = boxes.to(compute_dtype) * spatial_scale  # (N, 4) on the feature grid, sorted by image
    x1, y1, x2, y2 = boxes.unbind(dim=1)
    weights_x = _bin_weights(x1, (x2 - x1).clamp(min=0), out_w, width).to(features.dtype)  # (N, out_w, W)
    weights_y = _bin_weights(y1, (y2 - y1).clamp(min=0), out_h, height).to(features.dtype)  # (N, out_h, H)
    pooled = _pool_sorted(features, weights_x, weights_y, counts)  # (N, out_w, C, out_h), sorted by image
    if not is_sorted:
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(num_rois, device=order.device)
        pooled = pooled[inverse]
    return pooled.permute(0, 2, 3, 1).contiguous()


class PrRoIPool(nn.Module):
    """Module form of :func:`prroi_pool`.

    ``forward(features (B, C, H, W), rois (N, 5) of (batch index, x1, y1, x2, y2)) -> (N, C, out_h, out_w)``.
    """

    def __init__(self, output_size: int | tuple[int, int], spatial_scale: float) -> None:
        super().__init__()
        self.output_size = _pair(output_size)
        if not (isinstance(spatial_scale, (int, float)) and spatial_scale > 0):
            raise ValueError(f"PrRoIPool: spatial_scale must be a positive number, got {spatial_scale!r}")
        self.spatial_scale = float(spatial_scale)

    def forward(self, features: Tensor, rois: Tensor) -> Tensor:
        return prroi_pool(features, rois, self.output_size, self.spatial_scale)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}, spatial_scale={self.spatial_scale}"
