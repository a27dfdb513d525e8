"""The synthetic generator's ``natural`` style: image statistics, camera motion and artefacts, ground truth."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.dataset.synthetic import synthetic_dataset
from ltr.dataset.synthetic_natural import (
    CameraLook,
    apply_camera_look,
    camera_matrix,
    dead_leaves,
    natural_background,
    spectral_noise,
    world_to_frame,
)
from ltr.dataset.synthetic_render import build_assets, render_frame
from ltr.dataset.synthetic_scene import SyntheticConfig, natural_look, simulate
from ltr.dataset.synthetic_texture import render_background

NATURAL = SyntheticConfig(width=128, height=96, num_frames=30, style="natural")


def amplitude_slope(image: np.ndarray) -> float:
    """Slope of log mean amplitude against log radial frequency (0.01-0.3 cycles/pixel) of the grey image."""
    grey = image.mean(axis=-1) if image.ndim == 3 else image
    grey = grey - grey.mean()
    h, w = grey.shape
    window = np.hanning(h)[:, None] * np.hanning(w)[None, :]
    amplitude = np.abs(np.fft.fft2(grey * window))
    radius = np.sqrt(np.fft.fftfreq(h)[:, None] ** 2 + np.fft.fftfreq(w)[None, :] ** 2)
    edges = np.geomspace(0.01, 0.3, 16)
    which = np.digitize(radius, edges)
    f = [radius[which == i].mean() for i in range(1, len(edges))]
    a = [amplitude[which == i].mean() for i in range(1, len(edges))]
    return float(np.polyfit(np.log(f), np.log(a), 1)[0])


def test_spectral_noise_has_the_asked_slope():
    noise = spectral_noise(np.random.default_rng(0), 256, 256, 1.0, 1)
    assert noise.shape == (256, 256, 1) and noise.dtype == np.float32
    assert abs(float(noise.std()) - 1.0) < 1e-3
    assert -1.15 < amplitude_slope(noise[..., 0]) < -0.85


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_background_amplitude_spectrum_falls_as_one_over_f(seed):
    natural = natural_background(np.random.default_rng(seed), 240, 320)
    assert natural.shape == (240, 320, 3) and 0.0 <= natural.min() and natural.max() <= 1.0
    assert -1.3 < amplitude_slope(natural) < -0.75
    # The classic background is much smoother than a photograph (a steeper fall).
    assert amplitude_slope(render_background(np.random.default_rng(seed), 240, 320, 25)) < -1.3


def test_dead_leaves_cover_the_image_with_many_scales():
    image = dead_leaves(np.random.default_rng(4), 96, 128, (3.0, 40.0), cover=3.0)
    # Many distinct flat-ish regions: the quantised colours take many values, and edges are everywhere.
    quantised = (image * 8).astype(int)
    assert len(np.unique(quantised.reshape(-1, 3), axis=0)) > 40
    assert np.abs(np.diff(image.mean(-1), axis=1)).mean() > 0.01


def test_same_seed_same_pixels_other_style_other_pixels():
    a, b = simulate(NATURAL, 3, 1), simulate(NATURAL, 3, 1)
    np.testing.assert_array_equal(a.boxes, b.boxes)
    fa = render_frame(a, build_assets(a), 7)
    fb = render_frame(b, build_assets(b), 7)
    np.testing.assert_array_equal(fa, fb)
    classic = simulate(NATURAL.replace(style="classic"), 3, 1)
    assert np.abs(render_frame(classic, build_assets(classic), 7).astype(int) - fa).mean() > 10


def test_objects_follow_the_classic_world_motion_through_the_camera():
    classic = simulate(NATURAL.replace(style="classic"), 5, 2)
    natural = simulate(NATURAL, 5, 2)
    assert np.ptp(natural.zoom) > 0.02  # the camera zooms
    expected = world_to_frame(classic.target.states, natural.zoom, natural.pan, 128, 96)
    np.testing.assert_allclose(natural.target.states, expected)


def test_camera_matrix_and_world_to_frame_agree():
    zoom, pan, margin = 1.13, (4.5, -2.25), 9
    world = np.array([[30.0, 50.0, 5.0, 3.0, 0.2]])
    frame = world_to_frame(world, np.array([zoom]), np.array([pan]), 128, 96)[0]
    # The canvas holds world point X at X + margin (continuous), i.e. at index X + margin - 0.5.
    matrix = camera_matrix(zoom, pan, margin, 128, 96)
    index = matrix @ np.array([30.0 + margin - 0.5, 50.0 + margin - 0.5, 1.0])
    np.testing.assert_allclose(index + 0.5, frame[:2])
    np.testing.assert_allclose(frame[2:4], [5.0 * zoom, 3.0 * zoom])


def test_boxes_are_tight_around_the_rendered_target():
    checked = 0
    for index in range(3):
        scene = simulate(NATURAL, 11, index)
        assets = build_assets(scene)
        for t in range(0, scene.num_frames, 6):
            if not scene.visible[t] or scene.occlusion[t]:
                continue
            _, layers = render_frame(scene, assets, t, layers=True)
            ys, xs = np.nonzero(layers["target_alpha"] >= 0.5)
            x, y, w, h = scene.boxes[t]
            inside = x >= 0 and y >= 0 and x + w <= 128 and y + h <= 96
            if not inside:
                continue
            # Pixel centres inside the outline reach to within a pixel of every side of the box.
            assert xs.min() + 0.5 >= x - 0.01 and xs.max() + 0.5 <= x + w + 0.01
            assert xs.min() + 0.5 - x <= 1.01 and x + w - xs.max() - 0.5 <= 1.01
            assert ys.min() + 0.5 - y <= 1.01 and y + h - ys.max() - 0.5 <= 1.01
            checked += 1
    assert checked >= 5


def test_sensor_noise_grows_with_the_signal():
    look = CameraLook(
        gamma=1.0, vignette=0.0, defocus=np.zeros(1), motion_blur=0.0, shot=1.5, read=1.0, jpeg=100
    )
    stds = []
    for level in (20.0, 200.0):
        frame = np.full((64, 64, 3), level, np.float32)
        out = apply_camera_look(frame, look, 0, (0.0, 0.0), (0, 0)).astype(np.float64)
        assert abs(out.mean() - level) < 1.5
        stds.append(out.std())
    # sqrt(1.5 * I + 1): about 5.6 at 20 and 17.3 at 200; JPEG's chroma subsampling averages some of it away
    # (at quality 100 too), so check the ratio, sqrt(301 / 31) = 3.1, and loose levels.
    assert 3.5 < stds[0] < 6.0 and 10.5 < stds[1] < 18.0
    assert 2.6 < stds[1] / stds[0] < 3.6


def test_camera_look_blurs_and_compresses():
    rng = np.random.default_rng(0)
    frame = rng.uniform(0, 255, (48, 64, 3)).astype(np.float32)
    sharp = CameraLook(1.0, 0.0, np.zeros(1), 0.0, 0.0, 0.0, 100)
    blurred = CameraLook(1.0, 0.0, np.full(1, 2.0), 0.0, 0.0, 0.0, 100)
    a = apply_camera_look(frame, sharp, 0, (0.0, 0.0), (0, 0)).astype(float)
    b = apply_camera_look(frame, blurred, 0, (0.0, 0.0), (0, 0)).astype(float)
    assert np.abs(np.diff(b, axis=1)).mean() < 0.3 * np.abs(np.diff(a, axis=1)).mean()
    low = CameraLook(1.0, 0.0, np.zeros(1), 0.0, 0.0, 0.0, 30)
    c = apply_camera_look(frame, low, 0, (0.0, 0.0), (0, 0)).astype(float)
    assert np.abs(c - a).mean() > 5.0  # JPEG artefacts at quality 30


def test_config_style_and_dataset_option():
    with pytest.raises(ValueError, match="style"):
        SyntheticConfig(style="photo")
    assert "style" not in SyntheticConfig().to_dict()  # classic sets' markers are unchanged
    assert SyntheticConfig(**NATURAL.to_dict()) == NATURAL
    data = synthetic_dataset(
        split="val", num_sequences=2, style="natural", num_frames=12, width=96, height=72
    )
    seq = data.get_sequence(data.sequence_names()[0])
    frame = seq.frame(5)
    assert frame.shape == (72, 96, 3) and frame.dtype == np.uint8 and len(seq) == 12
    assert "textured" in seq.attributes["language"]


def test_mixed_style_takes_each_sequence_from_one_style():
    mixed = NATURAL.replace(style="mixed")
    looks = [natural_look("mixed", 8, i) for i in range(12)]
    assert 2 <= sum(looks) <= 10  # both looks occur
    for index in (looks.index(True), looks.index(False)):
        scene = simulate(mixed, 8, index)
        same = simulate(NATURAL.replace(style="natural" if looks[index] else "classic"), 8, index)
        np.testing.assert_array_equal(scene.boxes, same.boxes)
        assert (scene.look is not None) == looks[index]
        np.testing.assert_array_equal(
            render_frame(scene, build_assets(scene), 4), render_frame(same, build_assets(same), 4)
        )
