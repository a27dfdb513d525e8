"""Submission archives for the evaluation servers.

- GOT-10k test: ``<seq>/<seq>_001.txt`` (``_002``, ``_003`` for further runs; the server uses 3 runs of
  non-deterministic trackers) and ``<seq>/<seq>_time.txt`` (one column per run, one row per frame). Boxes
  x,y,w,h comma-separated, 3 decimals (the got10k toolkit's own ``%.3f``).
- TrackingNet test: ``<video>.txt`` at the zip root, x,y,w,h comma-separated, 2 decimals (as pytracking's
  packer; the server rounds every value to an integer before scoring, so more decimals change nothing).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from eval.frame_errors import ResultError
from eval.result_files import read_result_file, read_times, run_directories
from ltr.admin.io import atomic_write

TIME_SUFFIX = "_time.txt"


@dataclass
class PackReport:
    """What went into an archive."""

    path: Path
    sequences: int
    runs: int
    members: list[str]
    warnings: list[str] = field(default_factory=list)


def _sequences(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.txt") if not p.name.endswith(TIME_SUFFIX))


def _boxes_text(path: Path, decimals: int) -> str:
    boxes = read_result_file(path)
    bad = np.flatnonzero(~np.isfinite(boxes).all(axis=1))
    if len(bad):
        raise ResultError(f"{path}:{bad[0] + 1}: non-finite box {boxes[bad[0]].tolist()} cannot be submitted")
    fmt = f"%.{decimals}f"
    return "\n".join(",".join(fmt % v for v in row) for row in boxes) + "\n"


def _write_zip(out: Path, members: dict[str, str]) -> None:
    def write(f: io.BufferedIOBase) -> None:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, text in members.items():
                zf.writestr(name, text)

    atomic_write(out, write)


def _runs(results_dir: str | Path, tracker: str, param: str) -> list[Path]:
    return [folder for _, folder in run_directories(results_dir, tracker, param)]


def pack_got10k(
    results_dir: str | Path, tracker: str, param: str, out: str | Path, *, decimals: int = 3
) -> PackReport:
    """Zip every run of ``tracker/param`` in the GOT-10k test server layout (runs become _001, _002, ...)."""
    folders = _runs(results_dir, tracker, param)
    names = _sequences(folders[0])
    if not names:
        raise ResultError(f"no result files (*.txt) in {folders[0]}")
    warnings: list[str] = []
    if len(folders) > 3:
        warnings.append(f"{len(folders)} runs packed; the GOT-10k server evaluates at most 3 (_001.._003)")
    for folder in folders[1:]:
        other = _sequences(folder)
        if other != names:
            diff = sorted(set(names) ^ set(other))
            raise ResultError(f"{folder} and {folders[0]} hold different sequences (e.g. {diff[:3]})")
    members: dict[str, str] = {}
    for name in names:
        times = []
        for r, folder in enumerate(folders, start=1):
            members[f"{name}/{name}_{r:03d}.txt"] = _boxes_text(folder / f"{name}.txt", decimals)
            tpath = folder / f"{name}{TIME_SUFFIX}"
            times.append(read_times(tpath) if tpath.is_file() else None)
        if all(t is None for t in times):
            warnings.append(f"{name}: no {name}{TIME_SUFFIX} in any run; the time file is left out")
            continue
        if any(t is None for t in times) or len({len(t) for t in times}) != 1:
            raise ResultError(f"{name}: {TIME_SUFFIX} missing or of different lengths across runs {folders}")
        table = np.stack(times, axis=1)
        members[f"{name}/{name}{TIME_SUFFIX}"] = (
            "\n".join(",".join(f"{v:.8f}" for v in row) for row in table) + "\n"
        )
    out = Path(out)
    _write_zip(out, members)
    return PackReport(out, len(names), len(folders), sorted(members), warnings)


def pack_trackingnet(
    results_dir: str | Path, tracker: str, param: str, out: str | Path, *, run: int = 0, decimals: int = 2
) -> PackReport:
    """Zip one run (index ``run`` in run-id order) of ``tracker/param`` as ``<video>.txt`` at the zip root."""
    folders = _runs(results_dir, tracker, param)
    if not 0 <= run < len(folders):
        raise ResultError(
            f"run index {run} out of range: {tracker}/{param} has {len(folders)} run(s) {folders}"
        )
    folder = folders[run]
    names = _sequences(folder)
    if not names:
        raise ResultError(f"no result files (*.txt) in {folder}")
    members = {f"{name}.txt": _boxes_text(folder / f"{name}.txt", decimals) for name in names}
    warnings = [f"{len(folders)} runs found; packed {folder.name} only"] if len(folders) > 1 else []
    out = Path(out)
    _write_zip(out, members)
    return PackReport(out, len(names), 1, sorted(members), warnings)
