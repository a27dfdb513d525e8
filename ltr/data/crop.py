"""The one target-centred crop function, shared by training (data pipeline) and tracking.

Geometry (:func:`crop_region`): a square region of side ``sqrt(w*h) * search_area_factor`` centred at the box
centre, resampled to ``output_size x output_size`` pixels. Border modes:

- ``"replicate"``: the region stays where it is; parts outside the image repeat the border pixels.
- ``"inside"``: the region is shrunk (by at most ``max_scale_change``) until it fits the image in both
  directions, then shifted to lie inside the image.
- ``"inside_major"``: shrunk (by at most ``max_scale_change``) until it fits in at least one direction, then
  shifted inside the image as far as possible; in a direction where it is still larger than the image it is
  centred on the image (equal padding on both sides).

The target is therefore not always at the crop centre: always map boxes with the returned
:class:`CropTransform`. Its convention: ``p_crop = (p_image - offset) * scale`` for points, sizes times
``scale``; ``offset`` is the region's top-left corner in image pixels and ``scale = output_size / side``.

Pixel sampling, by image type (same geometry, same continuous pixel convention as :mod:`ltr.ops.boxes`):

- ``numpy.ndarray`` (H, W, C) frames (the CPU data pipeline): OpenCV on the uint8 frame, no float copy of
  the frame. The region is rounded to whole pixels (its corner and side move by at most half a source
  pixel), the part outside the frame is replicated with ``cv2.copyMakeBorder`` and the result resized with
  ``cv2.resize``, whose SIMD bilinear path is much faster than a bilinear ``cv2.warpAffine`` of the same
  output. Regions larger than three output
  sides (padding them would cost more than warping) are warped exactly with ``cv2.warpAffine`` and a
  replicated border, whose cost is bounded by the output size. Either way the returned transform is exact
  for the crop produced. See ``benchmarks/data_pipeline.py``.
- ``torch.Tensor`` (C, H, W) or (N, C, H, W) frames on any device: one ``grid_sample`` call for all crops
  (bilinear, ``padding_mode="border"`` = replicate, ``align_corners=False``), batched, no host
  synchronisation on GPU, so the tracker can crop several scales of a GPU frame at once. On CPU a shared
  frame is first cut to the part the crops read, so only that part is converted to float. For one crop of
  a CPU frame the numpy route is still the faster one (``benchmarks/data_pipeline.py`` measures both).

For the same region both routes agree to within interpolation rounding (cv2 uses fixed-point weights),
except in the outermost ring of output pixels (within half a source pixel of the region edge), where
``cv2.resize`` repeats the region's edge pixel instead of reading the image pixel beyond it.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ltr.ops.boxes import ArrayT, scale_xywh

CropMode = Literal["replicate", "inside", "inside_major"]
CROP_MODES: tuple[str, ...] = ("replicate", "inside", "inside_major")

__all__ = [
    "CROP_MODES",
    "CropMode",
    "CropTransform",
    "crop_region",
    "sample_target_crop",
    "sample_target_crops",
]


class CropTransform(NamedTuple):
    """Image <-> crop mapping of one crop (scalar ``scale``, (2,) ``offset``) or N crops ((N,), (N, 2)).

    ``p_crop = (p_image - offset) * scale``. Arrays are numpy or torch like the boxes they came from.
    """

    scale: ArrayT
    offset: ArrayT

    def image_to_crop(self, boxes_xywh: ArrayT) -> ArrayT:
        """xywh boxes in image pixels (..., 4) -> xywh in crop pixels (leading dims broadcast with scale)."""
        return scale_xywh(boxes_xywh, self.scale, -self.offset * self.scale[..., None])

    def crop_to_image(self, boxes_xywh: ArrayT) -> ArrayT:
        """xywh boxes in crop pixels (..., 4) -> xywh in image pixels."""
        return scale_xywh(boxes_xywh, 1.0 / self.scale, self.offset)


#: regions up to this many output sides are padded + resized; larger ones are warped (cost bounded by output)
_MAX_PAD_RATIO = 3.0


def _check_mode(mode: str) -> None:
    if mode not in CROP_MODES:
        raise ValueError(f"crop mode must be one of {CROP_MODES}, got {mode!r}")


def crop_region(
    box_xywh: ArrayT,
    search_area_factor: float,
    image_size_wh: ArrayT | tuple[float, float],
    *,
    mode: CropMode = "replicate",
    max_scale_change: float = math.inf,
    min_side: float = 1.0,
) -> ArrayT:
    """The square crop region(s) in image pixels.

    Args:
        box_xywh: (..., 4) target box(es) in image pixels, xywh (numpy or torch).
        search_area_factor: region side = sqrt(w * h) * search_area_factor (at least ``min_side``).
        image_size_wh: (..., 2) or (2,) image width and height, broadcast with the boxes.
        mode: ``"replicate"``, ``"inside"`` or ``"inside_major"`` (see the module docstring).
        max_scale_change: the most the inside modes may shrink the region (1.5 in SuperDiMP).

    Returns:
        (..., 4) xywh regions with w == h, same array type as ``box_xywh``.
    """
    _check_mode(mode)
    if max_scale_change < 1:
        raise ValueError(f"max_scale_change must be >= 1, got {max_scale_change}")
    is_torch = isinstance(box_xywh, Tensor)
    xp = torch if is_torch else np
    if is_torch:
        size = torch.as_tensor(image_size_wh, dtype=box_xywh.dtype, device=box_xywh.device)
        area = (box_xywh[..., 2] * box_xywh[..., 3]).clamp(min=0)
    else:
        size = np.asarray(image_size_wh, dtype=np.float64)
        area = np.clip(box_xywh[..., 2] * box_xywh[..., 3], 0, None)
    cx = box_xywh[..., 0] + 0.5 * box_xywh[..., 2]
    cy = box_xywh[..., 1] + 0.5 * box_xywh[..., 3]
    side = xp.maximum(xp.sqrt(area) * search_area_factor, xp.zeros_like(area) + min_side)
    width, height = size[..., 0], size[..., 1]
    if mode != "replicate":
        ratio_w, ratio_h = side / width, side / height
        shrink = xp.maximum(ratio_w, ratio_h) if mode == "inside" else xp.minimum(ratio_w, ratio_h)
        shrink = xp.clip(shrink, 1.0, max_scale_change)
        side = side / shrink
    x0 = cx - 0.5 * side
    y0 = cy - 0.5 * side
    if mode != "replicate":
        x0 = _shift_inside(x0, side, width, xp)
        y0 = _shift_inside(y0, side, height, xp)
    if is_torch:
        x0, y0, side = torch.broadcast_tensors(x0, y0, side)
    else:
        x0, y0, side = np.broadcast_arrays(x0, y0, side)
    return xp.stack([x0, y0, side, side], -1)


def _shift_inside(start, side, extent, xp):
    """Move [start, start + side] inside [0, extent]; centre it when side > extent."""
    inside = xp.minimum(xp.maximum(start, 0 * start), extent - side)
    centred = 0.5 * (extent - side)
    return xp.where(side <= extent, inside, centred)


def _transform_from_region(region: ArrayT, output_size: int) -> CropTransform:
    return CropTransform(scale=output_size / region[..., 2], offset=region[..., :2])


def _crop_numpy(image: np.ndarray, region: np.ndarray, output_size: int) -> tuple[np.ndarray, CropTransform]:
    """One crop of a numpy (H, W[, C]) frame (see the module docstring for the two paths)."""
    import cv2

    height, width = image.shape[:2]
    x0, y0, side = float(region[0]), float(region[1]), float(region[2])
    xi, yi, si = round(x0), round(y0), max(1, round(side))
    c0, c1, r0, r1 = max(xi, 0), min(xi + si, width), max(yi, 0), min(yi + si, height)
    overlaps = c1 > c0 and r1 > r0
    if overlaps and si <= _MAX_PAD_RATIO * output_size:
        patch = image[r0:r1, c0:c1]
        pads = (r0 - yi, yi + si - r1, c0 - xi, xi + si - c1)  # top, bottom, left, right
        if any(pads):
            patch = cv2.copyMakeBorder(patch, *pads, cv2.BORDER_REPLICATE)
        if si == output_size:
            out = patch.copy()
        else:
            out = cv2.resize(patch, (output_size, output_size), interpolation=cv2.INTER_LINEAR)
        transform = CropTransform(np.float64(output_size / si), np.array([xi, yi], dtype=np.float64))
    else:
        s = output_size / side
        # output pixel centre j + 0.5 <-> image x0 + (j + 0.5)/s <-> source index x0 + (j + 0.5)/s - 0.5
        inv = np.array([[1.0 / s, 0.0, x0 + 0.5 / s - 0.5], [0.0, 1.0 / s, y0 + 0.5 / s - 0.5]])
        out = cv2.warpAffine(
            image,
            inv,
            (output_size, output_size),
            flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
            borderMode=cv2.BORDER_REPLICATE,
        )
        transform = CropTransform(np.float64(s), np.array([x0, y0], dtype=np.float64))
    if out.ndim == 2 and image.ndim == 3:
        out = out[:, :, None]
    return out, transform


def _check_numpy_image(image: np.ndarray, name: str) -> None:
    if image.ndim not in (2, 3) or min(image.shape[:2]) < 1:
        raise ValueError(f"{name} must be an (H, W) or (H, W, C) array, got shape {image.shape}")


def _grid(transform: CropTransform, output_size: int, height: int, width: int, device, dtype) -> Tensor:
    """(N, out, out, 2) grid_sample coordinates (align_corners=False) of N crops."""
    base = torch.arange(output_size, device=device, dtype=dtype) + 0.5
    scale = transform.scale.to(dtype).reshape(-1, 1)
    offset = transform.offset.to(dtype).reshape(-1, 2)
    xs = offset[:, :1] + base / scale  # (N, out) image x of each output column
    ys = offset[:, 1:] + base / scale
    gx = (2.0 * xs / width - 1.0)[:, None, :].expand(-1, output_size, -1)
    gy = (2.0 * ys / height - 1.0)[:, :, None].expand(-1, -1, output_size)
    return torch.stack([gx, gy], dim=-1)


def _as_box_tensor(box_xywh, device) -> Tensor:
    box = torch.as_tensor(box_xywh, device=device)
    return box if box.is_floating_point() else box.float()


def sample_target_crops(
    images: Tensor | list[np.ndarray],
    boxes_xywh: ArrayT,
    search_area_factor: float,
    output_size: int,
    mode: CropMode = "replicate",
    max_scale_change: float = math.inf,
) -> tuple[Tensor | np.ndarray, CropTransform]:
    """N target crops at once.

    Args:
        images: a torch (C, H, W) frame shared by all crops, a torch (N, C, H, W) batch (one frame per crop),
            or a list of N numpy (H, W, C) frames (sizes may differ).
        boxes_xywh: (N, 4) xywh boxes in image pixels, one per crop (torch or numpy; torch ones may live on
            the frames' device).
        search_area_factor, output_size, mode, max_scale_change: see :func:`crop_region`.

    Returns:
        crops: torch (N, C, out, out) float32 (float64 for float64 frames) for torch frames; numpy
            (N, out, out, C) of the frames' dtype for numpy frames.
        transform: :class:`CropTransform` with ``scale`` (N,) and ``offset`` (N, 2), numpy for numpy boxes,
            torch (on the frames' device) otherwise.
    """
    if isinstance(images, Tensor):
        return _crops_torch(images, boxes_xywh, search_area_factor, output_size, mode, max_scale_change)
    if not isinstance(images, (list, tuple)):
        raise TypeError(
            f"images must be a torch.Tensor or a list of numpy arrays, got {type(images).__name__}"
        )
    boxes = np.asarray(boxes_xywh, dtype=np.float64).reshape(-1, 4)
    if len(images) != len(boxes):
        raise ValueError(f"got {len(images)} images but {len(boxes)} boxes")
    for i, im in enumerate(images):
        _check_numpy_image(im, f"images[{i}]")
    sizes = np.array([[im.shape[1], im.shape[0]] for im in images], dtype=np.float64)
    regions = crop_region(boxes, search_area_factor, sizes, mode=mode, max_scale_change=max_scale_change)
    channels = images[0].shape[2] if images[0].ndim == 3 else 1
    out = np.empty((len(images), output_size, output_size, channels), dtype=images[0].dtype)
    scales = np.empty(len(images))
    offsets = np.empty((len(images), 2))
    for i, im in enumerate(images):
        crop, t = _crop_numpy(im, regions[i], output_size)
        out[i] = crop.reshape(output_size, output_size, channels)
        scales[i], offsets[i] = t.scale, t.offset
    transform = CropTransform(scales, offsets)
    if isinstance(boxes_xywh, Tensor):
        transform = CropTransform(torch.from_numpy(transform.scale), torch.from_numpy(transform.offset))
    return out, transform


def _crops_torch(images, boxes_xywh, search_area_factor, output_size, mode, max_scale_change):
    if images.ndim not in (3, 4):
        raise ValueError(f"images must be (C, H, W) or (N, C, H, W), got shape {tuple(images.shape)}")
    boxes = _as_box_tensor(boxes_xywh, images.device).reshape(-1, 4)
    n = boxes.shape[0]
    height, width = images.shape[-2:]
    if images.ndim == 4 and images.shape[0] != n:
        raise ValueError(f"got {images.shape[0]} images but {n} boxes")
    dtype = images.dtype if images.is_floating_point() else torch.float32
    # fills, not torch.tensor([...], device=...) nor size[1] = h: a copy from host memory waits for the device
    size = torch.stack(
        [torch.full((), float(v), dtype=boxes.dtype, device=boxes.device) for v in (width, height)]
    )
    region = crop_region(boxes, search_area_factor, size, mode=mode, max_scale_change=max_scale_change)
    transform = _transform_from_region(region, output_size)
    src, grid_transform = images, transform
    if images.device.type == "cpu" and images.ndim == 3:
        src, grid_transform = _slice_for_regions(images, region, transform)
    grid = _grid(grid_transform, output_size, src.shape[-2], src.shape[-1], images.device, dtype)
    src = src.to(dtype)
    src = src.unsqueeze(0).expand(n, -1, -1, -1) if src.ndim == 3 else src
    crops = F.grid_sample(src, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return crops, transform


def _slice_for_regions(
    image: Tensor, region: Tensor, transform: CropTransform
) -> tuple[Tensor, CropTransform]:
    """The part of a CPU (C, H, W) frame the regions (N, 4) read, and the transform relative to it.

    Converting only that part to float (instead of the whole frame) makes CPU crops of large frames several
    times cheaper. The slice keeps one extra pixel around the regions, so bilinear sampling sees the same
    neighbours; where it is clipped at the frame border, ``padding_mode="border"`` repeats the same edge
    pixels as on the whole frame. (Reading the region bounds is a host synchronisation, hence CPU only.)
    """
    height, width = image.shape[-2:]
    lo = region[:, :2].min(dim=0).values.tolist()
    hi = (region[:, :2] + region[:, 2:]).max(dim=0).values.tolist()
    x0 = min(max(math.floor(lo[0]) - 1, 0), width - 1)
    y0 = min(max(math.floor(lo[1]) - 1, 0), height - 1)
    x1 = min(max(math.ceil(hi[0]) + 1, x0 + 1), width)
    y1 = min(max(math.ceil(hi[1]) + 1, y0 + 1), height)
    shift = torch.tensor([x0, y0], dtype=transform.offset.dtype)
    return image[:, y0:y1, x0:x1], CropTransform(transform.scale, transform.offset - shift)


def sample_target_crop(
    image: Tensor | np.ndarray,
    box_xywh: ArrayT,
    search_area_factor: float,
    output_size: int,
    mode: CropMode = "replicate",
    max_scale_change: float = math.inf,
) -> tuple[Tensor | np.ndarray, CropTransform]:
    """One target crop.

    Args:
        image: numpy (H, W, C) frame (any dtype cv2 warps, normally uint8) or torch (C, H, W) frame on any
            device (uint8 or float).
        box_xywh: (4,) target box in image pixels, xywh (numpy, torch or a sequence of 4 numbers).
        search_area_factor: crop side = sqrt(w * h) * search_area_factor before the inside modes shrink it.
        output_size: side of the square output in pixels.
        mode: ``"replicate"``, ``"inside"`` or ``"inside_major"``; max_scale_change: the inside modes' limit.

    Returns:
        crop: numpy (out, out, C) of the image's dtype, or torch (C, out, out) float32 (float64 for float64
            images) on the image's device.
        transform: :class:`CropTransform` with scalar ``scale`` and (2,) ``offset``: map boxes with
            ``transform.image_to_crop`` / ``transform.crop_to_image``.
    """
    if isinstance(image, Tensor):
        if image.ndim != 3:
            raise ValueError(f"image tensor must be (C, H, W), got shape {tuple(image.shape)}")
        crops, t = _crops_torch(image, box_xywh, search_area_factor, output_size, mode, max_scale_change)
        return crops[0], CropTransform(t.scale[0], t.offset[0])
    if not isinstance(image, np.ndarray):
        raise TypeError(f"image must be a numpy array or torch tensor, got {type(image).__name__}")
    _check_numpy_image(image, "image")
    box = np.asarray(box_xywh.cpu() if isinstance(box_xywh, Tensor) else box_xywh, dtype=np.float64)
    if box.shape != (4,):
        raise ValueError(f"box_xywh must have shape (4,), got {box.shape}")
    size = np.array([image.shape[1], image.shape[0]], dtype=np.float64)
    region = crop_region(box, search_area_factor, size, mode=mode, max_scale_change=max_scale_change)
    crop, transform = _crop_numpy(image, region, output_size)
    if isinstance(box_xywh, Tensor):
        transform = CropTransform(torch.as_tensor(transform.scale), torch.from_numpy(transform.offset))
    return crop, transform
