"""VOT short-term challenge folders (VOT2016..VOT2022 style).

Layout: ``<root>/list.txt`` (sequence names), per sequence a ``sequence`` file of ``key=value`` lines
(``channels.color=color/%08d.jpg``; without it frames are ``color/%08d.jpg`` or, legacy, ``%08d.jpg`` in the
folder), and ``groundtruth.txt`` with one region per line: 1 value = special code (unknown), 4 values =
rectangle ``x,y,w,h``, an even number >= 6 = polygon ``x1,y1,x2,y2,...`` (converted to its axis-aligned
min/max box), ``m<x0>,<y0>,<w>,<h>,<rle>`` = mask (converted to its tight box). Any NaN -> unknown.
Per-frame ``<tag>.tag`` / ``<tag>.label`` files (0/1 per line) go to ``attributes["tags"]``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from ltr.admin.paths import dataset_root
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.textio import parse_float, read_flags_per_line, read_lines, require_rows, split_numbers

_PRINTF = re.compile(r"%0?(\d*)d")


def read_sequence_file(path: Path) -> dict[str, str]:
    """The ``sequence`` metadata file as a dict (``key=value`` lines; blank and ``#`` lines skipped)."""
    meta = {}
    for lineno, line in enumerate(read_lines(path), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        key, sep, value = text.partition("=")
        if not sep:
            raise DatasetError(f"{path}:{lineno}: expected 'key=value', got {text!r}")
        meta[key.strip()] = value.strip()
    return meta


def mask_box(values: list[float], path: Path, lineno: int) -> list[float]:
    """Tight xywh box of a VOT RLE mask ``x0, y0, w, h, run0, run1, ...`` (runs alternate 0s and 1s)."""
    if len(values) < 4:
        raise DatasetError(f"{path}:{lineno}: a mask needs x0,y0,w,h and runs")
    x0, y0, width = values[0], values[1], int(values[2])
    ends = np.cumsum(np.asarray(values[4:], dtype=np.int64))
    starts = ends - np.asarray(values[4:], dtype=np.int64)
    ones = [(s, e) for i, (s, e) in enumerate(zip(starts, ends, strict=True)) if i % 2 == 1 and e > s]
    if not ones or width <= 0:
        return [np.nan] * 4
    rows0 = [s // width for s, _ in ones]
    rows1 = [(e - 1) // width for _, e in ones]
    cols0 = [0 if r0 != r1 else s % width for (s, _), r0, r1 in zip(ones, rows0, rows1, strict=True)]
    cols1 = [
        width - 1 if r0 != r1 else (e - 1) % width for (_, e), r0, r1 in zip(ones, rows0, rows1, strict=True)
    ]
    c0, c1, r0, r1 = min(cols0), max(cols1), min(rows0), max(rows1)
    return [x0 + c0, y0 + r0, float(c1 - c0 + 1), float(r1 - r0 + 1)]


def read_regions(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``groundtruth.txt`` -> boxes (N, 4) xywh (NaN = unknown) and codes (N,) (special code or -1)."""
    boxes, codes = [], []
    for lineno, line in enumerate(require_rows(read_lines(path), path), start=1):
        text = line.strip()
        is_mask = text.startswith("m")
        tokens = split_numbers(text[1:] if is_mask else text)
        values = [parse_float(t, path, lineno, line) for t in tokens]
        code = -1
        if is_mask:
            box = mask_box(values, path, lineno)
        elif len(values) == 1:
            box, code = [np.nan] * 4, int(values[0]) if np.isfinite(values[0]) else 0
        elif len(values) == 4:
            box = values
        elif len(values) >= 6 and len(values) % 2 == 0:
            xs, ys = np.asarray(values[0::2]), np.asarray(values[1::2])
            box = [xs.min(), ys.min(), xs.max() - xs.min(), ys.max() - ys.min()]
        else:
            raise DatasetError(
                f"{path}:{lineno}: expected 1 (code), 4 (rectangle) or an even number >= 6 (polygon) values, "
                f"got {text!r}"
            )
        if not np.isfinite(box).all():
            box = [np.nan] * 4
        boxes.append(box)
        codes.append(code)
    return np.asarray(boxes, dtype=np.float64).reshape(-1, 4), np.asarray(codes, dtype=np.int64)


def _frame_pattern(seq_dir: Path) -> str:
    seq_file = seq_dir / "sequence"
    if seq_file.is_file():
        meta = read_sequence_file(seq_file)
        if "channels.color" in meta:
            return meta["channels.color"]
    return "color/%08d.jpg" if (seq_dir / "color").is_dir() else "%08d.jpg"


def _format(pattern: str, number: int) -> str:
    return _PRINTF.sub(lambda m: f"{number:0{m.group(1) or 0}d}", pattern)


class VOTDataset(SequenceDataset):
    """A VOT challenge folder; boxes (N, 4) xywh (axis-aligned boxes of the regions), NaN = unknown."""

    name = "vot"

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        list_path = self.root / "list.txt"
        if list_path.is_file():
            self._names = [ln.strip() for ln in read_lines(list_path) if ln.strip()]
        elif self.root.is_dir():
            self._names = sorted(d.name for d in self.root.iterdir() if (d / "groundtruth.txt").is_file())
        else:
            raise DatasetError(f"VOT root not found: {self.root}")

    def sequence_names(self) -> list[str]:
        return list(self._names)

    def get_sequence(self, name: str) -> Sequence:
        seq_dir = self.root / name
        gt_path = seq_dir / "groundtruth.txt"
        if not gt_path.is_file() and any(seq_dir.glob("groundtruth_*.txt")):
            raise DatasetError(f"{seq_dir}: multi-object sequences (groundtruth_<id>.txt) are not supported")
        boxes, codes = read_regions(gt_path)
        pattern = _frame_pattern(seq_dir)
        frames = [seq_dir / _format(pattern, i) for i in range(1, len(boxes) + 1)]
        tags: dict[str, np.ndarray] = {}
        for tag_path in sorted([*seq_dir.glob("*.tag"), *seq_dir.glob("*.label")]):
            values = read_flags_per_line(tag_path)
            if len(values) > len(boxes):
                raise DatasetError(f"{tag_path}: {len(values)} values but {len(boxes)} frames")
            padded = np.zeros(len(boxes), dtype=bool)  # VOT tag files may stop at the last tagged frame
            padded[: len(values)] = values != 0
            tags[tag_path.stem] = padded
        attributes: dict[str, Any] = {"codes": codes, "tags": tags}
        return Sequence(name=name, boxes=boxes, frame_paths=frames, dataset=self.name, attributes=attributes)


def vot_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> VOTDataset:
    """Registry factory ``vot`` (``VOT_DIR`` = the folder holding ``list.txt``)."""
    if split not in (None, ""):
        raise DatasetError(f"point VOT_DIR/--root at the challenge folder instead of split={split!r}")
    if options:
        raise TypeError(f"vot dataset takes no options, got {sorted(options)}")
    return VOTDataset(dataset_root("vot", root))
