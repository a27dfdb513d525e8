"""Frames in any common layout -> three-channel RGB, and the tracker's search crop from them.

On a CPU device numpy frames stay numpy (H, W, 3) and are cropped with the shared crop function's OpenCV path
(fast on uint8: only the crop is converted to float); otherwise the frame becomes one (3, H, W) float32 tensor
on the device and is cropped with the shared crop function's ``grid_sample`` path.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ltr.data.crop import CropTransform, sample_target_crop, sample_target_crops

Frame = np.ndarray | Tensor


def _rgb_numpy(frame: np.ndarray) -> np.ndarray:
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if frame.ndim != 3:
        raise ValueError(f"frame must be an (H, W) or (H, W, C) array, got shape {frame.shape}")
    h, w, c = frame.shape
    if h < 1 or w < 1:
        raise ValueError(f"frame has an empty side: (H, W, C) = {(h, w, c)}")
    if c in (1, 2):
        return np.ascontiguousarray(np.repeat(frame[:, :, :1], 3, axis=2))
    if c in (3, 4):
        return np.ascontiguousarray(frame[:, :, :3])
    raise ValueError(f"frame must have 1, 2, 3 or 4 channels, got {c}")


def upload(data, device: torch.device, dtype: torch.dtype | None = None) -> Tensor:
    """Host data (numpy array, CPU tensor, numbers) as a tensor on ``device`` without waiting for the device.

    A copy from pageable host memory to a CUDA device waits until the stream's queued work has finished (a host
    synchronisation); staging the data in pinned memory and copying with ``non_blocking`` does not (the caching
    host allocator keeps the pinned buffer alive until the copy is done). On a CPU this is ``as_tensor``.
    """
    t = torch.as_tensor(data, dtype=dtype) if not isinstance(data, Tensor) else data.to(dtype or data.dtype)
    if t.device == device:
        return t
    if t.device.type == "cpu" and device.type == "cuda":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


def frame_to_tensor(frame: Frame, device: torch.device) -> Tensor:
    """(3, H, W) float32 (pixel values kept, e.g. 0..255) of a frame.

    Accepts numpy (H, W) grayscale, (H, W, 1), (H, W, 2) gray + alpha, (H, W, 3) RGB or (H, W, 4) RGBA of any
    real dtype, or a torch tensor (C, H, W) / (H, W) with the same channel rules. Alpha is dropped and gray is
    repeated to three channels.
    """
    if isinstance(frame, np.ndarray):
        return upload(_rgb_numpy(frame), device).permute(2, 0, 1).float()
    if not isinstance(frame, Tensor):
        raise TypeError(f"frame must be a numpy array or torch tensor, got {type(frame).__name__}")
    t = upload(frame, device)
    if t.dim() == 2:
        t = t[None]
    if t.dim() != 3:
        raise ValueError(f"frame tensor must be (C, H, W) or (H, W), got shape {tuple(frame.shape)}")
    c, h, w = t.shape
    if h < 1 or w < 1:
        raise ValueError(f"frame has an empty side: (C, H, W) = {(c, h, w)}")
    if c in (1, 2):
        t = t[:1].expand(3, -1, -1)
    elif c in (3, 4):
        t = t[:3]
    else:
        raise ValueError(f"frame must have 1, 2, 3 or 4 channels, got {c}")
    return t.float()


def prepare_frame(frame: Frame, device: torch.device) -> Frame:
    """numpy (H, W, 3) RGB for numpy frames on a CPU device, else a (3, H, W) float32 tensor on ``device``."""
    if isinstance(frame, np.ndarray) and device.type == "cpu":
        rgb = _rgb_numpy(frame)
        return rgb if rgb.dtype in (np.uint8, np.float32) else rgb.astype(np.float32)
    return frame_to_tensor(frame, device)


def frame_size_wh(frame: Frame) -> tuple[int, int]:
    """(width, height) of a prepared frame."""
    return (
        (frame.shape[1], frame.shape[0])
        if isinstance(frame, np.ndarray)
        else (frame.shape[2], frame.shape[1])
    )


def _to_torch(
    crops: np.ndarray, transform: CropTransform, device: torch.device
) -> tuple[Tensor, CropTransform]:
    """numpy (N, S, S, 3) crops + numpy transform -> (N, 3, S, S) float32 tensor + float32 tensor transform."""
    t = upload(np.ascontiguousarray(crops), device).permute(0, 3, 1, 2).float()
    scale = upload(np.asarray(transform.scale, dtype=np.float32), device)
    offset = upload(np.asarray(transform.offset, dtype=np.float32), device)
    return t, CropTransform(scale, offset)


def crop_frame(
    frame: Frame,
    box_xywh: Tensor | np.ndarray,
    search_area_factor: float,
    output_size: int,
    *,
    mode: str,
    max_scale_change: float,
    device: torch.device | None = None,
) -> tuple[Tensor, CropTransform]:
    """One crop of a prepared frame around ``box_xywh`` (4,) xywh image pixels.

    The box is a tensor or a host array; a numpy frame is cropped on the host, so give it the host copy of
    the box (a device tensor would be read back). ``device`` (default: the box tensor's) receives the crop.

    Returns crops (1, 3, S, S) float32 and a transform with ``scale`` (1,) and ``offset`` (1, 2) tensors.
    """
    if device is None:
        device = box_xywh.device if isinstance(box_xywh, Tensor) else torch.device("cpu")
    if isinstance(frame, np.ndarray):
        if isinstance(box_xywh, Tensor):
            box_xywh = box_xywh.detach().cpu().numpy()
        box = np.asarray(box_xywh, dtype=np.float64).reshape(1, 4)
        crops, tf = sample_target_crops([frame], box, search_area_factor, output_size, mode, max_scale_change)
        return _to_torch(crops, tf, device)
    box_t = upload(box_xywh, device, torch.float32).reshape(1, 4)
    return sample_target_crops(frame, box_t, search_area_factor, output_size, mode, max_scale_change)


def crop_frame_single(
    frame: Frame, box_xywh: Tensor, search_area_factor: float, output_size: int
) -> tuple[Tensor, CropTransform]:
    """A replicate-border crop (3, S, S) float32 centred on the box, with a scalar-tensor transform."""
    if isinstance(frame, np.ndarray):
        box = box_xywh.detach().reshape(4).cpu().numpy().astype(np.float64)
        crop, tf = sample_target_crop(frame, box, search_area_factor, output_size, mode="replicate")
        crops, t = _to_torch(
            crop[None], CropTransform(np.asarray([tf.scale]), tf.offset[None]), box_xywh.device
        )
        return crops[0], CropTransform(t.scale[0], t.offset[0])
    return sample_target_crop(frame, box_xywh, search_area_factor, output_size, mode="replicate")
