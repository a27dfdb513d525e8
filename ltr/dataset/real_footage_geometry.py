"""Geometry and rendering of the real-footage set (:mod:`ltr.dataset.real_footage`): views over photographs.

Coordinates are continuous and 0-based (pixel ``(i, j)`` covers ``[i, i+1) x [j, j+1)``), in source-photo
pixels or frame pixels; boxes are **xywh**.

- A **camera view** of a photograph is the window whose top-left corner is ``origin`` (source pixels) and
  whose pixels are ``scale`` source pixels wide: a source point ``X`` appears at ``(X - origin) / scale`` in
  the frame. A box follows exactly: ``((x - ox) / s, (y - oy) / s, w / s, h / s)``.
- A **patch** is an elliptical region of a photograph (centre, semi-axes, source pixels). Drawn with the
  state ``(cx, cy, k, angle)`` (frame pixels, frame pixels per source pixel, radians) its centre lands on
  ``(cx, cy)`` and it is scaled by ``k`` and rotated by ``angle``; its box is the tight bound of the rotated
  ellipse, ``half_w = k * sqrt(a^2 cos^2 + b^2 sin^2)``, ``half_h = k * sqrt(a^2 sin^2 + b^2 cos^2)``.
  The edge is feathered over about a pixel; a pixel centre is inside the ellipse exactly when its alpha is
  at least 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

#: width of the patches' soft edge, frame pixels.
FEATHER = 1.5


def view_matrix(origin: tuple[float, float], scale: float) -> np.ndarray:
    """(2, 3) float64 affine map from source pixel indices to frame pixel indices for ``cv2.warpAffine``.

    Continuous coordinates are pixel indices + 0.5, so ``x_f + 0.5 = (x_s + 0.5 - ox) / s``.
    """
    inv = 1.0 / float(scale)
    ox, oy = float(origin[0]), float(origin[1])
    return np.array([[inv, 0.0, (0.5 - ox) * inv - 0.5], [0.0, inv, (0.5 - oy) * inv - 0.5]])


def render_view(
    photo: np.ndarray, origin: tuple[float, float], scale: float, size: tuple[int, int]
) -> np.ndarray:
    """The camera view of ``photo`` (H, W, 3) uint8 -> (h, w, 3) uint8 frame, ``size = (w, h)``.

    Bilinear sampling; points beyond the photo's border take the reflected photo (the set's cameras keep
    their windows inside the photo, so this only touches the outermost half pixel).
    """
    return cv2.warpAffine(
        photo,
        view_matrix(origin, scale),
        (int(size[0]), int(size[1])),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REFLECT_101,
    )


def view_boxes(box_src: np.ndarray, origins: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Source box (4,) xywh seen through cameras ``origins`` (N, 2), ``scales`` (N,) -> (N, 4) xywh frame boxes."""
    box = np.asarray(box_src, dtype=np.float64)
    origins = np.atleast_2d(np.asarray(origins, dtype=np.float64))
    scales = np.asarray(scales, dtype=np.float64).reshape(-1)
    xy = (box[None, :2] - origins) / scales[:, None]
    wh = box[None, 2:] / scales[:, None]
    return np.concatenate([xy, wh], axis=1)


@dataclass(frozen=True)
class Patch:
    """An elliptical region of photograph ``photo``: centre ``(cx, cy)`` and semi-axes ``(a, b)``, source
    pixels, axis-aligned in the photo."""

    photo: str
    cx: float
    cy: float
    a: float
    b: float


def patch_boxes(patch: Patch, states: np.ndarray) -> np.ndarray:
    """Tight xywh boxes (N, 4) of ``patch`` drawn with ``states`` (N, 4) ``cx, cy, k, angle``."""
    states = np.atleast_2d(np.asarray(states, dtype=np.float64))
    cx, cy, k, angle = states.T
    c2, s2 = np.cos(angle) ** 2, np.sin(angle) ** 2
    hw = k * np.sqrt(patch.a**2 * c2 + patch.b**2 * s2)
    hh = k * np.sqrt(patch.a**2 * s2 + patch.b**2 * c2)
    return np.stack([cx - hw, cy - hh, 2 * hw, 2 * hh], axis=1)


def draw_patch(frame: np.ndarray, photo: np.ndarray, patch: Patch, state: np.ndarray) -> np.ndarray:
    """Composite ``patch`` (cut from ``photo``, (H, W, 3) uint8) into ``frame`` (h, w, 3) float32 in place.

    ``state``: (4,) ``cx, cy, k, angle``. Returns the patch's alpha over the frame, (h, w) float32 in [0, 1]
    (zero outside the patch's window).
    """
    height, width = frame.shape[:2]
    alpha_full = np.zeros((height, width), np.float32)
    cx, cy, k, angle = (float(v) for v in state)
    box = patch_boxes(patch, np.array([[cx, cy, k, angle]]))[0]
    pad = int(np.ceil(FEATHER)) + 1
    x0 = max(int(np.floor(box[0])) - pad, 0)
    y0 = max(int(np.floor(box[1])) - pad, 0)
    x1 = min(int(np.ceil(box[0] + box[2])) + pad, width)
    y1 = min(int(np.ceil(box[1] + box[3])) + pad, height)
    if x0 >= x1 or y0 >= y1:
        return alpha_full
    c, s = np.cos(angle), np.sin(angle)
    # Source -> frame (continuous): X_f = t + k R (X_s - c_s); in indices of the window starting at (x0, y0).
    rot = k * np.array([[c, -s], [s, c]])
    src_c = np.array([patch.cx, patch.cy])
    shift = np.array([cx, cy]) - rot @ src_c + rot @ np.array([0.5, 0.5]) - 0.5 - np.array([x0, y0])
    matrix = np.concatenate([rot, shift[:, None]], axis=1)
    rgb = cv2.warpAffine(
        photo, matrix, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT_101
    ).astype(np.float32)
    # Alpha from the ellipse in the patch's own (unscaled, unrotated) frame.
    dx = (np.arange(x0, x1, dtype=np.float64) + 0.5 - cx)[None, :]
    dy = (np.arange(y0, y1, dtype=np.float64) + 0.5 - cy)[:, None]
    u = (c * dx + s * dy) / (k * patch.a)
    v = (-s * dx + c * dy) / (k * patch.b)
    radius = np.sqrt(u * u + v * v)
    distance = (radius - 1.0) * k * min(patch.a, patch.b)  # frame pixels, exact on the outline
    alpha = np.clip(0.5 - distance / FEATHER, 0.0, 1.0).astype(np.float32)
    region = frame[y0:y1, x0:x1]
    region += alpha[..., None] * (rgb - region)
    alpha_full[y0:y1, x0:x1] = alpha
    return alpha_full
