"""The tracker on a tiny random-weight network: API, frame layouts, hard boxes, refinement switch, fuzz."""

import numpy as np
import pytest
import torch

from pytracking.tracker.dimp import DiMPParams, DiMPTracker, random_network
from pytracking.tracker.dimp.localize import NOT_FOUND, STATES
from tests.tracker.helpers import random_frame, tiny_tracker


def check_box(box, where=""):
    assert isinstance(box, np.ndarray) and box.dtype == np.float64 and box.shape == (4,), where
    assert np.isfinite(box).all(), f"{where}: {box}"
    assert box[2] > 0 and box[3] > 0, f"{where}: {box}"


OPENED = {"target_not_found_threshold": -1e9, "distractor_threshold": 1e9, "hard_negative_threshold": 1e9}


def test_api_shapes_and_types():
    rng = np.random.default_rng(0)
    tracker = tiny_tracker(**OPENED)
    tracker.initialize(random_frame(rng, 90, 120), [40.0, 30.0, 20.0, 16.0])
    assert tracker.memory.num_stored == 15  # 13 augmented crops + 2 dropout copies
    assert tracker.debug_info["init_patches"].shape == (13, 3, 64, 64)
    for _ in range(3):
        box = tracker.track(random_frame(rng, 90, 120))
        check_box(box)
    info = tracker.debug_info
    assert info["scores"].shape == (5, 5)  # 64-px crop: 4 x 4 features, +1 for the even filter
    assert info["state"] in STATES and info["state"] != NOT_FOUND
    assert info["refine_boxes"].shape == (10, 4)
    assert tracker.memory.num_stored == 18


def test_track_before_initialize_raises():
    with pytest.raises(RuntimeError, match="before initialize"):
        tiny_tracker().track(np.zeros((10, 10, 3), np.uint8))


@pytest.mark.parametrize(
    "box", [[1, 2, float("nan"), 3], [1, 2, 0, 3], [1, 2, 5, -1], [1, 2, 3], [-50, 2, 20, 5], [2, 11, 3, 3]]
)
def test_bad_init_box_is_a_clear_error(box):
    with pytest.raises(ValueError, match="init box"):
        tiny_tracker().initialize(np.zeros((10, 10, 3), np.uint8), box)


@pytest.mark.parametrize("channels", [None, 1, 2, 4])
def test_gray_and_alpha_frames(channels):
    rng = np.random.default_rng(1)
    tracker = tiny_tracker()
    tracker.initialize(random_frame(rng, 47, 61, channels), [10.0, 10.0, 12.0, 9.0])
    check_box(tracker.track(random_frame(rng, 47, 61, channels)))


def test_torch_frames_give_the_numpy_frames_boxes():
    rng = np.random.default_rng(2)
    frames = [random_frame(rng, 40, 50) for _ in range(3)]
    runs = []
    for as_torch in (False, True):
        tracker = tiny_tracker(**OPENED)
        conv = (lambda f: torch.from_numpy(f).permute(2, 0, 1)) if as_torch else (lambda f: f)
        tracker.initialize(conv(frames[0]), [5, 5, 10, 10])
        runs.append(np.stack([tracker.track(conv(f)) for f in frames[1:]]))
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize(
    "box",
    [
        [30.0, 20.0, 3.0, 2.0],  # tiny target
        [0.0, 0.0, 80.0, 60.0],  # fills the frame
        [-15.0, 10.0, 20.0, 20.0],  # starts mostly outside the frame
        [70.0, 50.0, 40.0, 40.0],  # crosses the corner
        [10.0, 10.0, 1e-3, 1e-3],  # nearly degenerate
    ],
)
def test_hard_boxes_stay_finite(box):
    rng = np.random.default_rng(3)
    tracker = tiny_tracker(**OPENED)
    tracker.initialize(random_frame(rng, 60, 80), box)
    for i in range(4):
        check_box(tracker.track(random_frame(rng, 60, 80)), f"frame {i}")


def test_refinement_off_moves_on_the_score_grid():
    """Without refinement the new position is the crop centre plus a whole number of score cells (16 px of
    the crop, times the crop's scale), as in the reference; the size follows the crop's scale."""
    rng = np.random.default_rng(4)
    tracker = tiny_tracker(refine=False, **OPENED)
    init = np.array([140.0, 100.0, 16.0, 12.0])
    tracker.initialize(random_frame(rng, 240, 320), init)
    for _ in range(3):
        box = tracker.track(random_frame(rng, 240, 320))
        coords = tracker.debug_info["sample_coords"].numpy()
        sample_pos = 0.5 * (coords[:2] + coords[2:] - 1)  # (y, x)
        scale = np.sqrt(np.prod((coords[2:] - coords[:2]) / 64.0))
        pos = box[[1, 0]] + (box[[3, 2]] - 1) / 2
        cells = (pos - sample_pos) / (16 * scale)
        np.testing.assert_allclose(cells, np.round(cells), atol=1e-4)
        assert tracker.debug_info["refine_boxes"] is None


@pytest.mark.parametrize("mode", ["plain", "s1"])
def test_refinement_modes_change_the_box(mode):
    rng = np.random.default_rng(5)
    frames = [random_frame(rng, 80, 100) for _ in range(3)]
    init = [30.0, 20.0, 16.0, 12.0]
    outs = []
    for params in ({"refine": False}, {"refine": True, "refine_mode": mode, "refine_decay": 0.5}):
        tracker = tiny_tracker(**params, **OPENED)
        tracker.initialize(frames[0], init)
        outs.append(np.stack([tracker.track(f) for f in frames[1:]]))
    assert not np.allclose(outs[0], outs[1])


def test_scale_learning_rate_blends_the_refined_size_geometrically():
    """Frame 1 starts from the same state at every rate, so its refined box is the same: rate 1 takes its size
    (the reference), rate r takes init^(1 - r) x refined^r per side; the position is the refined one."""
    rng = np.random.default_rng(6)
    frames = [random_frame(rng, 80, 100) for _ in range(2)]
    init = np.array([30.0, 20.0, 16.0, 12.0])
    boxes = {}
    for rate in (1.0, 0.25):
        tracker = tiny_tracker(scale_learning_rate=rate, **OPENED)
        tracker.initialize(frames[0], init)
        boxes[rate] = tracker.track(frames[1])
    refined, damped = boxes[1.0], boxes[0.25]
    assert not np.allclose(refined[2:], init[2:], rtol=1e-3)  # the refinement changed the size
    np.testing.assert_allclose(damped[2:], init[2:] ** 0.75 * refined[2:] ** 0.25, rtol=1e-5)
    np.testing.assert_allclose(damped[:2] + damped[2:] / 2, refined[:2] + refined[2:] / 2, rtol=1e-5)


def test_aspect_learning_rate_blends_scale_and_aspect_apart():
    """With its own aspect rate a, frame 1's box has the scale init^(1 - r) x refined^r of sqrt(w h) and the
    aspect init^(1 - a) x refined^a of w / h; a = r is the per-side blend."""
    rng = np.random.default_rng(6)
    frames = [random_frame(rng, 80, 100) for _ in range(2)]
    init = np.array([30.0, 20.0, 16.0, 12.0])
    boxes = {}
    for rate, aspect_rate in ((1.0, None), (0.5, 0.0), (0.5, 0.5), (0.5, None), (1.0, 0.25)):
        tracker = tiny_tracker(scale_learning_rate=rate, aspect_learning_rate=aspect_rate, **OPENED)
        tracker.initialize(frames[0], init)
        boxes[rate, aspect_rate] = tracker.track(frames[1])
    refined = boxes[1.0, None]

    def scale_aspect(box):
        return np.sqrt(box[2] * box[3]), box[2] / box[3]

    (s0, a0), (s1, a1) = scale_aspect(init), scale_aspect(refined)
    assert abs(np.log(a1 / a0)) > 1e-3  # the refinement changed the aspect
    for (rate, aspect_rate), box in boxes.items():
        a = rate if aspect_rate is None else aspect_rate
        np.testing.assert_allclose(
            scale_aspect(box), (s0 ** (1 - rate) * s1**rate, a0 ** (1 - a) * a1**a), rtol=1e-5
        )
        np.testing.assert_allclose(box[:2] + box[2:] / 2, refined[:2] + refined[2:] / 2, rtol=1e-5)
    np.testing.assert_allclose(boxes[0.5, 0.5], boxes[0.5, None], rtol=1e-6)


def test_bad_refine_mode():
    with pytest.raises(ValueError, match="refine_mode"):
        tiny_tracker(refine_mode="adam")


def fuzz(num_sequences, max_frames, seed):
    rng = np.random.default_rng(seed)
    common = {"refine_iters": 3, "num_random_boxes": 3}
    tracker_plain = tiny_tracker(**common)
    tracker_s1 = tiny_tracker(  # and with the motion prior: a target far outside the map zeroes the scores
        refine_mode="s1", refine_decay=0.5, score_window=1.0, target_not_found_threshold=-1e9, **common
    )
    frames = 0
    for s in range(num_sequences):
        tracker = tracker_plain if s % 2 else tracker_s1
        h, w = int(rng.integers(1, 120)), int(rng.integers(1, 120))
        channels = [None, 1, 3, 4][int(rng.integers(0, 4))]
        kind = rng.integers(0, 4)
        if kind == 0:  # ordinary
            box = [rng.uniform(0, w), rng.uniform(0, h), rng.uniform(1, w), rng.uniform(1, h)]
        elif kind == 1:  # tiny sizes
            box = [rng.uniform(0, w), rng.uniform(0, h), rng.choice([1e-3, 0.5]), rng.uniform(1e-3, 3)]
        elif kind == 2:  # outside the frame
            box = [
                rng.uniform(-3 * w, 4 * w),
                rng.uniform(-3 * h, 4 * h),
                rng.uniform(1, 2 * w),
                rng.uniform(1, h),
            ]
        else:  # larger than the frame
            box = [-rng.uniform(0, w), -rng.uniform(0, h), rng.uniform(w, 5 * w), rng.uniform(h, 5 * h)]
        frame0 = random_frame(rng, h, w, channels)
        if box[0] >= w or box[1] >= h or box[0] + box[2] <= 0 or box[1] + box[3] <= 0:
            with pytest.raises(ValueError, match="entirely outside"):
                tracker.initialize(frame0, box)
            continue
        tracker.initialize(frame0, box)
        for f in range(int(rng.integers(1, max_frames))):
            if rng.random() < 0.1:  # constant frames (zero-variance features)
                frame = np.full((h, w, 3), int(rng.integers(0, 256)), np.uint8)
            else:
                frame = random_frame(rng, h, w, channels)
            if s % 3 == 0:
                frame = torch.from_numpy(frame.reshape(h, w, -1)).permute(2, 0, 1)
            check_box(tracker.track(frame), f"sequence {s} frame {f} box {box} size {(h, w)}")
            frames += 1
    return frames


def test_fuzz_short():
    assert fuzz(num_sequences=24, max_frames=12, seed=11) > 100


@pytest.mark.slow
def test_fuzz_thousands_of_frames():
    # the count depends on the seed's draws only (2894 frames in the sequences whose first box is usable)
    assert fuzz(num_sequences=200, max_frames=40, seed=12) > 2800


def test_reinitialising_repeats_the_run():
    rng = np.random.default_rng(6)
    frames = [random_frame(rng, 70, 90) for _ in range(4)]
    tracker = tiny_tracker(**OPENED)  # every frame refines and learns
    runs = []
    for _ in range(2):
        tracker.initialize(frames[0], [20.0, 15.0, 18.0, 14.0])
        runs.append(np.stack([tracker.track(f) for f in frames[1:]]))
    assert np.array_equal(runs[0], runs[1])
    assert not np.allclose(runs[0][:, 2:], [18.0, 14.0])  # the refinement changed the size


def test_random_network_takes_network_fields_and_tracks_with_a_narrower_box_head():
    """``random_network(net_fields=...)`` changes the box head's width and nothing else, never asks for pretrained weights, and the tracker runs with it."""
    narrow = {"box_mod_channels": (16, 16), "box_linear_channels": (8, 8), "pretrained": True}
    loaded = random_network("nce_plus_tiny", crop_size=64, net_fields=narrow)
    head = loaded.net.box_head
    assert (head.box_fc2.linear.out_features, head.box_fc3.linear.out_features) == (8, 8)
    assert (head.box_fc2.linear.in_features, head.box_fc3.linear.in_features) == (16 * 25, 16 * 9)
    default = random_network("nce_plus_tiny", crop_size=64)
    assert default.net.box_head.box_fc2.linear.out_features == 32
    assert loaded.geometry == default.geometry
    rng = np.random.default_rng(5)
    frames = [random_frame(rng, 240, 320) for _ in range(4)]
    tracker = DiMPTracker(loaded.net, loaded.geometry, DiMPParams(train_setting="nce_plus_tiny", **OPENED))
    tracker.initialize(frames[0], [140.0, 100.0, 24.0, 20.0])
    boxes = np.stack([tracker.track(f) for f in frames[1:]])
    assert np.isfinite(boxes).all() and (boxes[:, 2:] > 0).all()
    assert not np.allclose(boxes[:, 2:], [24.0, 20.0])  # the narrow head's refinement moved the size


def test_frames_of_another_size_and_bad_dtypes_are_refused():
    rng = np.random.default_rng(7)
    tracker = tiny_tracker()
    with pytest.raises(ValueError, match="uint16"):
        tracker.initialize(np.zeros((40, 50, 3), np.uint16), [5, 5, 10, 10])
    tracker.initialize(random_frame(rng, 40, 50), [5, 5, 10, 10])
    with pytest.raises(ValueError, match=r"frame 1 is 60x40 pixels but the sequence started at 50x40"):
        tracker.track(random_frame(rng, 40, 60))
