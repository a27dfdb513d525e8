"""TrackingNet (Müller et al., ECCV 2018): training chunks TRAIN_0..TRAIN_11 and the TEST chunk.

Layout: ``<root>/<chunk>/anno/<video>.txt`` (comma ``x,y,w,h`` floats, continuous coordinates; CRLF and
leading spaces occur) and ``<root>/<chunk>/frames/<video>/0.jpg, 1.jpg, ...`` (zero-based, unpadded, sorted
numerically); frame n <-> annotation row n. TEST annotations hold only frame 0, so test boxes are (N, 4) with
NaN after frame 0. Optional ``class_map=FILE`` (``<video>\\t<class>`` per line) fills ``attributes["class"]``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ltr.admin.paths import dataset_root
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.common import build_sequence, read_boxes_and_frames
from ltr.dataset.textio import read_lines

TRAIN_CHUNKS = tuple(f"TRAIN_{i}" for i in range(12))


def _chunk_name(chunk: int | str) -> str:
    if isinstance(chunk, int) or str(chunk).isdigit():
        index = int(chunk)
        if not 0 <= index < len(TRAIN_CHUNKS):
            raise DatasetError(f"TrackingNet training chunks are 0..11, got {chunk}")
        return TRAIN_CHUNKS[index]
    name = str(chunk).upper()
    if name not in (*TRAIN_CHUNKS, "TEST"):
        raise DatasetError(f"unknown TrackingNet chunk {chunk!r}; use 0..11, TRAIN_<i> or TEST")
    return name


def read_class_map(path: Path) -> dict[str, str]:
    """``<video><TAB or space><class>`` lines -> {video: class}."""
    mapping = {}
    for lineno, line in enumerate(read_lines(path), start=1):
        parts = line.strip().split(None, 1)
        if not parts:
            continue
        if len(parts) != 2:
            raise DatasetError(f"{path}:{lineno}: expected '<video> <class>', got {line.strip()!r}")
        mapping[parts[0]] = parts[1].strip()
    return mapping


class TrackingNetDataset(SequenceDataset):
    """TrackingNet videos of the selected chunks; boxes (N, 4) xywh, continuous pixel coordinates."""

    def __init__(
        self,
        root: str | os.PathLike,
        split: str = "train",
        *,
        chunks: Iterable[int | str] | None = None,
        class_map: str | os.PathLike | None = None,
    ) -> None:
        self.root = Path(root)
        if split.upper() in TRAIN_CHUNKS and chunks is None:  # a single chunk as the split name
            split, chunks = "train", [split]
        split = split.lower()
        if split not in ("train", "test"):
            raise DatasetError(f"TrackingNet splits are 'train', 'test' or 'TRAIN_<i>', got {split!r}")
        self.name = "trackingnet" if split == "train" else "trackingnet_test"
        if split == "test":
            if chunks is not None:
                raise DatasetError("the TrackingNet test split is the TEST chunk; do not pass chunks")
            names = ["TEST"]
        elif chunks is None:
            names = [c for c in TRAIN_CHUNKS if (self.root / c).is_dir()]
            if not names:
                raise DatasetError(f"no TrackingNet training chunk (TRAIN_0..TRAIN_11) under {self.root}")
        else:
            names = [_chunk_name(c) for c in chunks]
        self._video_chunk: dict[str, str] = {}
        for chunk in names:
            anno_dir = self.root / chunk / "anno"
            if not anno_dir.is_dir():
                raise DatasetError(f"TrackingNet annotation folder not found: {anno_dir}")
            frames_dir = self.root / chunk / "frames"
            without_frames = []
            for anno in sorted(anno_dir.glob("*.txt")):
                if (frames_dir / anno.stem).is_dir():
                    self._video_chunk[anno.stem] = chunk
                else:
                    without_frames.append(anno.stem)
            if without_frames:  # e.g. TRAIN_0's AwVdVzh1Eh0_0 has an annotation but no video
                shown = ", ".join(without_frames[:5]) + (" ..." if len(without_frames) > 5 else "")
                warnings.warn(
                    f"TrackingNet {chunk}: skipping {len(without_frames)} annotated videos without a frames "
                    f"folder in {frames_dir}: {shown}",
                    stacklevel=2,
                )
        self._classes = read_class_map(Path(class_map)) if class_map is not None else {}

    def sequence_names(self) -> list[str]:
        return list(self._video_chunk)

    def get_sequence(self, name: str) -> Sequence:
        if name not in self._video_chunk:
            raise KeyError(f"no TrackingNet video {name!r} in the selected chunks")
        chunk_dir = self.root / self._video_chunk[name]
        anno_path = chunk_dir / "anno" / f"{name}.txt"
        problems: list[str] = []
        frames, boxes = read_boxes_and_frames(name, anno_path, chunk_dir / "frames" / name, problems, first=0)
        attributes: dict[str, Any] = {"chunk": self._video_chunk[name]}
        if name in self._classes:
            attributes["class"] = self._classes[name]
        return build_sequence(
            name, boxes, frames, dataset=self.name, attributes=attributes, problems=problems
        )


def trackingnet_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> TrackingNetDataset:
    """Registry factory ``trackingnet``: the training chunks found (or ``chunks=[...]``)."""
    return TrackingNetDataset(dataset_root("trackingnet", root), split or "train", **options)


def trackingnet_test_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> TrackingNetDataset:
    """Registry factory ``trackingnet_test``: the 511 TEST videos (first-frame boxes only)."""
    if split not in (None, "test"):
        raise DatasetError(f"trackingnet_test has only the test split (got split={split!r})")
    return TrackingNetDataset(dataset_root("trackingnet", root), "test", **options)
