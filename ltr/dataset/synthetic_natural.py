"""The ``natural`` look of the synthetic generator: image statistics of real photographs, made procedurally.

Networks trained on procedural images transfer to real ones when the images share the statistics that
low-level features see (Baradad et al., "Learning to See by Looking at Noise", NeurIPS 2021): amplitude
spectra falling as 1/f, occlusion edges at every scale (dead-leaves models), mostly desaturated colours,
and camera artefacts. This module makes such pixels; :mod:`ltr.dataset.synthetic_scene` and
:mod:`ltr.dataset.synthetic_render` use it when ``SyntheticConfig.style == "natural"``. No image files.

- :func:`spectral_noise`: Gaussian noise whose amplitude spectrum falls as ``f ** -slope`` (slope ~ 1).
- :func:`natural_colours`: colours drawn as photographs' are spread: mostly low saturation, earthy hues.
- :func:`dead_leaves`: back-to-front opaque shapes with a power-law size density (``r ** -3``, the scale-
  invariant choice), each textured with spectral noise in its own colour.
- :func:`natural_texture`: an object's texture, a region of such an image (families per
  :data:`~ltr.dataset.synthetic_texture.TEXTURE_KINDS`: ``noise`` plain 1/f, ``stripes`` oriented 1/f,
  ``spots`` dead leaves of disks, ``checker`` dead leaves of polygons).
- :class:`CameraLook` and :func:`apply_camera_look`: exposure and gamma, vignetting, defocus blur, motion
  blur along the camera's motion, signal-dependent sensor noise and JPEG re-encoding.

Every function takes a seeded :class:`numpy.random.Generator` (or values drawn from one), so equal seeds
give equal pixels. Images are float32 RGB in [0, 1] unless stated.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import cv2
import numpy as np

from ltr.dataset.synthetic_texture import hsv_to_rgb

#: range of the amplitude-spectrum slope of the noise textures (1 is the average of natural images).
SLOPE = (0.8, 1.3)


def spectral_noise(
    rng: np.random.Generator, height: int, width: int, slope: float, channels: int = 1
) -> np.ndarray:
    """(H, W, channels) float32 Gaussian noise, zero mean and unit standard deviation, whose amplitude
    spectrum falls as ``f ** -slope`` (radial frequency f in cycles per pixel; the DC term is zero)."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    radius = np.sqrt(fx * fx + fy * fy)
    radius[0, 0] = 1.0
    gain = radius**-slope
    gain[0, 0] = 0.0
    white = rng.standard_normal((channels, height, width))
    field = np.fft.irfft2(np.fft.rfft2(white) * gain, s=(height, width))
    field /= field.std(axis=(1, 2), keepdims=True) + 1e-12
    return np.ascontiguousarray(field.transpose(1, 2, 0), dtype=np.float32)


def natural_colours(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 3) RGB in [0, 1]: hues favour browns, greens and sky blues, saturation is mostly low and value
    spreads widely, as in photographs."""
    family = rng.choice(4, size=n, p=[0.4, 0.25, 0.2, 0.15])
    centre = np.array([0.08, 0.28, 0.58, 0.0])[family]  # earth, foliage, sky/water, anything
    spread = np.array([0.05, 0.07, 0.06, 0.5])[family]
    hue = centre + rng.normal(0.0, 1.0, n) * spread
    hue[family == 3] = rng.uniform(0, 1, int((family == 3).sum()))
    sat = rng.beta(1.3, 3.0, n)
    val = rng.beta(2.0, 2.0, n) * 0.85 + 0.1
    return hsv_to_rgb(np.stack([hue, sat, val], axis=1)).astype(np.float32)


def _colourise(noise: np.ndarray, colour: np.ndarray, contrast: float, chroma: float) -> np.ndarray:
    """Spectral noise (h, w, 2) -> (h, w, 3) texture around ``colour``: the first channel modulates
    luminance by ``contrast``, the second scales the colour's own chroma by ``1 + chroma * noise``."""
    lum = 1.0 + contrast * noise[..., 0:1]
    grey = float(colour.mean())
    tint = (colour - grey)[None, None, :] * (1.0 + chroma * noise[..., 1:2])
    return (grey + tint) * lum


#: supersampling of the dead-leaves label map (anti-aliased leaf edges after the area downsampling).
_SUPERSAMPLE = 2


def leaf_radii(rng: np.random.Generator, n: int, radius: tuple[float, float]) -> np.ndarray:
    """(n,) radii with density ``r ** -3`` on ``radius`` (lo, hi): the scale-invariant dead-leaves law."""
    lo, hi = radius
    u = rng.uniform(0, 1, n)
    return (lo**-2 - u * (lo**-2 - hi**-2)) ** -0.5


def leaf_count(height: int, width: int, radius: tuple[float, float], cover: float) -> int:
    """How many leaves of :func:`leaf_radii` cover an H x W image ``cover`` times on average."""
    lo, hi = radius
    mean_r2 = 2.0 * np.log(hi / lo) / (lo**-2 - hi**-2)  # E[r^2] under the density r ** -3
    return max(1, int(round(cover * height * width / (np.pi * mean_r2))))


def dead_leaves(
    rng: np.random.Generator,
    height: int,
    width: int,
    radius: tuple[float, float],
    cover: float = 2.5,
    kinds: tuple[str, ...] = ("ellipse", "polygon"),
    colours: np.ndarray | None = None,
    slope: float | None = None,
) -> np.ndarray:
    """(H, W, 3) float32 dead-leaves image: opaque ellipses and convex polygons painted back to front,
    radii from :func:`leaf_radii` on ``radius`` (pixels), as many as cover the image ``cover`` times, over a
    textured 1/f field that shows where no leaf fell (about ``exp(-cover)`` of the image).

    Each leaf is a colour of ``colours`` (cycled; default: a brightness-jittered pick from a few
    :func:`natural_colours` families, as a scene has)
    modulated by one of two spectral-noise fields (amplitude slope ``slope``, default drawn from
    :data:`SLOPE`) with its own sign, contrast and chroma. Leaves are drawn on a label map at twice the
    resolution and area-averaged, so their edges are anti-aliased.
    """
    ss = _SUPERSAMPLE
    n = leaf_count(height, width, radius, cover)
    slope = float(rng.uniform(*SLOPE)) if slope is None else slope
    if colours is None:  # a scene has a few colour families; leaves vary around them
        families = natural_colours(rng, int(rng.integers(4, 12)))
        palette = families[rng.integers(len(families), size=n + 1)]
        palette = palette * np.exp(rng.normal(0.0, 0.2, (n + 1, 1))).astype(np.float32)
    else:
        palette = np.asarray(colours, np.float32)[np.arange(n + 1) % len(colours)]
    radii = leaf_radii(rng, n, radius) * ss
    aspect = np.exp(rng.normal(0.0, 0.35, n))
    centres = rng.uniform(0, 1, (n, 2)) * (width * ss, height * ss)
    angles = rng.uniform(0, 180.0, n)
    kind = rng.integers(len(kinds), size=n)
    # Polygon vertices for every leaf at once (at most 8 sides; leaf i uses its first sides[i]).
    sides = rng.integers(4, 9, n)
    slot = np.arange(8)[None, :]
    theta = (slot + rng.uniform(-0.3, 0.3, (n, 8))) * (2 * np.pi / sides[:, None]) + np.deg2rad(angles)[
        :, None
    ]
    rho = rng.uniform(0.7, 1.0, (n, 8))
    rx, ry = radii * np.sqrt(aspect), radii / np.sqrt(aspect)
    one = 16  # cv2 drawing with shift=4: coordinates in 1/16 pixel
    vertices = np.stack(
        [
            centres[:, 0:1] + (rx[:, None] * rho) * np.cos(theta),
            centres[:, 1:2] + (ry[:, None] * rho) * np.sin(theta),
        ],
        axis=2,
    )
    vertices = np.round(vertices * one).astype(np.int32)
    centres16 = np.round(centres * one).astype(int).tolist()
    axes16 = np.maximum(np.round(np.stack([rx, ry], axis=1) * one), 1).astype(int).tolist()
    is_ellipse = [kinds[k] == "ellipse" for k in kind]
    labels = np.zeros((height * ss, width * ss), np.int32)
    for i in range(n):
        if is_ellipse[i]:
            cv2.ellipse(labels, centres16[i], axes16[i], float(angles[i]), 0, 360, i + 1, -1, cv2.LINE_8, 4)
        else:
            cv2.fillConvexPoly(labels, vertices[i, : sides[i]], i + 1, cv2.LINE_8, 4)
    noise = spectral_noise(rng, height, width, slope, 4)  # at the output resolution: its detail is there
    noise = cv2.resize(noise, (width * ss, height * ss), interpolation=cv2.INTER_LINEAR)
    # One gather of every leaf's numbers: tint (3), grey, signed contrast, chroma, which noise field.
    grey = palette.mean(axis=1, keepdims=True)
    table = np.concatenate(
        [
            palette - grey,
            grey,
            (rng.uniform(0.1, 0.45, n + 1) * rng.choice([-1.0, 1.0], n + 1))[:, None],
            rng.uniform(0.1, 0.5, n + 1)[:, None],
            rng.integers(2, size=n + 1)[:, None],
        ],
        axis=1,
    ).astype(np.float32)
    leaf = table[labels]
    pick = leaf[..., 6]
    lum_noise = noise[..., 0] + pick * (noise[..., 2] - noise[..., 0])
    chroma_noise = noise[..., 1] + pick * (noise[..., 3] - noise[..., 1])
    image = leaf[..., 0:3] * (1.0 + leaf[..., 5] * chroma_noise)[..., None]
    image += leaf[..., 3:4]
    image *= (1.0 + leaf[..., 4] * lum_noise)[..., None]
    image = cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)
    return np.clip(image, 0.0, 1.0)


def natural_background(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """(H, W, 3) float32 background: dead leaves with radii from 3 pixels to half the shorter side."""
    return dead_leaves(
        rng, height, width, (3.0, 0.5 * min(height, width)), cover=float(rng.uniform(2.0, 3.5))
    )


def natural_recipe(rng: np.random.Generator, kind: str) -> dict:
    """Parameters of a natural texture family ``kind`` (one of TEXTURE_KINDS): its colours, spectral slope
    and, for ``stripes``, orientation. Look-alike objects share a recipe (see :func:`similar_recipe`)."""
    return {
        "kind": kind,
        "colours": natural_colours(rng, 3),
        "slope": float(rng.uniform(*SLOPE)),
        "angle": float(rng.uniform(0, np.pi)),
        "stretch": float(rng.uniform(3.0, 8.0)),
    }


def similar_recipe(rng: np.random.Generator, recipe: dict, jitter: float = 0.06) -> dict:
    """A look-alike of ``recipe``: its colours shifted by at most ``jitter`` per channel."""
    colours = np.clip(recipe["colours"] + rng.uniform(-jitter, jitter, recipe["colours"].shape), 0.0, 1.0)
    return dict(recipe, colours=colours.astype(np.float32))


def natural_texture(rng: np.random.Generator, recipe: dict, size: int) -> np.ndarray:
    """(size, size, 3) float32 texture of ``recipe``: a region of a natural-statistics image, with mild
    shading so the object reads as a body."""
    kind, colours = recipe["kind"], recipe["colours"]
    if kind in ("noise", "stripes"):
        noise = spectral_noise(rng, size, size, recipe["slope"], 2)
        if kind == "stripes":  # stretch the field along one direction: an oriented (grain-like) 1/f texture
            big = spectral_noise(rng, size, size * 2, recipe["slope"], 2)
            stretched = cv2.resize(
                big, (size * 2 * int(recipe["stretch"]), size), interpolation=cv2.INTER_LINEAR
            )
            centre = (stretched.shape[1] / 2.0, size / 2.0)
            rot = cv2.getRotationMatrix2D(centre, np.rad2deg(recipe["angle"]), 1.0)
            rot[0, 2] -= centre[0] - size / 2.0
            noise = cv2.warpAffine(stretched, rot, (size, size), borderMode=cv2.BORDER_REFLECT_101)
            noise /= noise.std(axis=(0, 1), keepdims=True) + 1e-6
        texture = _colourise(noise, colours[0], 0.35, 0.6)
    else:
        kinds = ("ellipse",) if kind == "spots" else ("polygon",)
        texture = dead_leaves(
            rng, size, size, (size / 20.0, size / 3.0), 3.0, kinds, colours, recipe["slope"]
        )
    lin = (np.arange(size, dtype=np.float32) + 0.5) / size * 2.0 - 1.0
    shade = 1.0 - 0.2 * (lin[None, :] ** 2 + lin[:, None] ** 2)
    return np.clip(texture * shade[..., None], 0.0, 1.0).astype(np.float32)


# ------------------------------------------------------------------------------------------------ camera


@dataclass(frozen=True)
class CameraLook:
    """Per-sequence camera artefacts (drawn by :func:`camera_look`).

    gamma: exponent applied to [0, 1] intensities; vignette: relative darkening at the corners; defocus:
    (N,) Gaussian blur sigma per frame (pixels); motion_blur: exposure time as a fraction of the frame
    interval (blur length = camera speed times it); shot, read: noise standard deviation
    ``sqrt(shot * I + read ** 2)`` in 0..255 units for intensity I; jpeg: quality of the re-encoding.
    """

    gamma: float
    vignette: float
    defocus: np.ndarray
    motion_blur: float
    shot: float
    read: float
    jpeg: int


def camera_look(rng: np.random.Generator, n: int, smooth) -> CameraLook:
    """Draw a :class:`CameraLook` for ``n`` frames; ``smooth(rng, n)`` gives a smooth (n,) signal in [-1, 1]."""
    base = rng.uniform(0.0, 1.2)
    defocus = np.clip(base * (1.0 + 0.6 * smooth(rng, n)), 0.0, None)
    return CameraLook(
        gamma=float(np.exp(rng.uniform(-0.25, 0.25))),
        vignette=float(rng.uniform(0.0, 0.35)),
        defocus=defocus,
        motion_blur=float(rng.uniform(0.2, 1.0)),
        shot=float(rng.uniform(0.0, 1.5)),
        read=float(rng.uniform(0.5, 3.0)),
        jpeg=int(rng.integers(35, 96)),
    )


@functools.lru_cache(maxsize=4)
def _unit_fields(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Shared per image size: unit Gaussian noise (H + 32, W + 32, 3) float32 (frames read windows of it)
    and the squared distance from the centre normalised to 1 at the corners (H, W, 3) float32."""
    rng = np.random.Generator(np.random.PCG64(20211))
    noise = rng.standard_normal((height + 32, width + 32, 3), dtype=np.float32)
    ys = (np.arange(height, dtype=np.float32) + 0.5 - height / 2) / (height / 2)
    xs = (np.arange(width, dtype=np.float32) + 0.5 - width / 2) / (width / 2)
    radius2 = np.repeat(((ys[:, None] ** 2 + xs[None, :] ** 2) / 2.0)[..., None], 3, axis=2).astype(
        np.float32
    )
    for arr in (noise, radius2):
        arr.flags.writeable = False
    return noise, radius2


def _line_kernel(length: float, angle: float) -> np.ndarray:
    k = int(np.ceil(length)) | 1
    kernel = np.zeros((k, k), np.float32)
    c = (k - 1) / 2.0
    dx, dy = np.cos(angle) * (length - 1) / 2.0, np.sin(angle) * (length - 1) / 2.0
    cv2.line(
        kernel,
        (int(round((c - dx) * 16)), int(round((c - dy) * 16))),
        (int(round((c + dx) * 16)), int(round((c + dy) * 16))),
        1.0,
        thickness=1,
        lineType=cv2.LINE_AA,
        shift=4,
    )
    total = kernel.sum()
    if total <= 0:
        kernel[int(c), int(c)] = 1.0
        total = 1.0
    return kernel / total


def apply_camera_look(
    frame: np.ndarray, look: CameraLook, t: int, velocity: tuple[float, float], noise_offset: tuple[int, int]
) -> np.ndarray:
    """Frame (H, W, 3) float32 in 0..255 (linear light, after illumination) -> (H, W, 3) RGB uint8 as a
    camera would record it: vignetting, defocus, motion blur along ``velocity`` (the scene's image motion
    at the frame centre, pixels per frame), gamma, sensor noise (window of a shared field at
    ``noise_offset``), quantisation and JPEG re-encoding."""
    height, width = frame.shape[:2]
    noise, radius2 = _unit_fields(height, width)
    if look.vignette > 0:
        frame = cv2.multiply(frame, np.float32(1.0) - np.float32(look.vignette) * radius2)
    sigma = float(look.defocus[t])
    if sigma >= 0.3:
        frame = cv2.GaussianBlur(frame, (0, 0), sigma, borderType=cv2.BORDER_REFLECT_101)
    length = float(np.hypot(*velocity)) * look.motion_blur
    if length >= 1.5:
        kernel = _line_kernel(min(length, 25.0), float(np.arctan2(velocity[1], velocity[0])))
        frame = cv2.filter2D(frame, -1, kernel, borderType=cv2.BORDER_REFLECT_101)
    # Gamma and the noise level through 256-entry tables on the quantised intensity (cheap per pixel).
    linear = np.clip(frame + np.float32(0.5), 0.0, 255.0).astype(np.uint8)
    levels = np.arange(256, dtype=np.float64)
    encoded = cv2.LUT(
        linear, np.clip(255.0 * (levels / 255.0) ** (1.0 / look.gamma) + 0.5, 0, 255).astype(np.uint8)
    )
    std = cv2.LUT(encoded, np.sqrt(look.shot * levels + look.read**2).astype(np.float32))
    ox, oy = noise_offset
    image = cv2.add(
        encoded.astype(np.float32),
        cv2.multiply(std, noise[oy : oy + height, ox : ox + width]),
        dtype=cv2.CV_8U,
    )
    ok, data = cv2.imencode(
        ".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, look.jpeg]
    )
    if not ok:  # pragma: no cover - OpenCV encodes any uint8 image
        raise RuntimeError("cv2.imencode failed")
    return cv2.cvtColor(cv2.imdecode(data, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


# ----------------------------------------------------------------------------------------- camera motion


def camera_matrix(zoom: float, pan: tuple[float, float], margin: int, width: int, height: int) -> np.ndarray:
    """(2, 3) affine map from background-canvas pixel indices to frame pixel indices (``cv2.warpAffine``).

    The camera maps a world point X (continuous frame coordinates at zoom 1 and no pan; the canvas holds
    it at X + margin) to ``c + zoom * (X - pan - c)``, c the frame centre: see :func:`world_to_frame`.
    """
    cx, cy = width / 2.0, height / 2.0
    z = float(zoom)
    tx = cx + z * (0.5 - margin - pan[0] - cx) - 0.5
    ty = cy + z * (0.5 - margin - pan[1] - cy) - 0.5
    return np.array([[z, 0.0, tx], [0.0, z, ty]])


def world_to_frame(
    states: np.ndarray, zoom: np.ndarray, pan: np.ndarray, width: int, height: int
) -> np.ndarray:
    """Object states (N, 5) ``cx, cy, half_w, half_h, angle`` in world coordinates -> frame coordinates
    for a camera with per-frame ``zoom`` (N,) and ``pan`` (N, 2) (see :func:`camera_matrix`)."""
    out = np.array(states, dtype=np.float64, copy=True)
    centre = np.array([width / 2.0, height / 2.0])
    out[:, :2] = centre + zoom[:, None] * (states[:, :2] - pan - centre)
    out[:, 2:4] = states[:, 2:4] * zoom[:, None]
    return out
