"""Frames in any common layout -> one (3, H, W) float32 RGB tensor on the tracker's device."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def frame_to_tensor(frame: np.ndarray | Tensor, device: torch.device) -> Tensor:
    """(3, H, W) float32 (pixel values kept, e.g. 0..255) of a frame.

    Accepts numpy (H, W) grayscale, (H, W, 1), (H, W, 2) gray + alpha, (H, W, 3) RGB or (H, W, 4) RGBA of any
    real dtype, or a torch tensor (C, H, W) / (H, W) with the same channel rules. Alpha is dropped and gray is
    repeated to three channels.
    """
    if isinstance(frame, np.ndarray):
        if frame.ndim == 2:
            frame = frame[:, :, None]
        if frame.ndim != 3:
            raise ValueError(f"frame must be an (H, W) or (H, W, C) array, got shape {frame.shape}")
        t = torch.from_numpy(np.ascontiguousarray(frame)).to(device).permute(2, 0, 1)
    elif isinstance(frame, Tensor):
        t = frame.to(device)
        if t.dim() == 2:
            t = t[None]
        if t.dim() != 3:
            raise ValueError(f"frame tensor must be (C, H, W) or (H, W), got shape {tuple(frame.shape)}")
    else:
        raise TypeError(f"frame must be a numpy array or torch tensor, got {type(frame).__name__}")
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
