"""The training crop in the whole-pixel geometry of pytracking's training processing.

:mod:`ltr.data.crop` places a square region of side ``sqrt(w*h) * search_area_factor`` centred on the box and
only rounds it to whole pixels at the end. pytracking's training processing (``sample_target_adaptive`` of
its ``ltr/data/processing_utils.py``, which SuperDiMP's ``KLDiMPProcessing`` uses) rounds at every step, and
its crops therefore sit up to a pixel or two from the centred region. To train on the very same pixels and
boxes, this module reproduces that geometry (``DataConfig.crop_geometry="reference"``):

1. side ``n = ceil(output * sqrt(w * h / output^2) * search_area_factor)``, in float32 as the reference
   computes it (at least 1 here; the reference raises on such boxes);
2. ``inside`` / ``inside_major``: the shrink factor ``clip(max (inside) or min (inside_major) of
   n / image width, n / image height, 1, max_scale_change)`` and ``n = floor(n / shrink)`` per axis;
3. corner ``x1 = round(cx - n / 2)`` (half to even), ``x2 = x1 + n``; likewise y;
4. in every border mode (the reference does it in ``replicate`` too): the region is moved inside the image
   where it fits, and centred on the image where it is larger (``(pad left + pad right) // 2`` on each side);
5. the pixels: rows and columns outside the image repeat the border; on the right and bottom the repeated
   pixel is the last-but-one one whenever the region reaches the image's last column or row (the reference
   pads ``x2 - W + 1`` columns, one more than lie outside, and cuts one column less), then ``cv2.resize``
   (bilinear) to ``output x output``.

Boxes map with :class:`ltr.data.crop.CropTransform` (``offset = (x1, y1)``, ``scale = output / n``): the
reference's ``transform_box_to_crop``.
"""

from __future__ import annotations

import math

import numpy as np

from ltr.data.crop import CROP_MODES, CropMode, CropTransform

__all__ = ["reference_crop_region", "sample_reference_crops"]


def reference_crop_region(
    box_xywh: np.ndarray,
    search_area_factor: float,
    output_size: int,
    image_size_wh: tuple[int, int],
    mode: CropMode = "replicate",
    max_scale_change: float = math.inf,
) -> tuple[int, int, int, int]:
    """The whole-pixel region ``(x1, y1, x2, y2)`` (ends exclusive) of one crop (steps 1-4 above).

    Args:
        box_xywh: (4,) target box in image pixels; used as float32, the reference's precision.
        search_area_factor, output_size: region side before shrinking = sqrt(w * h) * search_area_factor,
            rounded up as the reference does through the output size.
        image_size_wh: (width, height) of the image.
        mode: ``"replicate"``, ``"inside"`` or ``"inside_major"``; max_scale_change: the inside modes' limit.
    """
    if mode not in CROP_MODES:
        raise ValueError(f"crop mode must be one of {CROP_MODES}, got {mode!r}")
    box = np.asarray(box_xywh, dtype=np.float32).reshape(4)
    im_w, im_h = int(image_size_wh[0]), int(image_size_wh[1])
    out = np.float32(output_size)
    ratio = np.sqrt(np.float32(box[2] * box[3]) / np.float32(out * out), dtype=np.float32)
    side = np.float32(np.float32(out * ratio) * np.float32(search_area_factor))
    n = max(1, math.ceil(float(side))) if np.isfinite(side) else 1
    n_x = n_y = n
    if mode != "replicate":
        ratios = (n_x / im_w, n_y / im_h)
        shrink = max(ratios) if mode == "inside" else min(ratios)
        shrink = min(max(1.0, shrink), max_scale_change)
        n_x, n_y = max(1, math.floor(n_x / shrink)), max(1, math.floor(n_y / shrink))
    bx, by, bw, bh = (float(v) for v in box)
    x1 = round(bx + 0.5 * bw - n_x * 0.5)
    y1 = round(by + 0.5 * bh - n_y * 0.5)
    x1 = _inside(x1, n_x, im_w)
    y1 = _inside(y1, n_y, im_h)
    return x1, y1, x1 + n_x, y1 + n_y


def _inside(start: int, side: int, extent: int) -> int:
    """Step 4 on one axis: shift [start, start + side) inside [0, extent), or centre it when larger."""
    end = start + side
    start += max(0, -start) + min(0, extent - end)
    end = start + side
    out = (max(0, -start) + max(0, end - extent)) // 2
    if out > 0:
        start = -out
    return start


def _crop_pixels(image: np.ndarray, region: tuple[int, int, int, int], output_size: int) -> np.ndarray:
    """Step 5: cut, pad with the border pixels, resize."""
    import cv2

    x1, y1, x2, y2 = region
    height, width = image.shape[:2]
    pad_left, pad_top = max(0, -x1), max(0, -y1)
    pad_right, pad_bottom = max(x2 - width + 1, 0), max(y2 - height + 1, 0)
    # at least one pixel (a region off a one-pixel-wide image would otherwise cut nothing)
    c0, r0 = min(x1 + pad_left, width - 1), min(y1 + pad_top, height - 1)
    c1, r1 = max(x2 - pad_right, c0 + 1), max(y2 - pad_bottom, r0 + 1)
    patch = np.ascontiguousarray(image[r0:r1, c0:c1])
    pads = (r0 - y1, y2 - r1, c0 - x1, x2 - c1)
    if any(pads):
        patch = cv2.copyMakeBorder(patch, *pads, cv2.BORDER_REPLICATE)
    out = cv2.resize(patch, (output_size, output_size))
    if out.ndim == 2 and image.ndim == 3:
        out = out[:, :, None]
    return out


def sample_reference_crops(
    images: list[np.ndarray],
    boxes_xywh: np.ndarray,
    search_area_factor: float,
    output_size: int,
    mode: CropMode = "replicate",
    max_scale_change: float = math.inf,
) -> tuple[np.ndarray, CropTransform]:
    """N crops of numpy (H, W, C) frames in the reference geometry (module docstring).

    Args:
        images: N frames (H, W, C) (sizes may differ; views such as ``np.fliplr`` are fine).
        boxes_xywh: (N, 4) boxes in image pixels, one per frame.
        search_area_factor, output_size, mode, max_scale_change: see :func:`reference_crop_region`.

    Returns:
        crops (N, out, out, C) of the frames' dtype and a :class:`CropTransform` with numpy ``scale`` (N,)
        and ``offset`` (N, 2).
    """
    boxes = np.asarray(boxes_xywh, dtype=np.float64).reshape(-1, 4)
    if len(images) != len(boxes):
        raise ValueError(f"got {len(images)} images but {len(boxes)} boxes")
    channels = images[0].shape[2] if images[0].ndim == 3 else 1
    crops = np.empty((len(images), output_size, output_size, channels), dtype=images[0].dtype)
    scales = np.empty(len(images))
    offsets = np.empty((len(images), 2))
    for i, (image, box) in enumerate(zip(images, boxes, strict=True)):
        size = (image.shape[1], image.shape[0])
        region = reference_crop_region(box, search_area_factor, output_size, size, mode, max_scale_change)
        crops[i] = _crop_pixels(image, region, output_size).reshape(output_size, output_size, channels)
        scales[i] = output_size / (region[2] - region[0])
        offsets[i] = region[:2]
    return crops, CropTransform(scales, offsets)
