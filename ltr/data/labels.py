"""Gaussian classifier labels on the score-map grid.

Grid convention. The classifier features have ``feature_size`` cells over a crop of ``crop_size`` pixels
(stride ``crop_size / feature_size``, 16 for ResNet layer3); cell i covers crop pixels
[i * stride, (i + 1) * stride), centre (i + 0.5) * stride. The target filter has ``filter_size`` taps and is
applied with padding ``filter_size // 2``:

- odd filter: score index j is centred on cell j, i.e. at crop pixel (j + 0.5) * stride;
- even filter (DiMP's 4): score index j covers cells j - k/2 .. j + k/2 - 1, whose centre lies between two
  cells, at crop pixel j * stride. Relative to the cell-centre position (c / stride - 0.5) of a target at
  crop pixel c, the label peak moves by +0.5 cells: this is the reference's +0.5 offset for even filters.
  Such a convolution gives ``feature_size + 1`` scores per axis; ``label_size`` chooses how many the label
  covers (``feature_size``, the batch contract's default, leaves out the last row/column; pass
  ``feature_size + 1`` to cover the whole padded score map).

Label value at index (r, c): exp(-((u_c - cx)^2 + (u_r - cy)^2) / (2 (sigma * stride)^2)), u the index's
crop-pixel position above, sigma in feature cells. DiMP uses sigma = feature_size * output_sigma_factor /
search_area_factor, output_sigma_factor = 1/4.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["gaussian_label", "label_grid_positions", "label_sigma_cells"]


def label_sigma_cells(feature_size: int, output_sigma_factor: float, search_area_factor: float) -> float:
    """Label sigma in feature cells: feature_size * output_sigma_factor / search_area_factor."""
    return feature_size * output_sigma_factor / search_area_factor


def label_grid_positions(
    crop_size: int, feature_size: int, filter_size: int, label_size: int, *, device=None, dtype=None
) -> Tensor:
    """(label_size,) crop-pixel positions of the score-map indices (see the module docstring)."""
    stride = crop_size / feature_size
    offset = 0.5 if filter_size % 2 == 1 else 0.0
    return (torch.arange(label_size, device=device, dtype=dtype or torch.float32) + offset) * stride


def gaussian_label(
    center_xy: Tensor,
    *,
    crop_size: int,
    feature_size: int,
    sigma_cells: float,
    filter_size: int,
    label_size: int | None = None,
    density: bool = False,
) -> Tensor:
    """Gaussian labels peaking at target centres.

    Args:
        center_xy: (..., 2) target centres (cx, cy) in crop pixels (= cxcywh[..., :2] of the crop boxes).
        crop_size: crop side in pixels; feature_size: score cells per side of the feature map.
        sigma_cells: Gaussian std in feature cells.
        filter_size: target filter taps per side (sets the grid offset, see the module docstring).
        label_size: label side; default ``feature_size``.
        density: divide by 2 pi sigma_cells^2: the Gaussian as a density per unit cell area (PrDiMP's label
            density, which pytracking's processing computes alongside the label).

    Returns:
        (..., label_size, label_size) labels in [0, 1] (densities with ``density``), dtype of ``center_xy``
        (float32 if not floating).
    """
    if center_xy.shape[-1] != 2:
        raise ValueError(f"center_xy must have shape (..., 2), got {tuple(center_xy.shape)}")
    if sigma_cells <= 0:
        raise ValueError(f"sigma_cells must be positive, got {sigma_cells}")
    size = feature_size if label_size is None else label_size
    dtype = center_xy.dtype if center_xy.is_floating_point() else torch.float32
    pos = label_grid_positions(
        crop_size, feature_size, filter_size, size, device=center_xy.device, dtype=dtype
    )
    sigma_px = sigma_cells * crop_size / feature_size
    center = center_xy.to(dtype)
    gx = torch.exp(-0.5 * ((pos - center[..., :1]) / sigma_px) ** 2)  # (..., L)
    gy = torch.exp(-0.5 * ((pos - center[..., 1:]) / sigma_px) ** 2)
    if density:
        norm = 1.0 / (math.sqrt(2.0 * math.pi) * sigma_cells)
        gx, gy = gx * norm, gy * norm
    return gy[..., :, None] * gx[..., None, :]
