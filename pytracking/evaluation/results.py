"""Tracker result files in the standard layout, written atomically.

``{results}/{tracker}/{param}[_{runid:03d}]/{seq}.txt``: one ``x,y,w,h`` line per frame (comma separated,
xywh image pixels, shortest round-trip float text, so no precision is lost); ``{seq}_time.txt``: the
tracker's seconds per frame (frame 0 = initialisation). The time file is written first and the box file last,
each via a temp file + rename, so a box file that exists is complete and marks the sequence as finished.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ltr.admin.io import atomic_write_text


def result_folder(results_root: str | Path, tracker: str, param: str, runid: int | None = None) -> Path:
    """``{results_root}/{tracker}/{param}`` or ``.../{param}_{runid:03d}``."""
    if runid is not None and not 0 <= runid <= 999:
        raise ValueError(f"runid must be in 0..999, got {runid}")
    name = param if runid is None else f"{param}_{runid:03d}"
    return Path(results_root) / tracker / name


def box_file(folder: str | Path, sequence: str) -> Path:
    return Path(folder) / f"{sequence}.txt"


def time_file(folder: str | Path, sequence: str) -> Path:
    return Path(folder) / f"{sequence}_time.txt"


def is_finished(folder: str | Path, sequence: str) -> bool:
    """True when the sequence's box file exists (it is written last, atomically)."""
    return box_file(folder, sequence).is_file()


def format_boxes(boxes: np.ndarray) -> str:
    """(N, 4) xywh -> text, one ``x,y,w,h`` line per box with exact (round-trip) floats."""
    boxes = np.asarray(boxes, dtype=np.float64)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"boxes must be (N, 4) xywh, got shape {boxes.shape}")
    return "".join(",".join(repr(float(v)) for v in row) + "\n" for row in boxes)


def write_sequence_results(folder: str | Path, sequence: str, boxes: np.ndarray, times: np.ndarray) -> Path:
    """Write ``{sequence}_time.txt`` then ``{sequence}.txt`` atomically; returns the box file path.

    Args:
        boxes: (N, 4) xywh image pixels; times: (N,) seconds per frame.
    """
    times = np.asarray(times, dtype=np.float64).reshape(-1)
    if len(times) != len(boxes):
        raise ValueError(f"{sequence}: {len(boxes)} boxes but {len(times)} frame times")
    text = format_boxes(boxes)
    atomic_write_text(time_file(folder, sequence), "".join(f"{t!r}\n" for t in times.tolist()))
    return atomic_write_text(box_file(folder, sequence), text)
