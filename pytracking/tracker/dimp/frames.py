"""Frames in any common layout -> three-channel RGB pixels on the tracker's device, and the checks of the
tracker's inputs.

:func:`frame_pixels` gives a frame's (3, H, W) pixels on the device, uint8 frames kept uint8 so that the
tracker's crop (:func:`~.patches.sample_patches`) converts only the pixels it cuts to float.

What the tracker's Python API accepts (the same rules the command-line tools apply to their inputs):

- **Frame dtype.** ``uint8`` is the expected pixel type (0..255). Floating-point frames (float16/32/64) are
  taken as pixel values on the same 0..255 scale, unchanged. Every other dtype (``uint16``, signed integers,
  ``bool``, ...) is refused with :class:`TrackerInputError`: the tracker does not guess a bit depth (16-bit
  sensors often fill only 10 or 12 bits), so the caller scales, e.g. ``(frame >> 8).astype(np.uint8)`` for
  full-range 16-bit data. :func:`frame_pixels` (and the functions built on it) checks the dtype of every frame
  (no pixel is read); :func:`validate_frame` also checks a float frame's values (finite, within 0..255, and
  not all within 0..1, which is a 0..1-scaled image: multiply it by 255), once, on the first frame.
- **Initial box.** :func:`validate_init_box`: four finite numbers x, y, w, h with w > 0 and h > 0 (xywh
  image pixels), overlapping the frame when its size is given.
- **Frame size.** One size per sequence: :func:`check_frame_size` refuses a frame whose (width, height)
  differs from the first frame's, naming the frame (the scale of every box would jump otherwise).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

Frame = np.ndarray | Tensor

_FLOAT_NUMPY = (np.float16, np.float32, np.float64)
_FLOAT_TORCH = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class TrackerInputError(ValueError):
    """A frame or box given to the tracker is unusable; the message says what is wrong and what to pass."""


class FrameSizeError(TrackerInputError):
    """A frame's size differs from the first frame's of the sequence."""


def check_frame_dtype(frame: Frame) -> None:
    """Refuse frames whose pixel type is neither uint8 nor floating point (see the module docstring).

    Reads no pixel (only the dtype), so it costs nothing per frame and never waits for a device.
    """
    if isinstance(frame, np.ndarray):
        dtype, ok = frame.dtype, frame.dtype == np.uint8 or frame.dtype in _FLOAT_NUMPY
    elif isinstance(frame, Tensor):
        dtype, ok = frame.dtype, frame.dtype == torch.uint8 or frame.dtype in _FLOAT_TORCH
    else:
        raise TrackerInputError(f"frame must be a numpy array or torch tensor, got {type(frame).__name__}")
    if ok:
        return
    if str(dtype).endswith("uint16"):
        advice = (
            "scale it to 8 bits first, e.g. (frame >> 8).astype(np.uint8) for full-range 16-bit data "
            "(the tracker does not guess the bit depth)"
        )
    else:
        advice = "convert it, e.g. frame.astype(np.uint8) when its values are 0..255"
    raise TrackerInputError(
        f"frame dtype {dtype} is not supported: pass uint8 (0..255) or floats on the 0..255 scale; {advice}"
    )


def validate_frame(frame: Frame) -> None:
    """Full check of a first frame: layout, dtype and, for floating-point frames, the values.

    A float frame must be finite and within 0..255, and not entirely within 0..1 (a 0..1-scaled image:
    multiply it by 255). Reading the values costs one pass over the frame (and, on a device, a wait for
    it), which is why the tracker does this once per sequence and :func:`frame_pixels` only checks dtypes.
    """
    check_frame_dtype(frame)
    if isinstance(frame, np.ndarray):
        _rgb_numpy(frame)  # layout errors: shape, channels, empty sides
        if frame.dtype == np.uint8:
            return
        finite = bool(np.isfinite(frame).all())
        low, high = (float(np.min(frame)), float(np.max(frame))) if finite else (0.0, 0.0)
    else:
        _tensor_chw(frame.shape)
        if frame.dtype == torch.uint8:
            return
        f = frame.detach().float()
        low, high, finite_f = torch.stack([f.min(), f.max(), torch.isfinite(f).all().float()]).tolist()
        finite = bool(finite_f)
    if not finite:
        raise TrackerInputError("frame holds NaN or infinite values")
    if low < 0.0 or high > 255.0:
        raise TrackerInputError(
            f"float frame values span {low:g}..{high:g}; float frames must hold pixel values 0..255"
        )
    if high <= 1.0:
        raise TrackerInputError(
            f"float frame values span {low:g}..{high:g}: a 0..1-scaled image? float frames must hold "
            "pixel values 0..255 (multiply by 255)"
        )


def validate_init_box(box_xywh: object, frame_wh: tuple[int, int] | None = None) -> np.ndarray:
    """The initial box as (4,) float64 xywh image pixels, or :class:`TrackerInputError` saying why not.

    It must be four finite numbers with w > 0 and h > 0 (the command-line tools refuse the same boxes); with
    ``frame_wh`` = (width, height) it must also overlap the frame.
    """
    try:
        box = np.asarray(box_xywh, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as err:
        raise TrackerInputError(f"init box must be 4 numbers x, y, w, h; got {box_xywh!r}") from err
    if box.shape != (4,) or not np.isfinite(box).all():
        raise TrackerInputError(f"init box must be 4 finite numbers x, y, w, h; got {box_xywh!r}")
    if not (box[2] > 0 and box[3] > 0):
        raise TrackerInputError(f"init box must have w > 0 and h > 0; got x, y, w, h = {box.tolist()}")
    if frame_wh is not None:
        w, h = frame_wh
        if box[0] >= w or box[1] >= h or box[0] + box[2] <= 0 or box[1] + box[3] <= 0:
            raise TrackerInputError(
                f"init box x, y, w, h = {box.tolist()} lies entirely outside the {w}x{h} frame"
            )
    return box


def input_frame_wh(frame: Frame) -> tuple[int, int]:
    """(width, height) of a frame as given to the tracker: numpy (H, W[, C]) or tensor (C, H, W) / (H, W)."""
    if isinstance(frame, np.ndarray) or frame.dim() == 2:
        return int(frame.shape[1]), int(frame.shape[0])
    return int(frame.shape[2]), int(frame.shape[1])


def check_frame_size(
    frame: Frame, expected_wh: tuple[int, int], *, index: int | None = None, source: str | None = None
) -> None:
    """Refuse a frame whose (width, height) differs from ``expected_wh`` (the sequence's first frame's).

    ``index`` (0-based frame number) and ``source`` (e.g. the image file) name the frame in the message.
    """
    wh = input_frame_wh(frame)
    if wh == tuple(expected_wh):
        return
    what = "frame" if index is None else f"frame {index}"
    if source:
        what += f" ({source})"
    raise FrameSizeError(
        f"{what} is {wh[0]}x{wh[1]} pixels but the sequence started at {expected_wh[0]}x{expected_wh[1]}; "
        "the tracker needs one frame size per sequence (initialise it again for a new size)"
    )


def _rgb_numpy(frame: np.ndarray) -> np.ndarray:
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if frame.ndim != 3:
        raise TrackerInputError(f"frame must be an (H, W) or (H, W, C) array, got shape {frame.shape}")
    h, w, c = frame.shape
    if h < 1 or w < 1:
        raise TrackerInputError(f"frame has an empty side: (H, W, C) = {(h, w, c)}")
    if c in (1, 2):
        return np.ascontiguousarray(np.repeat(frame[:, :, :1], 3, axis=2))
    if c in (3, 4):
        return np.ascontiguousarray(frame[:, :, :3])
    raise TrackerInputError(f"frame must have 1, 2, 3 or 4 channels, got {c}")


def concat(tensors: list[Tensor]) -> Tensor:
    """``torch.cat`` of (n_i, ...) tensors along the first dimension; a single tensor is returned as it is
    (one tracker's or one crop's batch: no copy)."""
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)


def pad_rows(t: Tensor, size: int) -> Tensor:
    """``t`` (n, ...) with its last row repeated up to ``size`` rows (a fixed batch size for compiled or
    captured stages; the copies are computed and dropped)."""
    n = t.shape[0]
    return t if n >= size else torch.cat([t, t[-1:].expand(size - n, *t.shape[1:])])


def upload(data, device: torch.device, dtype: torch.dtype | None = None) -> Tensor:
    """Host data (numpy array, CPU tensor, numbers) as a tensor on ``device`` without waiting for the device.

    A copy from pageable host memory to a CUDA device waits until the stream's queued work has finished (a host
    synchronisation); staging the data in pinned memory and copying with ``non_blocking`` does not (the caching
    host allocator keeps the pinned buffer alive until the copy is done). On a CPU this is ``as_tensor``.
    """
    if not isinstance(data, Tensor):
        t = torch.as_tensor(data, dtype=dtype)
    else:  # a tensor of the wanted dtype as it is (a call of .to costs a tensor operation even then)
        t = data if dtype is None or data.dtype == dtype else data.to(dtype)
    if t.device == device:
        return t
    if t.device.type == "cpu" and device.type == "cuda":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


def frame_to_tensor(frame: Frame, device: torch.device) -> Tensor:
    """(3, H, W) float32 (pixel values kept, e.g. 0..255) of a frame (:func:`frame_pixels`, as float32)."""
    return frame_pixels(frame, device).float()


def frame_pixels(frame: Frame, device: torch.device) -> Tensor:
    """(3, H, W) pixels of a frame on ``device``: uint8 frames stay uint8 (the crop converts only what it
    cuts), floating-point ones become float32.

    Accepts numpy (H, W) grayscale, (H, W, 1), (H, W, 2) gray + alpha, (H, W, 3) RGB or (H, W, 4) RGBA, or a
    torch tensor (C, H, W) / (H, W) with the same channel rules. Alpha is dropped and gray is repeated to three
    channels. The dtype must be uint8 or floating point (:func:`check_frame_dtype`).
    """
    check_frame_dtype(frame)
    if isinstance(frame, np.ndarray):
        t = upload(_rgb_numpy(frame), device).permute(2, 0, 1)
    else:
        c = _tensor_chw(frame.shape)[0]
        t = upload(frame, device)
        if t.dim() == 2:
            t = t[None]
        t = t[:1].expand(3, -1, -1) if c in (1, 2) else t[:3] if c == 4 else t
    return t if t.dtype == torch.uint8 else t.float()


def pinned_frame(frame: np.ndarray, device: torch.device) -> Frame:
    """A numpy frame staged for a tracker on ``device``: on a CUDA device its RGB pixels as a (3, H, W) view
    of (H, W, 3) pinned host memory, which :func:`frame_pixels` copies to the device as it is (no second
    host copy, no wait), giving the same tensor as from the numpy frame; elsewhere the frame unchanged.

    The copy into pinned memory is the host's largest per-frame cost on a GPU; threads that read frames
    ahead (``run_tracker.py --batch``) call this so that it happens beside the tracking.
    """
    if device.type != "cuda":
        return frame
    check_frame_dtype(frame)
    return torch.from_numpy(_rgb_numpy(frame)).pin_memory().permute(2, 0, 1)


def _tensor_chw(shape: torch.Size) -> tuple[int, int, int]:
    """(C, H, W) of a (C, H, W) or (H, W) frame tensor's shape; TrackerInputError for other layouts."""
    if len(shape) == 2:
        shape = torch.Size((1, *shape))
    if len(shape) != 3:
        raise TrackerInputError(f"frame tensor must be (C, H, W) or (H, W), got shape {tuple(shape)}")
    c, h, w = shape
    if h < 1 or w < 1:
        raise TrackerInputError(f"frame has an empty side: (C, H, W) = {(c, h, w)}")
    if c not in (1, 2, 3, 4):
        raise TrackerInputError(f"frame must have 1, 2, 3 or 4 channels, got {c}")
    return c, h, w


def prepare_frame(frame: Frame, device: torch.device) -> Frame:
    """numpy (H, W, 3) RGB for numpy frames on a CPU device, else a (3, H, W) float32 tensor on ``device``.

    Frames of a dtype other than uint8 or floating point are refused (:func:`check_frame_dtype`).
    """
    check_frame_dtype(frame)
    if isinstance(frame, np.ndarray) and device.type == "cpu":
        rgb = _rgb_numpy(frame)
        return rgb if rgb.dtype in (np.uint8, np.float32) else rgb.astype(np.float32)
    return frame_to_tensor(frame, device)
