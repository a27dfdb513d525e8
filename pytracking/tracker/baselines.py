"""Classical baseline trackers with the runtime tracker interface, for the tracker-quality comparison.

- :class:`StaticTracker`: reports the initial box on every frame (the "box stays where it started" floor).
- :class:`OpenCVTracker`: OpenCV's CSRT, KCF or MIL tracker (``opencv-contrib``; ``cv2.TrackerCSRT.create()``
  and friends, with OpenCV's default parameters).

Both implement what :func:`pytracking.evaluation.runner.track_sequence` calls: ``initialize(frame, box)``
with an (H, W, 3) RGB uint8 frame and a (4,) xywh float box, ``track(frame) -> (4,) xywh float64`` and a
``debug_info`` dict. :func:`make_baseline` builds one by name (``static``, ``csrt``, ``kcf``, ``mil``).

Conventions of :class:`OpenCVTracker` (OpenCV trackers take and return integer pixel rectangles):

- Frames may be (H, W) grayscale, (H, W, 1), (H, W, 3) RGB or (H, W, 4) RGBA uint8; they are converted to
  (H, W, 3) BGR before OpenCV sees them.
- The initial box is rounded by its corners (``x0 = floor(x + 0.5)``, ``x1 = floor(x + w + 0.5)``, same for
  y) and clipped to the image. Sides shorter than ``MIN_SIZE`` (4; 6 for MIL) pixels or than 1/``MAX_ASPECT``
  (1/16) of the other side are lengthened about the centre of the clipped box, staying inside the image (a
  box wholly outside the image becomes a 4 x 4 box at the nearest border). See :func:`pixel_rect`. These
  limits keep OpenCV from raising or hanging in ``init`` (see :data:`MIN_SIDE`).
- When OpenCV reports the target lost (``ok == False``) or returns a non-finite or empty rectangle, the
  previous box is reported again (the initial box, as given, before the first success).
- Every returned box is finite with w > 0 and h > 0.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np

from ltr.admin.registry import Registry

#: smallest side (pixels) and largest side ratio of the rectangle handed to OpenCV: CSRT (OpenCV 5.0) raises
#: in ``init`` for 2-pixel sides at the right / bottom image border and for side ratios of about 40, and
#: MIL's ``init`` never returns for a 4 x 4 rectangle, so MIL gets at least 6 pixels (:data:`MIN_SIDE`).
MIN_SIZE = 4
MAX_ASPECT = 16.0
MIN_SIDE = {"csrt": MIN_SIZE, "kcf": MIN_SIZE, "mil": 6}

#: OpenCV class names; looked up when a tracker is made, so that an OpenCV build without the contrib
#: trackers (opencv-python instead of this project's opencv-contrib-python-headless) still imports this module
_OPENCV_CLASSES = {"csrt": "TrackerCSRT", "kcf": "TrackerKCF", "mil": "TrackerMIL"}


def _opencv_factory(kind: str) -> Callable[[], Any]:
    cls = getattr(cv2, _OPENCV_CLASSES[kind], None)
    if cls is None:
        raise RuntimeError(
            f"the {kind} baseline needs cv2.{_OPENCV_CLASSES[kind]}, which this OpenCV build "
            f"({cv2.__version__}, {cv2.__file__}) lacks: it comes with opencv-contrib-python-headless "
            "(pip install -e . installs it; uninstall other opencv-python packages first, they shadow it)"
        )
    return cls.create


def check_box(box_xywh: Any, name: str = "box_xywh") -> np.ndarray:
    """(4,) xywh -> float64 copy; ValueError naming ``name`` unless finite with w > 0 and h > 0."""
    box = np.asarray(box_xywh, dtype=np.float64).reshape(-1)
    if box.shape != (4,):
        raise ValueError(f"{name} must hold 4 numbers (x, y, w, h), got shape {np.shape(box_xywh)}")
    if not (np.isfinite(box).all() and box[2] > 0 and box[3] > 0):
        raise ValueError(f"{name} must be finite with w > 0 and h > 0, got {box.tolist()}")
    return box


def to_bgr(frame: np.ndarray, name: str = "frame") -> np.ndarray:
    """(H, W), (H, W, 1), (H, W, 3) RGB or (H, W, 4) RGBA uint8 -> contiguous (H, W, 3) BGR uint8."""
    if not isinstance(frame, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(frame).__name__}")
    if frame.dtype != np.uint8:
        raise ValueError(f"{name} must be uint8, got dtype {frame.dtype}")
    if frame.ndim == 3 and frame.shape[2] == 1:
        frame = frame[:, :, 0]
    if frame.ndim == 2:
        return cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_GRAY2BGR)
    if frame.ndim == 3 and frame.shape[2] == 3:
        return cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2BGR)
    if frame.ndim == 3 and frame.shape[2] == 4:
        return cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGBA2BGR)
    raise ValueError(f"{name} must be (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), got shape {frame.shape}")


def _span(lo: float, hi: float, limit: int) -> tuple[int, int, float]:
    """Continuous [lo, hi) -> integer [a, b) with corners rounded half up and clipped to [0, limit] (b - a
    may be 0), and the centre of [lo, hi) clipped to [0, limit]."""
    a = min(max(math.floor(lo + 0.5), 0), limit)
    b = min(max(math.floor(hi + 0.5), 0), limit)
    clipped_lo = min(max(lo, 0.0), float(limit))
    clipped_hi = min(max(hi, 0.0), float(limit))
    return a, b, 0.5 * (clipped_lo + clipped_hi)


def _place(centre: float, size: int, limit: int) -> tuple[int, int]:
    """Integer [a, a + size) about ``centre`` (rounded half up), kept inside [0, limit]."""
    a = min(max(math.floor(centre - 0.5 * size + 0.5), 0), limit - size)
    return a, a + size


def pixel_rect(
    box_xywh: Any, width: int, height: int, min_size: int = MIN_SIZE, max_aspect: float = MAX_ASPECT
) -> tuple[int, int, int, int]:
    """(4,) continuous xywh box -> integer (x, y, w, h) rectangle inside a width x height image.

    Corners are rounded half up and clipped to the image. A side shorter than ``min_size`` pixels, or shorter
    than ``1 / max_aspect`` of the other side, is lengthened (the long side is shortened where the image is
    too small for that), about the centre of the clipped box and staying inside the image. Raises ValueError
    for an invalid box or an image side shorter than ``min_size``.
    """
    box = check_box(box_xywh)
    width, height = int(width), int(height)
    if width < min_size or height < min_size:
        raise ValueError(f"image {width}x{height} is smaller than the minimum box side {min_size}")
    x0, x1, cx = _span(box[0], box[0] + box[2], width)
    y0, y1, cy = _span(box[1], box[1] + box[3], height)
    w, h = max(x1 - x0, min_size), max(y1 - y0, min_size)
    if w > max_aspect * h:
        h = min(math.ceil(w / max_aspect), height)
        w = min(w, math.floor(max_aspect * h))
    elif h > max_aspect * w:
        w = min(math.ceil(h / max_aspect), width)
        h = min(h, math.floor(max_aspect * w))
    if w != x1 - x0:
        x0, x1 = _place(cx, w, width)
    if h != y1 - y0:
        y0, y1 = _place(cy, h, height)
    return x0, y0, w, h


class StaticTracker:
    """Reports the initial box (as given, float64 xywh) on every frame; frames are not looked at."""

    def __init__(self) -> None:
        self.debug_info: dict[str, Any] = {}
        self._box: np.ndarray | None = None

    def initialize(self, frame: np.ndarray, box_xywh: Any) -> None:
        """frame: (H, W, C) image (unused); box_xywh: (4,) xywh, finite, w > 0, h > 0."""
        self._box = check_box(box_xywh)
        self.debug_info = {}

    def track(self, frame: np.ndarray) -> np.ndarray:
        """(4,) xywh float64: the initial box."""
        if self._box is None:
            raise RuntimeError("StaticTracker.track called before initialize")
        return self._box.copy()


class OpenCVTracker:
    """OpenCV's ``kind`` tracker ("csrt", "kcf" or "mil") with default parameters; conventions in the module
    docstring. ``debug_info``: ``state`` ("init", "tracking" or "lost"), ``raw_rect`` (OpenCV's (x, y, w, h)
    integer rectangle of the last call) and ``lost_frames`` (frames in a row without a usable rectangle)."""

    def __init__(self, kind: str = "csrt") -> None:
        if kind not in _OPENCV_CLASSES:
            raise ValueError(f"unknown OpenCV tracker kind {kind!r}; choose one of {sorted(_OPENCV_CLASSES)}")
        self.kind = kind
        self.debug_info: dict[str, Any] = {}
        self._tracker: Any = None
        self._box: np.ndarray | None = None
        self._size: tuple[int, int] | None = None
        self._lost = 0

    def initialize(self, frame: np.ndarray, box_xywh: Any) -> None:
        """frame: (H, W[, C]) uint8 (RGB / gray / RGBA); box_xywh: (4,) xywh, finite, w > 0, h > 0."""
        box = check_box(box_xywh)
        image = to_bgr(frame)
        height, width = image.shape[:2]
        rect = pixel_rect(box, width, height, min_size=MIN_SIDE[self.kind])
        tracker = _opencv_factory(self.kind)()
        result = tracker.init(image, rect)
        if result is False:  # OpenCV < 4.5.1 returned a flag; 4.5.1+ returns None and raises on failure
            raise RuntimeError(f"OpenCV {self.kind} tracker refused the initial rectangle {rect}")
        self._tracker = tracker
        self._box = box
        self._size = (height, width)
        self._lost = 0
        self.debug_info = {"state": "init", "raw_rect": rect, "lost_frames": 0}

    def track(self, frame: np.ndarray) -> np.ndarray:
        """(4,) xywh float64 box on ``frame`` (same size as the first frame); the previous box when lost."""
        if self._tracker is None or self._box is None:
            raise RuntimeError(f"OpenCVTracker({self.kind!r}).track called before initialize")
        image = to_bgr(frame)
        if image.shape[:2] != self._size:
            raise ValueError(f"frame is {image.shape[:2]} (H, W) but the sequence started at {self._size}")
        ok, rect = self._tracker.update(image)
        raw = np.asarray(rect, dtype=np.float64).reshape(-1)
        usable = bool(ok) and raw.shape == (4,) and bool(np.isfinite(raw).all()) and raw[2] > 0 and raw[3] > 0
        if usable:
            self._box = raw
            self._lost = 0
        else:
            self._lost += 1
        self.debug_info = {
            "state": "tracking" if usable else "lost",
            "raw_rect": tuple(raw.tolist()),
            "lost_frames": self._lost,
        }
        return self._box.copy()


#: baseline tracker name -> its constructor.
BASELINES: Registry[Callable[..., StaticTracker | OpenCVTracker]] = Registry(
    "baseline tracker",
    {
        "static": StaticTracker,
        "csrt": functools.partial(OpenCVTracker, "csrt"),
        "kcf": functools.partial(OpenCVTracker, "kcf"),
        "mil": functools.partial(OpenCVTracker, "mil"),
    },
)
#: baseline parameter-set name -> the constructor's keyword arguments (one set: OpenCV's defaults).
BASELINE_PARAMS: Registry[dict[str, Any]] = Registry("baseline parameter set", {"default": {}})


def make_baseline(name: str, param: str = "default") -> StaticTracker | OpenCVTracker:
    """A fresh baseline tracker ``name`` of :data:`BASELINES` with parameter set ``param`` of
    :data:`BASELINE_PARAMS` (:class:`~ltr.admin.registry.UnknownName`, a ValueError, for an unknown one)."""
    return BASELINES[name](**BASELINE_PARAMS[param])
