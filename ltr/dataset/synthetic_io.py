"""Writing synthetic sequences to disk in the LaSOT or OTB layout (every file written atomically).

LaSOT layout (training): ``<root>/<class>/<class>-<k>/``

- ``img/00000001.jpg ...`` (8 digits, 1-based file numbers; file i+1 is frame i),
- ``groundtruth.txt``: one ``x,y,w,h`` line per frame, comma-separated,
- ``full_occlusion.txt`` and ``out_of_view.txt``: ONE line of comma-separated 0/1 flags,
- ``nlp.txt``: one sentence describing the target.

OTB layout (evaluation): ``<root>/<class>-<k>/img/0001.jpg ...`` (4 digits, 1-based), ``groundtruth_rect.txt``
(comma-separated ``x,y,w,h`` lines), ``absent.label`` (one 0/1 per line, 1 = target not visible) and
``attributes.json`` (see :func:`scene_attributes`; read by :class:`ltr.dataset.folder.FolderDataset`).

**Coordinates differ from the real LaSOT files**: boxes are our continuous 0-based xywh floats written with
two decimals (see :mod:`ltr.dataset.synthetic_scene`), not 1-based integers. Boxes are written on every
frame, including invisible ones (they hold the true, hidden position); use the flag files for visibility.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Iterable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ltr.admin.io import atomic_write, atomic_write_text
from ltr.dataset.synthetic_render import build_assets, render_frame
from ltr.dataset.synthetic_scene import Scene, SyntheticConfig, sequence_names, simulate

LAYOUTS: tuple[str, ...] = ("lasot", "otb")


def format_boxes(boxes: np.ndarray) -> str:
    """(N, 4) xywh -> text, one ``x,y,w,h`` line per row with two decimals."""
    return "".join(f"{x:.2f},{y:.2f},{w:.2f},{h:.2f}\n" for x, y, w, h in np.asarray(boxes, dtype=np.float64))


def format_flag_line(flags: np.ndarray) -> str:
    """(N,) bool -> ``0,1,0,...`` on one line (LaSOT flag files)."""
    return ",".join("1" if f else "0" for f in flags) + "\n"


def format_flag_lines(flags: np.ndarray) -> str:
    """(N,) bool -> one ``0``/``1`` per line (OTB-style ``absent.label``)."""
    return "".join("1\n" if f else "0\n" for f in flags)


def sequence_dir(root: Path, layout: str, class_name: str, name: str) -> Path:
    """Folder of one sequence under ``root`` for ``layout`` (``lasot`` or ``otb``)."""
    if layout == "lasot":
        return root / class_name / name
    if layout == "otb":
        return root / name
    raise ValueError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")


def frame_file(layout: str, t: int) -> str:
    """File name of 0-based frame ``t`` inside ``img/``."""
    return f"{t + 1:08d}.jpg" if layout == "lasot" else f"{t + 1:04d}.jpg"


def scene_attributes(scene: Scene) -> dict:
    """JSON-able per-sequence attributes (OTB layout's ``attributes.json``): class, language, distractor
    count, seed/index and per-frame 0/1 lists ``occlusion``, ``full_occlusion``, ``out_of_view``."""
    return {
        "class": scene.class_name,
        "language": scene.description,
        "distractors": len(scene.distractors),
        "seed": scene.seed,
        "index": scene.index,
        "occlusion": scene.occlusion.astype(int).tolist(),
        "full_occlusion": scene.full_occlusion.astype(int).tolist(),
        "out_of_view": scene.out_of_view.astype(int).tolist(),
    }


def write_annotations(scene: Scene, folder: Path, layout: str) -> None:
    """Write the ground-truth and flag files of ``scene`` into ``folder`` (see the module docstring)."""
    if layout == "lasot":
        atomic_write_text(folder / "groundtruth.txt", format_boxes(scene.boxes))
        atomic_write_text(folder / "full_occlusion.txt", format_flag_line(scene.full_occlusion))
        atomic_write_text(folder / "out_of_view.txt", format_flag_line(scene.out_of_view))
        atomic_write_text(folder / "nlp.txt", scene.description + "\n")
    elif layout == "otb":
        atomic_write_text(folder / "groundtruth_rect.txt", format_boxes(scene.boxes))
        atomic_write_text(folder / "absent.label", format_flag_lines(~scene.visible))
        atomic_write_text(folder / "attributes.json", json.dumps(scene_attributes(scene), indent=1) + "\n")
    else:
        raise ValueError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")


@dataclass
class WriteStats:
    """Seconds spent per stage (summed over frames) and the number of frames written."""

    frames: int = 0
    simulate_s: float = 0.0
    assets_s: float = 0.0
    render_s: float = 0.0
    encode_s: float = 0.0
    write_s: float = 0.0

    def __add__(self, other: WriteStats) -> WriteStats:
        return WriteStats(
            self.frames + other.frames,
            self.simulate_s + other.simulate_s,
            self.assets_s + other.assets_s,
            self.render_s + other.render_s,
            self.encode_s + other.encode_s,
            self.write_s + other.write_s,
        )


def _encode_and_write(image: np.ndarray, path: Path, quality: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    ok, buf = cv2.imencode(
        ".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality]
    )
    if not ok:
        raise RuntimeError(f"JPEG encoding failed for {path}")
    t1 = time.perf_counter()
    data = buf.tobytes()
    atomic_write(path, lambda f: f.write(data))
    return t1 - t0, time.perf_counter() - t1


def write_sequence(
    config: SyntheticConfig,
    seed: int,
    index: int,
    root: str | os.PathLike,
    layout: str,
    *,
    class_name: str,
    name: str,
    quality: int = 90,
    io_threads: int = 4,
) -> WriteStats:
    """Simulate, render and write sequence ``index`` under ``root``; returns per-stage timings.

    Rendering runs on the calling thread while ``io_threads`` threads JPEG-encode and write (both release
    the GIL; the fsync of each atomic write mostly waits on the disk, so several overlap), keeping at most
    16 frames in flight.
    """
    folder = sequence_dir(Path(root), layout, class_name, name)
    stats = WriteStats()
    t0 = time.perf_counter()
    scene = simulate(config, seed, index)
    t1 = time.perf_counter()
    assets = build_assets(scene)
    stats.simulate_s, stats.assets_s = t1 - t0, time.perf_counter() - t1
    (folder / "img").mkdir(parents=True, exist_ok=True)
    pending: list[Future] = []

    def drain(keep: int) -> None:
        while len(pending) > keep:
            enc, wr = pending.pop(0).result()
            stats.encode_s += enc
            stats.write_s += wr

    with ThreadPoolExecutor(max_workers=max(1, io_threads)) as pool:
        for t in range(scene.num_frames):
            r0 = time.perf_counter()
            image = render_frame(scene, assets, t)
            stats.render_s += time.perf_counter() - r0
            pending.append(
                pool.submit(_encode_and_write, image, folder / "img" / frame_file(layout, t), quality)
            )
            drain(16)
        drain(0)
    write_annotations(scene, folder, layout)
    stats.frames = scene.num_frames
    return stats


def _init_worker() -> None:
    cv2.setNumThreads(1)  # one process per CPU already; OpenCV's own threads would oversubscribe


def _write_job(args: tuple) -> WriteStats:
    config, seed, index, root, layout, cls, name, quality = args
    return write_sequence(config, seed, index, root, layout, class_name=cls, name=name, quality=quality)


def write_dataset(
    root: str | os.PathLike,
    *,
    layout: str,
    num_sequences: int,
    seed: int,
    config: SyntheticConfig | None = None,
    workers: int | None = None,
    quality: int = 90,
    progress: bool = True,
) -> WriteStats:
    """Write ``num_sequences`` sequences of the set ``seed`` under ``root`` in ``layout``.

    Sequences are written by a process pool of ``workers`` (default: CPU count; 0 or 1 = in this process).
    Returns the summed per-stage timings.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")
    if num_sequences < 1:
        raise ValueError(f"num_sequences must be >= 1, got {num_sequences}")
    if not 0 <= quality <= 100:
        raise ValueError(f"JPEG quality must be in [0, 100], got {quality}")
    config = config or SyntheticConfig()
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    jobs = [
        (config, seed, i, str(root), layout, cls, name, quality)
        for i, (cls, name) in enumerate(sequence_names(seed, num_sequences))
    ]
    workers = (os.cpu_count() or 1) if workers is None else workers
    if workers <= 1:
        results: Iterable[WriteStats] = map(_write_job, jobs)
        total = _collect(results, len(jobs), progress)
    else:
        # spawn, not fork: callers may hold threads (torch, data loaders) that fork would copy mid-state.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=min(workers, len(jobs)), mp_context=context, initializer=_init_worker
        ) as pool:
            total = _collect(pool.map(_write_job, jobs), len(jobs), progress)
    return total


def _collect(results: Iterable[WriteStats], count: int, progress: bool) -> WriteStats:
    total = WriteStats()
    if progress:
        from tqdm import tqdm

        results = tqdm(results, total=count, desc="synthetic sequences", unit="seq")
    for stats in results:
        total = total + stats
    return total
