"""Box formats and conversions: the one module that names them.

Formats (the last axis always has 4 entries; any leading shape ``...`` is kept):

- ``xywh``: (x, y, w, h), x/y the top-left corner. The datasets' and the batch contract's format.
- ``xyxy``: (x1, y1, x2, y2) = (x, y, x + w, y + h), top-left and bottom-right corners.
- ``cxcywh``: (cx, cy, w, h) = (x + w/2, y + h/2, w, h), the centre and the size.
- ``rel``: ((cx - cx0)/w0, (cy - cy0)/h0, log(w/w0), log(h/h0)), a box relative to a reference box
  (cx0, cy0, w0, h0). The space of the box-head sampling densities and of the refinement ascent: a
  Gaussian of std 0.05 here moves the centre by 5% of the reference width/height and scales the size
  by about exp(+-0.05). The reference box itself is rel = (0, 0, 0, 0).

Coordinates are continuous pixel coordinates: pixel (i, j) covers [j, j+1) x [i, i+1), so its centre is at
(j + 0.5, i + 0.5) and an image of width W spans [0, W]. No +1/-1 conventions are applied anywhere.

Every function accepts a ``torch.Tensor`` or a ``numpy.ndarray`` and returns the same kind (same dtype
and device for tensors); the reference box broadcasts against the boxes.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch
from torch import Tensor

ArrayT = TypeVar("ArrayT", Tensor, np.ndarray)

__all__ = [
    "box_iou",
    "cxcywh_to_xywh",
    "cxcywh_to_xyxy",
    "flip_xywh_horizontal",
    "rel_to_xywh",
    "scale_xywh",
    "xywh_to_cxcywh",
    "xywh_to_rel",
    "xywh_to_xyxy",
    "xyxy_to_cxcywh",
    "xyxy_to_xywh",
]


def _check(boxes: ArrayT, name: str = "boxes") -> None:
    if not isinstance(boxes, (Tensor, np.ndarray)):
        raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(boxes).__name__}")
    if boxes.ndim == 0 or boxes.shape[-1] != 4:
        raise ValueError(f"{name} must have shape (..., 4), got {tuple(boxes.shape)}")


def _stack(parts: list, like: ArrayT) -> ArrayT:
    if isinstance(like, Tensor):
        return torch.stack(parts, dim=-1)
    return np.stack(parts, axis=-1)


def _log(x: ArrayT) -> ArrayT:
    return torch.log(x) if isinstance(x, Tensor) else np.log(x)


def _exp(x: ArrayT) -> ArrayT:
    return torch.exp(x) if isinstance(x, Tensor) else np.exp(x)


def xywh_to_xyxy(boxes: ArrayT) -> ArrayT:
    """(..., 4) xywh -> (..., 4) xyxy."""
    _check(boxes)
    x, y, w, h = (boxes[..., i] for i in range(4))
    return _stack([x, y, x + w, y + h], boxes)


def xyxy_to_xywh(boxes: ArrayT) -> ArrayT:
    """(..., 4) xyxy -> (..., 4) xywh. Inverted corners give negative sizes (not clipped)."""
    _check(boxes)
    x1, y1, x2, y2 = (boxes[..., i] for i in range(4))
    return _stack([x1, y1, x2 - x1, y2 - y1], boxes)


def xywh_to_cxcywh(boxes: ArrayT) -> ArrayT:
    """(..., 4) xywh -> (..., 4) cxcywh."""
    _check(boxes)
    x, y, w, h = (boxes[..., i] for i in range(4))
    return _stack([x + 0.5 * w, y + 0.5 * h, w, h], boxes)


def cxcywh_to_xywh(boxes: ArrayT) -> ArrayT:
    """(..., 4) cxcywh -> (..., 4) xywh."""
    _check(boxes)
    cx, cy, w, h = (boxes[..., i] for i in range(4))
    return _stack([cx - 0.5 * w, cy - 0.5 * h, w, h], boxes)


def xyxy_to_cxcywh(boxes: ArrayT) -> ArrayT:
    """(..., 4) xyxy -> (..., 4) cxcywh."""
    return xywh_to_cxcywh(xyxy_to_xywh(boxes))


def cxcywh_to_xyxy(boxes: ArrayT) -> ArrayT:
    """(..., 4) cxcywh -> (..., 4) xyxy."""
    return xywh_to_xyxy(cxcywh_to_xywh(boxes))


def xywh_to_rel(boxes: ArrayT, reference: ArrayT) -> ArrayT:
    """(..., 4) xywh boxes -> (..., 4) rel coordinates w.r.t. ``reference`` (broadcastable (..., 4) xywh).

    rel = ((cx - cx0)/w0, (cy - cy0)/h0, log(w/w0), log(h/h0)). Needs w, h, w0, h0 > 0 (else NaN/inf).
    """
    _check(boxes)
    _check(reference, "reference")
    c = xywh_to_cxcywh(boxes)
    r = xywh_to_cxcywh(reference)
    return _stack(
        [
            (c[..., 0] - r[..., 0]) / r[..., 2],
            (c[..., 1] - r[..., 1]) / r[..., 3],
            _log(c[..., 2] / r[..., 2]),
            _log(c[..., 3] / r[..., 3]),
        ],
        c,
    )


def rel_to_xywh(rel: ArrayT, reference: ArrayT) -> ArrayT:
    """(..., 4) rel coordinates w.r.t. ``reference`` ((..., 4) xywh, broadcastable) -> (..., 4) xywh.

    The inverse of :func:`xywh_to_rel`: cx = cx0 + rel0*w0, cy = cy0 + rel1*h0, w = w0*exp(rel2),
    h = h0*exp(rel3).
    """
    _check(rel, "rel")
    _check(reference, "reference")
    r = xywh_to_cxcywh(reference)
    cx = r[..., 0] + rel[..., 0] * r[..., 2]
    cy = r[..., 1] + rel[..., 1] * r[..., 3]
    w = r[..., 2] * _exp(rel[..., 2])
    h = r[..., 3] * _exp(rel[..., 3])
    return _stack([cx - 0.5 * w, cy - 0.5 * h, w, h], cx)


def box_iou(a: ArrayT, b: ArrayT) -> ArrayT:
    """Elementwise IoU of xywh boxes: a (..., 4), b broadcastable (..., 4) -> (...).

    Boxes with non-positive area have IoU 0 with everything (no division by zero). For all pairs of two
    lists use ``box_iou(a[:, None], b[None, :])`` -> (N, M).
    """
    _check(a, "a")
    _check(b, "b")
    ax1, ay1, ax2, ay2 = (xywh_to_xyxy(a)[..., i] for i in range(4))
    bx1, by1, bx2, by2 = (xywh_to_xyxy(b)[..., i] for i in range(4))
    if isinstance(a, Tensor):
        iw = (torch.minimum(ax2, bx2) - torch.maximum(ax1, bx1)).clamp(min=0)
        ih = (torch.minimum(ay2, by2) - torch.maximum(ay1, by1)).clamp(min=0)
        area_a = a[..., 2].clamp(min=0) * a[..., 3].clamp(min=0)
        area_b = b[..., 2].clamp(min=0) * b[..., 3].clamp(min=0)
        inter = iw * ih
        union = area_a + area_b - inter
        return torch.where(union > 0, inter / union.clamp(min=torch.finfo(union.dtype).tiny), 0.0)
    iw = np.clip(np.minimum(ax2, bx2) - np.maximum(ax1, bx1), 0, None)
    ih = np.clip(np.minimum(ay2, by2) - np.maximum(ay1, by1), 0, None)
    area_a = np.clip(a[..., 2], 0, None) * np.clip(a[..., 3], 0, None)
    area_b = np.clip(b[..., 2], 0, None) * np.clip(b[..., 3], 0, None)
    inter = iw * ih
    union = area_a + area_b - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def scale_xywh(boxes: ArrayT, scale: ArrayT | float, offset: ArrayT | float = 0.0) -> ArrayT:
    """Affine map of xywh boxes (..., 4): (x, y) -> (x, y)*scale + offset, (w, h) -> (w, h)*scale.

    ``scale`` is a number or broadcastable (...,) array (isotropic), ``offset`` a number or (..., 2).
    """
    _check(boxes)
    if isinstance(boxes, Tensor):
        s = torch.as_tensor(scale, dtype=boxes.dtype, device=boxes.device)
        o = torch.as_tensor(offset, dtype=boxes.dtype, device=boxes.device)
    else:
        s = np.asarray(scale, dtype=boxes.dtype)
        o = np.asarray(offset, dtype=boxes.dtype)
    s = s[..., None]
    xy = boxes[..., :2] * s + o
    wh = boxes[..., 2:] * s
    if isinstance(boxes, Tensor):
        return torch.cat([xy, wh], dim=-1)
    return np.concatenate([xy, wh], axis=-1)


def flip_xywh_horizontal(boxes: ArrayT, image_width: float | ArrayT) -> ArrayT:
    """Mirror xywh boxes (..., 4) in an image of width ``image_width`` (number or broadcastable (...,)).

    x' = W - x - w; y, w, h unchanged (continuous coordinates, so flipping twice is the identity).
    """
    _check(boxes)
    x, y, w, h = (boxes[..., i] for i in range(4))
    return _stack([image_width - x - w, y, w, h], boxes)
