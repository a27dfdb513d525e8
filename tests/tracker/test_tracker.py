"""The tracker on a tiny random-weight network: API, frame layouts, hard boxes, refinement switch, fuzz."""

import contextlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from pytracking.tracker.dimp import DiMPParams, DiMPTracker, random_network
from pytracking.tracker.dimp.localize import NOT_FOUND
from tests.tracker.helpers import random_frame, tiny_tracker


def check_box(box, where=""):
    assert isinstance(box, np.ndarray) and box.dtype == np.float64 and box.shape == (4,), where
    assert np.isfinite(box).all(), f"{where}: {box}"
    assert box[2] > 0 and box[3] > 0, f"{where}: {box}"


def test_api_shapes_and_types():
    rng = np.random.default_rng(0)
    tracker = tiny_tracker()
    tracker.initialize(random_frame(rng, 90, 120), [40.0, 30.0, 20.0, 16.0])
    assert tracker.memory.count == 15  # 13 augmented crops + 2 dropout copies
    for _ in range(3):
        box = tracker.track(random_frame(rng, 90, 120))
        check_box(box)
    info = tracker.debug_info
    assert info["scores"].shape == (5, 5)  # 64-px crop: 4 x 4 features, +1 for the even filter
    assert info["state"] in (0, 1, 2, 3)
    if info["state"] != NOT_FOUND:
        assert info["refine_boxes"].shape == (10, 4)


def test_track_before_initialize_raises():
    with pytest.raises(RuntimeError, match="before initialize"):
        tiny_tracker().track(np.zeros((10, 10, 3), np.uint8))


def test_bad_init_box_is_a_clear_error():
    with pytest.raises(ValueError, match="init box"):
        tiny_tracker().initialize(np.zeros((10, 10, 3), np.uint8), [1, 2, float("nan"), 3])


@pytest.mark.parametrize("channels", [None, 1, 2, 4])
def test_gray_and_alpha_frames(channels):
    rng = np.random.default_rng(1)
    tracker = tiny_tracker()
    tracker.initialize(random_frame(rng, 47, 61, channels), [10.0, 10.0, 12.0, 9.0])
    check_box(tracker.track(random_frame(rng, 47, 61, channels)))


def test_torch_frames_and_float_frames():
    rng = np.random.default_rng(2)
    tracker = tiny_tracker()
    tracker.initialize(torch.from_numpy(random_frame(rng, 40, 50)).permute(2, 0, 1), [5, 5, 10, 10])
    check_box(tracker.track(random_frame(rng, 40, 50).astype(np.float32)))


@pytest.mark.parametrize(
    "box",
    [
        [30.0, 20.0, 3.0, 2.0],  # tiny target
        [0.0, 0.0, 80.0, 60.0],  # fills the frame
        [-50.0, 10.0, 20.0, 20.0],  # starts outside the frame
        [70.0, 50.0, 40.0, 40.0],  # crosses the corner
        [10.0, 10.0, 0.0, 0.0],  # degenerate
    ],
)
def test_hard_boxes_stay_finite(box):
    rng = np.random.default_rng(3)
    tracker = tiny_tracker()
    tracker.initialize(random_frame(rng, 60, 80), box)
    for i in range(4):
        b = tracker.track(random_frame(rng, 60, 80))
        check_box(b, f"frame {i}")
        assert b[2] <= 80 and b[3] <= 60  # never larger than the frame


def test_refinement_off_keeps_the_size_and_uses_the_score_grid():
    rng = np.random.default_rng(4)
    tracker = tiny_tracker(refine=False)
    init = np.array([30.0, 20.0, 16.0, 12.0])
    tracker.initialize(random_frame(rng, 80, 100), init)
    for _ in range(3):
        box = tracker.track(random_frame(rng, 80, 100))
        assert box[2:] == pytest.approx(init[2:], rel=1e-6)
        if tracker.debug_info["state"] != NOT_FOUND:
            tf = tracker.debug_info["crop_transform"]
            centre_crop = (box[:2] + box[2:] / 2 - tf.offset[0].numpy()) * tf.scale[0].numpy()
            assert centre_crop / 16.0 == pytest.approx(np.round(centre_crop / 16.0), abs=1e-3)
        assert tracker.debug_info["refine_boxes"] is None


@pytest.mark.parametrize("mode", ["plain", "s1"])
def test_refinement_modes_change_the_box(mode):
    rng = np.random.default_rng(5)
    frames = [random_frame(rng, 80, 100) for _ in range(3)]
    init = [30.0, 20.0, 16.0, 12.0]
    outs = []
    for params in ({"refine": False}, {"refine": True, "refine_mode": mode, "refine_decay": 0.5}):
        tracker = tiny_tracker(**params)
        tracker.initialize(frames[0], init)
        outs.append(np.stack([tracker.track(f) for f in frames[1:]]))
        states = tracker.debug_info["state"]
    if states != NOT_FOUND:
        assert not np.allclose(outs[0], outs[1])  # the refined run changed the box size


def test_bad_refine_mode():
    with pytest.raises(ValueError, match="refine_mode"):
        tiny_tracker(refine_mode="adam")


def fuzz(num_sequences, max_frames, seed, sync_free=False, int8_heads=False):
    """Sync-free runs also take the CUDA graph's fixed-shape path (whole maps, static buffers), as on a GPU;
    each tracker keeps its recorded refinement across the sequences it is re-initialised on."""
    rng = np.random.default_rng(seed)
    common = {
        "refine_iters": 3,
        "num_random_boxes": 3,
        "sync_free": sync_free,
        "cuda_graph": sync_free,
        "int8_heads": int8_heads,
    }
    tracker_plain = tiny_tracker(**common)
    tracker_s1 = tiny_tracker(  # and with the motion prior: a target far outside the map zeroes the scores
        refine_mode="s1", refine_decay=0.5, score_window=1.0, **common
    )
    frames = 0
    for s in range(num_sequences):
        tracker = tracker_plain if s % 2 else tracker_s1
        h, w = int(rng.integers(1, 120)), int(rng.integers(1, 120))
        channels = [None, 1, 3, 4][int(rng.integers(0, 4))]
        kind = rng.integers(0, 4)
        if kind == 0:  # ordinary
            box = [rng.uniform(0, w), rng.uniform(0, h), rng.uniform(1, w), rng.uniform(1, h)]
        elif kind == 1:  # degenerate sizes
            box = [rng.uniform(0, w), rng.uniform(0, h), rng.choice([0.0, 1e-3, 0.5]), rng.uniform(0, 3)]
        elif kind == 2:  # outside the frame
            box = [
                rng.uniform(-3 * w, 4 * w),
                rng.uniform(-3 * h, 4 * h),
                rng.uniform(1, 2 * w),
                rng.uniform(1, h),
            ]
        else:  # larger than the frame
            box = [-rng.uniform(0, w), -rng.uniform(0, h), rng.uniform(w, 5 * w), rng.uniform(h, 5 * h)]
        tracker.initialize(random_frame(rng, h, w, channels), box)
        for f in range(int(rng.integers(1, max_frames))):
            if rng.random() < 0.1:  # constant frames (zero-variance features)
                frame = np.full((h, w, 3), int(rng.integers(0, 256)), np.uint8)
            else:
                frame = random_frame(rng, h, w, channels)
            if s % 3 == 0:  # torch frames take the grid_sample crop path (the one used on GPUs)
                frame = torch.from_numpy(frame.reshape(h, w, -1)).permute(2, 0, 1)
            check_box(tracker.track(frame), f"sequence {s} frame {f} box {box} size {(h, w)}")
            frames += 1
    return frames


@pytest.mark.parametrize("sync_free", [False, True])
def test_fuzz_short(sync_free):
    """The masked (sync-free) path must be as robust: it also refines and updates on frames the branching
    path skips (target not found, garbage scores)."""
    assert fuzz(num_sequences=24, max_frames=12, seed=11, sync_free=sync_free) > 100


def test_fuzz_short_int8_heads():
    """The heads' int8 convolutions on the same frames: constant and tiny frames give zero-range inputs."""
    assert fuzz(num_sequences=24, max_frames=12, seed=11, int8_heads=True) > 100


@pytest.mark.slow
@pytest.mark.parametrize("sync_free", [False, True])
def test_fuzz_thousands_of_frames(sync_free):
    assert fuzz(num_sequences=200, max_frames=40, seed=12, sync_free=sync_free) > 3000


def test_reinitialising_repeats_the_run():
    rng = np.random.default_rng(6)
    frames = [random_frame(rng, 70, 90) for _ in range(4)]
    tracker = tiny_tracker(target_not_found_threshold=-1e9)  # every frame refines and learns
    runs = []
    for _ in range(2):
        tracker.initialize(frames[0], [20.0, 15.0, 18.0, 14.0])
        runs.append(np.stack([tracker.track(f) for f in frames[1:]]))
    assert np.array_equal(runs[0], runs[1])
    assert not np.allclose(runs[0][:, 2:], [18.0, 14.0])  # the refinement changed the size


def test_refinement_window_gives_the_same_boxes_as_the_whole_maps(monkeypatch):
    """Box-head features on a window around the classifier box (the default) vs on the whole maps: the
    boxes stay inside the window, so every frame's box is the same; the window really is smaller."""
    import pytracking.tracker.dimp.tracker as tracker_module

    rng = np.random.default_rng(11)
    frames = [random_frame(rng, 240, 320) for _ in range(5)]
    init = [140.0, 100.0, 24.0, 20.0]
    opened = {"target_not_found_threshold": -1e9, "distractor_threshold": 1e9, "hard_negative_threshold": 1e9}
    loaded = random_network("nce_plus_tiny", crop_size=192)
    outs, shapes = [], []
    for window in (DiMPParams.refine_window, None):  # the default window, the whole maps
        params = DiMPParams(train_setting="nce_plus_tiny", refine_window=window, **opened)
        tracker = DiMPTracker(loaded.net, loaded.geometry, params)
        calls = []
        original = tracker_module.BoxScorer

        def recording(head, modulated, *args, original=original, calls=calls, **kwargs):
            calls.append(tuple(modulated[0].shape[-2:]))
            return original(head, modulated, *args, **kwargs)

        monkeypatch.setattr(tracker_module, "BoxScorer", recording)
        tracker.initialize(frames[0], init)
        outs.append(np.stack([tracker.track(f) for f in frames[1:]]))
        monkeypatch.undo()
        shapes.append(calls)
    np.testing.assert_allclose(outs[0], outs[1], rtol=0, atol=1e-4)
    assert not np.allclose(outs[0][:, 2:], np.array(init[2:]))  # refinement ran and changed the size
    assert len(shapes[0]) == 4  # one box scorer per frame
    # the window: under half the 24x24 map (its size is a host bound: 1 px + 2.5% and one 16-px alignment)
    assert all(w[0] * w[1] < 24 * 24 / 2 for w in shapes[0]), shapes[0]
    assert all(w == (24, 24) for w in shapes[1])


def test_clip_xywh_projects_edges():
    from pytracking.tracker.dimp.refine import clip_xywh

    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [5.0, -3.0, 30.0, 4.0], [40.0, 40.0, 5.0, 5.0]])
    bounds = torch.tensor([2.0, -1.0, 20.0, float("inf")])
    expected = torch.tensor([[2.0, 0.0, 8.0, 10.0], [5.0, -1.0, 15.0, 2.0], [20.0, 40.0, 0.0, 5.0]])
    torch.testing.assert_close(clip_xywh(boxes, bounds), expected)


def test_random_network_takes_network_fields_and_tracks_with_a_narrower_box_head():
    """``random_network(net_fields=...)`` (``benchmarks/tracker_fps.py --box-channels``) changes the box
    head's width and nothing else, never asks for pretrained weights, and the tracker runs with it."""
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
    opened = {"target_not_found_threshold": -1e9, "distractor_threshold": 1e9, "hard_negative_threshold": 1e9}
    tracker = DiMPTracker(loaded.net, loaded.geometry, DiMPParams(train_setting="nce_plus_tiny", **opened))
    tracker.initialize(frames[0], [140.0, 100.0, 24.0, 20.0])
    boxes = np.stack([tracker.track(f) for f in frames[1:]])
    assert np.isfinite(boxes).all() and (boxes[:, 2:] > 0).all()
    assert not np.allclose(boxes[:, 2:], [24.0, 20.0])  # the narrow head's refinement moved the size


def _tracker_fps_module():
    """``benchmarks/tracker_fps.py`` as a module (the benchmarks are scripts, not a package)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "tracker_fps.py"
    spec = importlib.util.spec_from_file_location("_benchmark_tracker_fps", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tracker_runs_under_inference_mode_with_the_boxes_no_grad_gives():
    """``initialize`` and ``track`` run under ``torch.inference_mode`` (fewer per-operation checks than
    ``no_grad``); the boxes are bit for bit those of the same tracker under ``no_grad``, the baseline that
    ``benchmarks/tracker_fps.py --compare-no-grad`` times (its ``NoGradTracker``)."""
    NoGradTracker = _tracker_fps_module().NoGradTracker
    loaded = random_network("nce_plus_tiny", crop_size=64)
    rng = np.random.default_rng(11)
    frames = [random_frame(rng, 240, 320) for _ in range(6)]
    opened = {"target_not_found_threshold": -1e9, "distractor_threshold": 1e9, "hard_negative_threshold": 1e9}
    params = DiMPParams(train_setting="nce_plus_tiny", train_skipping=2, **opened)
    runs = []
    for cls in (DiMPTracker, NoGradTracker):
        tracker = cls(loaded.net, loaded.geometry, params)
        tracker.initialize(frames[0], [140.0, 100.0, 24.0, 20.0])
        runs.append((np.stack([tracker.track(f) for f in frames[1:]]), tracker))
    (boxes, inference), (boxes_no_grad, plain) = runs
    assert inference.centre.is_inference() and inference.filter.is_inference()
    assert not plain.centre.is_inference()
    assert not np.allclose(boxes[-1], boxes[0])  # the boxes moved: the comparison is not of constants
    np.testing.assert_array_equal(boxes, boxes_no_grad)


def test_the_benchmarks_kernels_off_baseline_takes_the_pytorch_paths_with_the_same_boxes():
    """``benchmarks/tracker_fps.py --compare-no-kernels`` times the tracker with the C++ kernels reported
    unavailable: its box scorers then pool in PyTorch, and the boxes agree with the kernels' to rounding."""
    import pytracking.tracker.dimp.tracker as tracker_module
    from ltr.ops import box_pool_kernel, quantize_kernel

    if not (box_pool_kernel.available() and quantize_kernel.available()):
        pytest.skip("no C++ compiler for the kernels")
    kernels_off = _tracker_fps_module().kernels_off
    loaded = random_network("nce_plus_tiny", crop_size=64)
    rng = np.random.default_rng(12)
    frames = [random_frame(rng, 240, 320) for _ in range(5)]
    opened = {"target_not_found_threshold": -1e9, "distractor_threshold": 1e9, "hard_negative_threshold": 1e9}
    params = DiMPParams(train_setting="nce_plus_tiny", **opened)
    used = []
    original = tracker_module.BoxScorer

    def recording(*args, **kwargs):
        scorer = original(*args, **kwargs)
        used.append(scorer.kernel)
        return scorer

    runs = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tracker_module, "BoxScorer", recording)
        for off in (False, True):
            tracker = DiMPTracker(loaded.net, loaded.geometry, params)
            tracker.initialize(frames[0], [140.0, 100.0, 24.0, 20.0])
            with kernels_off() if off else contextlib.nullcontext():
                assert box_pool_kernel.available() is not off and quantize_kernel.available() is not off
                runs.append(np.stack([tracker.track(f) for f in frames[1:]]))
    assert box_pool_kernel.available() and quantize_kernel.available()  # restored
    assert used == [True] * 4 + [False] * 4
    assert not np.allclose(runs[0][-1], runs[0][0])
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-4, atol=1e-3)
