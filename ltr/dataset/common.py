"""Steps the benchmark readers share: box file + frame folder read and reconciled; the Sequence assembled.

Kept apart from :mod:`ltr.dataset.textio` (plain text parsing) because these steps know about
:class:`~ltr.dataset.base.Sequence` and the ``attributes["problems"]`` convention of :mod:`ltr.dataset.base`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ltr.dataset.base import Sequence
from ltr.dataset.textio import IMAGE_EXTENSIONS, list_frames, read_rows, reconcile


def read_boxes_and_frames(
    name: str,
    anno_path: Path,
    frame_dir: Path,
    problems: list[str],
    *,
    first: int | None = None,
    extensions: tuple[str, ...] = IMAGE_EXTENSIONS,
) -> tuple[list[Path], np.ndarray]:
    """Boxes of ``anno_path`` and frames of ``frame_dir``, cut to a common length.

    The annotation file is read first (its errors name ``file:line``), then the frames are listed
    (:func:`~ltr.dataset.textio.list_frames` with ``first``/``extensions``); a length mismatch is appended to
    ``problems`` (:func:`~ltr.dataset.textio.reconcile`). Returns the frame paths and (N, 4) xywh boxes.
    """
    boxes = read_rows(anno_path, 4)
    frames = list_frames(frame_dir, extensions=extensions, first=first)
    # stacklevel 4: the warning points at the caller of the reader's get_sequence, as a direct call would
    return reconcile(name, frames, boxes, anno_path, problems, stacklevel=4)


def build_sequence(
    name: str,
    boxes: np.ndarray,
    frames: list[Path],
    *,
    dataset: str,
    attributes: dict[str, Any],
    problems: list[str],
    visible: np.ndarray | None = None,
) -> Sequence:
    """A file-backed :class:`Sequence`; ``problems`` is stored as ``attributes["problems"]`` when non-empty.

    ``boxes`` is (N, 4) xywh, ``frames`` the N frame paths, ``visible`` an optional (N,) bool mask.
    """
    if problems:
        attributes["problems"] = problems
    return Sequence(
        name=name,
        boxes=boxes,
        frame_paths=frames,
        visible=visible,
        dataset=dataset,
        attributes=attributes,
    )
