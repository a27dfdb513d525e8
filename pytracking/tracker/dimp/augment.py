"""Initial-frame augmentation: the first frame's training samples for the classifier's sample memory.

One target-centred crop ``expansion_factor`` times larger than the search crop is taken with the shared crop
function (``ltr.data.crop``, border mode ``replicate``: the target stays at the centre), and every augmented
sample is resampled from it in one ``grid_sample`` call: identity, horizontal flip, rotations, shifts (each
with its own random shift of up to +-``random_shift_factor``/2 crop sizes, except the identity), then the
Gaussian blurs on their own samples. Dropout copies are made later, on the classification features
(:func:`feature_dropout`).

Target boxes in the samples: the box moves with the sample's centre offset and flip; rotations keep the box
size (as in the reference implementation).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ltr.data.crop import CropTransform
from pytracking.tracker.dimp.frames import Frame, crop_frame_single
from pytracking.tracker.dimp.params import AugmentationParams


class InitSamples(NamedTuple):
    """crops: (N, C, S, S) float crops (pixel values of the frame, not normalised); boxes: (N, 4) xywh target
    boxes in crop pixels; identity_transform: image <-> crop mapping of sample 0 (the un-augmented crop)."""

    crops: Tensor
    boxes: Tensor
    identity_transform: CropTransform


def _sample_geometry(
    aug: AugmentationParams, crop_size: int, generator: torch.Generator
) -> tuple[Tensor, Tensor, list[tuple[int, float, float]]]:
    """Per sample: linear map A (N, 2, 2) and offset t (N, 2) from sample to expanded-crop coordinates
    (both about the crop centres, pixels), and the blur list [(sample index, sigma_x, sigma_y)]."""
    mats: list[Tensor] = []
    offs: list[Tensor] = []
    blurs: list[tuple[int, float, float]] = []
    eye = torch.eye(2, dtype=torch.float64)

    def rand_shift() -> Tensor:
        return (
            (torch.rand(2, generator=generator, dtype=torch.float64) - 0.5)
            * crop_size
            * aug.random_shift_factor
        )

    mats.append(eye)
    offs.append(torch.zeros(2, dtype=torch.float64))
    if aug.fliplr:
        mats.append(torch.tensor([[-1.0, 0.0], [0.0, 1.0]], dtype=torch.float64))
        offs.append(rand_shift())
    for angle in aug.rotations:
        a = math.radians(angle)
        mats.append(
            torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=torch.float64)
        )
        offs.append(rand_shift())
    for sx, sy in aug.blurs:
        blurs.append((len(mats), sx, sy))
        mats.append(eye)
        offs.append(rand_shift())
    for fx, fy in aug.shifts:
        mats.append(eye)
        offs.append(torch.tensor([fx, fy], dtype=torch.float64) * crop_size / 2 + rand_shift())
    return torch.stack(mats), torch.stack(offs), blurs


def gaussian_blur(image: Tensor, sigma_x: float, sigma_y: float) -> Tensor:
    """Separable Gaussian blur of (N, C, H, W) images, replicate border; sigma 0 leaves an axis unchanged."""
    out = image
    for axis, sigma in ((3, sigma_x), (2, sigma_y)):
        if sigma <= 0:
            continue
        radius = max(1, math.ceil(2 * sigma))
        x = torch.arange(-radius, radius + 1, device=image.device, dtype=image.dtype)
        k = torch.exp(-0.5 * (x / sigma) ** 2)
        k = k / k.sum()
        c = out.shape[1]
        if axis == 3:
            weight = k.reshape(1, 1, 1, -1).expand(c, 1, 1, -1)
            out = F.conv2d(F.pad(out, (radius, radius, 0, 0), mode="replicate"), weight, groups=c)
        else:
            weight = k.reshape(1, 1, -1, 1).expand(c, 1, -1, 1)
            out = F.conv2d(F.pad(out, (0, 0, radius, radius), mode="replicate"), weight, groups=c)
    return out


def augmented_samples(
    frame: Frame,
    box_xywh: Tensor,
    *,
    crop_size: int,
    search_area_factor: float,
    aug: AugmentationParams,
    generator: torch.Generator,
) -> InitSamples:
    """The augmented initial crops of a prepared ``frame`` (numpy (H, W, 3) or tensor (3, H, W), see
    :func:`pytracking.tracker.dimp.frames.prepare_frame`) around ``box_xywh`` (4,) xywh image pixels (a tensor
    on the tracker's device).

    Returns :class:`InitSamples` with ``aug.num_image_samples`` crops of ``crop_size`` pixels.
    """
    expanded = max(crop_size, round(crop_size * aug.expansion_factor))
    big, t_big = crop_frame_single(frame, box_xywh, search_area_factor * expanded / crop_size, expanded)
    mats, offs, blurs = _sample_geometry(aug, crop_size, generator)
    n = mats.shape[0]
    dtype, device = big.dtype, big.device
    a = mats.to(device=device, dtype=dtype)
    t = offs.to(device=device, dtype=dtype)
    c_big = 0.5 * expanded
    # output pixel centres relative to the crop centre
    u = torch.arange(crop_size, device=device, dtype=dtype) + 0.5 - 0.5 * crop_size
    uy, ux = torch.meshgrid(u, u, indexing="ij")
    pts = torch.stack([ux, uy], dim=-1)  # (S, S, 2) x, y
    src = torch.einsum("nij,hwj->nhwi", a, pts) + t[:, None, None, :] + c_big  # expanded-crop pixels
    grid = 2.0 * src / expanded - 1.0
    crops = F.grid_sample(
        big.unsqueeze(0).expand(n, -1, -1, -1),
        grid,
        mode="bilinear",
        padding_mode="border",
        align_corners=False,
    )
    if blurs:
        crops = crops.clone()
        for index, sx, sy in blurs:
            crops[index : index + 1] = gaussian_blur(crops[index : index + 1], sx, sy)
    # target box: its centre maps through the inverse of each sample's transform, its size is kept
    box_big = t_big.image_to_crop(box_xywh.to(dtype))
    centre_big = box_big[:2] + 0.5 * box_big[2:]
    rel = centre_big - c_big - t  # (N, 2)
    centre = torch.linalg.solve(a, rel.unsqueeze(-1)).squeeze(-1) + 0.5 * crop_size
    size = box_big[2:].expand(n, 2)
    boxes = torch.cat([centre - 0.5 * size, size], dim=-1)
    # the identity sample is the centre crop_size x crop_size part of the expanded crop
    shift = 0.5 * (expanded - crop_size)
    identity = CropTransform(t_big.scale, t_big.offset + shift / t_big.scale)
    return InitSamples(crops, boxes, identity)


def feature_dropout(features: Tensor, copies: int, prob: float, generator: torch.Generator) -> Tensor:
    """``copies`` channel-dropout versions (copies, C, H, W) of (1, C, H, W) features (kept channels scaled by
    1 / (1 - prob), dropped ones zero)."""
    if copies == 0:
        return features[:0]
    c = features.shape[1]
    keep = (torch.rand(copies, c, 1, 1, generator=generator) >= prob).to(features.dtype) / (1.0 - prob)
    return features * keep.to(features.device)
