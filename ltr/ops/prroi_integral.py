"""Precise RoI pooling from a summed-area table: the same values as :func:`ltr.ops.prroi_pool.prroi_pool`,
at a per-box cost that does not grow with the feature map.

:mod:`ltr.ops.prroi_pool` writes a pooled bin as ``(row weights) @ F @ (column weights)^T / area``, which
touches every sample of the map (or of the window the boxes touch) for every box. When one map is pooled many
times with changing boxes (the box refinement: ten ascent steps on one frame's features), the work can be
split instead. With ``K`` the tent's antiderivative (see :mod:`ltr.ops.prroi_pool`), the integral of the
interpolated surface over ``[x1, x2] x [y1, y2]`` is ``Q(x2, y2) - Q(x1, y2) - Q(x2, y1) + Q(x1, y1)`` with

    Q(x, y) = sum_ij F[i, j] K(x - j) K(y - i).

For ``x = k + u`` (k an integer, 0 <= u < 1), ``K(x - j)`` is 1 for ``j <= k - 1`` and 0 for ``j >= k + 2``,
so it equals ``sum_p d_p [j <= p]`` with only three non-zero steps, at ``p = k - 1, k, k + 1``:
``d = ((1 - u)^2 / 2, 1/2 + u - u^2, u^2 / 2)``. Hence

    Q(x, y) = sum over 3 x 3 (p, q) of d_p(x) d_q(y) T[q, p],    T[q, p] = sum_{i <= q, j <= p} F[i, j],

a 3 x 3 read of the summed-area table ``T`` (made once per map) per box corner. ``Q`` is continuously
differentiable in ``(x, y)``, and the gradient of ``d`` (with ``k`` held) is its exact derivative, so autograd
gives exact box gradients. Indices outside the map are clamped (the table has one more row and column in
front, the sums over nothing, and ``T`` is constant past the map's end), which gives ``K``'s saturation for
free.

A bin is a difference of table entries, so rounding costs more here than in the direct contraction; the
table is kept small where boxes are (:func:`summed_area_table`) and the corners' weights are made in float64.
In float32, on a tracker's boxes, the pooled values agree with :func:`prroi_pool`'s to a few millionths of the
largest value (``tests/ops/test_prroi_integral.py`` bounds it at 3e-6).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ltr.ops.prroi_pool import _check_scale, _pair, _weight_dtype

__all__ = ["SummedAreaTable", "prroi_pool_integral", "summed_area_table"]


class SummedAreaTable(NamedTuple):
    """A feature map prepared for :func:`prroi_pool_integral` (see :func:`summed_area_table`).

    table: (B, H + 1, W + 1, C), the summed-area table of ``F[b, c] - mean[b, c]``, ``T[q + 1, p + 1] =
    sum_{i <= q, j <= p}``, less its row and column through the centre entry (``T[q, p] - T[q, c] - T[r, p] +
    T[r, c]``, r = H // 2, c = W // 2: terms of the row or the column alone, which cancel in every bin);
    channels last, so that each entry a box reads is one contiguous row.
    mean: (B, C) the per-channel means taken out (their share of a bin is added back exactly).
    """

    table: Tensor
    mean: Tensor


def _sums_from(values: Tensor, dim: int, start: int) -> Tensor:
    """Prefix sums along ``dim`` counted from entry ``start`` instead of 0: ``out[t] = sum_{start <= j < t} v[j]``
    for ``t >= start`` and ``-sum_{t <= j < start} v[j]`` before, for ``t = 0 .. n`` (one more entry than
    ``values``). Each entry adds only the values between it and ``start``, so the rounding stays small there."""
    before = values.narrow(dim, 0, start).flip(dim).cumsum(dim).flip(dim).neg()
    after = values.narrow(dim, start, values.shape[dim] - start).cumsum(dim)
    zero = torch.zeros_like(values.narrow(dim, 0, 1))
    return torch.cat([before, zero, after], dim=dim)


def summed_area_table(features: Tensor) -> SummedAreaTable:
    """The summed-area table of (B, C, H, W) ``features``, per channel, made small near the map's centre.

    A bin's integral is a difference of table entries, so the table's rounding error grows with its
    entries' size. Two changes that leave every bin's integral as it is keep the entries small where boxes are
    (around the centre, in a tracker's crops): the channel means are taken out (their share of each bin is
    added back exactly by :func:`prroi_pool_integral`), and the sums start at the centre entry instead of the
    corner (a term that depends on the row or the column alone cancels in every bin's four corners).
    """
    if features.dim() != 4:
        raise ValueError(f"summed_area_table: features must be (B, C, H, W), got {tuple(features.shape)}")
    values = features.permute(0, 2, 3, 1)  # channels last
    mean = values.mean(dim=(1, 2))
    centred = values - mean[:, None, None, :]
    height, width = features.shape[-2:]
    table = _sums_from(_sums_from(centred, 1, height // 2), 2, width // 2)
    return SummedAreaTable(table, mean)


def _corner_reads(edges: Tensor, size: int) -> tuple[Tensor, Tensor]:
    """Table rows (or columns) and weights for ``K(edge - j)`` summed against any per-sample values.

    Args:
        edges: (..., E) coordinates on the feature grid.
        size: samples along the axis (the table has ``size + 1`` entries, entry 0 the zero padding).

    Returns:
        index (..., E, 3) int64 into the padded table axis and weights (..., E, 3) (differentiable in
        ``edges``), such that ``sum_j K(edge - j) v[j] = sum_r weights[r] * V[index[r]]`` for the prefix sums
        ``V[t] = sum_{j < t} v[j]`` (up to a constant added to every ``V[t]``: the weights sum to 1).
    """
    k = edges.detach().nan_to_num(0.0, 0.0, 0.0).floor()  # a NaN box gives NaN bins, not a bad index
    u = edges - k
    weights = torch.stack([0.5 * (1.0 - u) ** 2, 0.5 + u - u * u, 0.5 * u * u], dim=-1)
    offsets = torch.arange(-1, 2, device=edges.device, dtype=edges.dtype)
    index = (k[..., None] + offsets).clamp(-1.0, float(size - 1)) + 1.0  # padded index of p = k - 1, k, k + 1
    return index.long(), weights


def _differences(bins: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """(bins, bins + 1) matrix taking values at the bin edges to their differences (next edge minus edge)."""
    eye = torch.eye(bins + 1, dtype=dtype, device=device)
    return eye[1:] - eye[:-1]


def prroi_pool_integral(
    sat: SummedAreaTable,
    boxes_xyxy: Tensor,
    output_size: int | tuple[int, int],
    spatial_scale: float,
) -> Tensor:
    """Precise RoI pooling of a fixed number of boxes per image from :func:`summed_area_table`'s table.

    The values of :func:`ltr.ops.prroi_pool.prroi_pool_dense` (same conventions: a box coordinate ``x`` lands at
    ``x * spatial_scale`` on the grid; empty boxes pool to zeros with zero gradients), as a fixed graph with no
    host synchronisation, at a cost per box of ``(out_h + 1) * (out_w + 1)`` corners of 3 x 3 table reads.

    Args:
        sat: the feature maps' :class:`SummedAreaTable`, table (B, H + 1, W + 1, C) and mean (B, C).
        boxes_xyxy: (B, N, 4) boxes of each image, xyxy image pixels.
        output_size: ``out`` or ``(out_h, out_w)`` bins per box.
        spatial_scale: feature-grid units per image pixel (``1 / stride``).

    Returns:
        (B, N, C, out_h, out_w) in the table's dtype, differentiable with respect to ``boxes_xyxy``.
    """
    table, mean = sat
    if table.dim() != 4 or boxes_xyxy.dim() != 3 or boxes_xyxy.shape[0] != table.shape[0]:
        raise ValueError(
            f"prroi_pool_integral: table (B, H + 1, W + 1, C) and boxes (B, N, 4) must agree on B, got "
            f"{tuple(table.shape)} and {tuple(boxes_xyxy.shape)}"
        )
    _check_scale(spatial_scale)
    out_h, out_w = _pair(output_size)
    num_images, rows, cols, channels = table.shape
    num_boxes = boxes_xyxy.shape[1]
    dtype, device = table.dtype, table.device
    # The corners' weights are O(1) numbers from coordinates of up to the map's size: they are made in
    # prroi_pool's weight dtype and only then cast to the table's dtype.
    wide = _weight_dtype(device)
    boxes = boxes_xyxy.to(wide) * spatial_scale
    x1, y1, x2, y2 = boxes.unbind(dim=-1)  # (B, N) each
    width, height = (x2 - x1).clamp(min=0), (y2 - y1).clamp(min=0)
    steps_x = torch.arange(out_w + 1, device=device, dtype=wide) / out_w
    steps_y = torch.arange(out_h + 1, device=device, dtype=wide) / out_h
    edges_x = x1[..., None] + width[..., None] * steps_x  # bin edges, as prroi_pool's
    edges_y = y1[..., None] + height[..., None] * steps_y
    col_index, col_weights = _corner_reads(edges_x, cols - 1)  # (B, N, out_w + 1, 3)
    row_index, row_weights = _corner_reads(edges_y, rows - 1)  # (B, N, out_h + 1, 3)

    # Q at every corner (row edge a, column edge b) of every box from its 3 x 3 reads, each a row of C values
    # of the (B * (H + 1) * (W + 1), C) table.
    image = torch.arange(num_images, device=device)[:, None, None, None, None, None] * (rows * cols)
    flat = image + row_index[:, :, :, None, :, None] * cols + col_index[:, :, None, :, None, :]
    corners = (out_h + 1) * (out_w + 1)
    reads = table.reshape(-1, channels).index_select(0, flat.reshape(-1))
    reads = reads.view(num_images * num_boxes * corners, 9, channels)
    weights = row_weights[:, :, :, None, :, None] * col_weights[:, :, None, :, None, :]
    q = torch.matmul(weights.reshape(-1, 1, 9).to(dtype), reads)
    q = q.view(num_images * num_boxes, corners, channels)
    # The bins' integrals: differences of Q at their corners, as one product with a constant matrix.
    diff = torch.kron(_differences(out_h, dtype, device), _differences(out_w, dtype, device))
    integral = torch.matmul(diff, q).view(num_images, num_boxes, out_h * out_w, channels)
    # The means' share: mean x the bin's integral of the map's coverage (sum_j K(x - j) over the map's
    # columns, read from the same weights with the entries' sample counts), per axis.
    cover_x = (col_weights * col_index.to(wide)).sum(-1).diff(dim=-1)  # (B, N, out_w)
    cover_y = (row_weights * row_index.to(wide)).sum(-1).diff(dim=-1)  # (B, N, out_h)
    cover = (cover_y[..., :, None] * cover_x[..., None, :]).flatten(2).to(dtype)  # (B, N, out_h * out_w)
    integral = integral + cover[..., None] * mean[:, None, None, :]

    area = (width / out_w) * (height / out_h)
    valid = area > 0
    scale = (valid.to(wide) / torch.where(valid, area, torch.ones_like(area))).to(dtype)
    pooled = integral * scale[..., None, None]  # (B, N, out_h * out_w, C)
    return pooled.view(num_images, num_boxes, out_h, out_w, channels).permute(0, 1, 4, 2, 3)
