"""The tracker's target state as boxes: pytracking's conventions (positions (y, x) and sizes (h, w), pixel centres
at integer coordinates) to and from xywh boxes in image and crop pixels.

All functions take any leading batch shape, so that one tracker (shapes (2,), scalars) and many in lockstep
(rows) compute the same float32 operations.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["box_in_crop", "boxes_in_image", "target_boxes"]


def target_boxes(pos: Tensor, size: Tensor) -> np.ndarray:
    """Targets at ``pos`` (..., 2) (y, x) with ``size`` (..., 2) (h, w) as boxes (..., 4) float64 xywh, image
    pixels."""
    box = torch.cat([pos.flip(-1) - (size.flip(-1) - 1) / 2, size.flip(-1)], dim=-1)
    return box.double().numpy()


def box_in_crop(
    pos: Tensor, size: Tensor, sample_pos: Tensor, sample_scale: Tensor, crop_size: Tensor
) -> Tensor:
    """Boxes (..., 4) xywh crop pixels of targets at ``pos`` (..., 2) (y, x) with ``size`` (..., 2) (h, w),
    image pixels, in crops of ``crop_size`` (2,) (h, w) pixels centred at ``sample_pos`` (..., 2) with
    ``sample_scale`` (..., 1) (a scalar for one box) image pixels per crop pixel."""
    centre = (pos - sample_pos) / sample_scale + (crop_size - 1) / 2
    box_sz = size / sample_scale
    top_left = centre - (box_sz - 1) / 2
    return torch.cat([top_left.flip(-1), box_sz.flip(-1)], dim=-1)


def boxes_in_image(boxes: Tensor, sample_pos: Tensor, sample_scale: Tensor, crop_size: Tensor) -> Tensor:
    """(..., S, 4) xywh crop-pixel boxes -> (..., S, 4) xywh image pixels (the inverse of
    :func:`box_in_crop`), for crops centred at ``sample_pos`` (..., 1, 2) with ``sample_scale`` (..., 1, 1)
    (for one crop: (2,) and a scalar)."""
    size = boxes[..., 2:] * sample_scale
    centre = (boxes[..., :2] + (boxes[..., 2:] - 1) / 2 - (crop_size - 1) / 2) * sample_scale
    centre = centre + sample_pos.flip(-1)
    return torch.cat([centre - (size - 1) / 2, size], dim=-1)
