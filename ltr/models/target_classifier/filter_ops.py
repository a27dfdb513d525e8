"""Correlation of per-sequence filters with feature maps, and its transpose (the filter gradient).

Shapes: features (S, B, C, H, W) for S images of each of B sequences; one filter (C, k, k) per sequence,
stacked (B, C, k, k). Both the correlation and its transpose are batched matrix products (the channel sum)
followed by k * k shifts of small maps, so each sequence only ever sees its own filter and there is no
Python loop over sequences. (oneDNN runs the equivalent grouped convolutions, a single output channel per
group, 2-50x slower: ``python benchmarks/filter_transpose.py``.)

Padding is ``k // 2`` on every side, so a score map is (H + 1 - k % 2, W + 1 - k % 2): for the even filter
size 4 of DiMP the map is one cell larger than the feature map.

Score-map geometry (DiMP's label convention, used by the optimizer's label/mask/weight maps and expected from
the data pipeline's labels and by the tracker): score cell ``j`` stands for image pixel ``stride * j`` for an
even filter size and ``stride * (j + 1/2)`` for an odd one. (The filter window of cell ``j`` covers feature
samples ``j - k//2 .. j - k//2 + k - 1``; any half-cell offset between that window and the convention is
absorbed by the learned layers, as in the reference.)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def _check(features: Tensor, num_sequences: int, where: str) -> None:
    if features.dim() != 5:
        raise ValueError(f"{where}: features must be (S, B, C, H, W), got shape {tuple(features.shape)}")
    if features.shape[1] != num_sequences:
        raise ValueError(
            f"{where}: features have B={features.shape[1]} sequences but {num_sequences} filters/maps given"
        )


def score_cell_to_pixel(filter_size: int, stride: int) -> tuple[float, float]:
    """(scale, offset) with pixel = scale * cell + offset for the score-map convention above."""
    return float(stride), 0.5 * stride * (filter_size % 2)


def score_map_size(feature_size: tuple[int, int], filter_size: int) -> tuple[int, int]:
    """(height, width) of the score map for a (H, W) feature map and a square filter of ``filter_size``."""
    extra = 1 - filter_size % 2
    return feature_size[0] + extra, feature_size[1] + extra


def apply_filter(features: Tensor, filters: Tensor) -> Tensor:
    """Scores ``s[i, b] = features[i, b] (*) filters[b]`` (cross-correlation, summed over channels).

    Args:
        features: (S, B, C, H, W).
        filters: (B, C, k, k).

    Returns:
        (S, B, H', W') with (H', W') = :func:`score_map_size`.
    """
    num_seq, channels, k = filters.shape[0], filters.shape[1], filters.shape[-1]
    _check(features, num_seq, "apply_filter")
    if features.shape[2] != channels:
        raise ValueError(f"apply_filter: features have C={features.shape[2]} channels, filters C={channels}")
    s, b, c, h, w = features.shape
    # scores[y, x] = sum_{u, v} (filters[:, :, u, v] . features[:, :, y + u - p, x + v - p]) (p = k // 2, zero
    # outside the map): one product gives every tap's channel sum at every cell, (S, B, k*k, H*W), and the
    # score map is the sum of the k*k tap maps, each shifted by its tap's offset
    p = k // 2
    taps = torch.matmul(filters.reshape(num_seq, c, k * k).transpose(1, 2), features.reshape(s, b, c, h * w))
    taps = F.pad(taps.reshape(s, b, k * k, h, w), (p, p, p, p))
    mh, mw = score_map_size((h, w), k)
    scores = taps[:, :, 0, :mh, :mw]
    for tap in range(1, k * k):
        u, v = divmod(tap, k)
        scores = scores + taps[:, :, tap, u : u + mh, v : v + mw]
    return scores  # (S, B, H', W')


def apply_filter_transpose(features: Tensor, maps: Tensor, filter_size: int) -> Tensor:
    """The adjoint of :func:`apply_filter` w.r.t. the filter: ``sum_i features[i, b] (*) maps[i, b]``.

    For ``maps = dL/dscores`` this is ``dL/dfilters``. Differentiable in both arguments.

    Args:
        features: (S, B, C, H, W).
        maps: (S, B, H', W') with (H', W') = :func:`score_map_size` of (H, W) and ``filter_size``.
        filter_size: k.

    Returns:
        (B, C, k, k).
    """
    s, b, c, h, w = features.shape
    _check(features, maps.shape[1], "apply_filter_transpose")
    if maps.shape[0] != s or tuple(maps.shape[-2:]) != score_map_size((h, w), filter_size):
        raise ValueError(
            f"apply_filter_transpose: maps must be ({s}, {b}, *{score_map_size((h, w), filter_size)}), "
            f"got {tuple(maps.shape)}"
        )
    # One product per image instead of a convolution with an (H', W') kernel (which oneDNN runs ~20x slower):
    # grads[b, c, u, v] = sum_{i, y, x} features[i, b, c, y, x] maps[i, b, y + p - u, x + p - v] (p = k // 2,
    # zero outside the map), so the shifted copies of each map form a (k*k, H*W) matrix: the k x k patches of
    # the map padded to (H + k - 1, W + k - 1), in reverse kernel order.
    k, p = filter_size, filter_size // 2
    mh, mw = maps.shape[-2:]
    top = k - 1 - p
    padded = F.pad(maps.reshape(s * b, 1, mh, mw), (top, w - mw + p, top, h - mh + p))
    shifted = F.unfold(padded, k).flip(1)  # (S B, k*k, H*W): row u*k + v is the map shifted by (u - p, v - p)
    per_image = torch.matmul(features.reshape(s * b, c, h * w), shifted.transpose(1, 2))  # (S B, C, k*k)
    return per_image.reshape(s, b, c, k, k).sum(0)
