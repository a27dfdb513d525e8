"""Seeded simulation of one synthetic tracking video: trajectories, sizes, occlusion, ground truth.

Simulation is cheap (no pixels): it fixes every random choice of a sequence, including per-frame values
the renderer needs (camera pan, illumination, blur, noise offsets), so frame ``t`` can be rendered on its
own, in any order, and always comes out identical (see :mod:`ltr.dataset.synthetic_render`).

**Ground-truth convention.** Boxes are **xywh** in continuous 0-based pixel coordinates (pixel ``(i, j)``
covers ``[i, i+1) x [j, j+1)``; the image spans ``[0, W] x [0, H]``), float, rounded to 0.01 px. A box is the
tight axis-aligned bound of the target's *whole* outline (amodal): it is not shrunk by occluders and not
clipped to the image, so a target half outside the image has a box that extends past the border.
Per-frame flags (all from the rasterised outline, before motion blur):

- ``out_of_view``: no pixel centre of the image lies inside the target outline;
- ``full_occlusion``: some do, but every one of them is covered by an occluder;
- ``visible = ~out_of_view & ~full_occlusion``; boxes stay the true geometric box on invisible frames;
- ``occlusion``: at least one in-image target pixel is covered by an occluder (partial or full).

A pixel counts as inside an outline when its anti-aliased coverage is at least 0.5, which is exactly the
rule the renderer's ``layers`` use, so the flags agree with what is drawn.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from scipy.interpolate import PchipInterpolator

from ltr.dataset.synthetic_natural import (
    CameraLook,
    camera_look,
    natural_recipe,
    similar_recipe,
    world_to_frame,
)
from ltr.dataset.synthetic_texture import (
    SHAPE_KINDS,
    TEXTURE_KINDS,
    Shape,
    coverage,
    local_coords,
    object_roi,
    random_shape,
    similar_palette,
    texture_recipe,
    transform_outline,
)

#: Version of the generator; bump when a change alters pixels or boxes for a given seed.
GENERATOR_VERSION = 1

#: looks of the generator (``SyntheticConfig.style``): ``classic``, palette textures on value noise (the
#: default); ``natural``, natural-image statistics and camera artefacts (:mod:`ltr.dataset.synthetic_natural`);
#: ``mixed``, each sequence one of the two with equal probability (:func:`natural_look`).
STYLES = ("classic", "natural", "mixed")
#: natural style: the log of the camera zoom wanders within +-NATURAL_ZOOM.
NATURAL_ZOOM = 0.15

_HUE_NAMES = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "magenta")


@dataclass(frozen=True)
class SyntheticConfig:
    """Difficulty knobs of the generator. Lengths given as a fraction are relative to ``sqrt(W * H)``.

    Ranges are ``(low, high)`` and sampled uniformly per sequence (object counts: integers, inclusive).
    """

    width: int = 320
    height: int = 240
    num_frames: int = 100
    #: sqrt(w * h) of the target's unrotated box, as a fraction of sqrt(W * H).
    target_size: tuple[float, float] = (0.09, 0.24)
    #: width / height of the target's unrotated box.
    aspect: tuple[float, float] = (0.5, 2.0)
    #: mean speed of a trajectory segment (fraction per frame); segments differ, so speed changes.
    speed: tuple[float, float] = (0.002, 0.014)
    #: hard cap on the per-frame centre displacement (fraction per frame).
    max_speed: float = 0.03
    #: the log of the target scale wanders within +-scale_change around its sequence mean.
    scale_change: float = 0.3
    #: the log of the aspect ratio wanders within +-aspect_change around its sequence mean.
    aspect_change: float = 0.15
    #: in-plane rotation wanders within +-rotation degrees around a random base angle.
    rotation: float = 30.0
    #: number of look-alike distractors (same shape kind and texture family, similar colours).
    distractors: tuple[int, int] = (0, 3)
    #: occluder slots; each is used with probability ``occlusion_prob``.
    max_occluders: int = 2
    occlusion_prob: float = 0.35
    #: probability that an occlusion event is built to cover the target completely.
    full_occlusion_prob: float = 0.4
    #: probability that the target leaves the image once and comes back.
    out_of_view_prob: float = 0.2
    #: motion blur length = motion_blur * exposure * speed (pixels); exposure ~ U(0.3, 1) per sequence.
    motion_blur: float = 2.0
    #: amplitude of global brightness / colour / light-gradient changes.
    illumination: float = 0.3
    #: std of additive sensor noise (image values in [0, 1]).
    noise: float = 0.02
    #: number of static clutter shapes on the background at 320x240 (scaled with the image area).
    clutter: int = 25
    #: amplitude of the background's camera pan (fraction).
    camera_pan: float = 0.06
    #: side of the square texture of each object, pixels.
    texture_size: int = 96
    #: the look, one of :data:`STYLES`. ``natural`` keeps every trajectory of ``classic`` (same seed, same
    #: world motion) but draws natural-statistics textures and backgrounds, moves the objects with the
    #: camera (pan and zoom) and records frames through :class:`~ltr.dataset.synthetic_natural.CameraLook`;
    #: ``mixed`` gives each sequence one of the two looks.
    style: str = "classic"
    #: probability that a classic-look sequence's background is a natural-statistics canvas (dead leaves of
    #: 1/f-textured shapes, :func:`~ltr.dataset.synthetic_natural.natural_background`) instead of palette
    #: noise with clutter shapes.
    photo_background: float = 0.0
    #: probability that a classic-look sequence's background is grey (desaturated), as a grey photograph is.
    grey_background: float = 0.0
    #: probability that a classic-look sequence's target and distractors are textured with regions of one
    #: natural-statistics canvas (look-alikes are other regions of it) instead of regular patterns.
    photo_target: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):  # lists (from JSON or the command line) -> tuples, so configs stay hashable
            if isinstance(getattr(self, f.name), list):
                object.__setattr__(self, f.name, tuple(getattr(self, f.name)))
        if self.width < 16 or self.height < 16:
            raise ValueError(f"SyntheticConfig: width/height must be >= 16, got {self.width}x{self.height}")
        if self.num_frames < 1:
            raise ValueError(f"SyntheticConfig: num_frames must be >= 1, got {self.num_frames}")
        for name in ("target_size", "aspect", "speed", "distractors"):
            lo, hi = getattr(self, name)
            if lo > hi or lo < 0:
                raise ValueError(f"SyntheticConfig.{name}: need 0 <= low <= high, got {(lo, hi)}")
        if self.aspect[0] <= 0 or self.target_size[0] <= 0:
            raise ValueError("SyntheticConfig.aspect and .target_size must be > 0")
        for name in (
            "occlusion_prob",
            "full_occlusion_prob",
            "out_of_view_prob",
            "photo_background",
            "grey_background",
            "photo_target",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"SyntheticConfig.{name} must be in [0, 1], got {getattr(self, name)}")
        if self.max_speed <= 0 or self.texture_size < 8:
            raise ValueError("SyntheticConfig: need max_speed > 0 and texture_size >= 8")
        if self.style not in STYLES:
            raise ValueError(f"SyntheticConfig.style must be one of {STYLES}, got {self.style!r}")
        for name in ("max_occluders", "clutter", "noise", "motion_blur", "illumination", "camera_pan"):
            if getattr(self, name) < 0:
                raise ValueError(f"SyntheticConfig.{name} must be >= 0, got {getattr(self, name)}")

    @property
    def unit(self) -> float:
        """Pixels per unit of the relative lengths: sqrt(W * H)."""
        return float(np.sqrt(self.width * self.height))

    def replace(self, **changes: Any) -> SyntheticConfig:
        """A copy with ``changes``; unknown names raise ``TypeError`` naming them."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise TypeError(f"unknown SyntheticConfig option(s) {unknown}; known: {sorted(known)}")
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return SyntheticConfig(**values)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values (tuples as lists); ``SyntheticConfig(**d)`` restores an equal config.

        Fields added after sets were first written (``style``, the ``photo_*`` and ``grey_*``
        probabilities) are left out at their defaults, so the markers of those sets
        (:func:`ltr.dataset.synthetic.ensure_written`) still match.
        """
        out = {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)
        }
        for name, default in _LATER_FIELDS.items():
            if out[name] == default:
                del out[name]
        return out


#: fields added after the first written sets, with the defaults that leave them out of markers.
_LATER_FIELDS: dict[str, Any] = {
    "style": "classic",
    "photo_background": 0.0,
    "grey_background": 0.0,
    "photo_target": 0.0,
}


@dataclass
class ObjectTrack:
    """One moving object. ``states`` is (N, 5): ``cx, cy, half_w, half_h, angle`` (pixels, radians)."""

    shape: Shape
    recipe: dict
    states: np.ndarray
    blur: np.ndarray  # (N,) motion-blur length in pixels
    blur_angle: np.ndarray  # (N,) direction of motion, radians


@dataclass
class Scene:
    """Everything random about one sequence, plus its ground truth (see the module docstring)."""

    config: SyntheticConfig
    seed: int
    index: int
    class_name: str
    description: str
    target: ObjectTrack
    distractors: list[ObjectTrack]
    occluders: list[ObjectTrack]
    pan: np.ndarray  # (N, 2) background offset, pixels
    gain: np.ndarray  # (N, 3) per-channel brightness factor
    light: np.ndarray  # (N, 2) light-gradient strength along x and y
    noise_offset: np.ndarray  # (N, 2) int offsets into the noise field
    zoom: np.ndarray | None = None  # (N,) camera zoom (natural style; objects' states already include it)
    look: CameraLook | None = None  # camera artefacts (natural style)
    boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))  # (N, 4) xywh
    out_of_view: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    full_occlusion: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    occlusion: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    visible_ratio: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def num_frames(self) -> int:
        return len(self.boxes)

    @property
    def visible(self) -> np.ndarray:
        """(N,) bool: the target can be seen (not out of view, not fully occluded)."""
        return ~(self.out_of_view | self.full_occlusion)


def _rng(seed: int, index: int, stream: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, index, stream])))


def scene_rng(seed: int, index: int, stream: int) -> np.random.Generator:
    """The generator of random stream ``stream`` (0: simulation, 1: assets, 2: kinds, 3: natural style's
    recipes and camera, 4: the ``mixed`` style's choice, 5: the ``photo_*`` and ``grey_*`` choices and
    canvases) of sequence ``index``."""
    return _rng(seed, index, stream)


def scene_kinds(seed: int, index: int) -> tuple[str, str]:
    """(shape kind, texture kind) of sequence ``index``, from their own random stream (no simulation)."""
    rng = _rng(seed, index, 2)
    return SHAPE_KINDS[int(rng.integers(len(SHAPE_KINDS)))], TEXTURE_KINDS[
        int(rng.integers(len(TEXTURE_KINDS)))
    ]


def natural_look(style: str, seed: int, index: int) -> bool:
    """Whether sequence ``index`` has the natural look under ``style``: always for ``natural``, never for
    ``classic``, and for ``mixed`` a fair coin of its own random stream, so a mixed set's sequence is the
    same as that sequence in the set of its style."""
    if style == "mixed":
        return bool(_rng(seed, index, 4).random() < 0.5)
    return style == "natural"


def class_name(seed: int, index: int) -> str:
    """The class of sequence ``index``: texture kind + shape kind, lowercase (e.g. ``stripesblob``)."""
    shape_kind, texture_kind = scene_kinds(seed, index)
    return f"{texture_kind}{shape_kind}"


def sequence_names(seed: int, num_sequences: int) -> list[tuple[str, str]]:
    """``(class, name)`` of sequences ``0..num_sequences-1``; names are LaSOT-style ``<class>-<k>``, k from 1.

    Sequence i's name depends only on sequences 0..i, so a longer set extends a shorter one.
    """
    counts: dict[str, int] = {}
    out = []
    for i in range(num_sequences):
        cls = class_name(seed, i)
        counts[cls] = counts.get(cls, 0) + 1
        out.append((cls, f"{cls}-{counts[cls]}"))
    return out


def smooth_signal(rng: np.random.Generator, n: int, min_period: float = 25.0, max_period: float = 150.0):
    """(n,) smooth random signal in [-1, 1]: a normalised sum of three sinusoids of random period/phase."""
    t = np.arange(n, dtype=np.float64)
    periods = rng.uniform(min_period, max_period, 3)
    phases = rng.uniform(0, 2 * np.pi, 3)
    weights = rng.uniform(0.5, 1.0, 3)
    s = (weights[:, None] * np.sin(2 * np.pi * t[None, :] / periods[:, None] + phases[:, None])).sum(0)
    return np.clip(s / weights.sum() * 1.6, -1.0, 1.0)


def _trajectory(
    rng: np.random.Generator,
    cfg: SyntheticConfig,
    n: int,
    radius: float,
    exit_out: tuple[float, float] | None,
) -> np.ndarray:
    """(n, 2) smooth centre path through random waypoints.

    Waypoints lie in the image (centres at least ``0.6 * radius`` from the border); segment speeds differ.
    With ``exit_out``, from the waypoint before a random time in [0.3, 0.7] n the path heads briskly for the
    nearest border, passes ``exit_out`` (x, y) pixels beyond it (out of view) and comes back in.
    """
    w, h, unit = cfg.width, cfg.height, cfg.unit
    mx, my = min(0.6 * radius, w / 2 - 1), min(0.6 * radius, h / 2 - 1)

    def inside() -> np.ndarray:
        return np.array([rng.uniform(mx, w - mx), rng.uniform(my, h - my)])

    points = [inside()]
    times = [0.0]
    exit_time = rng.uniform(0.3, 0.7) * n if exit_out is not None else None
    fastest = 0.8 * cfg.max_speed * unit
    returning = -1
    while times[-1] < n + 1:
        p = inside()
        speed = rng.uniform(*cfg.speed) * unit
        if returning >= 0:
            # Come back in near the border just left, briskly.
            axis, far = returning % 2, (w, h)[returning % 2]
            edge = rng.uniform(0.15, 0.35) * far
            p[axis] = edge if returning < 2 else far - edge
            speed = fastest * rng.uniform(0.5, 1.0)
            returning = -1
        dt = max(np.linalg.norm(p - points[-1]) / max(speed, 1e-6), 8.0)
        if exit_time is not None and times[-1] + dt >= exit_time - 8.0:
            # Leave instead: head briskly for the nearest border and cross it.
            last = points[-1]
            gaps = np.array([last[0], last[1], w - last[0], h - last[1]])
            side = int(np.argmin(gaps))
            p = last + rng.normal(0, 0.1 * unit, 2)
            out = exit_out[side % 2]
            p[side % 2] = -out if side < 2 else (w if side == 2 else h) + out
            dt = max(np.linalg.norm(p - last) / (fastest * rng.uniform(0.5, 1.0)), 8.0)
            exit_time, returning = None, side
        points.append(p)
        times.append(times[-1] + dt)
    # Monotone (PCHIP) interpolation: C1-smooth and, unlike a natural spline, never overshoots a waypoint,
    # so paths stay where the waypoints put them (in the image, or just beyond the exit border).
    spline = PchipInterpolator(np.asarray(times), np.asarray(points), axis=0)
    # Walk along the spline one frame at a time, slowing down only where it would exceed the speed cap.
    cap = cfg.max_speed * unit
    step = 0.25
    speed_at = np.linalg.norm(spline(np.arange(0.0, times[-1] + 2.0, step), 1), axis=1).tolist()
    tau = [0.0]
    for _ in range(1, n):
        pos = tau[-1] / step
        i = int(pos)
        v = speed_at[i] + (pos - i) * (speed_at[i + 1] - speed_at[i])  # linear interpolation
        tau.append(tau[-1] + min(1.0, 0.95 * cap / max(v, 1e-9)))
    return spline(np.asarray(tau))


def _extent(rng: np.random.Generator, cfg: SyntheticConfig, n: int, size: float, aspect: float) -> np.ndarray:
    """(n, 3) ``half_w, half_h, angle`` with smooth scale, aspect and rotation changes."""
    scale = np.exp(cfg.scale_change * smooth_signal(rng, n))
    asp = aspect * np.exp(cfg.aspect_change * smooth_signal(rng, n))
    angle = np.deg2rad(cfg.rotation) * smooth_signal(rng, n) + rng.uniform(-0.3, 0.3)
    return np.stack([0.5 * size * scale * np.sqrt(asp), 0.5 * size * scale / np.sqrt(asp), angle], axis=1)


def _moving_object(
    rng: np.random.Generator, cfg: SyntheticConfig, size: float, aspect: float, exit_prob: float
) -> tuple[np.ndarray, np.ndarray]:
    """(n, 5) states ``cx, cy, half_w, half_h, angle`` and the (n, 2) path of one object.

    With probability ``exit_prob`` the path leaves the image far enough to hide the object completely.
    """
    n = cfg.num_frames
    extent = _extent(rng, cfg, n, size, aspect)
    # The outline lies in the box [-1, 1]^2 scaled by (half_w, half_h) and rotated: its half-extent along x
    # is at most |hw cos a| + |hh sin a| (y: |hw sin a| + |hh cos a|), so a centre that far beyond a border
    # has the whole object outside.
    hw, hh, cos, sin = extent[:, 0], extent[:, 1], np.abs(np.cos(extent[:, 2])), np.abs(np.sin(extent[:, 2]))
    reach = (float((hw * cos + hh * sin).max()), float((hw * sin + hh * cos).max()))
    radius = float(np.hypot(hw, hh).max())
    exit_out = tuple(r * rng.uniform(1.02, 1.15) for r in reach) if rng.random() < exit_prob else None
    path = _trajectory(rng, cfg, n, radius, exit_out)
    return np.concatenate([path, extent], axis=1), path


def _blur(path: np.ndarray, exposure: float, cfg: SyntheticConfig) -> tuple[np.ndarray, np.ndarray]:
    vel = np.gradient(path, axis=0) if len(path) > 1 else np.zeros_like(path)
    length = np.minimum(cfg.motion_blur * exposure * np.linalg.norm(vel, axis=1), 0.05 * cfg.unit)
    return length, np.arctan2(vel[:, 1], vel[:, 0])


def circumradius(shape: Shape, state: np.ndarray) -> float:
    """Largest distance (pixels) from the object centre to its outline for ``state`` (5,)."""
    pts = transform_outline(shape.outline, tuple(state))
    return float(np.linalg.norm(pts - state[:2], axis=1).max())


def outline_boxes(shape: Shape, states: np.ndarray) -> np.ndarray:
    """Tight xywh boxes (N, 4) of the transformed outline for ``states`` (N, 5), not clipped to the image."""
    states = np.atleast_2d(np.asarray(states, dtype=np.float64))
    outline = shape.outline
    c, s = np.cos(states[:, 4:5]), np.sin(states[:, 4:5])
    px, py = outline[None, :, 0] * states[:, 2:3], outline[None, :, 1] * states[:, 3:4]
    xs = states[:, 0:1] + c * px - s * py
    ys = states[:, 1:2] + s * px + c * py
    x0, y0 = xs.min(axis=1), ys.min(axis=1)
    return np.stack([x0, y0, xs.max(axis=1) - x0, ys.max(axis=1) - y0], axis=1)


def outline_box(shape: Shape, state: np.ndarray) -> np.ndarray:
    """Tight xywh box (4,) of the transformed outline for one ``state`` (5,)."""
    return outline_boxes(shape, state)[0]


def _occluder(
    rng: np.random.Generator,
    cfg: SyntheticConfig,
    shape: Shape,
    states: np.ndarray,
    path: np.ndarray,
    exposure: float,
) -> ObjectTrack:
    """An occluder moving in a straight line that passes over the target at a random event time.

    A *full* occluder (probability ``full_occlusion_prob``) is an ellipse or rounded rectangle whose
    half-sizes exceed the target's circumradius, centred on the target at the event and moving with it
    plus a relative drift, so it hides the target completely for a while; a partial one is smaller and
    offset.
    """
    n, unit = cfg.num_frames, cfg.unit
    te = int(rng.integers(int(0.15 * n), max(int(0.85 * n), int(0.15 * n) + 1)))
    r_t = circumradius(shape, states[te])
    full = rng.random() < cfg.full_occlusion_prob
    t_vel = (path[min(te + 1, n - 1)] - path[max(te - 1, 0)]) / 2.0
    heading = rng.uniform(0, 2 * np.pi)
    # A relative speed of at least ~1.7 px/frame at 320x240 bounds how long an occlusion lasts.
    drift = rng.uniform(0.006, 0.014) * unit * np.array([np.cos(heading), np.sin(heading)])
    if full:
        o_shape = random_shape(rng, ("ellipse", "roundrect")[int(rng.integers(2))])
        half = r_t * rng.uniform(1.2, 1.6, 2)
        offset = rng.normal(0, 0.05 * r_t, 2)
        vel = t_vel + drift
    else:
        o_shape = random_shape(rng)
        half = r_t * rng.uniform(0.5, 1.1, 2)
        a = rng.uniform(0, 2 * np.pi)
        offset = r_t * rng.uniform(0.5, 1.1) * np.array([np.cos(a), np.sin(a)])
        vel = drift
    t = np.arange(n, dtype=np.float64)[:, None]
    o_path = path[te] + offset + vel[None, :] * (t - te)
    angle = rng.uniform(-0.5, 0.5) + np.deg2rad(5.0) * smooth_signal(rng, n)
    o_states = np.concatenate([o_path, np.tile(half, (n, 1)), angle[:, None]], axis=1)
    return ObjectTrack(o_shape, texture_recipe(rng), o_states, *_blur(o_path, exposure, cfg))


def _hue_name(palette: np.ndarray) -> str:
    return _HUE_NAMES[int(((palette[0, 0] % 1.0) * len(_HUE_NAMES) + 0.5) % len(_HUE_NAMES))]


def simulate(config: SyntheticConfig, seed: int, index: int) -> Scene:
    """Simulate sequence ``index`` of the set with base ``seed``; deterministic in (config, seed, index)."""
    cfg = config
    n, unit = cfg.num_frames, cfg.unit
    rng = _rng(seed, index, 0)

    # Target.
    shape_kind, texture_kind = scene_kinds(seed, index)
    shape = random_shape(rng, shape_kind)
    recipe = texture_recipe(rng, texture_kind)
    size = rng.uniform(*cfg.target_size) * unit
    aspect = float(np.exp(rng.uniform(np.log(cfg.aspect[0]), np.log(cfg.aspect[1]))))
    states, path = _moving_object(rng, cfg, size, aspect, cfg.out_of_view_prob)
    exposure = rng.uniform(0.3, 1.0)
    target = ObjectTrack(shape, recipe, states, *_blur(path, exposure, cfg))

    # Look-alike distractors: same shape kind and texture family, similar colours and size.
    distractors = []
    for _ in range(int(rng.integers(cfg.distractors[0], cfg.distractors[1] + 1))):
        d_recipe = dict(recipe, palette=similar_palette(rng, recipe["palette"], 0.05))
        d_size = size * rng.uniform(0.8, 1.25)
        d_aspect = aspect * rng.uniform(0.8, 1.25)
        d_states, d_path = _moving_object(rng, cfg, d_size, d_aspect, 0.0)
        distractors.append(
            ObjectTrack(random_shape(rng, shape.kind), d_recipe, d_states, *_blur(d_path, exposure, cfg))
        )

    # Occluders, each aimed at the target at a random event time, never in front of it at the start.
    occluders = []
    for _ in range(cfg.max_occluders):
        if rng.random() >= cfg.occlusion_prob:
            continue
        for _attempt in range(10):
            occ = _occluder(rng, cfg, shape, states, path, exposure)
            first = slice(0, min(n, 5))
            t_boxes = outline_boxes(shape, states[first])
            o_boxes = outline_boxes(occ.shape, occ.states[first])
            if not any(_overlap(a, b) for a, b in zip(t_boxes, o_boxes)):
                occluders.append(occ)
                break

    # Camera and photometric changes.
    pan = cfg.camera_pan * unit * np.stack([smooth_signal(rng, n), smooth_signal(rng, n)], axis=1)
    gain = np.exp(cfg.illumination * smooth_signal(rng, n, 20, 120))[:, None] * (
        1.0 + 0.3 * cfg.illumination * np.stack([smooth_signal(rng, n) for _ in range(3)], axis=1)
    )
    light = cfg.illumination * np.stack([smooth_signal(rng, n), smooth_signal(rng, n)], axis=1)
    noise_offset = rng.integers(0, 32, (n, 2))

    n_d = len(distractors)
    description = (
        f"a {_hue_name(recipe['palette'])} {recipe['kind']} {shape.kind} moving among "
        f"{n_d} look-alike object{'s' if n_d != 1 else ''}"
    )
    zoom, look = None, None
    if natural_look(cfg.style, seed, index):
        # Own random stream, so the classic draws above (every trajectory) are the same in both styles.
        nat = _rng(seed, index, 3)
        target.recipe = natural_recipe(nat, texture_kind)
        for d in distractors:
            d.recipe = similar_recipe(nat, target.recipe)
        for o in occluders:
            o.recipe = natural_recipe(nat, str(o.recipe["kind"]))
        zoom = np.exp(NATURAL_ZOOM * smooth_signal(nat, n, 40, 200))
        look = camera_look(nat, n, smooth_signal)
        for obj in (target, *distractors, *occluders):
            obj.states = world_to_frame(obj.states, zoom, pan, cfg.width, cfg.height)
            obj.blur = obj.blur * zoom
        hue, sat, _ = colorsys.rgb_to_hsv(*(float(c) for c in target.recipe["colours"][0]))
        colour = _HUE_NAMES[int((hue * len(_HUE_NAMES) + 0.5) % len(_HUE_NAMES))] if sat >= 0.15 else "grey"
        description = (
            f"a {colour} {texture_kind}-textured {shape.kind} moving among "
            f"{n_d} look-alike object{'s' if n_d != 1 else ''}"
        )
    scene = Scene(
        config=cfg,
        seed=seed,
        index=index,
        class_name=class_name(seed, index),
        description=description,
        target=target,
        distractors=distractors,
        occluders=occluders,
        pan=pan,
        gain=gain,
        light=light,
        noise_offset=noise_offset,
        zoom=zoom,
        look=look,
    )
    _annotate(scene)
    return scene


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two xywh boxes (4,) intersect, with one pixel of slack."""
    return bool(
        a[0] <= b[0] + b[2] + 1
        and b[0] <= a[0] + a[2] + 1
        and a[1] <= b[1] + b[3] + 1
        and b[1] <= a[1] + a[3] + 1
    )


def _annotate(scene: Scene) -> None:
    """Fill boxes and per-frame flags of ``scene`` from its geometry (see the module docstring)."""
    cfg = scene.config
    n = len(scene.target.states)
    shape = scene.target.shape
    outline = shape.outline
    area = 0.5 * abs(
        np.sum(outline[:, 0] * np.roll(outline[:, 1], -1) - np.roll(outline[:, 0], -1) * outline[:, 1])
    )
    out_of_view = np.zeros(n, bool)
    full_occ = np.zeros(n, bool)
    occl = np.zeros(n, bool)
    ratio = np.zeros(n)
    boxes = outline_boxes(shape, scene.target.states)
    occ_boxes = [outline_boxes(o.shape, o.states) for o in scene.occluders]
    for t in range(n):
        state = scene.target.states[t]
        box = boxes[t]
        near = [
            o
            for o, ob in zip(scene.occluders, occ_boxes)
            if _overlap(box, ob[t]) and _overlap(ob[t], np.array([0.0, 0.0, cfg.width, cfg.height]))
        ]
        inside_image = (
            box[0] >= 0 and box[1] >= 0 and box[0] + box[2] <= cfg.width and box[1] + box[3] <= cfg.height
        )
        if not near and inside_image and min(state[2], state[3]) >= 4.0:
            # Wholly in the image, nothing in front, and big enough to contain a pixel centre.
            ratio[t] = 1.0
            continue
        roi = object_roi(tuple(state), outline, cfg.height, cfg.width, pad=0)
        inside = None
        if roi is not None:
            u, v = local_coords(roi, tuple(state))
            inside = coverage(shape, u, v, min(state[2], state[3])) >= 0.5
        if inside is None or not inside.any():
            out_of_view[t] = True
            continue
        covered = np.zeros_like(inside)
        for occ in near:
            o_state = tuple(occ.states[t])
            u, v = local_coords(roi, o_state)
            covered |= coverage(occ.shape, u, v, min(o_state[2], o_state[3])) >= 0.5
        seen = inside & ~covered
        occl[t] = bool((inside & covered).any())
        full_occ[t] = not seen.any()
        ratio[t] = seen.sum() / max(area * state[2] * state[3], 1e-9)
    scene.boxes = np.round(boxes, 2)
    scene.out_of_view = out_of_view
    scene.full_occlusion = full_occ
    scene.occlusion = occl
    scene.visible_ratio = np.clip(ratio, 0.0, 1.0)
