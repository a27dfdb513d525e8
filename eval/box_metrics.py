"""Per-frame box measures on (N, 4) **xywh** arrays, vectorised over frames.

Pixel-inclusive IoU (corners ``x .. x+w-1``, intersection ``+1``) equals the continuous IoU, so one
formula serves every toolkit; the centre offset only moves both centres by the same amount and is kept as
an explicit argument so each toolkit's formula can be reproduced literally.
"""

from __future__ import annotations

import numpy as np


def _as_boxes(boxes: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(boxes, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"{name} must be an (N, 4) xywh array, got shape {arr.shape}")
    return arr


def iou_xywh(pred: np.ndarray, gt: np.ndarray, *, union_eps: float = 0.0, clip: bool = False) -> np.ndarray:
    """IoU of matching rows of two (N, 4) xywh arrays -> (N,) float64.

    Intersection sides are clamped at 0; union = w1*h1 + w2*h2 - inter (+ ``union_eps``). A zero union gives
    NaN (0/0), which every curve counts as a failure. Values above 1 (float rounding of identical boxes)
    become 1; ``clip`` also clamps below at 0 (only reachable with negative sizes).
    """
    a = _as_boxes(pred, "pred")
    b = _as_boxes(gt, "gt")
    if a.shape != b.shape:
        raise ValueError(f"pred and gt must have the same shape, got {a.shape} and {b.shape}")
    x1 = np.maximum(a[:, 0], b[:, 0])
    y1 = np.maximum(a[:, 1], b[:, 1])
    x2 = np.minimum(a[:, 0] + a[:, 2], b[:, 0] + b[:, 2])
    y2 = np.minimum(a[:, 1] + a[:, 3], b[:, 1] + b[:, 3])
    inter = np.clip(x2 - x1, 0.0, None) * np.clip(y2 - y1, 0.0, None)
    union = a[:, 2] * a[:, 3] + b[:, 2] * b[:, 3] - inter + union_eps
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / union
    # (x + w) - x can exceed w by one ulp, so identical float boxes may give 1 + 2e-16, which would pass the
    # threshold 1.0; every IoU above 1 is such an artefact, so the upper bound is always applied.
    return np.clip(iou, 0.0, 1.0) if clip else np.minimum(iou, 1.0)


def centers_xywh(boxes: np.ndarray, offset: float = -1.0) -> np.ndarray:
    """(N, 4) xywh -> (N, 2) centres ``x + (w + offset) / 2`` (offset -1: pixel-inclusive, 0: continuous)."""
    b = _as_boxes(boxes, "boxes")
    return b[:, :2] + (b[:, 2:] + offset) / 2.0


def center_error(pred: np.ndarray, gt: np.ndarray, *, offset: float = -1.0) -> np.ndarray:
    """Euclidean centre distance in pixels of matching rows of two (N, 4) xywh arrays -> (N,)."""
    d = centers_xywh(pred, offset) - centers_xywh(gt, offset)
    return np.sqrt((d * d).sum(axis=1))


def normalized_center_error(
    pred: np.ndarray, gt: np.ndarray, *, offset: float = -1.0, size_floor: float = 0.0
) -> np.ndarray:
    """Centre distance with both centres divided by the GT (w, h) (floored at ``size_floor``) -> (N,).

    pred, gt: (N, 4) xywh. A zero GT size gives inf/NaN (0 / 0), i.e. a failure unless masked out.
    """
    size = _as_boxes(gt, "gt")[:, 2:]
    if size_floor > 0:
        size = np.maximum(size, size_floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = centers_xywh(pred, offset) / size - centers_xywh(gt, offset) / size
    return np.sqrt((d * d).sum(axis=1))


def clip_to_image(boxes: np.ndarray, image_wh: np.ndarray) -> np.ndarray:
    """Clip (N, 4) xywh boxes to images of size ``image_wh`` ((N, 2) or (2,), width and height).

    GOT-10k toolkit rule: x, y clamped to [0, W] / [0, H], then w to [0, W - x], h to [0, H - y].
    """
    b = _as_boxes(boxes, "boxes").copy()
    wh = np.broadcast_to(np.asarray(image_wh, dtype=np.float64), (len(b), 2))
    b[:, 0] = np.clip(b[:, 0], 0.0, wh[:, 0])
    b[:, 1] = np.clip(b[:, 1], 0.0, wh[:, 1])
    b[:, 2] = np.clip(b[:, 2], 0.0, wh[:, 0] - b[:, 0])
    b[:, 3] = np.clip(b[:, 3], 0.0, wh[:, 1] - b[:, 1])
    return b
