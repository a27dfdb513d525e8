"""The embedded default dataset: seeded procedural tracking videos, in memory or written to disk.

Every command (training, tracking, evaluation) can run on it with no download. Each sequence is a textured
target (noise / stripes / spots / checker texture on an ellipse, rounded rectangle, convex polygon or blob
outline) moving smoothly over a panning textured background with speed, scale, aspect and rotation changes,
look-alike distractors, occluders (partial and full), motion blur, illumination change and excursions out
of the image. Same seed, same pixels and boxes (in any order, in any process; bit-exactness across
machines assumes the same numpy/OpenCV builds, since their SIMD math may round differently elsewhere).

Ground truth (details in :mod:`ltr.dataset.synthetic_scene`): xywh boxes in continuous 0-based pixels, the
tight bound of the whole target outline, not clipped to the image; ``visible`` is False exactly when no
pixel of the target can be seen (fully outside the image or fully occluded).

Sets (sequence names are ``<class>-<k>``, e.g. ``stripesblob-3``):

- ``synthetic_dataset()`` / ``split="test"``: the default test set, 20 x 150 frames, seed 7919;
- ``split="train"``: 200 x 100 frames, seed 1; ``split="val"``: 20 x 100 frames, seed 2;
- ``synthetic_dataset(root)``: a written copy (OTB or LaSOT layout), read by the matching reader.

Command line (writes a set to disk; layouts in :mod:`ltr.dataset.synthetic_io`)::

    python -m ltr.dataset.synthetic --out DIR --sequences N --frames F --seed S --layout lasot|otb
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence as Seq
from pathlib import Path
from typing import Any

import numpy as np

from ltr.admin.io import atomic_write_text
from ltr.admin.paths import DATASET_VARS, lookup
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.synthetic_io import LAYOUTS, write_dataset
from ltr.dataset.synthetic_render import Assets, build_assets, render_frame
from ltr.dataset.synthetic_scene import (
    GENERATOR_VERSION,
    Scene,
    SyntheticConfig,
    sequence_names,
    simulate,
)

__all__ = [
    "SPLITS",
    "SyntheticConfig",
    "SyntheticDataset",
    "ensure_default_test_set",
    "synthetic_dataset",
]

#: split -> (seed, number of sequences, frames per sequence). Seeds differ, so no split overlaps another.
SPLITS: dict[str, tuple[int, int, int]] = {
    "test": (7919, 20, 150),
    "train": (1, 200, 100),
    "val": (2, 20, 100),
}

_MARKER = ".synthetic_complete.json"


class _LRU:
    """A small thread-safe least-recently-used cache."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return None

    def put(self, key: Any, value: Any) -> None:
        if self.maxsize <= 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)


#: Process-wide caches shared by all synthetic datasets: pixel assets (background, textures; ~0.5 MB each
#: at 320x240) of recently used sequences, and recently rendered frames (~0.2 MB each).
_ASSETS = _LRU(128)
_FRAMES = _LRU(32)


class SyntheticFrames:
    """``frame_loader`` of one synthetic sequence: renders frame ``t`` on demand as (H, W, 3) RGB uint8.

    Assets and recent frames live in process-wide LRU caches, so memory stays bounded however many
    sequences are open. Picklable (only the scene's geometry travels).
    """

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self._key = (scene.config, scene.seed, scene.index)

    def _assets(self) -> Assets:
        assets = _ASSETS.get(self._key)
        if assets is None:
            assets = build_assets(self.scene)
            _ASSETS.put(self._key, assets)
        return assets

    def __call__(self, t: int) -> np.ndarray:
        key = (*self._key, int(t))
        frame = _FRAMES.get(key)
        if frame is None:
            frame = render_frame(self.scene, self._assets(), int(t))
            _FRAMES.put(key, frame)
        return frame.copy()


class SyntheticDataset(SequenceDataset):
    """``num_sequences`` procedural sequences of the set ``seed``, simulated on first access, rendered lazily.

    Boxes are (N, 4) xywh float64 (see the module docstring); ``attributes`` hold per-frame bool arrays
    ``occlusion`` (any part of the target occluded), ``full_occlusion``, ``out_of_view``, ``absent``
    (= not visible), ``visible_ratio`` (N,) float, plus ``class``, ``language``, ``distractors`` (count),
    ``seed`` and ``index``.
    """

    name = "synthetic"

    def __init__(
        self,
        num_sequences: int = SPLITS["test"][1],
        *,
        seed: int = SPLITS["test"][0],
        config: SyntheticConfig | None = None,
    ) -> None:
        if num_sequences < 1:
            raise ValueError(f"SyntheticDataset: num_sequences must be >= 1, got {num_sequences}")
        self.seed = int(seed)
        self.config = config or SyntheticConfig()
        self._names = sequence_names(self.seed, num_sequences)
        self._index = {name: i for i, (_, name) in enumerate(self._names)}
        self._scenes: dict[str, Scene] = {}
        self._lock = threading.Lock()

    def sequence_names(self) -> list[str]:
        return [name for _, name in self._names]

    def class_of(self, name: str) -> str:
        """The class (texture + shape kind) of sequence ``name``."""
        return self._names[self._lookup(name)][0]

    def _lookup(self, name: str) -> int:
        if name not in self._index:
            raise KeyError(
                f"synthetic set (seed {self.seed}) has no sequence {name!r}; e.g. {self._names[0][1]!r}"
            )
        return self._index[name]

    def scene(self, name: str) -> Scene:
        """The simulated scene of ``name`` (geometry and ground truth, no pixels); simulated once, then cached
        (a few kB each). Treat it as read-only."""
        with self._lock:
            scene = self._scenes.get(name)
        if scene is None:
            scene = simulate(self.config, self.seed, self._lookup(name))
            with self._lock:
                self._scenes[name] = scene
        return scene

    def get_sequence(self, name: str) -> Sequence:
        """A fresh :class:`Sequence` (its arrays are copies; frames render lazily from the cached scene)."""
        scene = self.scene(name)
        return Sequence(
            name=name,
            boxes=scene.boxes.copy(),
            frame_loader=SyntheticFrames(scene),
            visible=scene.visible,
            dataset=self.name,
            attributes={
                "class": scene.class_name,
                "language": scene.description,
                "occlusion": scene.occlusion.copy(),
                "full_occlusion": scene.full_occlusion.copy(),
                "out_of_view": scene.out_of_view.copy(),
                "absent": ~scene.visible,
                "visible_ratio": scene.visible_ratio.copy(),
                "distractors": len(scene.distractors),
                "seed": self.seed,
                "index": scene.index,
            },
        )


def _split_params(split: str | None) -> tuple[int, int, int]:
    key = split or "test"
    if key not in SPLITS:
        raise ValueError(
            f"synthetic dataset: unknown split {split!r}; choose one of {sorted(SPLITS)} or None"
        )
    return SPLITS[key]


def synthetic_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> SequenceDataset:
    """Registry factory for ``synthetic``.

    With ``root`` (or, for the test split, ``SYNTHETIC_DIR`` set in the environment or paths file): the
    written copy in ``root`` (see :func:`read_written`). Otherwise: the in-memory set of
    ``split`` (None = ``test``, ``train``, ``val``; see :data:`SPLITS`). ``options`` may
    override ``num_sequences``, ``seed`` and any :class:`SyntheticConfig` field (e.g.
    ``num_frames``, ``width``); unknown names raise ``TypeError``.
    """
    if root is None and split in (None, "test"):
        root = lookup(DATASET_VARS["synthetic"])  # a written copy named by SYNTHETIC_DIR, if any
    if root is not None:
        if options:
            raise TypeError(f"synthetic_dataset(root=...): options {sorted(options)} only apply in memory")
        return read_written(root)
    seed, num_sequences, num_frames = _split_params(split)
    seed = int(options.pop("seed", seed))
    num_sequences = int(options.pop("num_sequences", num_sequences))
    options.setdefault("num_frames", num_frames)
    config = SyntheticConfig().replace(**options)
    return SyntheticDataset(num_sequences, seed=seed, config=config)


def read_written(root: str | os.PathLike) -> SequenceDataset:
    """A synthetic set written to ``root``: LaSOT layout (``<class>/<class>-<k>/groundtruth.txt``) read with
    :class:`ltr.dataset.lasot.LasotDataset` (split ``all``), anything else with
    :class:`ltr.dataset.folder.FolderDataset` (OTB layout)."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"synthetic dataset root {root} is not a directory")
    children = [d for d in root.iterdir() if d.is_dir()]
    lasot = bool(children) and all(
        not (d / "img").is_dir() and any((s / "groundtruth.txt").is_file() for s in d.glob(f"{d.name}-*"))
        for d in children
    )
    if lasot:
        from ltr.dataset.lasot import LasotDataset

        return LasotDataset(root, split="all")
    from ltr.dataset.folder import FolderDataset

    return FolderDataset(root)


def _marker_payload(seed: int, num_sequences: int, config: SyntheticConfig, layout: str) -> dict[str, Any]:
    return {
        "generator_version": GENERATOR_VERSION,
        "layout": layout,
        "seed": seed,
        "num_sequences": num_sequences,
        "config": config.to_dict(),
    }


def ensure_default_test_set(
    workspace: str | os.PathLike, *, workers: int | None = None, progress: bool = True
) -> Path:
    """Write the default test set (OTB layout) under ``workspace/datasets/synthetic_otb`` unless complete.

    Idempotent: a marker file naming the generator version and parameters is written last; when it matches,
    nothing is written. A folder with a stale marker is deleted and rewritten; a non-empty folder without a
    marker that holds anything other than the expected sequences is refused (``DatasetError``).
    Returns the dataset folder.
    """
    seed, num_sequences, num_frames = SPLITS["test"]
    config = SyntheticConfig(num_frames=num_frames)
    return ensure_written(
        Path(workspace) / "datasets" / "synthetic_otb",
        layout="otb",
        seed=seed,
        num_sequences=num_sequences,
        config=config,
        workers=workers,
        progress=progress,
    )


def ensure_written(
    folder: Path,
    *,
    layout: str,
    seed: int,
    num_sequences: int,
    config: SyntheticConfig,
    workers: int | None = None,
    progress: bool = True,
) -> Path:
    """Write a synthetic set to ``folder`` unless its completion marker already matches (see above)."""
    folder = Path(folder)
    expected = _marker_payload(seed, num_sequences, config, layout)
    marker = folder / _MARKER
    if marker.is_file():
        try:
            found = json.loads(marker.read_text())
        except json.JSONDecodeError as err:
            raise DatasetError(
                f"{marker}:{err.lineno}: corrupt synthetic-dataset marker ({err.msg})"
            ) from err
        if found == expected:
            return folder
        shutil.rmtree(folder)
    elif folder.is_dir():
        names = sequence_names(seed, num_sequences)
        allowed = {cls if layout == "lasot" else name for cls, name in names}
        unexpected = sorted(p.name for p in folder.iterdir() if p.name not in allowed)
        if unexpected:
            raise DatasetError(
                f"{folder}: not an incomplete synthetic dataset (unexpected entries {unexpected[:5]}); "
                "remove it or choose another workspace"
            )
    write_dataset(
        folder,
        layout=layout,
        num_sequences=num_sequences,
        seed=seed,
        config=config,
        workers=workers,
        progress=progress,
    )
    atomic_write_text(marker, json.dumps(expected, indent=2, sort_keys=True) + "\n")
    return folder


def main(argv: Seq[str] | None = None) -> int:
    """``python -m ltr.dataset.synthetic --out DIR ...``: write a synthetic set to disk."""
    parser = argparse.ArgumentParser(
        prog="python -m ltr.dataset.synthetic",
        description="Write seeded procedural tracking videos in the LaSOT or OTB layout.",
    )
    parser.add_argument("--out", required=True, type=Path, help="output folder (created)")
    parser.add_argument("--layout", required=True, choices=LAYOUTS)
    parser.add_argument("--sequences", type=int, default=100, help="number of sequences (default 100)")
    parser.add_argument("--frames", type=int, default=100, help="frames per sequence (default 100)")
    parser.add_argument(
        "--seed", type=int, default=SPLITS["train"][0], help="set seed (default: the train seed)"
    )
    parser.add_argument("--width", type=int, default=SyntheticConfig.width)
    parser.add_argument("--height", type=int, default=SyntheticConfig.height)
    parser.add_argument("--workers", type=int, default=None, help="processes (default: CPU count)")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        config = SyntheticConfig(width=args.width, height=args.height, num_frames=args.frames)
    except ValueError as err:
        parser.error(str(err))
    if args.sequences < 1:
        parser.error(f"--sequences must be >= 1, got {args.sequences}")
    try:  # before any frame is rendered
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        parser.exit(2, f"error: cannot create --out {args.out}: {err.strerror or err}\n")
    start = time.perf_counter()
    stats = write_dataset(
        args.out,
        layout=args.layout,
        num_sequences=args.sequences,
        seed=args.seed,
        config=config,
        workers=args.workers,
        quality=args.quality,
        progress=not args.no_progress,
    )
    wall = time.perf_counter() - start
    print(
        f"wrote {args.sequences} sequences / {stats.frames} frames ({args.layout} layout) to {args.out} "
        f"in {wall:.1f} s ({stats.frames / max(wall, 1e-9):.0f} frames/s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
