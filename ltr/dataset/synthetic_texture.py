"""Procedural shapes, colour palettes and textures for the synthetic video generator.

Everything here is a pure function of a :class:`numpy.random.Generator`, so a seeded generator always
produces identical arrays.

Shapes live in *normalised local coordinates* ``(u, v)``: the shape's axis-aligned extent is exactly
``[-1, 1] x [-1, 1]`` before the object's scale and rotation are applied. A shape provides a signed distance
``sdf(u, v)`` (negative inside; the zero level set is the exact outline, the magnitude is only approximate
away from it) and a dense outline polygon ``outline`` of shape (K, 2) in the same coordinates.

Textures are float32 RGB images in [0, 1] of shape (S, S, 3); an object's local square ``[-1, 1]^2`` maps
onto the whole texture, so the pattern moves, scales and rotates with the object.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import cv2
import numpy as np

SHAPE_KINDS: tuple[str, ...] = ("ellipse", "roundrect", "polygon", "blob")
TEXTURE_KINDS: tuple[str, ...] = ("noise", "stripes", "spots", "checker")

_OUTLINE_POINTS = 360


@dataclass(frozen=True)
class Shape:
    """A closed 2D outline normalised to the box ``[-1, 1]^2`` (see the module docstring).

    ``kind`` is one of :data:`SHAPE_KINDS`; ``params`` holds the kind's parameters in raw coordinates and
    ``offset``/``half`` the affine normalisation ``raw = offset + half * (u, v)``.
    """

    kind: str
    params: tuple[float, ...]
    offset: tuple[float, float]
    half: tuple[float, float]

    def _raw(self, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.offset[0] + self.half[0] * u, self.offset[1] + self.half[1] * v

    def sdf(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Signed distance-like field at local points ``u``, ``v`` (same shapes); < 0 inside the outline."""
        x, y = self._raw(u, v)
        return _raw_sdf(self.kind, self.params, x, y) / min(self.half)

    @cached_property
    def outline(self) -> np.ndarray:
        """(K, 2) outline vertices in local coordinates, counter-clockwise; their bound is ``[-1, 1]^2``."""
        raw = _raw_outline(self.kind, self.params)
        out = (raw - np.asarray(self.offset)) / np.asarray(self.half)
        out.flags.writeable = False
        return out


def _raw_outline(kind: str, params: tuple[float, ...]) -> np.ndarray:
    theta = np.linspace(0.0, 2.0 * np.pi, _OUTLINE_POINTS, endpoint=False)
    if kind == "ellipse":
        return np.stack([np.cos(theta), np.sin(theta)], axis=1)
    if kind == "roundrect":
        (r,) = params
        # Corner arcs of radius r centred at (+-(1-r), +-(1-r)), quarter by quarter.
        quarter = _OUTLINE_POINTS // 4
        pts = []
        for qi, (sx, sy) in enumerate(((1, 1), (-1, 1), (-1, -1), (1, -1))):
            a = np.linspace(qi * np.pi / 2, (qi + 1) * np.pi / 2, quarter)
            pts.append(np.stack([sx * (1 - r) + r * np.cos(a), sy * (1 - r) + r * np.sin(a)], axis=1))
        return np.concatenate(pts)
    if kind == "polygon":
        return np.asarray(params, dtype=np.float64).reshape(-1, 2)
    if kind == "blob":
        c, s = np.cos(theta), np.sin(theta)
        return _blob_radius(params, c, s)[:, None] * np.stack([c, s], axis=1)
    raise ValueError(f"unknown shape kind {kind!r}; choose one of {SHAPE_KINDS}")


def _blob_radius(params: tuple[float, ...], cos1: np.ndarray, sin1: np.ndarray) -> np.ndarray:
    """Blob radius ``1 + sum_k a_k cos(k theta + phi_k)`` at directions given by cos/sin of theta.

    Harmonics come from the angle-addition recurrence (no trigonometric calls per pixel).
    """
    coeffs = {int(k): (amp, phase) for k, amp, phase in np.asarray(params).reshape(-1, 3)}
    r = np.ones_like(cos1)
    ck, sk = cos1, sin1
    for k in range(1, max(coeffs) + 1):
        if k > 1:
            ck, sk = ck * cos1 - sk * sin1, sk * cos1 + ck * sin1
        if k in coeffs:
            amp, phase = coeffs[k]
            r = r + (amp * np.cos(phase)) * ck - (amp * np.sin(phase)) * sk
    return r


def _raw_sdf(kind: str, params: tuple[float, ...], x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if kind == "ellipse":
        return np.sqrt(x * x + y * y) - 1.0
    if kind == "roundrect":
        (r,) = params
        dx = np.abs(x) - (1.0 - r)
        dy = np.abs(y) - (1.0 - r)
        outside = np.sqrt(np.maximum(dx, 0.0) ** 2 + np.maximum(dy, 0.0) ** 2)
        return outside + np.minimum(np.maximum(dx, dy), 0.0) - r
    if kind == "polygon":
        verts = np.asarray(params, dtype=np.float64).reshape(-1, 2)
        edges = np.roll(verts, -1, axis=0) - verts
        normals = np.stack([edges[:, 1], -edges[:, 0]], axis=1)  # outward for counter-clockwise vertices
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)
        offsets = (normals * verts).sum(axis=1)
        dist = x[..., None] * normals[:, 0] + y[..., None] * normals[:, 1] - offsets
        return dist.max(axis=-1)
    if kind == "blob":
        rho = np.sqrt(x * x + y * y)
        safe = np.where(rho > 0, rho, 1.0)
        cos1 = np.where(rho > 0, x / safe, 1.0)
        return rho - _blob_radius(params, cos1, y / safe)
    raise ValueError(f"unknown shape kind {kind!r}; choose one of {SHAPE_KINDS}")


def random_shape(rng: np.random.Generator, kind: str | None = None) -> Shape:
    """A random shape of ``kind`` (or a random kind) normalised to ``[-1, 1]^2``."""
    kind = kind or SHAPE_KINDS[rng.integers(len(SHAPE_KINDS))]
    if kind == "ellipse":
        params: tuple[float, ...] = ()
    elif kind == "roundrect":
        params = (float(rng.uniform(0.15, 0.6)),)
    elif kind == "polygon":
        k = int(rng.integers(5, 9))
        angles = (np.arange(k) + rng.uniform(-0.3, 0.3, k)) * (2 * np.pi / k) + rng.uniform(0, 2 * np.pi)
        radii = rng.uniform(0.75, 1.0, k)
        pts = np.stack([radii * np.cos(angles), radii * np.sin(angles)], axis=1)
        hull = cv2.convexHull(pts.astype(np.float32), clockwise=False, returnPoints=True).reshape(-1, 2)
        # OpenCV's orientation flag refers to image axes (y down); enforce counter-clockwise in (x, y) maths.
        area = 0.5 * np.sum(hull[:, 0] * np.roll(hull[:, 1], -1) - np.roll(hull[:, 0], -1) * hull[:, 1])
        if area < 0:
            hull = hull[::-1]
        params = tuple(float(p) for p in hull.astype(np.float64).ravel())
    elif kind == "blob":
        rows = []
        for harmonic in (2, 3, 5):
            rows += [float(harmonic), float(rng.uniform(0.0, 0.12)), float(rng.uniform(0, 2 * np.pi))]
        params = tuple(rows)
    else:
        raise ValueError(f"unknown shape kind {kind!r}; choose one of {SHAPE_KINDS}")
    raw = _raw_outline(kind, params)
    lo, hi = raw.min(axis=0), raw.max(axis=0)
    return Shape(
        kind=kind,
        params=params,
        offset=(float((lo[0] + hi[0]) / 2), float((lo[1] + hi[1]) / 2)),
        half=(float((hi[0] - lo[0]) / 2), float((hi[1] - lo[1]) / 2)),
    )


# ----------------------------------------------------------------------------------------------- colours


def hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    """(..., 3) HSV with hue in [0, 1) and s, v in [0, 1] -> (..., 3) RGB float in [0, 1]."""
    hsv = np.asarray(hsv, dtype=np.float64)
    h, s, v = hsv[..., 0] % 1.0, np.clip(hsv[..., 1], 0, 1), np.clip(hsv[..., 2], 0, 1)
    k = (np.array([5.0, 3.0, 1.0]) + h[..., None] * 6.0) % 6.0
    return v[..., None] - v[..., None] * s[..., None] * np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0)


def random_palette(rng: np.random.Generator, n: int = 3) -> np.ndarray:
    """(n, 3) HSV palette around a random base hue (analogous + one contrasting colour)."""
    base = rng.uniform(0, 1)
    hues = base + rng.normal(0, 0.06, n)
    hues[-1] = base + rng.choice([-1, 1]) * rng.uniform(0.15, 0.5)
    sats = rng.uniform(0.35, 0.95, n)
    vals = rng.uniform(0.25, 1.0, n)
    vals[0] = rng.uniform(0.55, 1.0)
    vals[1] = rng.uniform(0.15, 0.45)  # a dark middle stop keeps every texture contrasted
    return np.stack([hues, sats, vals], axis=1)


def similar_palette(rng: np.random.Generator, palette: np.ndarray, hue_jitter: float) -> np.ndarray:
    """A look-alike of an HSV ``palette`` (n, 3): same structure, hue shifted by at most ``hue_jitter``."""
    out = np.array(palette, dtype=np.float64, copy=True)
    out[:, 0] += rng.uniform(-hue_jitter, hue_jitter)
    out[:, 1:] = np.clip(out[:, 1:] + rng.normal(0, 0.05, (len(out), 2)), 0.1, 1.0)
    return out


def _apply_palette(field: np.ndarray, palette_hsv: np.ndarray) -> np.ndarray:
    """Map a scalar field in [0, 1] (H, W) onto a piecewise-linear ramp through the palette -> (H, W, 3)."""
    colours = hsv_to_rgb(palette_hsv).astype(np.float32)
    stops = np.linspace(0.0, 1.0, len(colours))
    out = np.empty((*field.shape, 3), np.float32)
    for c in range(3):
        out[..., c] = np.interp(field, stops, colours[:, c])
    return out


# ---------------------------------------------------------------------------------------------- textures


def value_noise(
    rng: np.random.Generator, height: int, width: int, octaves: int, base_cells: int
) -> np.ndarray:
    """Multi-octave value noise (H, W) float32 in [0, 1]; ``base_cells`` sets the coarsest scale."""
    out = np.zeros((height, width), np.float32)
    total = 0.0
    for o in range(octaves):
        cells = base_cells * 2**o
        grid = rng.random((max(2, cells * height // max(height, width)) + 1, cells + 1)).astype(np.float32)
        weight = 0.55**o
        out += weight * cv2.resize(grid, (width, height), interpolation=cv2.INTER_CUBIC)
        total += weight
    out /= total
    lo, hi = float(out.min()), float(out.max())
    return (out - lo) / max(hi - lo, 1e-6)


def texture_recipe(rng: np.random.Generator, kind: str | None = None) -> dict:
    """Random parameters of a texture family: ``{"kind", "palette" (n, 3) HSV, kind-specific numbers}``."""
    kind = kind or TEXTURE_KINDS[rng.integers(len(TEXTURE_KINDS))]
    recipe: dict = {"kind": kind, "palette": random_palette(rng, 3)}
    if kind == "noise":
        recipe["cells"] = int(rng.integers(2, 6))
    elif kind == "stripes":
        recipe["freq"] = float(rng.uniform(2.0, 6.0))
        recipe["angle"] = float(rng.uniform(0, np.pi))
        recipe["warp"] = float(rng.uniform(0.0, 1.5))
    elif kind == "spots":
        recipe["count"] = int(rng.integers(6, 18))
        recipe["radius"] = float(rng.uniform(0.08, 0.2))
    elif kind == "checker":
        recipe["cells"] = int(rng.integers(2, 6))
        recipe["angle"] = float(rng.uniform(0, np.pi / 2))
    else:
        raise ValueError(f"unknown texture kind {kind!r}; choose one of {TEXTURE_KINDS}")
    return recipe


def render_texture(rng: np.random.Generator, recipe: dict, size: int = 96) -> np.ndarray:
    """Draw one texture of ``recipe`` (see :func:`texture_recipe`) -> (size, size, 3) float32 RGB in [0, 1].

    ``rng`` supplies the per-instance details, so two draws of one recipe look alike but are not equal.
    """
    lin = (np.arange(size, dtype=np.float32) + 0.5) / size * 2.0 - 1.0
    u, v = np.meshgrid(lin, lin)
    kind = recipe["kind"]
    detail = value_noise(rng, size, size, octaves=3, base_cells=4)
    if kind == "noise":
        field = value_noise(rng, size, size, octaves=4, base_cells=recipe["cells"])
    elif kind == "stripes":
        a = recipe["angle"] + rng.normal(0, 0.1)
        phase = (u * np.cos(a) + v * np.sin(a)) * recipe["freq"] * np.pi + recipe["warp"] * 3.0 * detail
        field = 0.5 + 0.5 * np.sin(phase + rng.uniform(0, 2 * np.pi))
    elif kind == "spots":
        field = 0.15 * detail
        centres = rng.uniform(-1, 1, (recipe["count"], 2))
        radii = recipe["radius"] * rng.uniform(0.6, 1.4, recipe["count"])
        for (cx, cy), r in zip(centres, radii):
            field = np.maximum(field, np.clip(1.0 - np.hypot(u - cx, v - cy) / r, 0, 1) ** 0.5)
    elif kind == "checker":
        a = recipe["angle"]
        ru, rv = u * np.cos(a) - v * np.sin(a), u * np.sin(a) + v * np.cos(a)
        n = recipe["cells"]
        field = ((np.floor((ru + 2) * n) + np.floor((rv + 2) * n)) % 2).astype(np.float32)
        field = 0.8 * field + 0.2 * detail
    else:
        raise ValueError(f"unknown texture kind {kind!r}; choose one of {TEXTURE_KINDS}")
    rgb = _apply_palette(np.clip(field, 0, 1).astype(np.float32), recipe["palette"])
    # Mild shading so objects read as 3D bodies, plus fine grain.
    shade = (1.0 - 0.25 * (u * u + v * v) + 0.1 * (detail - 0.5)).astype(np.float32)
    return np.clip(rgb * shade[..., None], 0.0, 1.0)


def render_background(rng: np.random.Generator, height: int, width: int, clutter: int) -> np.ndarray:
    """A textured background canvas (H, W, 3) float32 RGB in [0, 1].

    Multi-scale noise through a random palette, a linear colour gradient, and ``clutter`` static textured
    shapes drawn on top.
    """
    field = value_noise(rng, height, width, octaves=5, base_cells=int(rng.integers(2, 5)))
    canvas = _apply_palette(field, random_palette(rng, 4))
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    a = rng.uniform(0, 2 * np.pi)
    ramp = (np.cos(a) * xs / width + np.sin(a) * ys / height).astype(np.float32)
    tint = hsv_to_rgb(np.array([rng.uniform(0, 1), 0.5, 1.0])).astype(np.float32) - 0.5
    canvas = canvas + 0.35 * ramp[..., None] * tint
    for _ in range(clutter):
        size = int(rng.integers(4, max(6, min(height, width) // 9)))
        tex = render_texture(rng, texture_recipe(rng), size=max(size * 2, 8))
        shape = random_shape(rng)
        half_x, half_y = size * rng.uniform(0.5, 1.0), size * rng.uniform(0.5, 1.0)
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        angle = rng.uniform(0, np.pi)
        paste_object(
            canvas, tex, shape, (cx, cy, half_x, half_y, angle), opacity=float(rng.uniform(0.25, 0.7))
        )
    return np.clip(canvas, 0.0, 1.0).astype(np.float32)


# ------------------------------------------------------------------------------------------ rasterising


def object_roi(
    state: tuple[float, float, float, float, float], outline: np.ndarray, height: int, width: int, pad: int
) -> tuple[int, int, int, int] | None:
    """Integer pixel window ``(x0, y0, x1, y1)`` (exclusive end) around an object, clipped to the image.

    ``state`` is ``(cx, cy, half_w, half_h, angle)`` (pixels, radians); None when the window is empty.
    """
    pts = transform_outline(outline, state)
    x0 = max(int(np.floor(pts[:, 0].min())) - pad, 0)
    y0 = max(int(np.floor(pts[:, 1].min())) - pad, 0)
    x1 = min(int(np.ceil(pts[:, 0].max())) + pad + 1, width)
    y1 = min(int(np.ceil(pts[:, 1].max())) + pad + 1, height)
    if x0 >= x1 or y0 >= y1:
        return None
    return x0, y0, x1, y1


def transform_outline(outline: np.ndarray, state: tuple[float, float, float, float, float]) -> np.ndarray:
    """Local outline (K, 2) -> image points (K, 2) for ``state = (cx, cy, half_w, half_h, angle)``.

    Image coordinates are continuous, 0-based: pixel (i, j) covers ``[i, i+1) x [j, j+1)``.
    """
    cx, cy, hw, hh, angle = state
    c, s = np.cos(angle), np.sin(angle)
    px, py = outline[:, 0] * hw, outline[:, 1] * hh
    return np.stack([cx + c * px - s * py, cy + s * px + c * py], axis=1)


def local_coords(
    roi: tuple[int, int, int, int], state: tuple[float, float, float, float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """Local ``(u, v)`` (each (h, w) float32) of the pixel centres of ``roi`` for an object ``state``."""
    x0, y0, x1, y1 = roi
    cx, cy, hw, hh, angle = state
    dx = np.arange(x0, x1, dtype=np.float32) + np.float32(0.5 - cx)
    dy = np.arange(y0, y1, dtype=np.float32) + np.float32(0.5 - cy)
    c, s = np.float32(np.cos(angle)), np.float32(np.sin(angle))
    u = (c * dx[None, :] + s * dy[:, None]) / np.float32(hw)
    v = (-s * dx[None, :] + c * dy[:, None]) / np.float32(hh)
    return u, v


def coverage(shape: Shape, u: np.ndarray, v: np.ndarray, scale_px: float) -> np.ndarray:
    """Anti-aliased coverage in [0, 1] (same shape as ``u``); exactly >= 0.5 where the point is inside."""
    d = shape.sdf(u, v).astype(np.float32)
    return np.clip(np.float32(0.5) - d * np.float32(scale_px), 0.0, 1.0)


def paste_object(
    canvas: np.ndarray,
    texture: np.ndarray,
    shape: Shape,
    state: tuple[float, float, float, float, float],
    opacity: float = 1.0,
) -> None:
    """Alpha-composite a textured shape into ``canvas`` (H, W, 3) float32 in place (no blur)."""
    height, width = canvas.shape[:2]
    roi = object_roi(state, shape.outline, height, width, pad=2)
    if roi is None:
        return
    u, v = local_coords(roi, state)
    alpha = coverage(shape, u, v, min(state[2], state[3])) * np.float32(opacity)
    rgb = sample_texture(texture, u, v)
    x0, y0, x1, y1 = roi
    region = canvas[y0:y1, x0:x1]
    region += alpha[..., None] * (rgb - region)


def sample_texture(texture: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Sample a (S, S, 3) texture (float32 or uint8) at local coordinates (u, v in [-1, 1]).

    Returns (h, w, 3) float32 in the texture's own value units.
    """
    size = texture.shape[0]
    half = np.float32(size / 2.0)
    map_x = (u + np.float32(1.0)) * half - np.float32(0.5)
    map_y = (v + np.float32(1.0)) * half - np.float32(0.5)
    out = cv2.remap(texture, map_x, map_y, interpolation=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    return out if out.dtype == np.float32 else out.astype(np.float32)
