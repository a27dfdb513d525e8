"""Tolerant readers for the small text files every benchmark ships: box rows, flag columns, frame folders.

All parsers accept CRLF line endings, leading/trailing blanks and any mix of ``,`` / tab / space / ``;``
separators. A malformed line raises :class:`DatasetError` naming ``file:line``; ``NaN`` values are kept
(they mark unknown boxes, which become invalid frames downstream).
"""

from __future__ import annotations

import io
import math
import os
import re
import warnings
from pathlib import Path

import numpy as np

from ltr.dataset.base import DatasetError

_SEPARATORS = re.compile(r"[,\t; ]+")
_TO_SPACE = str.maketrans(",;\t\r", "    ")
_DIGITS = re.compile(r"(\d+)")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")


def read_lines(
    path: str | Path, *, what: str = "annotation file", error: type[Exception] = DatasetError
) -> list[str]:
    """The file's lines without line terminators; trailing blank lines dropped (a UTF-8 BOM too).

    A missing file raises ``error("{what} not found: {path}")``, one that cannot be read (a folder, no
    permission) ``error("{path}: cannot read the {what} (...)")``, undecodable bytes
    ``error("{path}: not a UTF-8 text file (...)")``; ``what``/``error`` let other readers (tracker result
    files in :mod:`eval.result_files`) keep their own wording and exception type.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig", errors="strict")
    except FileNotFoundError as err:
        raise error(f"{what} not found: {path}") from err
    except UnicodeDecodeError as err:
        raise error(f"{path}: not a UTF-8 text file ({err.reason})") from err
    except OSError as err:
        raise error(f"{path}: cannot read the {what} ({err.strerror or type(err).__name__})") from err
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def split_numbers(line: str) -> list[str]:
    """Split one annotation line on any of ``, \\t ;`` and spaces."""
    stripped = line.strip(" \t\r\n,;")  # also tolerate a trailing separator ("1,2,3,4,")
    return _SEPARATORS.split(stripped) if stripped else []


def parse_float(token: str, path: Path, lineno: int, line: str) -> float:
    try:
        return float(token)
    except ValueError as err:
        raise DatasetError(f"{path}:{lineno}: expected a number, got {token!r} in {line.strip()!r}") from err


def _fast_rows(lines: list[str], ncols: int) -> np.ndarray | None:
    """Vectorised parse of well-formed files (numpy's reader); None when anything looks off.

    Blank lines, empty fields and ragged rows all change the parsed shape and fall back to the slow path.
    """
    if not lines:
        return None
    text = "\n".join(lines).translate(_TO_SPACE)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns about empty input
            data = np.loadtxt(io.StringIO(text), ndmin=2, comments=None, dtype=np.float64)
    except ValueError:
        return None
    return data if data.shape == (len(lines), ncols) else None


def require_rows(lines: list[str], path: Path, ncols: int = 4) -> list[str]:
    """``lines`` of an annotation file, or :class:`DatasetError` naming the file when it has none.

    An empty ground-truth file is never a valid annotation: a sequence needs at least its first frame's box.
    """
    if not any(line.strip() for line in lines):
        what = "x,y,w,h row" if ncols == 4 else f"row of {ncols} numbers"
        raise DatasetError(
            f"{path}: empty annotation file (expected one {what} per frame, at least the first)"
        )
    return lines


def read_rows(path: str | Path, ncols: int = 4) -> np.ndarray:
    """Read one row of ``ncols`` numbers per line (boxes: xywh), as (N, ncols) float64.

    ``nan``/``NaN`` tokens are kept. Blank lines inside the file are an error (they would shift frames), and
    so is a file without any row (:func:`require_rows`).
    """
    path = Path(path)
    lines = require_rows(read_lines(path), path, ncols)
    fast = _fast_rows(lines, ncols)
    if fast is not None:
        return fast
    rows: list[list[float]] = []  # slow path: finds the offending line for the error message
    for lineno, line in enumerate(lines, start=1):
        tokens = split_numbers(line)
        if len(tokens) != ncols:
            raise DatasetError(f"{path}:{lineno}: expected {ncols} numbers, got {line.strip()!r}")
        rows.append([parse_float(t, path, lineno, line) for t in tokens])
    return np.asarray(rows, dtype=np.float64).reshape(-1, ncols)


def read_flags_per_line(path: str | Path) -> np.ndarray:
    """One integer per line (GOT-10k ``absence.label``/``cover.label``, ``absent.label``) -> (N,) int."""
    path = Path(path)
    values = []
    for lineno, line in enumerate(read_lines(path), start=1):
        token = line.strip()
        try:
            value = float(token)
        except ValueError as err:
            raise DatasetError(f"{path}:{lineno}: expected one integer flag, got {token!r}") from err
        if not math.isfinite(value) or value != int(value):
            raise DatasetError(f"{path}:{lineno}: expected one integer flag, got {token!r}")
        values.append(int(value))
    return np.asarray(values, dtype=np.int64)


def read_flags_one_line(path: str | Path) -> np.ndarray:
    """All flags on the first line, comma separated (LaSOT ``full_occlusion.txt``) -> (N,) int.

    Also accepts one flag per line, which some re-packaged copies use.
    """
    path = Path(path)
    lines = [ln for ln in read_lines(path) if ln.strip()]
    if len(lines) > 1:
        return read_flags_per_line(path)
    if not lines:
        return np.zeros(0, dtype=np.int64)
    values = []
    for token in split_numbers(lines[0]):
        if token not in {"0", "1"}:
            raise DatasetError(f"{path}:1: expected comma-separated 0/1 flags, got {token!r}")
        values.append(int(token))
    return np.asarray(values, dtype=np.int64)


def frame_number(path: Path) -> int | None:
    """The last run of digits in a file stem (``00000012.jpg`` -> 12, ``frame_7.png`` -> 7), else None."""
    digits = _DIGITS.findall(path.stem)
    return int(digits[-1]) if digits else None


def _renumber(path: Path, number: int) -> Path:
    """``path`` with its last digit run replaced by ``number`` at the same zero-padded width."""
    match = list(_DIGITS.finditer(path.stem))[-1]
    digits = f"{number:0{len(match.group(1))}d}"
    return path.with_name(path.stem[: match.start()] + digits + path.stem[match.end() :] + path.suffix)


def list_frames(
    directory: str | Path, extensions: tuple[str, ...] = IMAGE_EXTENSIONS, first: int | None = None
) -> list[Path]:
    """Image files of ``directory`` in frame order: numerically by their number, else by name.

    Numbered frames must be contiguous (and start at ``first`` when given); a gap raises
    :class:`DatasetError` naming the first missing file.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise DatasetError(f"frame folder not found: {directory}")
    with os.scandir(directory) as entries:  # d_type from the listing: no stat per frame
        names = [e.name for e in entries if e.name.lower().endswith(extensions) and e.is_file()]
    stem_digits = [_DIGITS.findall(name.rsplit(".", 1)[0]) for name in names]
    if not names or not all(stem_digits):
        return [directory / name for name in sorted(names)]
    numbers = [int(d[-1]) for d in stem_digits]
    order = sorted(range(len(names)), key=lambda i: (numbers[i], names[i]))
    names = [names[i] for i in order]
    numbers = [numbers[i] for i in order]
    if first is not None and numbers[0] != first:
        missing = _renumber(directory / names[0], first)
        raise DatasetError(f"missing frame {missing} (first frame found: {names[0]})")
    for i in range(1, len(names)):
        prev, num = numbers[i - 1], numbers[i]
        if num == prev:
            raise DatasetError(f"{directory}: two frames numbered {num} ({names[i - 1]}, {names[i]})")
        if num != prev + 1:
            missing = _renumber(directory / names[i], prev + 1)
            raise DatasetError(f"missing frame {missing} (frame numbers jump from {prev} to {num})")
    return [directory / name for name in names]


def numbered_paths(directory: Path, first: int, count: int, digits: int, ext: str) -> list[Path]:
    """``directory/{first:0{digits}d}.{ext}`` ... for ``count`` consecutive numbers (files not checked)."""
    return [directory / f"{n:0{digits}d}.{ext}" for n in range(first, first + count)]


def reconcile(
    name: str,
    frames: list[Path],
    boxes: np.ndarray,
    anno_path: Path,
    problems: list[str],
    stacklevel: int = 3,
) -> tuple[list[Path], np.ndarray]:
    """Cut frames and (N, 4) boxes to a common length when they disagree, recording a problem.

    A single annotation row (first-frame-only files) is padded with NaN rows instead. The warning is issued
    at ``stacklevel`` (3: the caller of the function that called this one).
    """
    if len(boxes) == len(frames):
        return frames, boxes
    if len(boxes) == 1 and len(frames) > 1:
        padded = np.full((len(frames), boxes.shape[1]), np.nan)
        padded[0] = boxes[0]
        return frames, padded
    msg = f"{anno_path}: {len(boxes)} annotation rows but {len(frames)} frames in sequence {name!r}"
    problems.append(msg)
    warnings.warn(msg + "; using the shorter length", stacklevel=stacklevel)
    n = min(len(frames), len(boxes))
    return frames[:n], boxes[:n]
