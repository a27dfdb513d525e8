"""The heads' per-frame convolutions in int8 (``params.int8_heads``): close to the float heads, used by the
tracker on a CPU, refused with a warning elsewhere."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from ltr.ops.int8_conv import int8_available
from ltr.ops.int8_matmul import int8_mm_available
from pytracking.tracker.dimp import DiMPParams, DiMPTracker, random_network
from pytracking.tracker.dimp.int8 import Int8Heads
from tests.tracker.helpers import random_frame

pytestmark = pytest.mark.skipif(
    not (int8_available() and int8_mm_available()), reason="no oneDNN int8 convolution or int8 matmul here"
)

OPENED = {"target_not_found_threshold": -1e9, "distractor_threshold": 1e9, "hard_negative_threshold": 1e9}


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def _backbone_features(net, crop: int, seed: int = 0):
    torch.manual_seed(seed)
    with torch.no_grad():
        return net.backbone(torch.randn(1, 3, crop, crop))


def test_int8_heads_are_close_to_the_float_heads() -> None:
    loaded = random_network("nce_plus_tiny", crop_size=128)
    net, heads = loaded.net, Int8Heads(loaded.net)
    feats = _backbone_features(net, 128)
    with torch.no_grad():
        clf = net.classifier.feature_head(feats["layer3"])
        clf8 = heads.classifier_features(feats["layer3"])
        assert clf8.shape == clf.shape
        assert 1e-5 < _relative(clf8, clf) < 0.03  # quantised (not the float path), by about a percent
        box = net.box_head.get_test_features([feats["layer2"], feats["layer3"]])
        box8 = net.box_head.get_test_features([feats["layer2"], feats["layer3"]], conv2d=heads.conv2d)
        for a, b in zip(box8, box, strict=True):
            assert a.shape == b.shape
            assert 1e-5 < _relative(a, b) < 0.03
    # one int8 convolution per (convolution, padding), made once
    assert len(heads._convs) == 4
    heads.conv2d(net.box_head.test_conv2[0][0], feats["layer2"], (0, 0))
    assert len(heads._convs) == 5


def _track(loaded, frames, init, **params):
    tracker = DiMPTracker(
        loaded.net, loaded.geometry, DiMPParams(train_setting="nce_plus_tiny", **OPENED, **params)
    )
    tracker.initialize(frames[0], init)
    boxes = np.stack([tracker.track(f) for f in frames[1:]])
    assert np.isfinite(boxes).all() and (boxes[:, 2:] > 0).all()
    return tracker, boxes


def test_the_tracker_uses_int8_heads_on_a_cpu_and_localises_like_the_float_tracker() -> None:
    rng = np.random.default_rng(3)
    loaded = random_network("nce_plus_tiny", crop_size=128)
    frames = [random_frame(rng, 180, 240) for _ in range(6)]
    init = [100.0, 70.0, 30.0, 26.0]
    # the classifier alone (refinement off): the same score peaks, so the same boxes to a fraction of a pixel
    plain, float_boxes = _track(loaded, frames, init, refine=False)
    int8, int8_boxes = _track(loaded, frames, init, refine=False, int8_heads=True)
    assert plain._int8 is None and int8._int8 is not None
    np.testing.assert_allclose(int8_boxes, float_boxes, atol=0.5)
    # the last frame's scores: computed from int8 features (not equal), within a few percent
    scores, scores8 = plain.debug_info["scores"], int8.debug_info["scores"]
    assert 1e-5 < _relative(scores8, scores) < 0.05
    # with refinement (the box head's convolutions in int8 too): other numbers, still boxes
    _, refined = _track(loaded, frames, init)
    _, refined8 = _track(loaded, frames, init, int8_heads=True)
    assert not np.array_equal(refined8, refined)


def test_the_ascent_runs_its_per_box_products_in_int8_with_int8_heads() -> None:
    """The same tracker with the ascent's Linear products in int8 or float32 (the convolutions int8 in both):
    from the same state, the refined boxes differ by quantisation noise only."""
    rng = np.random.default_rng(4)
    loaded = random_network("nce_plus_tiny", crop_size=128)
    frames = [random_frame(rng, 180, 240) for _ in range(2)]
    init = [100.0, 70.0, 30.0, 26.0]
    params = DiMPParams(train_setting="nce_plus_tiny", **OPENED, int8_heads=True)
    runs = []
    for box_layers in (True, False):
        tracker = DiMPTracker(loaded.net, loaded.geometry, params)
        assert tracker._int8 is not None and tracker._int8.box_layers
        tracker._int8.box_layers = box_layers
        tracker.initialize(frames[0], init)
        runs.append(np.stack([tracker.track(f) for f in frames[1:]]))
    # one frame: later ones start from different states, and a random network's scores have no clear peak
    assert not np.array_equal(runs[0], runs[1])
    np.testing.assert_allclose(runs[0], runs[1], atol=0.5)  # pixels, on a 30 x 26 box


def test_int8_heads_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="int8_heads"):
        DiMPParams(int8_heads="yes")  # type: ignore[arg-type]
    assert dataclasses.replace(DiMPParams(), int8_heads=True).int8_heads is True


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_int8_heads_on_cuda_warn_and_run_in_float() -> None:
    loaded = random_network("nce_plus_tiny", "cuda", crop_size=64)
    with pytest.warns(RuntimeWarning, match="int8_heads"):
        tracker = DiMPTracker(
            loaded.net, loaded.geometry, DiMPParams(train_setting="nce_plus_tiny", int8_heads=True)
        )
    assert tracker._int8 is None
