"""Seeded weights and images shared by the golden-file script and its tests.

The golden numbers of ``scripts/pytracking_golden.py`` (``network``, ``tracker``) come from pytracking's
network filled with these values; the tests rebuild the very same state dict from the recorded key names and
shapes, write it in pytracking's file format, convert it and compare this toolkit's outputs. Every value is a
pure function of ``(seed, key, shape)`` (numpy's PCG64, platform-independent), so nothing but names and shapes
needs storing.

Scales keep a random ResNet-50 in eval mode well-conditioned: convolution and linear weights are He-normal
over their fan-in, BatchNorm divides by a positive running variance near one, and the last BatchNorm of every
residual branch (``bn3``) has a small gain, so the residual sum grows slowly through the 16 bottlenecks and
every feature stays of order one.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence

import numpy as np
import torch

#: Key suffixes (pytracking's names) of the DiMP filter optimizer's scalars and per-bin 1x1 convolutions,
#: with their distributions near the values training gives them: (kind, low, high) of a uniform draw.
_SPECIAL: dict[str, tuple[str, float, float]] = {
    "log_step_length": ("uniform", math.log(0.5), math.log(1.0)),
    "filter_reg": ("uniform", 0.05, 0.2),
    "label_map_predictor.weight": ("uniform", 0.0, 1.0),
    "target_mask_predictor.0.weight": ("uniform", -3.0, 3.0),
    "spatial_weight_predictor.weight": ("uniform", 0.5, 1.5),
}


def _rng(seed: int, key: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(key.encode("utf-8"))])


def seeded_tensor(seed: int, key: str, shape: Sequence[int]) -> torch.Tensor:
    """The value of state-dict entry ``key`` (pytracking's name) of ``shape``: float32, or an int64 zero
    for ``num_batches_tracked``. Deterministic in ``(seed, key, shape)``."""
    shape = tuple(int(s) for s in shape)
    if key.endswith("num_batches_tracked"):
        return torch.zeros(shape, dtype=torch.int64)
    rng = _rng(seed, key)
    for suffix, (_, low, high) in _SPECIAL.items():
        if key.endswith(suffix):
            value = rng.uniform(low, high, size=shape)
            break
    else:
        if key.endswith("running_mean"):
            value = 0.1 * rng.standard_normal(shape)
        elif key.endswith("running_var"):
            value = rng.uniform(0.5, 1.5, size=shape)
        elif key.endswith("bias"):
            value = 0.1 * rng.standard_normal(shape)
        elif len(shape) == 1:  # a BatchNorm gain
            low, high = (0.1, 0.3) if ".bn3." in key else (0.5, 1.0)
            value = rng.uniform(low, high, size=shape)
        else:  # convolution / linear weight, (out, in, ...): He-normal over the fan-in
            fan_in = math.prod(shape[1:])
            value = rng.standard_normal(shape, dtype=np.float32) * np.float32(math.sqrt(2.0 / fan_in))
    return torch.from_numpy(np.asarray(value, dtype=np.float32).reshape(shape))


def seeded_state_dict(
    seed: int, keys_and_shapes: Iterable[tuple[str, Sequence[int]]]
) -> dict[str, torch.Tensor]:
    """``{key: seeded_tensor(seed, key, shape)}`` in the given order."""
    return {key: seeded_tensor(seed, key, shape) for key, shape in keys_and_shapes}


def seeded_image(seed: int, size: int) -> torch.Tensor:
    """A (3, size, size) float32 image of order-one values (as after ImageNet normalisation): a sum of
    random plane waves (smooth structure at several scales) plus a little pixel noise."""
    rng = np.random.default_rng([seed, 0x1A6E])
    coords = np.arange(size, dtype=np.float64)
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    image = np.zeros((3, size, size))
    for channel in range(3):
        for _ in range(12):
            period = rng.uniform(6.0, 64.0)
            angle = rng.uniform(0.0, math.pi)
            phase = rng.uniform(0.0, 2.0 * math.pi)
            kx, ky = math.cos(angle) * 2.0 * math.pi / period, math.sin(angle) * 2.0 * math.pi / period
            image[channel] += rng.uniform(0.2, 1.0) * np.sin(kx * xx + ky * yy + phase)
    image /= image.std(axis=(1, 2), keepdims=True)
    image += 0.1 * rng.standard_normal(image.shape)
    return torch.from_numpy(image.astype(np.float32))


def seeded_crops(
    seed: int, image_size: int, crop_size: int, corners_xy: Sequence[tuple[int, int]]
) -> torch.Tensor:
    """(N, 3, crop_size, crop_size) crops of :func:`seeded_image` at whole-pixel top-left corners (x, y)."""
    image = seeded_image(seed, image_size)
    crops = [image[:, y : y + crop_size, x : x + crop_size] for x, y in corners_xy]
    if any(c.shape[-2:] != (crop_size, crop_size) for c in crops):
        raise ValueError(f"crops of {crop_size} px at {list(corners_xy)} leave the {image_size}-px image")
    return torch.stack(crops).contiguous()


def tracker_golden_weights(geometry: str) -> tuple[int, dict[str, torch.Tensor]]:
    """(seed, state dict) of pytracking's ``dimpnet50`` with the seeded weights of the tracker golden file
    ``tests/golden/tracker_<geometry>.npz`` (its key names, shapes and seed)."""
    from pathlib import Path

    with np.load(Path(__file__).parent / f"tracker_{geometry}.npz") as g:
        shapes = [
            (str(k), tuple(int(v) for v in s[:n]))
            for k, s, n in zip(g["keys"], g["shapes"], g["ndims"], strict=True)
        ]
        seed = int(g["seed"])
    return seed, seeded_state_dict(seed, shapes)
