"""Augmentations on uint8 arrays (no PIL round trips): grayscale, horizontal flip, brightness, normalise.

All functions take torch tensors with channels before height and width, ``(..., C, H, W)`` (uint8 images are
fastest contiguous: ``np.ascontiguousarray(a.transpose(0, 3, 1, 2))`` of numpy (N, H, W, C) crops). The
random decisions are drawn once per sample by :func:`draw_augmentation` so the processing applies them
consistently to images, boxes, labels and proposals.

Conventions (SuperDiMP train setting): grayscale is joint (one decision for all frames of a sample);
flip and brightness are drawn per frame set (train set, test set), like the reference's per-set transforms;
``flip_joint=True`` flips both sets together instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ltr.ops.boxes import flip_xywh_horizontal

IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)
#: ITU-R BT.601 luma weights for (R, G, B), the ones OpenCV's RGB2GRAY uses.
GRAY_WEIGHTS: tuple[float, float, float] = (0.299, 0.587, 0.114)

__all__ = [
    "GRAY_WEIGHTS",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "AugmentationDraw",
    "brightness_normalize",
    "brightness_normalize_lut",
    "normalization_lut",
    "draw_augmentation",
    "hflip",
    "to_grayscale",
]


@dataclass(frozen=True)
class AugmentationDraw:
    """The random choices of one sample: grayscale (all frames), flip and brightness factor per frame set."""

    grayscale: bool = False
    flip_train: bool = False
    flip_test: bool = False
    brightness_train: float = 1.0
    brightness_test: float = 1.0


def draw_augmentation(
    rng: np.random.Generator,
    *,
    grayscale_prob: float,
    flip_prob: float,
    brightness_jitter: float,
    flip_joint: bool = False,
) -> AugmentationDraw:
    """Draw one sample's augmentation. Brightness factors are uniform in [max(0, 1 - b), 1 + b]."""
    for name, p in (("grayscale_prob", grayscale_prob), ("flip_prob", flip_prob)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {p}")
    if brightness_jitter < 0:
        raise ValueError(f"brightness_jitter must be >= 0, got {brightness_jitter}")
    gray = bool(rng.random() < grayscale_prob)
    flip_train = bool(rng.random() < flip_prob)
    flip_test = flip_train if flip_joint else bool(rng.random() < flip_prob)
    lo, hi = max(0.0, 1.0 - brightness_jitter), 1.0 + brightness_jitter
    b_train, b_test = (float(v) for v in rng.uniform(lo, hi, size=2))
    return AugmentationDraw(gray, flip_train, flip_test, b_train, b_test)


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


def hflip(images: Tensor, boxes_xywh: Tensor) -> tuple[Tensor, Tensor]:
    """Mirror images (..., C, H, W) left-right and their xywh boxes (..., 4) (x' = W - x - w)."""
    if boxes_xywh.shape[-1] != 4:
        raise ValueError(f"boxes_xywh must have shape (..., 4), got {tuple(boxes_xywh.shape)}")
    return images.flip(-1), flip_xywh_horizontal(boxes_xywh, images.shape[-1])


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
    """(C, 256) float32 table: entry [c, v] = (min(v * brightness / 255, 1) - mean[c]) / std[c]."""
    v = np.minimum(np.arange(256, dtype=np.float64) * (brightness / 255.0), 1.0)
    m = np.asarray(mean, dtype=np.float64)[:, None]
    s = np.asarray(std, dtype=np.float64)[:, None]
    return ((v[None, :] - m) / s).astype(np.float32)


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
