"""The one narrow interface every sequence reader implements.

A :class:`SequenceDataset` lists sequences by name; a :class:`Sequence` gives its frame count, lazily loaded
RGB uint8 frames, boxes and per-frame masks:

- ``boxes``: (N, 4) float64, **xywh** in the dataset's own pixel convention (no +1/-1 shifts applied),
  NaN where the annotation is unknown.
- ``valid``: (N,) bool, the box is a usable annotation (finite, w > 0, h > 0).
- ``visible``: (N,) bool, valid and the target is visible (not absent / fully occluded / out of view).
- ``attributes``: optional extras (``class``, ``absent``, ``occlusion``, ``language``, per-sequence attribute
  flags, ...). ``attributes["problems"]`` (list of str), when present, names recoverable annotation problems
  found while loading (e.g. a row/frame count mismatch that was cut to the shorter length); the readers also
  warn, and ``python -m ltr.dataset.check`` reports them.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FrameLoader = Callable[[int], np.ndarray]


class DatasetError(RuntimeError):
    """A dataset is missing, misconfigured or malformed. The message names the file/line or variable."""


def valid_boxes(boxes: np.ndarray) -> np.ndarray:
    """(N, 4) xywh -> (N,) bool: all values finite and w > 0, h > 0."""
    boxes = np.asarray(boxes, dtype=np.float64)
    return np.isfinite(boxes).all(axis=1) & (boxes[:, 2] > 0) & (boxes[:, 3] > 0)


def read_image_rgb(path: str | Path) -> np.ndarray:
    """Read an image file as (H, W, 3) RGB uint8. Grayscale and 4-channel files are converted."""
    import cv2

    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise DatasetError(f"cannot read frame image {path} (missing or not an image)")
    if img.ndim == 2:
        return cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
    if img.shape[2] == 4:
        return cv2.cvtColor(img, cv2.COLOR_BGRA2RGB)
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


_JPEG_SUFFIXES = (".jpg", ".jpeg", ".jpe")


def image_problem(data: bytes, suffix: str) -> str | None:
    """Why the encoded image ``data`` (a file's bytes, ``suffix`` its extension) is incomplete, or None.

    OpenCV decodes a truncated JPEG without an error (the missing rows come out grey, libjpeg only prints a
    warning), so JPEGs are checked for their end-of-image marker after the last start-of-scan marker (a
    thumbnail's own end marker comes before the main image's scans). Other formats fail to decode when cut
    short, which :func:`read_image_checked` reports.
    """
    if suffix.lower() in _JPEG_SUFFIXES and data[:2] == b"\xff\xd8":
        if data.rfind(b"\xff\xd9") < data.rfind(b"\xff\xda"):
            return "truncated JPEG (no end-of-image marker after the last scan)"
    return None


def read_image_checked(path: str | Path) -> np.ndarray:
    """Decode an image file thoroughly: (H, W, C) or (H, W) as stored, or :class:`DatasetError` naming the
    file when it cannot be read, is truncated (:func:`image_problem`) or does not decode."""
    import cv2

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DatasetError(f"cannot read frame image {path} ({err.strerror or type(err).__name__})") from err
    problem = image_problem(data, path.suffix)
    if problem is not None:  # not decoded: libjpeg would print its own warning for each such frame
        raise DatasetError(f"{path}: {problem}")
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED) if data else None
    if img is None:
        raise DatasetError(f"{path}: not a readable image (empty, truncated or not an image format)")
    return img


@dataclass
class Sequence:
    """One annotated video (or a single image, for COCO).

    Frames come either from ``frame_paths`` (read lazily with OpenCV) or from ``frame_loader(i)`` (in-memory
    generators). ``boxes`` is (N, 4) xywh float64, NaN for unknown rows; ``valid``/``visible`` default to
    :func:`valid_boxes` of the boxes.
    """

    name: str
    boxes: np.ndarray
    frame_paths: list[Path] | None = None
    frame_loader: FrameLoader | None = None
    valid: np.ndarray | None = None
    visible: np.ndarray | None = None
    dataset: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.boxes = np.asarray(self.boxes, dtype=np.float64).reshape(-1, 4)
        if self.frame_paths is None and self.frame_loader is None:
            raise ValueError(f"sequence {self.name!r} needs frame_paths or a frame_loader")
        if self.frame_paths is not None:
            self.frame_paths = [p if isinstance(p, Path) else Path(p) for p in self.frame_paths]
        if self.valid is None:
            self.valid = valid_boxes(self.boxes)
        else:
            self.valid = np.asarray(self.valid, dtype=bool) & valid_boxes(self.boxes)
        if self.visible is None:
            self.visible = self.valid.copy()
        else:
            self.visible = np.asarray(self.visible, dtype=bool) & self.valid

    def __len__(self) -> int:
        return len(self.frame_paths) if self.frame_paths is not None else len(self.boxes)

    @property
    def num_frames(self) -> int:
        return len(self)

    def frame(self, index: int) -> np.ndarray:
        """Frame ``index`` (0-based) as (H, W, 3) RGB uint8."""
        if not 0 <= index < len(self):
            raise IndexError(f"frame {index} out of range for sequence {self.name!r} with {len(self)} frames")
        if self.frame_loader is not None:
            return self.frame_loader(index)
        return read_image_rgb(self.frame_paths[index])

    @property
    def init_box(self) -> np.ndarray:
        """The first frame's box, (4,) xywh; :class:`DatasetError` when the sequence has no annotation row."""
        if len(self.boxes) == 0:
            raise DatasetError(
                f"sequence {self.name!r} has no annotation rows (not even the first frame's box)"
            )
        return self.boxes[0].copy()


class SequenceDataset(ABC):
    """A named collection of sequences. Subclasses read one on-disk layout."""

    name: str = "dataset"
    #: False for image datasets (COCO) whose sequences are single images.
    is_video: bool = True

    @abstractmethod
    def sequence_names(self) -> list[str]:
        """All sequence names, in a stable order."""

    @abstractmethod
    def get_sequence(self, name: str) -> Sequence:
        """Load one sequence's annotation (frames stay lazy)."""

    def __len__(self) -> int:
        return len(self.sequence_names())

    def __iter__(self) -> Iterator[Sequence]:
        for name in self.sequence_names():
            seq = self.get_sequence(name)
            if len(seq) == 0:
                warnings.warn(f"{self.name}: skipping empty sequence {name!r}", stacklevel=2)
                continue
            yield seq
