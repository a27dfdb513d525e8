"""GOT-10k (Huang et al., TPAMI 2019): official train / val / test folders and user split files.

Layout: ``<root>/{train,val,test}/list.txt`` (one folder name per line) and per sequence
``00000001.jpg..`` (8 digits, 1-based), ``groundtruth.txt`` (comma ``x,y,w,h`` floats; only the first row in
``test/``), ``absence.label``, ``cover.label``, ``cut_by_image.label`` (one integer per line; train/val) and
``meta_info.ini`` (``[METAINFO]`` then ``key: value`` lines).

``visible = valid & !absence & cover > 0``; ``attributes["visible_ratio"] = cover / 8``. Test sequences get
(N, 4) boxes with NaN after frame 0. Splits ``train``, ``val``, ``test`` are the official folders; any other
name (``vottrain``, ``votval``, ...) selects sequences of the train folder with a split file whose lines are
folder names or 0-based indices into ``train/list.txt`` (see :mod:`ltr.dataset.splits`). ``root`` may also
be the train folder itself (pytracking's convention) for train-derived splits.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import numpy as np

from ltr.admin.paths import dataset_root
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.common import build_sequence, read_boxes_and_frames
from ltr.dataset.splits import find_split_file, read_split_file
from ltr.dataset.textio import read_flags_per_line, read_lines

OFFICIAL_SPLITS = ("train", "val", "test")
LABEL_FILES = ("absence", "cover", "cut_by_image")


def read_meta_info(path: Path) -> dict[str, Any]:
    """``meta_info.ini`` as a dict of stripped strings; ``resolution`` ``(W, H)`` becomes a tuple of ints."""
    meta: dict[str, Any] = {}
    for lineno, line in enumerate(read_lines(path), start=1):
        text = line.strip()
        if not text or (text.startswith("[") and text.endswith("]")):
            continue
        key, sep, value = text.partition(":")
        if not sep:
            raise DatasetError(f"{path}:{lineno}: expected 'key: value', got {text!r}")
        meta[key.strip()] = value.strip()
    resolution = meta.get("resolution")
    if isinstance(resolution, str) and resolution.startswith("("):
        try:
            meta["resolution"] = tuple(int(v) for v in ast.literal_eval(resolution))
        except (ValueError, SyntaxError, TypeError) as err:
            raise DatasetError(f"{path}: resolution {resolution!r} is not a (W, H) tuple") from err
    return meta


def read_list(split_dir: Path) -> list[str]:
    """Sequence folder names from ``list.txt``, or the sorted sub-folders when there is no list file."""
    list_path = split_dir / "list.txt"
    if list_path.is_file():
        return [ln.strip() for ln in read_lines(list_path) if ln.strip()]
    if not split_dir.is_dir():
        raise DatasetError(f"GOT-10k split folder not found: {split_dir}")
    return sorted(d.name for d in split_dir.iterdir() if d.is_dir())


class Got10kDataset(SequenceDataset):
    """GOT-10k sequences of one split; boxes (N, 4) xywh float pixels."""

    def __init__(
        self, root: str | os.PathLike, split: str = "train", *, split_file: str | os.PathLike | None = None
    ) -> None:
        self.root = Path(root)
        self.split = split
        self.name = "got10k" if split not in ("val", "test") else f"got10k_{split}"
        folder = split if split in OFFICIAL_SPLITS else "train"
        self.split_dir = self.root / folder
        if not self.split_dir.is_dir() and folder == "train" and (self.root / "list.txt").is_file():
            self.split_dir = self.root  # root is the train folder itself
        if not self.split_dir.is_dir():
            raise DatasetError(
                f"GOT-10k {folder} folder not found: {self.split_dir} (set GOT10K_DIR to the root)"
            )
        official = read_list(self.split_dir)
        if split in OFFICIAL_SPLITS:
            self._names = official
        else:
            self._names = read_split_file(find_split_file("got10k", split, split_file), official)

    def sequence_names(self) -> list[str]:
        return list(self._names)

    def get_sequence(self, name: str) -> Sequence:
        seq_dir = self.split_dir / name
        if not seq_dir.is_dir():
            raise DatasetError(f"GOT-10k sequence folder not found: {seq_dir}")
        problems: list[str] = []
        frames, boxes = read_boxes_and_frames(
            name,
            seq_dir / "groundtruth.txt",
            seq_dir,
            problems,
            first=1,
            extensions=(".jpg", ".jpeg", ".png"),
        )
        n = len(frames)
        attributes: dict[str, Any] = {}
        for label in LABEL_FILES:
            path = seq_dir / f"{label}.label"
            if path.is_file():
                values = read_flags_per_line(path)
                if len(values) < n:
                    raise DatasetError(f"{path}: {len(values)} labels but {n} frames")
                attributes[label] = values[:n]
        visible = np.ones(n, dtype=bool)
        if "absence" in attributes:
            attributes["absence"] = attributes["absence"].astype(bool)
            visible &= ~attributes["absence"]
        if "cover" in attributes:
            visible &= attributes["cover"] > 0
            attributes["visible_ratio"] = attributes["cover"] / 8.0
        if "cut_by_image" in attributes:
            attributes["cut_by_image"] = attributes["cut_by_image"].astype(bool)
        meta_path = seq_dir / "meta_info.ini"
        if meta_path.is_file():
            attributes["meta"] = read_meta_info(meta_path)
            if "object_class" in attributes["meta"]:
                attributes["class"] = attributes["meta"]["object_class"]
        return build_sequence(
            name, boxes, frames, dataset=self.name, attributes=attributes, problems=problems, visible=visible
        )


def got10k_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> Got10kDataset:
    """Registry factory ``got10k``: ``train`` (default), ``val``, ``test``, ``vottrain``, ``votval``, ..."""
    return Got10kDataset(dataset_root("got10k", root), split or "train", **options)


def got10k_val_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> Got10kDataset:
    """Registry factory ``got10k_val``: the official 180-sequence validation folder."""
    if split not in (None, "val"):
        raise DatasetError(f"got10k_val has only the val split (got split={split!r}); use --dataset got10k")
    return Got10kDataset(dataset_root("got10k", root), "val", **options)


def got10k_test_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> Got10kDataset:
    """Registry factory ``got10k_test``: the official test folder (first-frame boxes only)."""
    if split not in (None, "test"):
        raise DatasetError(f"got10k_test has only the test split (got split={split!r}); use --dataset got10k")
    return Got10kDataset(dataset_root("got10k", root), "test", **options)
