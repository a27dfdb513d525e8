"""Augmentations on uint8 arrays (no PIL round trips): grayscale, horizontal flip, brightness, normalise.

All functions take torch tensors with channels before height and width, ``(..., C, H, W)`` (uint8 images are
fastest contiguous: ``np.ascontiguousarray(a.transpose(0, 3, 1, 2))`` of numpy (N, H, W, C) crops). The
random decisions are drawn once per sample by :func:`draw_augmentation` so the processing applies them
consistently to images, boxes, labels and proposals.

Conventions (SuperDiMP's train setting, as its transforms draw them): grayscale and a flip of the whole
frames are joint (one decision for all frames of a sample, before the crop); then every frame's crop gets its
own flip and brightness factor (the reference's per-set transform is rolled once per frame). Grayscale and
the whole-frame flip work on numpy (H, W, C) frames (:func:`grayscale_frame`, ``np.fliplr``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from ltr.ops.boxes import flip_xywh_horizontal

IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)
#: How a flip maps boxes (:func:`flip_width`).
FlipConvention = Literal["reference", "continuous"]
FLIP_CONVENTIONS: tuple[str, ...] = ("reference", "continuous")
#: ITU-R BT.601 luma weights for (R, G, B), the ones OpenCV's RGB2GRAY uses.
GRAY_WEIGHTS: tuple[float, float, float] = (0.299, 0.587, 0.114)

__all__ = [
    "FLIP_CONVENTIONS",
    "GRAY_WEIGHTS",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "AugmentationDraw",
    "FlipConvention",
    "brightness_normalize",
    "brightness_normalize_lut",
    "normalization_lut",
    "draw_augmentation",
    "flip_width",
    "grayscale_frame",
    "hflip",
    "to_grayscale",
]


@dataclass(frozen=True)
class AugmentationDraw:
    """The random choices of one sample: grayscale and a flip of the whole frames (one decision each for all
    frames, before the crop), then per frame a flip of its crop and a brightness factor."""

    grayscale: bool = False
    joint_flip: bool = False
    flips: tuple[bool, ...] = ()
    brightness: tuple[float, ...] = ()

    def frame_flips(self, num_frames: int) -> tuple[bool, ...]:
        """Per-frame crop flips (all False when none were drawn)."""
        return self.flips or (False,) * num_frames

    def frame_brightness(self, num_frames: int) -> tuple[float, ...]:
        """Per-frame brightness factors (all 1 when none were drawn)."""
        return self.brightness or (1.0,) * num_frames


def draw_augmentation(
    rng: np.random.Generator,
    num_frames: int,
    *,
    grayscale_prob: float,
    joint_flip_prob: float,
    flip_prob: float,
    brightness_jitter: float,
    flip_joint: bool = False,
) -> AugmentationDraw:
    """Draw one sample's augmentation for ``num_frames`` frames.

    Grayscale and the whole-frame flip are one decision each for the sample (the reference's joint
    transform); every frame then gets its own crop flip and a brightness factor uniform in
    [max(0, 1 - b), 1 + b] (the reference rolls its per-set transform once per frame). ``flip_joint=True``
    uses one crop-flip decision for all frames instead.
    """
    for name, p in (
        ("grayscale_prob", grayscale_prob),
        ("joint_flip_prob", joint_flip_prob),
        ("flip_prob", flip_prob),
    ):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {p}")
    if brightness_jitter < 0:
        raise ValueError(f"brightness_jitter must be >= 0, got {brightness_jitter}")
    gray = bool(rng.random() < grayscale_prob)
    joint_flip = bool(rng.random() < joint_flip_prob)
    u = rng.random(1 if flip_joint else num_frames)
    flips = tuple(bool(v < flip_prob) for v in np.broadcast_to(u, (num_frames,)))
    lo, hi = max(0.0, 1.0 - brightness_jitter), 1.0 + brightness_jitter
    brightness = tuple(float(v) for v in rng.uniform(lo, hi, size=num_frames))
    return AugmentationDraw(gray, joint_flip, flips, brightness)


def flip_width(width: float, convention: FlipConvention) -> float:
    """The width ``W'`` a horizontal flip mirrors boxes in, ``x' = W' - x - w``: ``W - 1`` for
    ``"reference"`` (pytracking mirrors pixel indices, while its crops map coordinates continuously, so its
    flipped boxes sit one pixel left of the mirrored target), ``W`` for ``"continuous"``."""
    if convention not in FLIP_CONVENTIONS:
        raise ValueError(f"flip convention must be one of {FLIP_CONVENTIONS}, got {convention!r}")
    return width - 1 if convention == "reference" else width


def grayscale_frame(image: np.ndarray) -> np.ndarray:
    """RGB uint8 (H, W, 3) -> its gray value (OpenCV's RGB2GRAY, the reference's) in all three channels."""
    import cv2

    gray = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
    return np.repeat(gray[:, :, None], 3, axis=2)


def to_grayscale(images: Tensor) -> Tensor:
    """RGB (..., 3, H, W) -> gray replicated to 3 channels, (..., 3, H, W), same dtype (uint8 rounded)."""
    if images.ndim < 3 or images.shape[-3] != 3:
        raise ValueError(f"images must be (..., 3, H, W) RGB, got shape {tuple(images.shape)}")
    w = torch.tensor(GRAY_WEIGHTS, dtype=torch.float32, device=images.device).reshape(3, 1, 1)
    gray = (images.to(torch.float32) * w).sum(dim=-3, keepdim=True)
    if not images.is_floating_point():
        info = torch.iinfo(images.dtype)
        gray = gray.round_().clamp_(info.min, info.max)
    return gray.to(images.dtype).expand_as(images).contiguous()


def hflip(
    images: Tensor, boxes_xywh: Tensor, convention: FlipConvention = "continuous"
) -> tuple[Tensor, Tensor]:
    """Mirror images (..., C, H, W) left-right and their xywh boxes (..., 4): x' = W' - x - w with
    W' = :func:`flip_width` of the image width (W for ``"continuous"``, W - 1 for ``"reference"``)."""
    if boxes_xywh.shape[-1] != 4:
        raise ValueError(f"boxes_xywh must have shape (..., 4), got {tuple(boxes_xywh.shape)}")
    return images.flip(-1), flip_xywh_horizontal(boxes_xywh, flip_width(images.shape[-1], convention))


def brightness_normalize(
    images: Tensor,
    brightness: float | Tensor = 1.0,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> Tensor:
    """uint8 (..., 3, H, W) -> float32 (..., 3, H, W): (clamp(x * brightness / 255, 0, 1) - mean) / std.

    ``brightness`` is a number or a tensor broadcastable to (..., 1, 1, 1) (one factor per image).
    """
    if images.ndim < 3 or images.shape[-3] != len(mean):
        raise ValueError(f"images must be (..., {len(mean)}, H, W), got shape {tuple(images.shape)}")
    m = torch.tensor(mean, dtype=torch.float32, device=images.device).reshape(-1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32, device=images.device).reshape(-1, 1, 1)
    b = torch.as_tensor(brightness, dtype=torch.float32, device=images.device)
    scale = b / 255.0
    if scale.ndim > 0:
        scale = scale.reshape(*scale.shape, *([1] * (images.ndim - scale.ndim)))
    out = images.to(torch.float32, memory_format=torch.contiguous_format)
    return out.mul_(scale).clamp_(0.0, 1.0).sub_(m).div_(s)


def normalization_lut(
    brightness: float, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
) -> np.ndarray:
    """(C, 256) float32 table: entry [c, v] = (min(v * brightness / 255, 1) - mean[c]) / std[c].

    Computed in float32 in the reference's order (``v * float32(brightness / 255)``, clamp, minus the mean,
    divided by the std, each step rounded to float32), so the normalised images equal pytracking's bit for
    bit."""
    v = np.arange(256, dtype=np.float32) * np.float32(brightness / 255.0)
    v = np.minimum(v, np.float32(1.0))
    m = np.asarray(mean, dtype=np.float32)[:, None]
    s = np.asarray(std, dtype=np.float32)[:, None]
    return (v[None, :] - m) / s


def brightness_normalize_lut(
    images: np.ndarray,
    brightness: Sequence[float] | np.ndarray,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> np.ndarray:
    """:func:`brightness_normalize` for numpy uint8 (N, C, H, W) by table look-up: float32 (N, C, H, W).

    One ``cv2.LUT`` pass per image plane replaces the float conversion, scale, clamp, subtract and divide
    passes (faster on a CPU: ``benchmarks/data_pipeline.py``). ``brightness`` has one factor per image.
    """
    import cv2

    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1] != len(mean):
        raise ValueError(f"images must be uint8 (N, {len(mean)}, H, W), got {images.dtype} {images.shape}")
    factors = np.broadcast_to(np.asarray(brightness, dtype=np.float64), (images.shape[0],))
    out = np.empty(images.shape, dtype=np.float32)
    tables: dict[float, np.ndarray] = {}
    for i, b in enumerate(factors):
        lut = tables.get(float(b))
        if lut is None:
            lut = tables[float(b)] = normalization_lut(float(b), mean, std)
        for c in range(images.shape[1]):
            out[i, c] = cv2.LUT(images[i, c], lut[c])
    return out
