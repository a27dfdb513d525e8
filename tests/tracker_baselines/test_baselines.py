"""Baseline trackers (static, OpenCV CSRT/KCF/MIL) through the same runner as the learned tracker."""

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr.dataset.base import Sequence
from pytracking.evaluation.runner import track_sequence
from pytracking.tracker.baselines import (
    BASELINES,
    MAX_ASPECT,
    MIN_SIDE,
    MIN_SIZE,
    OpenCVTracker,
    StaticTracker,
    check_box,
    make_baseline,
    pixel_rect,
    to_bgr,
)

H, W, SIDE, N = 120, 160, 24, 30


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two (4,) xywh boxes."""
    iw = max(0.0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def moving_square(seed: int = 3) -> Sequence:
    """N frames (H, W, 3) RGB: a blocky-textured SIDE x SIDE square moving (+3, +1.5) px per frame over a
    blurred-noise background. Boxes (N, 4) xywh on integer pixels."""
    rng = np.random.default_rng(seed)
    background = cv2.GaussianBlur(rng.integers(0, 256, (H, W, 3), dtype=np.uint8), (5, 5), 0)
    blocks = rng.integers(0, 256, (SIDE // 4, SIDE // 4, 3), dtype=np.uint8)
    texture = np.repeat(np.repeat(blocks, 4, axis=0), 4, axis=1)
    boxes = np.array([[round(20 + 3 * t), round(30 + 1.5 * t), SIDE, SIDE] for t in range(N)], float)

    def frame(t: int) -> np.ndarray:
        img = background.copy()
        x, y = int(boxes[t, 0]), int(boxes[t, 1])
        img[y : y + SIDE, x : x + SIDE] = texture
        return img

    return Sequence(name="square", boxes=boxes, frame_loader=frame, dataset="test")


def converted(seq: Sequence, convert) -> Sequence:
    return Sequence(
        name=seq.name, boxes=seq.boxes, frame_loader=lambda t: convert(seq.frame(t)), dataset="test"
    )


def test_static_tracker_reports_the_initial_box_on_every_frame():
    seq = moving_square()
    init = np.array([20.25, 30.5, 23.75, 24.125])
    seq.boxes[0] = init
    boxes, times = track_sequence(StaticTracker(), seq)
    assert boxes.shape == (N, 4) and times.shape == (N,)
    np.testing.assert_array_equal(boxes, np.tile(init, (N, 1)))
    tracker = StaticTracker()
    tracker.initialize(seq.frame(0), init)
    out = tracker.track(seq.frame(1))
    out[:] = 0.0  # the caller owns the returned array
    np.testing.assert_array_equal(tracker.track(seq.frame(2)), init)


def test_csrt_follows_a_moving_square_that_static_loses():
    seq = moving_square()
    csrt, _ = track_sequence(make_baseline("csrt"), seq)
    static, _ = track_sequence(make_baseline("static"), seq)
    assert iou(csrt[-1], seq.boxes[-1]) > 0.5
    assert np.mean([iou(p, g) for p, g in zip(csrt, seq.boxes)]) > 0.6
    assert iou(static[-1], seq.boxes[-1]) < 0.2
    assert np.isfinite(csrt).all() and (csrt[:, 2:] > 0).all()


@pytest.mark.parametrize(
    "convert",
    [
        lambda f: cv2.cvtColor(f, cv2.COLOR_RGB2GRAY),  # (H, W)
        lambda f: cv2.cvtColor(f, cv2.COLOR_RGB2GRAY)[:, :, None],  # (H, W, 1)
        lambda f: np.dstack([f, np.full(f.shape[:2], 255, np.uint8)]),  # (H, W, 4) RGBA
    ],
    ids=["gray", "gray1", "rgba"],
)
def test_csrt_tracks_grayscale_and_rgba_frames(convert):
    seq = moving_square()
    boxes, _ = track_sequence(OpenCVTracker("csrt"), converted(seq, convert))
    assert iou(boxes[-1], seq.boxes[-1]) > 0.5


def test_rgba_frames_give_the_same_boxes_as_rgb():
    seq = moving_square()
    rgba = converted(seq, lambda f: np.dstack([f, np.zeros(f.shape[:2], np.uint8)]))
    rgb_boxes, _ = track_sequence(OpenCVTracker("kcf"), seq)
    rgba_boxes, _ = track_sequence(OpenCVTracker("kcf"), rgba)
    np.testing.assert_array_equal(rgb_boxes, rgba_boxes)


def test_to_bgr_channel_order():
    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[..., 0] = 200  # red
    bgr = to_bgr(rgb)
    assert bgr.shape == (2, 3, 3) and (bgr[..., 2] == 200).all() and (bgr[..., :2] == 0).all()
    assert to_bgr(np.full((2, 3), 7, np.uint8)).tolist() == [[[7, 7, 7]] * 3] * 2
    with pytest.raises(ValueError, match="uint8"):
        to_bgr(rgb.astype(np.float32))
    with pytest.raises(ValueError, match="shape"):
        to_bgr(np.zeros((2, 3, 2), np.uint8))


@pytest.mark.parametrize("kind", ["csrt", "kcf"])
def test_lost_target_keeps_the_previous_box(kind):
    seq = moving_square()
    tracker = OpenCVTracker(kind)
    tracker.initialize(seq.frame(0), seq.boxes[0])
    last = None
    for t in range(1, 6):
        last = tracker.track(seq.frame(t))
        assert tracker.debug_info["state"] == "tracking"
    blank = np.full((H, W, 3), 128, np.uint8)  # the target (and everything else) disappears
    for k in range(1, 4):
        out = tracker.track(blank)
        assert tracker.debug_info["state"] == "lost" and tracker.debug_info["lost_frames"] == k
        np.testing.assert_array_equal(out, last)


def test_lost_before_any_success_reports_the_float_initial_box():
    seq = moving_square()
    init = np.array([20.4, 30.6, 23.7, 24.2])
    tracker = OpenCVTracker("csrt")
    tracker.initialize(seq.frame(0), init)
    out = tracker.track(np.full((H, W, 3), 128, np.uint8))
    assert tracker.debug_info["state"] == "lost"
    np.testing.assert_array_equal(out, init)


@pytest.mark.parametrize(
    "box, rect",
    [
        ([10.4, 20.6, 30.2, 9.8], (10, 21, 31, 9)),  # corners rounded half up: 40.6 -> 41, 30.4 -> 30
        ([-10.0, -5.0, 30.0, 20.0], (0, 0, 20, 15)),  # clipped at the top-left
        ([150.0, 110.0, 30.0, 30.0], (150, 110, 10, 10)),  # clipped at the bottom-right
        ([50.2, 60.1, 0.3, 0.2], (48, 58, 4, 4)),  # tiny: MIN_SIZE about the centre (50.35, 60.2)
        ([300.0, 50.0, 10.0, 10.0], (156, 50, 4, 10)),  # wholly right of the image: 4 px at the border
        ([-40.0, -40.0, 5.0, 5.0], (0, 0, 4, 4)),  # wholly above-left
        ([157.5, 100.0, 20.0, 30.0], (156, 100, 4, 20)),  # a 2-px sliver at the border (CSRT would raise)
        ([10.0, 50.0, 100.0, 2.0], (10, 48, 100, 7)),  # side ratio 50 -> 100 / 7 <= MAX_ASPECT
        ([0.0, 0.0, 160.0, 4.0], (0, 0, 160, 10)),
    ],
)
def test_pixel_rect(box, rect):
    assert pixel_rect(box, W, H) == rect


def test_pixel_rect_shortens_the_long_side_when_the_image_is_too_small():
    assert pixel_rect([0.0, 0.0, 300.0, 4.0], 300, 6) == (102, 0, 96, 6)


@given(
    x=st.floats(-500, 500),
    y=st.floats(-500, 500),
    w=st.floats(1e-3, 400),
    h=st.floats(1e-3, 400),
    width=st.integers(MIN_SIZE, 300),
    height=st.integers(MIN_SIZE, 300),
)
@settings(max_examples=200, deadline=None)
def test_pixel_rect_is_inside_the_image_large_enough_and_not_too_thin(x, y, w, h, width, height):
    rx, ry, rw, rh = pixel_rect([x, y, w, h], width, height)
    assert all(isinstance(v, int) for v in (rx, ry, rw, rh))
    assert 0 <= rx and rx + rw <= width and 0 <= ry and ry + rh <= height
    assert rw >= MIN_SIZE and rh >= MIN_SIZE
    assert max(rw, rh) <= MAX_ASPECT * min(rw, rh)
    inside = x >= 0 and y >= 0 and x + w <= width and y + h <= height
    if inside and min(w, h) >= MIN_SIZE + 1 and max(w, h) + 1 <= MAX_ASPECT * (min(w, h) - 1):
        # inside, and not tiny or thin even after rounding: every corner moves by at most half a pixel
        assert abs(rx - x) <= 0.5 and abs(rx + rw - (x + w)) <= 0.5
        assert abs(ry - y) <= 0.5 and abs(ry + rh - (y + h)) <= 0.5


@pytest.mark.parametrize("kind", ["csrt", "kcf", "mil"])
@pytest.mark.parametrize(
    "box", [[-30.0, -30.0, 40.0, 40.0], [158.7, 100.0, 20.0, 30.0], [70.2, 60.3, 0.5, 0.25]]
)
def test_degenerate_initial_boxes_give_finite_positive_boxes(kind, box):
    seq = moving_square()
    tracker = OpenCVTracker(kind)
    tracker.initialize(seq.frame(0), box)
    x, y, w, h = tracker.debug_info["raw_rect"]
    assert min(w, h) >= MIN_SIDE[kind] and x >= 0 and y >= 0 and x + w <= W and y + h <= H
    for t in range(1, 4):
        out = tracker.track(seq.frame(t))
        assert out.shape == (4,) and out.dtype == np.float64
        assert np.isfinite(out).all() and out[2] > 0 and out[3] > 0


@pytest.mark.parametrize("bad", [[1.0, 2.0, 0.0, 5.0], [1.0, 2.0, 5.0, -1.0], [np.nan, 0, 4, 4], [1, 2, 3]])
def test_invalid_initial_boxes_are_rejected(bad):
    frame = np.zeros((H, W, 3), np.uint8)
    for tracker in (StaticTracker(), OpenCVTracker("csrt")):
        with pytest.raises(ValueError, match="box_xywh"):
            tracker.initialize(frame, bad)


def test_errors_for_misuse():
    frame = np.zeros((H, W, 3), np.uint8)
    with pytest.raises(RuntimeError, match="before initialize"):
        OpenCVTracker("kcf").track(frame)
    with pytest.raises(RuntimeError, match="before initialize"):
        StaticTracker().track(frame)
    tracker = OpenCVTracker("kcf")
    tracker.initialize(moving_square().frame(0), [20, 30, 24, 24])
    with pytest.raises(ValueError, match="sequence started at"):
        tracker.track(np.zeros((H + 1, W, 3), np.uint8))
    with pytest.raises(ValueError, match="smaller than the minimum"):
        pixel_rect([0, 0, 1, 1], 1, 10)


def test_make_baseline_names():
    assert BASELINES.names == ("static", "csrt", "kcf", "mil")
    assert isinstance(make_baseline("static"), StaticTracker)
    for name in ("csrt", "kcf", "mil"):
        tracker = make_baseline(name)
        assert isinstance(tracker, OpenCVTracker) and tracker.kind == name
    with pytest.raises(ValueError, match="unknown baseline"):
        make_baseline("mosse")
    with pytest.raises(ValueError, match="parameter set"):
        make_baseline("csrt", "fast")
    with pytest.raises(ValueError, match="unknown OpenCV tracker"):
        OpenCVTracker("dimp")
    np.testing.assert_array_equal(check_box((1, 2, 3, 4)), [1.0, 2.0, 3.0, 4.0])


def test_an_opencv_build_without_the_contrib_trackers_fails_only_when_one_is_used(monkeypatch):
    """Plain opencv-python has no CSRT: the module still imports and static still runs; making CSRT names the
    package that has it."""
    monkeypatch.delattr(cv2, "TrackerCSRT")
    frame = np.zeros((40, 50, 3), dtype=np.uint8)
    static = make_baseline("static")
    static.initialize(frame, [5.0, 6.0, 10.0, 12.0])
    np.testing.assert_array_equal(static.track(frame), [5.0, 6.0, 10.0, 12.0])
    csrt = make_baseline("csrt")
    with pytest.raises(RuntimeError, match="cv2.TrackerCSRT.*opencv-contrib-python-headless"):
        csrt.initialize(frame, [5.0, 6.0, 10.0, 12.0])
