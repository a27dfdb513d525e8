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

Cost: the columns are contracted first for all rois of an image in one product, then the rows per roi, so
the largest intermediate holds ``N * out_w * C * H`` values (about ``W / out_w`` times less than gathering a
``(N, C, H, W)`` copy of the features per roi); the rois are padded into a ``(B, max rois per image)`` grid
so that all images go through two batched products when they are spread (nearly) evenly, as in a training
batch or a single image, and are pooled one image at a time otherwise. Grouping the rois by image costs one
host synchronisation per call.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import torch
from torch import Tensor, nn

__all__ = ["PrRoIPool", "prroi_pool", "prroi_pool_dense"]

# Use the padded all-images path while B * max(rois per image) <= _MAX_PADDING * N: with little padding it does
# the same arithmetic in fewer, larger products; with much padding the per-image path does less
# (benchmarks/prroi_pool.py compares them).
_MAX_PADDING = 1.25


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


def _weight_dtype(device: torch.device) -> torch.dtype:
    """The dtype the box weights are computed in: float64 (they are differences of nearby values of ``K``, see
    :func:`prroi_pool`), float32 on MPS, which has no float64."""
    return torch.float32 if device.type == "mps" else torch.float64


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


def _box_weights(
    boxes: Tensor,
    origin: tuple[int, int],
    output_size: tuple[int, int],
    grid: tuple[int, int],
    dtype: torch.dtype,
) -> tuple[Tensor, Tensor]:
    """Column and row weights of N boxes on a (part of a) feature grid.

    Args:
        boxes: (N, 4) xyxy on the feature grid, in the compute dtype.
        origin: (col, row) of the grid part's first sample.
        output_size: (out_h, out_w) bins.
        grid: (height, width) of the grid part.
        dtype: the features' dtype, which the weights are cast to.

    Returns:
        weights_x (N, out_w, width) and weights_y (N, out_h, height).
    """
    (out_h, out_w), (grid_h, grid_w) = output_size, grid
    num_rois = boxes.shape[0]
    x1, y1, x2, y2 = boxes.unbind(dim=1)
    starts = torch.stack([x1 - origin[0], y1 - origin[1]])  # (2, N)
    lengths = torch.stack([x2 - x1, y2 - y1]).clamp(min=0)
    if out_w == out_h:  # both axes in one go, on the larger grid
        weights = _bin_weights(starts.view(-1), lengths.view(-1), out_w, max(grid_w, grid_h))
        weights_x, weights_y = weights[:num_rois, :, :grid_w], weights[num_rois:, :, :grid_h]
    else:
        weights_x = _bin_weights(starts[0], lengths[0], out_w, grid_w)
        weights_y = _bin_weights(starts[1], lengths[1], out_h, grid_h)
    return weights_x.to(dtype), weights_y.to(dtype)


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
    _check_scale(spatial_scale)


def _check_scale(spatial_scale: float) -> None:
    valid = isinstance(spatial_scale, numbers.Real) and not isinstance(spatial_scale, bool)
    if not (valid and 0 < spatial_scale < math.inf):
        raise ValueError(f"prroi_pool: spatial_scale must be a positive finite number, got {spatial_scale!r}")


class _Layout(NamedTuple):
    """How the rois map onto the images (tensors on the rois' device) and the part of the map they touch."""

    order: Tensor  # (N,) stable permutation sorting the rois by image
    counts: list[int]  # B numbers of rois per image
    slots: Tensor  # (N,) row of each roi in the padded (B * max(counts)) layout: image * max + rank
    is_sorted: bool  # order is the identity
    is_dense: bool  # slots is the identity: sorted, as many rois per image
    rows: tuple[int, int]  # [start, stop) of the feature rows any roi has a non-zero weight on
    cols: tuple[int, int]  # same for the columns


def _layout(batch_index: Tensor, boxes: Tensor, num_images: int, height: int, width: int) -> _Layout:
    """Check the batch-index column (N,) and lay the rois out by image, with one host synchronisation.

    ``boxes`` (N, 4) are xyxy on the feature grid. Sample ``j`` weighs on a bin only if the bin meets
    (j - 1, j + 1), so all weights vanish (with their gradients) outside columns floor(min x1)..ceil(max x2)
    and likewise for rows.
    """
    num_rois = batch_index.shape[0]
    index = batch_index.long()
    bad = (index.to(batch_index.dtype) != batch_index) | (index < 0) | (index >= num_images)
    lower = boxes[:, :2].amin(dim=0).floor()
    upper = torch.maximum(boxes[:, :2], boxes[:, 2:]).amax(dim=0).ceil()
    bounds = torch.cat([lower, upper]).clamp(-1.0, float(max(height, width)) + 1.0).nan_to_num(0.0)
    position = torch.arange(num_rois, device=index.device)
    if num_images == 1:  # a single image (the tracker): nothing to group
        order = slots = position
        counts = index.new_full((1,), num_rois)
        no = torch.zeros((), dtype=torch.bool, device=index.device)
        flags = torch.stack([bad.any(), no, no])  # sorted and dense
    else:
        index = index.clamp(0, num_images - 1)
        order = torch.argsort(index, stable=True)
        sorted_index = index[order]
        # Counts by searching the sorted indices: bincount has no deterministic CUDA kernel.
        images = torch.arange(num_images + 1, device=index.device)
        counts = torch.diff(torch.searchsorted(sorted_index, images))
        rank = position - (torch.cumsum(counts, 0) - counts)[sorted_index]  # rank within its image
        slots = torch.empty_like(order)
        slots[order] = sorted_index * counts.max() + rank
        flags = torch.stack([bad.any(), (order != position).any(), (slots != position).any()])
    summary = torch.cat([counts, flags.long(), bounds.long()]).tolist()
    if summary[num_images]:
        first = int(torch.nonzero(bad)[0, 0])
        raise ValueError(
            f"prroi_pool: rois[{first}, 0] = {batch_index[first].item()} is not an image index in "
            f"[0, {num_images - 1}]"
        )
    col_start, row_start, col_end, row_end = summary[num_images + 3 :]
    # At least one row and column, so that rois entirely off the map still give a graph with zero gradients.
    col_start, row_start = min(max(col_start, 0), width - 1), min(max(row_start, 0), height - 1)
    cols = (col_start, min(max(col_end + 1, col_start + 1), width))
    rows = (row_start, min(max(row_end + 1, row_start + 1), height))
    counts = summary[:num_images]
    # Dense = every slot of the (B, max count) grid holds its own roi in input order; slots equal to their
    # positions are not enough when the last images have fewer rois (e.g. counts [4, 3]).
    is_sorted = not summary[num_images + 1]
    is_dense = not summary[num_images + 2] and num_rois == num_images * max(counts)
    return _Layout(order, counts, slots, is_sorted, is_dense, rows, cols)


def _pool_padded(features: Tensor, weights_x: Tensor, weights_y: Tensor, layout: _Layout) -> Tensor:
    """All images at once: rois scattered into a (B, max count) grid, two batched products.

    Args:
        features: (B, C, H, W).
        weights_x: (N, out_w, W) column weights, rois in input order.
        weights_y: (N, out_h, H) row weights, same order.

    Returns:
        (N, out_w, C, out_h) pooled bins in input order.
    """
    num_images, channels, height, width = features.shape
    out_w, out_h = weights_x.shape[1], weights_y.shape[1]
    rows = num_images * max(layout.counts)
    if not layout.is_dense:  # empty slots get zero weights (index_put: deterministic on CUDA, index_copy not)
        weights_x = weights_x.new_zeros(rows, out_w, width).index_put((layout.slots,), weights_x)
        weights_y = weights_y.new_zeros(rows, out_h, height).index_put((layout.slots,), weights_y)
    # Columns first, per image: (B, M * out_w, W) @ (B, W, C * H) -> (B, M * out_w, C * H).
    cols = torch.matmul(
        weights_x.reshape(num_images, -1, width),
        features.reshape(num_images, channels * height, width).transpose(1, 2),
    )
    # Then rows, per roi: (B * M, out_w * C, H) @ (B * M, H, out_h).
    bins = torch.matmul(cols.view(rows, out_w * channels, height), weights_y.transpose(1, 2))
    bins = bins.view(rows, out_w, channels, out_h)
    return bins if layout.is_dense else bins[layout.slots]


def _pool_per_image(features: Tensor, weights_x: Tensor, weights_y: Tensor, layout: _Layout) -> Tensor:
    """One image at a time (when the rois are spread too unevenly for the padded grid).

    Args:
        features: (B, C, H, W).
        weights_x: (N, out_w, W) column weights, rois in input order.
        weights_y: (N, out_h, H) row weights, same order.

    Returns:
        (N, out_w, C, out_h) pooled bins in input order.
    """
    _, channels, height, width = features.shape
    out_w, out_h = weights_x.shape[1], weights_y.shape[1]
    if not layout.is_sorted:
        weights_x, weights_y = weights_x[layout.order], weights_y[layout.order]
    pieces = []
    splits = weights_x.split(layout.counts), weights_y.split(layout.counts)
    for feature, wx, wy in zip(features.unbind(0), *splits, strict=True):
        n = wx.shape[0]
        if n == 0:
            continue
        # All rois of this image in one product: (n * out_w, W) @ (W, C * H), then rows per roi.
        cols = torch.matmul(wx.reshape(n * out_w, width), feature.reshape(channels * height, width).t())
        bins = torch.matmul(cols.view(n, out_w * channels, height), wy.transpose(1, 2))
        pieces.append(bins.view(n, out_w, channels, out_h))
    pooled = torch.cat(pieces, dim=0)
    if layout.is_sorted:
        return pooled
    inverse = torch.empty_like(layout.order)
    inverse[layout.order] = torch.arange(len(inverse), device=inverse.device)
    return pooled[inverse]


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

    # The weights are differences of K at nearby bin edges, divided by the bin width: in float32 a 1-pixel box
    # at stride 16 already loses 1e-4 of relative accuracy to cancellation, so they are computed in float64
    # (small (N, bins, size) tensors) and only then cast to the features' dtype for the products.
    compute_dtype = _weight_dtype(features.device)
    boxes = rois[:, 1:].to(compute_dtype) * spatial_scale  # (N, 4) xyxy on the feature grid
    layout = _layout(rois[:, 0].detach(), boxes.detach(), num_images, height, width)
    (row_start, row_end), (col_start, col_end) = layout.rows, layout.cols
    if (row_end - row_start, col_end - col_start) != (height, width):
        # Only the window that some roi touches takes part (in DiMP the proposals gather around the target).
        features = features[:, :, row_start:row_end, col_start:col_end]
    weights_x, weights_y = _box_weights(
        boxes,
        (col_start, row_start),
        (out_h, out_w),
        (row_end - row_start, col_end - col_start),
        features.dtype,
    )
    # The padded grid costs B * max(count) rois of work for N: take it only when it wastes little.
    if num_images * max(layout.counts) <= _MAX_PADDING * num_rois:
        pooled = _pool_padded(features, weights_x, weights_y, layout)
    else:
        pooled = _pool_per_image(features, weights_x, weights_y, layout)
    return pooled.permute(0, 2, 3, 1).contiguous()  # (N, out_w, C, out_h) -> (N, C, out_h, out_w)


def prroi_pool_dense(
    features: Tensor,
    boxes_xyxy: Tensor,
    output_size: int | tuple[int, int],
    spatial_scale: float,
) -> Tensor:
    """:func:`prroi_pool` of a fixed number of boxes per image over the whole map, as a fixed graph.

    The same values as :func:`prroi_pool`, but with no host synchronisation and no shape that depends on the
    box values (no window around the boxes, no grouping by image), so that tracing it (``make_fx``,
    ``torch.export``, ONNX export) records one graph valid for every box. It does the work of the whole map.

    Args:
        features: (B, C, H, W) float tensor.
        boxes_xyxy: (B, N, 4) boxes of each image, xyxy image pixels (empty boxes pool to zeros).
        output_size: ``out`` or ``(out_h, out_w)`` bins per box.
        spatial_scale: feature-grid units per image pixel (``1 / stride``).

    Returns:
        (B, N, C, out_h, out_w), differentiable with respect to ``features`` and ``boxes_xyxy``.
    """
    if features.dim() != 4 or boxes_xyxy.dim() != 3 or boxes_xyxy.shape[0] != features.shape[0]:
        raise ValueError(
            f"prroi_pool_dense: features (B, C, H, W) and boxes (B, N, 4) must agree on B, got "
            f"{tuple(features.shape)} and {tuple(boxes_xyxy.shape)}"
        )
    _check_scale(spatial_scale)
    out_h, out_w = _pair(output_size)
    num_images, channels, height, width = features.shape
    num_boxes = boxes_xyxy.shape[1]
    compute_dtype = _weight_dtype(features.device)
    boxes = boxes_xyxy.reshape(-1, 4).to(compute_dtype) * spatial_scale
    weights_x, weights_y = _box_weights(boxes, (0, 0), (out_h, out_w), (height, width), features.dtype)
    # columns of all boxes of an image in one product, then the rows per box (as _pool_padded)
    cols = torch.matmul(
        weights_x.reshape(num_images, num_boxes * out_w, width),
        features.reshape(num_images, channels * height, width).transpose(1, 2),
    )
    bins = torch.matmul(
        cols.reshape(num_images * num_boxes, out_w * channels, height), weights_y.transpose(1, 2)
    )
    return bins.reshape(num_images, num_boxes, out_w, channels, out_h).permute(0, 1, 3, 4, 2)


class PrRoIPool(nn.Module):
    """Module form of :func:`prroi_pool`.

    ``forward(features (B, C, H, W), rois (N, 5) of (batch index, x1, y1, x2, y2)) -> (N, C, out_h, out_w)``.
    """

    def __init__(self, output_size: int | tuple[int, int], spatial_scale: float) -> None:
        super().__init__()
        self.output_size = _pair(output_size)
        _check_scale(spatial_scale)
        self.spatial_scale = float(spatial_scale)

    def forward(self, features: Tensor, rois: Tensor) -> Tensor:
        return prroi_pool(features, rois, self.output_size, self.spatial_scale)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}, spatial_scale={self.spatial_scale}"
