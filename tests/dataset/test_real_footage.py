"""The real-footage validation set: boxes follow the construction, determinism, frame sizes, registry."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.dataset.base import DatasetError
from ltr.dataset.real_footage import (
    CAMERA_SEQUENCES,
    OBJECT_SEQUENCES,
    SOURCES,
    camera_path,
    load_photo,
    missing_sources,
    real_footage_dataset,
)
from ltr.dataset.real_footage_geometry import Patch, draw_patch, patch_boxes, render_view, view_boxes
from ltr.dataset.registry import BENCHMARKS, get_dataset

needs_photos = pytest.mark.skipif(
    bool(missing_sources()), reason=f"real_footage photos missing: pip install {' '.join(missing_sources())}"
)


def _photo(h: int = 120, w: int = 160) -> np.ndarray:
    """A smooth random colour image (smooth, so bilinear sampling of it is well defined)."""
    import cv2

    rng = np.random.default_rng(3)
    small = rng.integers(0, 256, (h // 8, w // 8, 3)).astype(np.uint8)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def bilinear(photo: np.ndarray, x: float, y: float) -> np.ndarray:
    """The photo's colour at pixel-index coordinates (x, y), bilinearly interpolated (the expected pixel)."""
    x0, y0 = int(np.floor(x)), int(np.floor(y))
    fx, fy = x - x0, y - y0
    p = photo.astype(np.float64)
    return (
        p[y0, x0] * (1 - fx) * (1 - fy)
        + p[y0, x0 + 1] * fx * (1 - fy)
        + p[y0 + 1, x0] * (1 - fx) * fy
        + p[y0 + 1, x0 + 1] * fx * fy
    )


def test_pure_pan_shifts_pixels_and_box_by_the_pan():
    photo = _photo()
    origins = np.array([[10.0, 20.0], [17.0, 20.0], [17.0, 15.0]])
    scales = np.ones(3)
    frames = [render_view(photo, o, 1.0, (64, 48)) for o in origins]
    # An integer pan at scale 1 shows the photo itself, moved by the pan.
    np.testing.assert_array_equal(frames[0], photo[20:68, 10:74])
    np.testing.assert_array_equal(frames[1][:, :-7], frames[0][:, 7:])
    np.testing.assert_array_equal(frames[2][5:], frames[1][:-5])
    boxes = view_boxes(np.array([40.0, 30.0, 12.0, 9.0]), origins, scales)
    np.testing.assert_allclose(boxes, [[30, 10, 12, 9], [23, 10, 12, 9], [23, 15, 12, 9]])


def test_zoom_maps_box_corners_through_the_camera():
    photo = _photo()
    box = np.array([50.0, 40.0, 20.0, 10.0])
    origin, scale = np.array([30.5, 25.25]), 0.5  # two frame pixels per photo pixel
    (out,) = view_boxes(box, origin[None], np.array([scale]))
    np.testing.assert_allclose(out, [(50 - 30.5) * 2, (40 - 25.25) * 2, 40, 20])
    frame = render_view(photo, origin, scale, (100, 80))
    # Frame pixel centre (x + 0.5) shows the photo at origin + scale * (x + 0.5): check one interior point.
    x, y = 41, 31  # continuous (41.5, 31.5) -> photo (51.25, 41.0) -> between pixel centres 50.5 / 51.5
    src_x, src_y = origin[0] + scale * (x + 0.5) - 0.5, origin[1] + scale * (y + 0.5) - 0.5
    np.testing.assert_allclose(frame[y, x], bilinear(photo, src_x, src_y), atol=1.0)


def test_camera_path_keeps_window_in_photo_and_target_in_frame():
    rng = np.random.default_rng(0)
    target = (70.0, 50.0, 30.0, 20.0)
    origins, scales = camera_path(rng, (120, 160), (64, 48), (0.5, 3.0), 200, target=target, margin=4.0)
    assert scales.min() >= 0.5 and scales.max() <= (120 - 2) / 48 + 1e-9
    assert scales.max() / scales.min() > 1.2  # it zooms
    assert np.ptp(origins[:, 0]) > 5 and np.ptp(origins[:, 1]) > 5  # it pans
    assert (origins >= 0).all()
    assert (origins[:, 0] + 64 * scales <= 159 + 1e-9).all() and (
        origins[:, 1] + 48 * scales <= 119 + 1e-9
    ).all()
    boxes = view_boxes(np.array(target), origins, scales)
    assert (boxes[:, 0] >= 4 - 1e-9).all() and (boxes[:, 1] >= 4 - 1e-9).all()
    assert (boxes[:, 0] + boxes[:, 2] <= 60 + 1e-9).all() and (boxes[:, 1] + boxes[:, 3] <= 44 + 1e-9).all()


@pytest.mark.parametrize("angle", [0.0, 0.3, -1.0])
def test_patch_box_is_the_tight_bound_of_the_drawn_ellipse(angle):
    photo = _photo()
    patch = Patch("any", 80.0, 60.0, 30.0, 18.0)
    state = np.array([70.3, 52.6, 0.8, angle])
    frame = np.zeros((110, 140, 3), np.float32)
    alpha = draw_patch(frame, photo, patch, state)
    (box,) = patch_boxes(patch, state[None])
    ys, xs = np.nonzero(alpha >= 0.5)
    # Pixel centres inside the ellipse span the box to within one pixel on every side.
    assert xs.min() + 0.5 >= box[0] and xs.max() + 0.5 <= box[0] + box[2]
    assert ys.min() + 0.5 >= box[1] and ys.max() + 0.5 <= box[1] + box[3]
    assert xs.min() + 0.5 - box[0] < 1.0 and box[0] + box[2] - xs.max() - 0.5 < 1.0
    assert ys.min() + 0.5 - box[1] < 1.0 and box[1] + box[3] - ys.max() - 0.5 < 1.0
    # A pixel near the centre shows the photo at the point the patch's transform maps it from (bilinear).
    d = np.array([70.5 - 70.3, 52.5 - 52.6])
    c, s = np.cos(angle), np.sin(angle)
    src = np.array([80.0, 60.0]) + np.array([[c, s], [-s, c]]) @ d / 0.8 - 0.5  # pixel-index coordinates
    np.testing.assert_allclose(frame[52, 70], bilinear(photo, *src), atol=1.0)


def test_sources_table_names_installed_files():
    assert SOURCES["grace_hopper"][0] == "matplotlib"
    image = load_photo("grace_hopper")  # matplotlib is a dependency: always there
    assert image.shape == (600, 512, 3) and image.dtype == np.uint8 and not image.flags.writeable
    assert 60.0 < image.mean() < 200.0  # a real photograph, not a blank


@needs_photos
def test_set_sizes_boxes_and_determinism():
    data = real_footage_dataset()
    names = data.sequence_names()
    assert len(names) == len(CAMERA_SEQUENCES) + len(OBJECT_SEQUENCES) >= 10
    assert names == [s.name for s in (*CAMERA_SEQUENCES, *OBJECT_SEQUENCES)]
    for name in (names[0], names[len(CAMERA_SEQUENCES)]):
        seq = data.get_sequence(name)
        frame = seq.frame(60)
        assert len(seq) == 120 and seq.visible.all()
        h, w = frame.shape[:2]
        assert 320 <= w <= 640 and 240 <= h <= 480 and frame.dtype == np.uint8
        b = seq.boxes
        assert (b[:, :2] >= 0).all() and (b[:, 0] + b[:, 2] <= w).all() and (b[:, 1] + b[:, 3] <= h).all()
        again = real_footage_dataset().get_sequence(name)
        np.testing.assert_array_equal(again.boxes, b)
        np.testing.assert_array_equal(again.frame(60), frame)
        other = real_footage_dataset(seed=1).get_sequence(name)
        assert np.abs(other.boxes - b).max() > 1.0


@needs_photos
def test_object_sequence_is_occluded_sometimes_but_never_fully():
    data = real_footage_dataset(num_frames=40)
    occluded, ratio = data.occlusion(OBJECT_SEQUENCES[0].name)
    assert occluded.shape == ratio.shape == (40,)
    assert ratio.min() > 0.2 and ratio.max() == 1.0


@needs_photos
def test_registry_and_options():
    assert BENCHMARKS["real_footage"].dataset == "real_footage"
    data = get_dataset("real_footage", num_frames=30)
    assert len(data.get_sequence(data.sequence_names()[0])) == 30
    with pytest.raises(TypeError, match="unknown option"):
        real_footage_dataset(frames=3)
    with pytest.raises(ValueError, match="split"):
        real_footage_dataset(split="train")


def test_missing_package_is_named(monkeypatch):
    import ltr.dataset.real_footage as rf

    monkeypatch.setitem(rf.SOURCES, "nowhere", ("matplotlib", "mpl-data/no-such-photo.png"))
    with pytest.raises(DatasetError, match="pip install matplotlib"):
        rf.load_photo("nowhere")
