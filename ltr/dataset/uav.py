"""UAV123 (Mueller et al., ECCV 2016): 123 sequences, 51 of them sub-ranges of longer videos; also UAV20L.

Layout: ``<root>/data_seq/UAV123/<folder>/000001.jpg..`` (6 digits) and ``<root>/anno/UAV123/<seq>.txt``
(comma ``x,y,w,h``, one row per frame of the range; target-absent rows are ``NaN,NaN,NaN,NaN`` and become
invalid frames). :data:`UAV123_RANGES` gives the image range of each sub-sequence; every other sequence is
images 1..rows of the same-named folder. ``variant="UAV20L"`` reads the 20 full-length annotations of
``<root>/anno/UAV20L/`` over images 1..rows of ``data_seq/UAV123/<seq>``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ltr.admin.paths import dataset_root
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.common import build_sequence
from ltr.dataset.textio import numbered_paths, read_rows, reconcile

# folder -> consecutive (first, last) image ranges of its sub-sequences <folder>_1, <folder>_2, ...
_SPLIT_VIDEOS: dict[str, tuple[tuple[int, int], ...]] = {
    "bird1": ((1, 253), (775, 1477), (1573, 2437)),
    "car1": ((1, 751), (751, 1627), (1627, 2629)),
    "car6": ((1, 487), (487, 1807), (1807, 2953), (2953, 3925), (3925, 4861)),
    "car8": ((1, 1357), (1357, 2575)),
    "car16": ((1, 415), (415, 1993)),
    "group1": ((1, 1333), (1333, 2515), (2515, 3925), (3925, 4873)),
    "group2": ((1, 907), (907, 1771), (1771, 2683)),
    "group3": ((1, 1567), (1567, 2827), (2827, 4369), (4369, 5527)),
    "person2": ((1, 1189), (1189, 2623)),
    "person4": ((1, 1501), (1501, 2743)),
    "person5": ((1, 877), (877, 2101)),
    "person7": ((1, 1249), (1249, 2065)),
    "person8": ((1, 1075), (1075, 1525)),
    "person12": ((1, 601), (601, 1621)),
    "person14": ((1, 847), (847, 1813), (1813, 2923)),
    "person17": ((1, 1501), (1501, 2347)),
    "person19": ((1, 1243), (1243, 2791), (2791, 4357)),
    "truck4": ((1, 577), (577, 1261)),
    "uav1": ((1, 1555), (1555, 2377), (2473, 3469)),
}

#: sub-sequence name -> (image folder, first image number, last image number), 1-based inclusive.
UAV123_RANGES: dict[str, tuple[str, int, int]] = {
    f"{folder}_{i}": (folder, first, last)
    for folder, ranges in _SPLIT_VIDEOS.items()
    for i, (first, last) in enumerate(ranges, start=1)
}


class UAV123Dataset(SequenceDataset):
    """UAV123 (or UAV20L) sequences; boxes (N, 4) xywh, NaN rows for absent targets."""

    def __init__(self, root: str | os.PathLike, variant: str = "UAV123") -> None:
        self.root = Path(root)
        if variant not in ("UAV123", "UAV20L"):
            raise DatasetError(f"UAV variant must be 'UAV123' or 'UAV20L', got {variant!r}")
        self.variant = variant
        self.name = "uav" if variant == "UAV123" else "uav20l"
        self.anno_dir = self.root / "anno" / variant
        if not self.anno_dir.is_dir():
            raise DatasetError(
                f"UAV annotation folder not found: {self.anno_dir} (set UAV123_DIR to the root)"
            )
        self._names = sorted(p.stem for p in self.anno_dir.glob("*.txt"))

    def sequence_names(self) -> list[str]:
        return list(self._names)

    def get_sequence(self, name: str) -> Sequence:
        anno_path = self.anno_dir / f"{name}.txt"
        boxes = read_rows(anno_path, 4)
        if self.variant == "UAV123" and name in UAV123_RANGES:
            folder, first, last = UAV123_RANGES[name]
        else:
            folder, first, last = name, 1, len(boxes)
        frames = numbered_paths(self.root / "data_seq" / "UAV123" / folder, first, last - first + 1, 6, "jpg")
        problems: list[str] = []
        frames, boxes = reconcile(name, frames, boxes, anno_path, problems)
        attributes: dict[str, Any] = {"folder": folder, "first_frame_number": first}
        return build_sequence(
            name, boxes, frames, dataset=self.name, attributes=attributes, problems=problems
        )


def uav_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> UAV123Dataset:
    """Registry factory ``uav`` (``UAV123_DIR``); ``--split UAV20L`` for the long-term variant."""
    return UAV123Dataset(dataset_root("uav", root), split or "UAV123", **options)
