"""Need for Speed (NfS, Kiani Galoogahi et al., ICCV 2017), 100 videos evaluated at 30 fps.

Two layouts (``layout="auto"`` picks the packed one when ``<root>/sequences`` and ``<root>/anno`` exist):

- ``raw`` (as downloaded): ``<root>/<seq>/30/<seq>/00001.jpg..`` (5 digits) and ``<root>/<seq>/30/<seq>.txt``
  with whitespace-separated VATIC rows ``track xmin ymin xmax ymax frame lost occluded generated "label"``.
  These rows are annotated at 240 fps: 30-fps frame k (0-based) is 240-fps frame 8k, so when the frame
  numbers run past twice the image count only every 8th frame is kept (frame numbers are 1-based unless a
  row has frame 0). Boxes: ``x = xmin, y = ymin, w = xmax - xmin, h = ymax - ymin``; ``lost`` rows are not
  visible; frames with no row are NaN (invalid); rows past the last image are dropped.
- ``packed`` (pytracking's): ``<root>/sequences/<seq>/00001.jpg..`` and ``<root>/anno/nfs_<seq>.txt``
  (tab-separated ``x,y,w,h``, one row per 30-fps frame).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ltr.admin.paths import dataset_root
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.common import build_sequence, read_boxes_and_frames
from ltr.dataset.textio import list_frames, parse_float, read_lines, require_rows

FPS_RATIO = 8  # 240 fps / 30 fps


def read_vatic(path: Path) -> np.ndarray:
    """VATIC rows -> (M, 8) float: track, xmin, ymin, xmax, ymax, frame, lost, occluded (label dropped)."""
    rows = []
    for lineno, line in enumerate(require_rows(read_lines(path), path, 8), start=1):
        text = line.strip()
        if not text:
            continue
        quote = text.find('"')
        tokens = (text[:quote] if quote >= 0 else text).split()
        if len(tokens) < 8:
            raise DatasetError(
                f"{path}:{lineno}: expected a VATIC row (track xmin ymin xmax ymax frame lost "
                f"occluded ...), got {text!r}"
            )
        rows.append([parse_float(t, path, lineno, line) for t in tokens[:8]])
    data = np.asarray(rows, dtype=np.float64).reshape(-1, 8)
    if len(np.unique(data[:, 0])) > 1:
        raise DatasetError(f"{path}: more than one track id ({np.unique(data[:, 0]).astype(int).tolist()})")
    return data


def vatic_to_frames(rows: np.ndarray, num_frames: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Map (M, 8) VATIC rows onto ``num_frames`` 30-fps frames.

    Returns boxes (num_frames, 4) xywh (NaN where no row), lost (num_frames,) bool, occluded (num_frames,)
    bool and the number of rows that fell past the last frame.
    """
    frame = rows[:, 5].astype(np.int64)
    index = frame - (0 if (frame == 0).any() else 1)
    if len(index) and index.max() >= 2 * num_frames:  # 240-fps rows for 30-fps images
        keep = index % FPS_RATIO == 0
        rows, index = rows[keep], index[keep] // FPS_RATIO
    inside = (index >= 0) & (index < num_frames)
    dropped = int((~inside).sum())
    rows, index = rows[inside], index[inside]
    boxes = np.full((num_frames, 4), np.nan)
    boxes[index] = np.stack(
        [rows[:, 1], rows[:, 2], rows[:, 3] - rows[:, 1], rows[:, 4] - rows[:, 2]], axis=1
    )
    lost = np.zeros(num_frames, dtype=bool)
    occluded = np.zeros(num_frames, dtype=bool)
    lost[index] = rows[:, 6] != 0
    occluded[index] = rows[:, 7] != 0
    return boxes, lost, occluded, dropped


class NfsDataset(SequenceDataset):
    """NfS 30-fps sequences; boxes (N, 4) xywh in pixels."""

    name = "nfs"

    def __init__(self, root: str | os.PathLike, layout: str = "auto") -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise DatasetError(f"NfS root {self.root} is not a directory (set NFS_DIR)")
        if layout == "auto":
            packed = (self.root / "sequences").is_dir() and (self.root / "anno").is_dir()
            layout = "packed" if packed else "raw"
        if layout not in ("raw", "packed"):
            raise DatasetError(f"NfS layout must be 'auto', 'raw' or 'packed', got {layout!r}")
        self.layout = layout
        if layout == "packed":
            self._names = sorted(p.stem[len("nfs_") :] for p in (self.root / "anno").glob("nfs_*.txt"))
        else:
            self._names = sorted(
                d.name for d in self.root.iterdir() if (d / "30" / f"{d.name}.txt").is_file()
            )

    def sequence_names(self) -> list[str]:
        return list(self._names)

    def get_sequence(self, name: str) -> Sequence:
        problems: list[str] = []
        attributes: dict[str, Any] = {}
        visible = None
        if self.layout == "packed":
            anno_path = self.root / "anno" / f"nfs_{name}.txt"
            frames, boxes = read_boxes_and_frames(
                name, anno_path, self.root / "sequences" / name, problems, first=1
            )
        else:
            base = self.root / name / "30"
            anno_path = base / f"{name}.txt"
            frames = list_frames(base / name, first=1)
            boxes, lost, occluded, dropped = vatic_to_frames(read_vatic(anno_path), len(frames))
            if dropped > 1:
                problems.append(
                    f"{anno_path}: {dropped} annotation rows fall past the last of {len(frames)} frames"
                )
            visible = ~lost
            attributes.update(lost=lost, occluded=occluded)
        return build_sequence(
            name, boxes, frames, dataset=self.name, attributes=attributes, problems=problems, visible=visible
        )


def nfs_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> NfsDataset:
    """Registry factory ``nfs`` (``NFS_DIR``); option ``layout`` = auto | raw | packed."""
    if split not in (None, "", "30", "test"):
        raise DatasetError(f"NfS is read at 30 fps only (got split={split!r})")
    return NfsDataset(dataset_root("nfs", root), **options)
