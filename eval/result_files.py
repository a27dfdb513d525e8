"""Tracker result files: ``{results}/{tracker}/{param}[_{runid:03d}]/{seq}.txt`` with one x,y,w,h row a frame.

The delimiter (tab, comma, or blanks) is detected per file from its first non-empty line. Every problem is
reported with the file and line; NaN values are kept (the evaluation protocol decides what they mean).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from eval.frame_errors import ResultError
from ltr.dataset.textio import read_lines

_RUN_DIR = re.compile(r"^(?P<param>.+?)_(?P<run>\d{3})$")


def detect_delimiter(line: str) -> str | None:
    """',' or '\\t' if the line contains one (comma wins), else None (split on any blanks)."""
    if "," in line:
        return ","
    if "\t" in line:
        return "\t"
    return None


def read_result_file(path: str | Path) -> np.ndarray:
    """Read one result file -> (N, 4) float64 xywh (NaN kept). Errors name ``file:line``."""
    path = Path(path)
    lines = read_lines(path, what="result file", error=ResultError)
    if not lines:
        raise ResultError(f"{path}: empty result file (expected one x,y,w,h line per frame)")
    delim = detect_delimiter(lines[0])
    try:  # fast path (numpy's C parser); any doubt -> the line-by-line check below names the line
        boxes = np.loadtxt(lines, delimiter=delim, dtype=np.float64, ndmin=2, comments=None)
        if boxes.shape == (len(lines), 4):
            return boxes
    except ValueError:
        pass
    return _parse_checked(path, lines, delim)


def _parse_checked(path: Path, lines: list[str], delim: str | None) -> np.ndarray:
    """Line-by-line parse that raises :class:`ResultError` naming ``path:line`` for the first bad line."""
    rows: list[list[float]] = []
    for lineno, line in enumerate(lines, start=1):
        tokens = [t.strip() for t in line.split(delim)] if delim else line.split()
        if len(tokens) != 4 or not all(tokens):
            sep = {",": "comma", "\t": "tab", None: "blank"}[delim]
            raise ResultError(
                f"{path}:{lineno}: expected 4 {sep}-separated numbers (x,y,w,h), got {line.strip()!r}"
            )
        try:
            rows.append([float(t) for t in tokens])
        except ValueError as err:
            bad = next(t for t in tokens if not _is_float(t))
            raise ResultError(f"{path}:{lineno}: {bad!r} is not a number") from err
    return np.asarray(rows, dtype=np.float64)


def _is_float(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def run_directories(results_dir: str | Path, tracker: str, param: str) -> list[tuple[int | None, Path]]:
    """The run folders of ``tracker/param``: ``param`` (run None) or ``param_000``, ``param_001``, ...

    Numbered runs win: the plain ``param`` folder is used only when no ``param_NNN`` exists. Sorted by run
    id. An error lists the folders that exist when none matches.
    """
    base = Path(results_dir) / tracker
    runs: list[tuple[int | None, Path]] = []
    if base.is_dir():
        for child in sorted(base.iterdir()):
            m = _RUN_DIR.match(child.name)
            if child.is_dir() and m and m.group("param") == param:
                runs.append((int(m.group("run")), child))
    if not runs and (base / param).is_dir():
        runs.append((None, base / param))
    if not runs:
        existing = sorted(p.name for p in base.iterdir()) if base.is_dir() else []
        raise ResultError(
            f"no results for {tracker}/{param}: expected {base / param} or {base / (param + '_000')}, ..."
            + (f" (found in {base}: {existing})" if existing else f" ({base} does not exist)")
        )
    return sorted(runs, key=lambda r: -1 if r[0] is None else r[0])


@dataclass
class TrackerResults:
    """Loaded results of one ``tracker/param``: runs[r][seq] = (N, 4) xywh; paths[r][seq] = the file;
    times[r][seq] = (N,) seconds per frame from ``{seq}_time.txt`` where that file exists."""

    key: str
    run_ids: list[int | None]
    runs: list[dict[str, np.ndarray]]
    paths: list[dict[str, Path]]
    missing: dict[str, list[str]] = field(default_factory=dict)  # run folder -> missing sequence names
    times: list[dict[str, np.ndarray]] = field(default_factory=list)

    def fps(self, sequences: list[str]) -> float | None:
        """Frames per second: mean of 1/t over all positive frame times of the given sequences and all runs
        (the got10k toolkit's pooled definition); None unless every run has a time file for every one."""
        pooled = []
        for run in self.times:
            if not all(name in run for name in sequences):
                return None
            pooled.extend(run[name] for name in sequences)
        if not pooled:
            return None
        t = np.concatenate(pooled)
        t = t[np.isfinite(t) & (t > 0)]
        return float(np.mean(1.0 / t)) if t.size else None


def read_times(path: str | Path) -> np.ndarray:
    """A ``{seq}_time.txt`` file -> (N,) seconds (first number of each line). Errors name ``file:line``."""
    path = Path(path)
    values = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        token = line.replace(",", " ").split()[:1]
        if not token:
            continue
        try:
            values.append(float(token[0]))
        except ValueError as err:
            raise ResultError(f"{path}:{lineno}: expected a time in seconds, got {line.strip()!r}") from err
    return np.asarray(values, dtype=np.float64)


def load_tracker_results(
    results_dir: str | Path, key: str, sequences: list[str], *, allow_missing: bool = False
) -> TrackerResults:
    """Load every run of ``key`` = "tracker/param" for the given sequence names.

    A missing ``{seq}.txt`` is an error naming the file, unless ``allow_missing`` (then it is listed in
    ``missing`` and left out of that run).
    """
    if key.count("/") != 1:
        raise ValueError(f"tracker must be given as tracker/param (e.g. dimp/nce_plus), got {key!r}")
    tracker, param = key.split("/")
    out = TrackerResults(key, [], [], [])
    for run_id, folder in run_directories(results_dir, tracker, param):
        boxes: dict[str, np.ndarray] = {}
        paths: dict[str, Path] = {}
        times: dict[str, np.ndarray] = {}
        missing = []
        for name in sequences:
            path = folder / f"{name}.txt"
            if not path.is_file():
                missing.append(name)
                continue
            boxes[name] = read_result_file(path)
            paths[name] = path
            time_path = folder / f"{name}_time.txt"
            if time_path.is_file():
                times[name] = read_times(time_path)
        if missing and not allow_missing:
            shown = ", ".join(str(folder / f"{m}.txt") for m in missing[:3])
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise ResultError(
                f"{key}: {len(missing)} of {len(sequences)} result files missing: {shown}{more} "
                "(pass --allow-missing to evaluate on the sequences every tracker has)"
            )
        if missing:
            out.missing[str(folder)] = missing
        out.run_ids.append(run_id)
        out.runs.append(boxes)
        out.paths.append(paths)
        out.times.append(times)
    return out
