"""The real-footage validation set: tracking sequences made from real photographs that installed packages ship.

It measures how well a tracker trained on the procedural world (:mod:`ltr.dataset.synthetic`) transfers to
real images. Use it to choose between recipes and report it apart from the synthetic test set; never train
on it.

**Sources** (:data:`SOURCES`), read from the installed packages' own folders, nothing downloaded:

- matplotlib (a dependency): ``mpl-data/sample_data/grace_hopper.jpg``;
- scikit-image (install it with ``pip install scikit-image``; :func:`missing_sources` says what is
  absent): ``skimage/data/`` ``astronaut.png``, ``chelsea.png``, ``coffee.png``, ``rocket.jpg``,
  ``motorcycle_left.png``, ``camera.png`` (grey), ``coins.png`` (grey), ``grass.png`` (grey),
  ``gravel.png`` (grey), ``brick.png`` (grey). Grey photos are used as grey RGB frames.

**Sequences** (:data:`CAMERA_SEQUENCES`, :data:`OBJECT_SEQUENCES`; 120 frames each, frames of 320x240 to
640x480):

- ``cam-*``, camera paths: a camera pans and zooms over one photograph (:func:`view_boxes`); the target is
  a region of that photograph, its box chosen once by eye in photo pixels (the tables below). The frame box
  is that box mapped through the camera, exactly; the window stays inside the photo and always holds the
  whole target.
- ``obj-*``, real objects moved over real backgrounds: an elliptical region of one photograph (a face, a
  coin, a lamp; :class:`~ltr.dataset.real_footage_geometry.Patch`) moves, scales and rotates over a panning
  view of another photograph, behind a second real patch that crosses it once (partial occlusion);
  ``obj-coins`` also has look-alike coins. The box is the tight bound of the moved ellipse, exactly
  (amodal: occluders do not shrink it), and the target stays wholly in the frame.

Every random choice (paths, zoom, scale, rotation, occlusion time) comes from ``numpy`` generators seeded
by ``(seed, sequence index)``, so a seed gives the same frames and boxes in any process and order.
Ground truth: (N, 4) **xywh** float64 in continuous 0-based frame pixels, rounded to 0.01; every frame
visible. ``attributes``: ``kind`` (``camera`` / ``object``), ``photo`` (the target's), ``seed`` and, for
object sequences, ``background``; :meth:`RealFootageDataset.occlusion` gives the per-frame occlusion.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.real_footage_geometry import Patch, draw_patch, patch_boxes, render_view, view_boxes
from ltr.dataset.synthetic_scene import smooth_signal

__all__ = [
    "CAMERA_SEQUENCES",
    "OBJECT_SEQUENCES",
    "SOURCES",
    "CameraSpec",
    "ObjectSpec",
    "RealFootageDataset",
    "missing_sources",
    "real_footage_dataset",
]

#: photo name -> (package, file path inside the installed package's folder).
SOURCES: dict[str, tuple[str, str]] = {
    "grace_hopper": ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg"),
    "astronaut": ("skimage", "data/astronaut.png"),
    "chelsea": ("skimage", "data/chelsea.png"),
    "coffee": ("skimage", "data/coffee.png"),
    "rocket": ("skimage", "data/rocket.jpg"),
    "motorcycle": ("skimage", "data/motorcycle_left.png"),
    "camera": ("skimage", "data/camera.png"),
    "coins": ("skimage", "data/coins.png"),
    "grass": ("skimage", "data/grass.png"),
    "gravel": ("skimage", "data/gravel.png"),
    "brick": ("skimage", "data/brick.png"),
}
_PIP_NAMES = {"matplotlib": "matplotlib", "skimage": "scikit-image"}

#: the set's default seed and frames per sequence.
SEED = 4242
NUM_FRAMES = 120


@dataclass(frozen=True)
class CameraSpec:
    """A camera path over ``photo``; ``target``: (x, y, w, h) photo pixels; ``size``: frame (w, h);
    ``zoom``: range of photo pixels per frame pixel (narrowed to what keeps the window in the photo)."""

    name: str
    photo: str
    target: tuple[float, float, float, float]
    size: tuple[int, int]
    zoom: tuple[float, float]


@dataclass(frozen=True)
class ObjectSpec:
    """``target`` moved over a view of ``background``; ``size``: frame (w, h); ``target_size``: range of
    the target's sqrt(box w * box h) over sqrt(frame w * frame h); ``occluder``: the patch that crosses the
    target once; ``distractors``: look-alike patches moving on their own paths behind the target."""

    name: str
    background: str
    target: Patch
    size: tuple[int, int]
    target_size: tuple[float, float]
    occluder: Patch
    distractors: tuple[Patch, ...] = ()


CAMERA_SEQUENCES: tuple[CameraSpec, ...] = (
    CameraSpec("cam-astronaut-face", "astronaut", (168, 30, 130, 150), (320, 240), (0.8, 1.3)),
    CameraSpec("cam-astronaut-badge", "astronaut", (133, 346, 80, 77), (320, 240), (0.7, 1.2)),
    CameraSpec("cam-chelsea-eye", "chelsea", (134, 84, 74, 64), (320, 240), (0.7, 1.0)),
    CameraSpec("cam-coffee-spoon", "coffee", (324, 228, 84, 98), (400, 300), (0.7, 1.2)),
    CameraSpec("cam-rocket", "rocket", (302, 124, 42, 130), (480, 360), (0.7, 1.1)),
    CameraSpec("cam-motorcycle-lamp", "motorcycle", (503, 118, 62, 72), (640, 480), (0.7, 1.0)),
    CameraSpec("cam-motorcycle-wheel", "motorcycle", (505, 282, 180, 170), (480, 360), (0.8, 1.3)),
    CameraSpec("cam-hopper-face", "grace_hopper", (152, 128, 212, 210), (480, 360), (0.8, 1.3)),
    CameraSpec("cam-cameraman-camcorder", "camera", (256, 136, 72, 54), (320, 240), (0.7, 1.3)),
    CameraSpec("cam-coins", "coins", (302, 14, 64, 80), (320, 240), (0.7, 1.2)),
)

# Occluders: real regions of other photographs.
_TOWER = Patch("rocket", 50, 230, 34, 120)
_FLAG = Patch("astronaut", 40, 160, 38, 110)
_SEAT = Patch("motorcycle", 250, 180, 95, 28)
_SHELF = Patch("motorcycle", 620, 210, 60, 50)
_GRAVEL = Patch("gravel", 256, 256, 70, 55)

OBJECT_SEQUENCES: tuple[ObjectSpec, ...] = (
    ObjectSpec(
        "obj-badge-on-gravel", "gravel", Patch("astronaut", 173, 384, 40, 39), (320, 240), (0.2, 0.3), _SEAT
    ),
    ObjectSpec(
        "obj-hopper-on-motorcycle",
        "motorcycle",
        Patch("grace_hopper", 258, 232, 106, 118),
        (480, 360),
        (0.25, 0.4),
        _FLAG,
    ),
    ObjectSpec(
        "obj-chelsea-on-grass", "grass", Patch("chelsea", 226, 150, 180, 140), (400, 300), (0.3, 0.45), _TOWER
    ),
    ObjectSpec(
        "obj-coins-on-coffee",
        "coffee",
        Patch("coins", 334, 55, 30, 39),
        (320, 240),
        (0.18, 0.28),
        _SHELF,
        (Patch("coins", 217, 50, 25, 27), Patch("coins", 104, 184, 24, 25)),
    ),
    ObjectSpec(
        "obj-lamp-on-rocket", "rocket", Patch("motorcycle", 534, 155, 31, 37), (480, 360), (0.15, 0.25), _SEAT
    ),
    ObjectSpec(
        "obj-astronaut-on-brick",
        "brick",
        Patch("astronaut", 229, 98, 66, 82),
        (320, 240),
        (0.25, 0.35),
        _GRAVEL,
    ),
    ObjectSpec(
        "obj-cup-on-camera", "camera", Patch("coffee", 292, 118, 118, 100), (400, 300), (0.25, 0.4), _TOWER
    ),
    ObjectSpec(
        "obj-cameraman-on-coffee",
        "coffee",
        Patch("camera", 212, 128, 56, 70),
        (320, 240),
        (0.22, 0.32),
        _FLAG,
    ),
)


def _source_path(photo: str) -> Path | None:
    package, rel = SOURCES[photo]
    spec = importlib.util.find_spec(package)  # finds the package's folder without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / rel
    return path if path.is_file() else None


def missing_sources() -> list[str]:
    """The pip packages to install for sources of :data:`SOURCES` that are not installed (empty: complete)."""
    return sorted({_PIP_NAMES[SOURCES[p][0]] for p in SOURCES if _source_path(p) is None})


@functools.lru_cache(maxsize=len(SOURCES))
def load_photo(photo: str) -> np.ndarray:
    """Photograph ``photo`` of :data:`SOURCES` as read-only (H, W, 3) RGB uint8 (grey files as grey RGB)."""
    path = _source_path(photo)
    if path is None:
        package = _PIP_NAMES[SOURCES[photo][0]]
        raise DatasetError(
            f"real_footage: photo {photo!r} ({'/'.join(SOURCES[photo])}) is not installed; "
            f"pip install {package}"
        )
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise DatasetError(f"real_footage: cannot read {path}")
    rgb = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    rgb.flags.writeable = False
    return rgb


def _rng(seed: int, index: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, index])))


def _unit(
    rng: np.random.Generator, n: int, min_period: float = 40.0, max_period: float = 160.0
) -> np.ndarray:
    """(n,) smooth signal in [0, 1]."""
    return 0.5 + 0.5 * smooth_signal(rng, n, min_period, max_period)


def _zoom_limit(photo_hw: tuple[int, int], size: tuple[int, int]) -> float:
    """Largest photo-pixels-per-frame-pixel scale whose window fits in the photo, less two pixels."""
    return min((photo_hw[1] - 2) / size[0], (photo_hw[0] - 2) / size[1])


def camera_path(
    rng: np.random.Generator,
    photo_hw: tuple[int, int],
    size: tuple[int, int],
    zoom: tuple[float, float],
    n: int,
    target: tuple[float, float, float, float] | None = None,
    margin: float = 8.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(n, 2) window origins and (n,) scales of a smooth pan-and-zoom over a photo of ``photo_hw`` (H, W).

    The window (``size`` frame pixels times the scale) stays inside the photo; with ``target`` (x, y, w, h
    photo pixels) it also keeps the whole target at least ``margin`` frame pixels inside the frame. The
    zoom range is narrowed where a scale could not satisfy both.
    """
    h_src, w_src = photo_hw
    hi = min(zoom[1], _zoom_limit(photo_hw, size))
    lo = zoom[0]
    if target is not None:
        need = max((target[2] + 1) / (size[0] - 2 * margin), (target[3] + 1) / (size[1] - 2 * margin))
        lo = max(lo, need * 1.05)
    if lo > hi:
        raise ValueError(
            f"no zoom in {zoom} fits a {size} frame over a {w_src}x{h_src} photo and target {target}"
        )
    scales = np.exp(np.log(lo) + (np.log(hi) - np.log(lo)) * _unit(rng, n, 50.0, 200.0))
    origins = np.empty((n, 2))
    for axis, (extent, frame_side) in enumerate(((w_src, size[0]), (h_src, size[1]))):
        window = scales * frame_side
        low = np.zeros(n)
        high = extent - 1 - window
        if target is not None:
            start, side = target[axis], target[2 + axis]
            low = np.maximum(low, start + side - window + margin * scales)
            high = np.minimum(high, start - margin * scales)
        if np.any(low > high):
            raise ValueError(f"target {target} lies too close to the border of a {w_src}x{h_src} photo")
        origins[:, axis] = low + (high - low) * _unit(rng, n, 60.0, 240.0)
    return origins, scales


def object_path(
    rng: np.random.Generator, patch: Patch, size: tuple[int, int], target_size: tuple[float, float], n: int
) -> np.ndarray:
    """(n, 4) states ``cx, cy, k, angle`` of a patch wandering over a ``size`` (w, h) frame.

    Its box's sqrt(w * h) varies smoothly within ``target_size`` times sqrt(frame w * h); rotation wanders
    within +-15 degrees; the whole box stays at least 2 pixels inside the frame.
    """
    unit = float(np.sqrt(size[0] * size[1]))
    lo, hi = (t * unit / (2.0 * np.sqrt(patch.a * patch.b)) for t in target_size)
    k = np.exp(np.log(lo) + (np.log(hi) - np.log(lo)) * _unit(rng, n, 40.0, 150.0))
    angle = np.deg2rad(15.0) * smooth_signal(rng, n, 40.0, 150.0)
    boxes = patch_boxes(patch, np.stack([np.zeros(n), np.zeros(n), k, angle], axis=1))
    states = np.stack([np.zeros(n), np.zeros(n), k, angle], axis=1)
    for axis in range(2):
        half = boxes[:, 2 + axis] / 2.0
        low, high = half + 2.0, size[axis] - half - 2.0
        if np.any(low > high):
            raise ValueError(f"patch {patch} at scale up to {k.max():.2f} does not fit a {size} frame")
        states[:, axis] = low + (high - low) * _unit(rng, n, 90.0, 300.0)
    return states


def crossing_path(
    rng: np.random.Generator, occluder: Patch, target_states: np.ndarray, target_patch: Patch
) -> np.ndarray:
    """(n, 4) states of ``occluder`` crossing the target once: it passes close to the target's centre at a
    random frame in the middle half, moving in a straight line at 4-8 pixels per frame relative to it, at a
    size that covers part of the target (its shorter semi-axis 0.25-0.5 of the target's)."""
    n = len(target_states)
    event = int(rng.integers(n // 4, max(3 * n // 4, n // 4 + 1)))
    t_state = target_states[event]
    t_half = np.sqrt(target_patch.a * target_patch.b) * t_state[2]
    k = rng.uniform(0.25, 0.5) * t_half / min(occluder.a, occluder.b)
    heading = rng.uniform(0, 2 * np.pi)
    speed = rng.uniform(4.0, 8.0)
    offset = (
        rng.uniform(0.3, 0.7) * t_half * np.array([np.cos(heading + np.pi / 2), np.sin(heading + np.pi / 2)])
    )
    t = np.arange(n, dtype=np.float64) - event
    centre = t_state[:2] + offset + speed * t[:, None] * np.array([np.cos(heading), np.sin(heading)])
    # Follow the target's own motion so that the crossing is relative to it.
    centre += target_states[:, :2] - t_state[:2]
    angle = np.full(n, rng.uniform(-0.4, 0.4))
    return np.concatenate([centre, np.full((n, 1), k), angle[:, None]], axis=1)


@dataclass
class _Scene:
    """One sequence's geometry: everything needed to render any frame."""

    spec: CameraSpec | ObjectSpec
    origins: np.ndarray  # (N, 2) camera (background) window origins, photo pixels
    scales: np.ndarray  # (N,) photo pixels per frame pixel
    target: np.ndarray | None = None  # (N, 4) patch states (object sequences)
    occluder: np.ndarray | None = None
    distractors: tuple[np.ndarray, ...] = ()


def _simulate(spec: CameraSpec | ObjectSpec, seed: int, index: int, n: int) -> _Scene:
    rng = _rng(seed, index)
    if isinstance(spec, CameraSpec):
        photo = load_photo(spec.photo)
        origins, scales = camera_path(rng, photo.shape[:2], spec.size, spec.zoom, n, target=spec.target)
        return _Scene(spec, origins, scales)
    photo = load_photo(spec.background)
    limit = _zoom_limit(photo.shape[:2], spec.size)
    origins, scales = camera_path(rng, photo.shape[:2], spec.size, (0.6 * limit, 0.95 * limit), n)
    target = object_path(rng, spec.target, spec.size, spec.target_size, n)
    distractors = tuple(object_path(rng, d, spec.size, spec.target_size, n) for d in spec.distractors)
    occluder = crossing_path(rng, spec.occluder, target, spec.target)
    return _Scene(spec, origins, scales, target, occluder, distractors)


def _boxes(scene: _Scene) -> np.ndarray:
    spec = scene.spec
    if isinstance(spec, CameraSpec):
        return view_boxes(np.asarray(spec.target, np.float64), scene.origins, scene.scales)
    return patch_boxes(spec.target, scene.target)


def _render(scene: _Scene, t: int) -> tuple[np.ndarray, float, bool]:
    """Frame ``t`` (h, w, 3) RGB uint8, the target's uncovered share and whether anything covers it."""
    spec = scene.spec
    if isinstance(spec, CameraSpec):
        return render_view(load_photo(spec.photo), scene.origins[t], scene.scales[t], spec.size), 1.0, False
    frame = render_view(load_photo(spec.background), scene.origins[t], scene.scales[t], spec.size)
    frame = frame.astype(np.float32)
    for patch, states in zip(spec.distractors, scene.distractors):
        draw_patch(frame, load_photo(patch.photo), patch, states[t])
    target = draw_patch(frame, load_photo(spec.target.photo), spec.target, scene.target[t]) >= 0.5
    cover = draw_patch(frame, load_photo(spec.occluder.photo), spec.occluder, scene.occluder[t]) >= 0.5
    inside = int(target.sum())
    covered = int((target & cover).sum())
    image = np.clip(frame + 0.5, 0, 255).astype(np.uint8)
    return image, 1.0 - covered / max(inside, 1), covered > 0


class _Frames:
    """``frame_loader`` of one sequence: renders frame ``t`` on demand (photos are cached per process)."""

    def __init__(self, scene: _Scene) -> None:
        self.scene = scene

    def __call__(self, t: int) -> np.ndarray:
        return _render(self.scene, int(t))[0]


class RealFootageDataset(SequenceDataset):
    """The sequences of :data:`CAMERA_SEQUENCES` and :data:`OBJECT_SEQUENCES` made with ``seed`` (see the
    module docstring); geometry is simulated on first access, frames render lazily."""

    name = "real_footage"

    def __init__(self, *, seed: int = SEED, num_frames: int = NUM_FRAMES) -> None:
        missing = missing_sources()
        if missing:
            raise DatasetError(
                f"real_footage needs photos from packages that are not installed: pip install {' '.join(missing)}"
            )
        if num_frames < 2:
            raise ValueError(f"real_footage: num_frames must be >= 2, got {num_frames}")
        self.seed = int(seed)
        self.num_frames = int(num_frames)
        self._specs = {spec.name: (i, spec) for i, spec in enumerate((*CAMERA_SEQUENCES, *OBJECT_SEQUENCES))}

    def sequence_names(self) -> list[str]:
        return list(self._specs)

    def scene(self, name: str) -> _Scene:
        """The geometry of sequence ``name`` (window origins and scales, patch states)."""
        if name not in self._specs:
            raise KeyError(f"real_footage has no sequence {name!r}; e.g. {next(iter(self._specs))!r}")
        index, spec = self._specs[name]
        return _simulate(spec, self.seed, index, self.num_frames)

    def get_sequence(self, name: str) -> Sequence:
        scene = self.scene(name)
        boxes = np.round(_boxes(scene), 2)
        spec = scene.spec
        attributes: dict[str, Any] = {
            "kind": "camera" if isinstance(spec, CameraSpec) else "object",
            "photo": spec.photo if isinstance(spec, CameraSpec) else spec.target.photo,
            "seed": self.seed,
        }
        if isinstance(spec, ObjectSpec):
            attributes["background"] = spec.background
        return Sequence(
            name=name, boxes=boxes, frame_loader=_Frames(scene), dataset=self.name, attributes=attributes
        )

    def occlusion(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(N,) bool ``occlusion`` and (N,) float ``visible_ratio`` of sequence ``name`` (renders every frame)."""
        scene = self.scene(name)
        stats = [_render(scene, t)[1:] for t in range(self.num_frames)]
        return np.array([s[1] for s in stats]), np.array([s[0] for s in stats])


def real_footage_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> SequenceDataset:
    """Registry factory for ``real_footage``: the in-memory set (no root; split None or ``val``).

    ``options``: ``seed`` and ``num_frames``; unknown names raise ``TypeError``.
    """
    if root is not None:
        raise TypeError("real_footage is made in memory from installed packages' photos; it takes no root")
    if split not in (None, "val"):
        raise ValueError(f"real_footage: unknown split {split!r}; it has one, 'val' (the default)")
    unknown = sorted(set(options) - {"seed", "num_frames"})
    if unknown:
        raise TypeError(f"real_footage: unknown option(s) {unknown}; known: ['num_frames', 'seed']")
    return RealFootageDataset(**options)


def main(argv: Seq[str] | None = None) -> int:
    """``python -m ltr.dataset.real_footage --preview DIR``: write each sequence's first, middle and last
    frames with the ground-truth box drawn, to check the set by eye."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ltr.dataset.real_footage", description=main.__doc__)
    parser.add_argument("--preview", required=True, type=Path, help="output folder (created)")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    dataset = RealFootageDataset(seed=args.seed)
    args.preview.mkdir(parents=True, exist_ok=True)
    for name in dataset.sequence_names():
        seq = dataset.get_sequence(name)
        tiles = []
        for t in (0, len(seq) // 2, len(seq) - 1):
            frame = cv2.cvtColor(seq.frame(t), cv2.COLOR_RGB2BGR)
            x, y, w, h = seq.boxes[t]
            cv2.rectangle(frame, (round(x), round(y)), (round(x + w), round(y + h)), (0, 255, 0), 1)
            tiles.append(frame)
        cv2.imwrite(str(args.preview / f"{name}.jpg"), np.hstack(tiles))
    print(f"wrote {len(dataset)} previews to {args.preview}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
