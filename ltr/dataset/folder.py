"""Any directory of sequences in the OTB layout, so users can track and evaluate their own videos.

Layout (``root`` holds one folder per sequence; ``root`` may also be a single sequence folder)::

    <root>/<seq>/img/0001.jpg ...         frames, numbered (any zero padding, contiguous) or sorted by name
    <root>/<seq>/groundtruth_rect.txt     one x,y,w,h row per frame (any separator); one row = init only
    <root>/<seq>/absent.label             optional: one 0/1 per line, 1 = target not visible in that frame
    <root>/<seq>/attributes.json          optional: a JSON object merged into ``Sequence.attributes``

Boxes are xywh in the file's own pixel convention. Rows with NaN or w/h <= 0 are invalid frames.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ltr.admin.paths import dataset_root
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.common import build_sequence
from ltr.dataset.textio import list_frames, read_flags_per_line, read_rows, reconcile

GT_FILE = "groundtruth_rect.txt"
ABSENT_FILE = "absent.label"
ATTRIBUTES_FILE = "attributes.json"


def read_attributes_json(path: Path) -> dict[str, Any]:
    """An optional ``attributes.json`` object; invalid JSON or a non-object is an error naming the file."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DatasetError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from err
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object of attributes, got {type(data).__name__}")
    return data


def read_absent(path: Path, num_frames: int) -> np.ndarray | None:
    """``absent.label`` as (N,) bool (True = target absent), or None when the file is missing."""
    if not path.is_file():
        return None
    flags = read_flags_per_line(path)
    if len(flags) != num_frames:
        raise DatasetError(f"{path}: {len(flags)} flags but {num_frames} frames")
    bad = np.flatnonzero((flags != 0) & (flags != 1))
    if len(bad):
        raise DatasetError(f"{path}:{bad[0] + 1}: expected 0 or 1, got {flags[bad[0]]}")
    return flags.astype(bool)


class FolderDataset(SequenceDataset):
    """Sequences stored as ``<root>/<seq>/{img/, groundtruth_rect.txt[, absent.label, attributes.json]}``."""

    name = "folder"

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise DatasetError(f"folder dataset root {self.root} is not a directory")
        if (self.root / "img").is_dir():  # the root itself is one sequence
            self._dirs = {self.root.name: self.root}
        else:
            self._dirs = {
                d.name: d
                for d in sorted(self.root.iterdir())
                if d.is_dir() and ((d / "img").is_dir() or (d / GT_FILE).is_file())
            }

    def sequence_names(self) -> list[str]:
        return list(self._dirs)

    def get_sequence(self, name: str) -> Sequence:
        if name not in self._dirs:
            raise KeyError(f"no sequence {name!r} in {self.root}")
        seq_dir = self._dirs[name]
        frames = list_frames(seq_dir / "img")
        gt_path = seq_dir / GT_FILE
        boxes = read_rows(gt_path, 4)
        problems: list[str] = []
        frames, boxes = reconcile(name, frames, boxes, gt_path, problems)
        absent = read_absent(seq_dir / ABSENT_FILE, len(frames))
        attributes = read_attributes_json(seq_dir / ATTRIBUTES_FILE)
        visible = None
        if absent is not None:
            attributes["absent"] = absent
            visible = ~absent
        return build_sequence(
            name, boxes, frames, dataset=self.name, attributes=attributes, problems=problems, visible=visible
        )


def folder_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> FolderDataset:
    """Registry factory: ``--dataset folder --root DIR`` (or ``FOLDER_DIR``). No splits."""
    if split not in (None, "", "all"):
        raise DatasetError(f"the folder dataset has no splits (got split={split!r})")
    if options:
        raise TypeError(f"folder dataset takes no options, got {sorted(options)}")
    return FolderDataset(dataset_root("folder", root))
