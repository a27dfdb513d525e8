"""Rendering one frame of a simulated synthetic sequence (see :mod:`ltr.dataset.synthetic_scene`).

Layers, back to front: panning textured background, look-alike distractors, the target, occluders; then
a global illumination change (per-channel gain and a light gradient) and sensor noise. Moving objects get
motion blur along their velocity. Rendering frame ``t`` depends only on the scene and its assets, never
on previously rendered frames.

In the ``natural`` style (:mod:`ltr.dataset.synthetic_natural`) the background is seen through the
camera's pan and zoom (the objects' states already include both), and the frame is recorded through the
scene's :class:`~ltr.dataset.synthetic_natural.CameraLook` (blur, gamma, signal-dependent noise, JPEG)
instead of the classic additive noise. The classic look can take parts of it per sequence
(``SyntheticConfig.photo_background``, ``grey_background``, ``photo_target``): a natural-statistics or grey
background, and target and look-alikes cut from one natural-statistics image.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import cv2
import numpy as np

from ltr.dataset.synthetic_natural import (
    apply_camera_look,
    camera_matrix,
    natural_background,
    natural_texture,
)
from ltr.dataset.synthetic_scene import NATURAL_ZOOM, ObjectTrack, Scene, scene_rng
from ltr.dataset.synthetic_texture import (
    coverage,
    local_coords,
    object_roi,
    render_background,
    render_texture,
    sample_texture,
)

_NOISE_PAD = 32
_NOISE_SEED = 20201
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)  # ITU-R BT.601 weights, as cv2's grey conversion


@dataclass
class Assets:
    """Per-sequence pixel assets (about 0.5 MB at 320x240), built once from the scene's asset random stream.

    ``background``: (H + 2m, W + 2m, 3) uint8 canvas with pan margin ``margin``; ``target``,
    ``distractors``, ``occluders``: (S, S, 3) uint8 textures.
    """

    margin: int
    background: np.ndarray
    target: np.ndarray
    distractors: list[np.ndarray]
    occluders: list[np.ndarray]


def build_assets(scene: Scene) -> Assets:
    """Draw the background and textures of ``scene`` (deterministic in seed and index)."""
    cfg = scene.config
    rng = scene_rng(scene.seed, scene.index, 1)
    margin = int(np.ceil(cfg.camera_pan * cfg.unit)) + 2
    size = cfg.texture_size
    if scene.look is not None:  # the natural look (natural style, or a mixed set's natural sequence)
        # Zooming out by up to exp(NATURAL_ZOOM) shows that much more of the canvas around the frame.
        margin += int(np.ceil(0.5 * max(cfg.width, cfg.height) * (np.exp(NATURAL_ZOOM) - 1.0)))
        h, w = cfg.height + 2 * margin, cfg.width + 2 * margin
        background = (natural_background(rng, h, w) * 255.0 + 0.5).astype(np.uint8)
        photo_tg = False  # the photo-like options are the classic look's

        def texture(recipe: dict) -> np.ndarray:
            return (natural_texture(rng, recipe, size) * 255.0 + 0.5).astype(np.uint8)

    else:
        h, w = cfg.height + 2 * margin, cfg.width + 2 * margin
        # Stream 5 decides the photo-like options (three coins, always drawn) and draws their canvases.
        photo = scene_rng(scene.seed, scene.index, 5)
        photo_bg, grey_bg, photo_tg = photo.random(3) < (
            cfg.photo_background,
            cfg.grey_background,
            cfg.photo_target,
        )
        if photo_bg:
            canvas = natural_background(photo, h, w)
        else:
            clutter = int(round(cfg.clutter * cfg.width * cfg.height / (320 * 240)))
            canvas = render_background(rng, h, w, clutter)
        if grey_bg:
            canvas = np.repeat(canvas @ _LUMA[:, None], 3, axis=2)
        background = (canvas * 255.0 + 0.5).astype(np.uint8)

        def texture(recipe: dict) -> np.ndarray:
            return (render_texture(rng, recipe, size) * 255.0 + 0.5).astype(np.uint8)

    if photo_tg:
        # Target and look-alikes are regions of one natural-statistics image, as parts of one photograph.
        canvas = (natural_background(photo, 2 * size, 2 * size) * 255.0 + 0.5).astype(np.uint8)
        corners = photo.integers(0, size + 1, (1 + len(scene.distractors), 2))
        regions = [np.ascontiguousarray(canvas[y : y + size, x : x + size]) for y, x in corners]
        target, distractors = regions[0], regions[1:]
    else:
        target = texture(scene.target.recipe)
        distractors = [texture(d.recipe) for d in scene.distractors]
    occluders = [texture(o.recipe) for o in scene.occluders]
    return Assets(margin, background, target, distractors, occluders)


@functools.lru_cache(maxsize=4)
def _frame_fields(height: int, width: int, noise: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shared per image size: sensor noise (H + 32, W + 32, 3) float32 in 0..255 units (each frame reads a
    window at its own offset) and the light-gradient ramps ``ramp_x``, ``ramp_y`` (H, W) float32 in [-1, 1].
    """
    rng = np.random.Generator(np.random.PCG64(_NOISE_SEED))
    field = rng.standard_normal((height + _NOISE_PAD, width + _NOISE_PAD, 3), dtype=np.float32)
    field *= np.float32(noise * 255.0)
    ramp_x = np.tile(np.linspace(-1, 1, width, dtype=np.float32)[None, :], (height, 1))
    ramp_y = np.tile(np.linspace(-1, 1, height, dtype=np.float32)[:, None], (1, width))
    for arr in (field, ramp_x, ramp_y):
        arr.flags.writeable = False
    return field, ramp_x, ramp_y


def _line_kernel(length: float, angle: float) -> np.ndarray:
    """Normalised motion-blur kernel: a line of ``length`` pixels at ``angle`` (radians)."""
    k = int(np.ceil(length)) | 1
    kernel = np.zeros((k, k), np.float32)
    c = (k - 1) / 2.0
    dx, dy = np.cos(angle) * (length - 1) / 2.0, np.sin(angle) * (length - 1) / 2.0
    p0 = (int(round((c - dx) * 16)), int(round((c - dy) * 16)))
    p1 = (int(round((c + dx) * 16)), int(round((c + dy) * 16)))
    cv2.line(kernel, p0, p1, 1.0, thickness=1, lineType=cv2.LINE_AA, shift=4)
    total = kernel.sum()
    if total <= 0:
        kernel[int(c), int(c)] = 1.0
        total = 1.0
    return kernel / total


def _composite(
    frame: np.ndarray, obj: ObjectTrack, texture: np.ndarray, t: int, alpha_out: np.ndarray | None
) -> None:
    """Draw ``obj`` at frame ``t`` into ``frame`` (H, W, 3) float32 in place.

    ``alpha_out`` (H, W) float32, when given, receives ``max(alpha_out, coverage)`` of the unblurred shape.
    """
    height, width = frame.shape[:2]
    state = tuple(float(s) for s in obj.states[t])
    blur = float(obj.blur[t])
    pad = 2 + int(np.ceil(blur))
    roi = object_roi(state, obj.shape.outline, height, width, pad=pad)
    if roi is None:
        return
    x0, y0, x1, y1 = roi
    u, v = local_coords(roi, state)
    alpha = coverage(obj.shape, u, v, min(state[2], state[3]))
    if alpha_out is not None:
        np.maximum(alpha_out[y0:y1, x0:x1], alpha, out=alpha_out[y0:y1, x0:x1])
    if not alpha.any():
        return
    alpha3 = cv2.merge([alpha, alpha, alpha])
    rgb = cv2.multiply(sample_texture(texture, u, v), alpha3)  # premultiplied colour
    if blur >= 1.5:
        kernel = _line_kernel(blur, float(obj.blur_angle[t]))
        rgb = cv2.filter2D(rgb, -1, kernel, borderType=cv2.BORDER_CONSTANT)
        alpha3 = cv2.filter2D(alpha3, -1, kernel, borderType=cv2.BORDER_CONSTANT)
    region = frame[y0:y1, x0:x1]
    region -= cv2.multiply(region, alpha3)
    region += rgb


def render_frame(
    scene: Scene, assets: Assets, t: int, *, hide_target: bool = False, layers: bool = False
) -> np.ndarray | tuple[np.ndarray, dict[str, np.ndarray]]:
    """Frame ``t`` (0-based) as (H, W, 3) RGB uint8.

    With ``layers=True`` also returns ``{"target_alpha", "occluder_alpha"}``, (H, W) float32 coverage of the
    unblurred target and of the union of occluders (a pixel is inside where coverage >= 0.5).
    ``hide_target`` leaves the target out (for tests and visualisation).
    """
    cfg = scene.config
    if not 0 <= t < scene.num_frames:
        raise IndexError(f"frame {t} out of range for synthetic sequence {scene.index} ({scene.num_frames})")
    h, w, m = cfg.height, cfg.width, assets.margin
    px, py = scene.pan[t]
    if scene.zoom is not None:
        matrix = camera_matrix(float(scene.zoom[t]), (float(px), float(py)), m, w, h)
        frame = cv2.warpAffine(assets.background, matrix, (w, h), flags=cv2.INTER_LINEAR).astype(np.float32)
    else:
        centre = (float(m + px + (w - 1) / 2.0), float(m + py + (h - 1) / 2.0))
        frame = cv2.getRectSubPix(assets.background, (w, h), centre, patchType=cv2.CV_32F)
    target_alpha = np.zeros((h, w), np.float32) if layers else None
    occluder_alpha = np.zeros((h, w), np.float32) if layers else None
    for obj, tex in zip(scene.distractors, assets.distractors):
        _composite(frame, obj, tex, t, None)
    if not hide_target:
        _composite(frame, scene.target, assets.target, t, target_alpha)
    elif layers:
        # Coverage is still reported so tests can compare the two renders pixel by pixel.
        _composite(np.zeros_like(frame), scene.target, assets.target, t, target_alpha)
    for obj, tex in zip(scene.occluders, assets.occluders):
        _composite(frame, obj, tex, t, occluder_alpha)
    # Illumination: per-channel gain times a linear light gradient; then sensor noise.
    noise, ramp_x, ramp_y = _frame_fields(h, w, cfg.noise)
    lx, ly = scene.light[t]
    light = ramp_x * np.float32(lx)
    light += ramp_y * np.float32(ly)
    light += np.float32(1.0)
    frame = cv2.multiply(frame, cv2.merge([light * np.float32(g) for g in scene.gain[t]]))
    ox, oy = scene.noise_offset[t]
    if scene.look is not None:
        # Image motion at the frame centre: the world point there moves by -zoom * (pan change).
        step = scene.pan[min(t + 1, scene.num_frames - 1)] - scene.pan[max(t - 1, 0)]
        step = step / max(min(t + 1, scene.num_frames - 1) - max(t - 1, 0), 1)
        velocity = (-float(scene.zoom[t] * step[0]), -float(scene.zoom[t] * step[1]))
        image = apply_camera_look(frame, scene.look, t, velocity, (int(ox), int(oy)))
    else:
        frame += noise[oy : oy + h, ox : ox + w]
        np.clip(frame, 0.0, 255.0, out=frame)
        frame += np.float32(0.5)
        image = frame.astype(np.uint8)
    if layers:
        return image, {"target_alpha": target_alpha, "occluder_alpha": occluder_alpha}
    return image
