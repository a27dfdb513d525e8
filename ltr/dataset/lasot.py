"""LaSOT (Fan et al., CVPR 2019): training split (protocol II), the 280-video test split, or everything.

Layout: ``<root>/<class>/<class>-<k>/`` holding ``img/00000001.jpg..`` (8 digits, 1-based; frame i <-> row i),
``groundtruth.txt`` (comma ``x,y,w,h`` integers, 1-based pixel coordinates), ``full_occlusion.txt`` and
``out_of_view.txt`` (one line of comma-separated 0/1 flags) and ``nlp.txt`` (one sentence).

``visible = valid & !full_occlusion & !out_of_view``; absent frames often repeat a real-looking box, so the
flags are the only reliable visibility signal. Splits: ``test`` (the 280 names of :data:`LASOT_TEST`),
``train`` (every other sequence: the 1120 official ones of the 70 classes x 20 videos, plus any extra folder
found on disk), ``all`` (every sequence on disk), any other name via a split file (:mod:`ltr.dataset.splits`).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from ltr.admin.paths import dataset_root
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.common import build_sequence
from ltr.dataset.splits import find_split_file, read_split_file
from ltr.dataset.textio import list_frames, read_flags_one_line, read_rows, reconcile

#: The official test split (protocol II): class -> the 4 video numbers held out for testing.
LASOT_TEST: dict[str, tuple[int, ...]] = {
    "airplane": (1, 9, 13, 15),
    "basketball": (1, 6, 7, 11),
    "bear": (2, 4, 6, 17),
    "bicycle": (2, 7, 9, 18),
    "bird": (2, 3, 15, 17),
    "boat": (3, 4, 12, 17),
    "book": (3, 10, 11, 19),
    "bottle": (1, 12, 14, 18),
    "bus": (2, 5, 17, 19),
    "car": (2, 6, 9, 17),
    "cat": (1, 3, 18, 20),
    "cattle": (2, 7, 12, 13),
    "chameleon": (3, 6, 11, 20),
    "coin": (3, 6, 7, 18),
    "crab": (3, 6, 12, 18),
    "crocodile": (3, 4, 10, 14),
    "cup": (1, 4, 7, 17),
    "deer": (4, 8, 10, 14),
    "dog": (1, 7, 15, 19),
    "drone": (2, 7, 13, 15),
    "electricfan": (1, 10, 18, 20),
    "elephant": (1, 12, 16, 18),
    "flag": (2, 3, 5, 9),
    "fox": (2, 3, 5, 20),
    "frog": (3, 4, 9, 20),
    "gametarget": (1, 2, 7, 13),
    "gecko": (1, 5, 16, 19),
    "giraffe": (2, 10, 13, 15),
    "goldfish": (3, 7, 8, 10),
    "gorilla": (4, 6, 9, 13),
    "guitar": (3, 8, 10, 16),
    "hand": (2, 3, 9, 16),
    "hat": (1, 2, 5, 18),
    "helmet": (5, 11, 13, 19),
    "hippo": (1, 7, 9, 20),
    "horse": (1, 4, 12, 15),
    "kangaroo": (2, 5, 11, 14),
    "kite": (4, 6, 10, 15),
    "leopard": (1, 7, 16, 20),
    "licenseplate": (6, 12, 13, 15),
    "lion": (1, 5, 12, 20),
    "lizard": (1, 3, 6, 13),
    "microphone": (2, 6, 14, 16),
    "monkey": (3, 4, 9, 17),
    "motorcycle": (1, 3, 9, 18),
    "mouse": (1, 8, 9, 17),
    "person": (1, 5, 10, 12),
    "pig": (2, 10, 13, 18),
    "pool": (3, 7, 12, 15),
    "rabbit": (10, 13, 17, 19),
    "racing": (10, 15, 16, 20),
    "robot": (1, 5, 8, 19),
    "rubicCube": (1, 6, 14, 19),
    "sepia": (6, 8, 13, 16),
    "shark": (2, 3, 5, 6),
    "sheep": (3, 5, 7, 9),
    "skateboard": (3, 8, 16, 19),
    "spider": (14, 16, 18, 20),
    "squirrel": (8, 11, 13, 19),
    "surfboard": (4, 5, 8, 12),
    "swing": (10, 14, 17, 20),
    "tank": (6, 9, 14, 16),
    "tiger": (4, 6, 12, 18),
    "train": (1, 7, 11, 20),
    "truck": (3, 6, 7, 16),
    "turtle": (5, 8, 9, 16),
    "umbrella": (2, 9, 17, 19),
    "volleyball": (1, 13, 18, 19),
    "yoyo": (7, 15, 17, 19),
    "zebra": (10, 14, 16, 17),
}
VIDEOS_PER_CLASS = 20


def lasot_test_names() -> list[str]:
    """The 280 test sequence names, ordered by class then video number."""
    return [f"{cls}-{k}" for cls, ks in LASOT_TEST.items() for k in ks]


def lasot_official_names() -> list[str]:
    """All 1400 official sequence names (70 classes x 20 videos)."""
    return [f"{cls}-{k}" for cls in LASOT_TEST for k in range(1, VIDEOS_PER_CLASS + 1)]


def _sort_key(name: str) -> tuple[str, int, str]:
    cls, _, k = name.rpartition("-")
    return (cls, int(k), "") if k.isdigit() else (name, -1, name)


class LasotDataset(SequenceDataset):
    """LaSOT sequences of one split; boxes (N, 4) xywh in LaSOT's 1-based pixel coordinates."""

    def __init__(
        self, root: str | os.PathLike, split: str = "train", *, split_file: str | os.PathLike | None = None
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise DatasetError(f"LaSOT root {self.root} is not a directory (set LASOT_DIR)")
        self.split = split
        self.name = "lasot" if split != "test" else "lasot_test"
        self._names = self._resolve(split, split_file)

    def _on_disk(self) -> list[str]:
        found = []
        for cls_dir in self.root.iterdir():
            if cls_dir.is_dir():
                prefix = cls_dir.name + "-"
                found += [d.name for d in cls_dir.iterdir() if d.is_dir() and d.name.startswith(prefix)]
        return found

    def _resolve(self, split: str, split_file: str | os.PathLike | None) -> list[str]:
        if split == "test":
            return lasot_test_names()
        if split == "all":
            return sorted(self._on_disk(), key=_sort_key)
        if split == "train":
            test = set(lasot_test_names())
            present_classes = [c for c in LASOT_TEST if (self.root / c).is_dir()]
            missing = len(LASOT_TEST) - len(present_classes)
            if present_classes and missing:
                warnings.warn(
                    f"LaSOT: {missing} of the {len(LASOT_TEST)} classes are missing under {self.root} "
                    "(partial download?); training on the classes found",
                    stacklevel=3,
                )
            expected = [f"{c}-{k}" for c in present_classes for k in range(1, VIDEOS_PER_CLASS + 1)]
            names = (set(self._on_disk()) | set(expected)) - test
            return sorted(names, key=_sort_key)
        return read_split_file(find_split_file("lasot", split, split_file))

    def sequence_names(self) -> list[str]:
        return list(self._names)

    def get_sequence(self, name: str) -> Sequence:
        cls = name.rpartition("-")[0]
        seq_dir = self.root / cls / name
        if not seq_dir.is_dir():
            raise DatasetError(f"LaSOT sequence folder not found: {seq_dir}")
        gt_path = seq_dir / "groundtruth.txt"
        boxes = read_rows(gt_path, 4)
        frames = list_frames(seq_dir / "img", first=1)
        problems: list[str] = []
        lengths_on_disk = (len(frames), len(boxes))
        frames, boxes = reconcile(name, frames, boxes, gt_path, problems)
        n = len(frames)
        flags = {}
        for key, fname in (("full_occlusion", "full_occlusion.txt"), ("out_of_view", "out_of_view.txt")):
            values = read_flags_one_line(seq_dir / fname)
            if len(values) < n:
                raise DatasetError(f"{seq_dir / fname}: {len(values)} flags but {n} frames")
            if len(values) > n and len(values) not in lengths_on_disk:
                problems.append(f"{seq_dir / fname}: {len(values)} flags but {n} frames")
            flags[key] = values[:n].astype(bool)
        nlp_path = seq_dir / "nlp.txt"
        attributes: dict[str, Any] = {"class": cls, **flags}
        if nlp_path.is_file():
            attributes["language"] = nlp_path.read_text(encoding="utf-8", errors="replace").strip()
        visible = ~flags["full_occlusion"] & ~flags["out_of_view"]
        return build_sequence(
            name, boxes, frames, dataset=self.name, attributes=attributes, problems=problems, visible=visible
        )


def lasot_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> LasotDataset:
    """Registry factory ``lasot``: split ``train`` (default), ``test``, ``all`` or a split-file name."""
    return LasotDataset(dataset_root("lasot", root), split or "train", **options)


def lasot_test_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> LasotDataset:
    """Registry factory ``lasot_test``: the 280 test sequences under ``LASOT_DIR``."""
    if split not in (None, "test"):
        raise DatasetError(f"lasot_test has only the test split (got split={split!r}); use --dataset lasot")
    return LasotDataset(dataset_root("lasot", root), "test", **options)
