"""Per-frame IoU / centre errors against hand-computed values, and IoU properties (hypothesis)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval.box_metrics import center_error, clip_to_image, iou_xywh, normalized_center_error


def test_iou_hand_values():
    pred = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 10, 10]], float)
    gt = np.array([[5, 5, 10, 10], [0, 0, 10, 10], [20, 0, 10, 10], [5, 0, 10, 10]], float)
    # overlaps: 5x5=25 of union 175; identical; disjoint; 5x10=50 of union 150
    np.testing.assert_allclose(iou_xywh(pred, gt), [25 / 175, 1.0, 0.0, 50 / 150])


def test_identical_float_boxes_give_exactly_one():
    # (13.4 + 21.35) - 13.4 = 21.350000000000005: without the bound the IoU is 1 + 2e-16 and passes t = 1
    boxes = np.array([[13.4, 40.31, 21.35, 27.23], [0.1, 0.2, 0.7, 0.3]])
    assert (iou_xywh(boxes, boxes) == 1.0).all()


def test_zero_union_is_nan_and_eps_keeps_it_finite():
    z = np.zeros((1, 4))
    assert math.isnan(iou_xywh(z, z)[0])
    assert iou_xywh(z, z, union_eps=1e-16)[0] == 0.0


def test_center_errors_hand_values():
    pred = np.array([[0.0, 0.0, 10.0, 10.0]])
    gt = np.array([[5.0, 5.0, 10.0, 20.0]])
    # centres (pixel-inclusive): (4.5, 4.5) and (9.5, 14.5): dx=5, dy=10
    assert center_error(pred, gt)[0] == pytest.approx(math.sqrt(125))
    # the +-1 offset moves both centres alike for equal sizes only; with GT h=20, pred h=10:
    # continuous centres (5, 5) and (10, 15): dx=5, dy=10 (same, the offset cancels in differences)
    assert center_error(pred, gt, offset=0)[0] == pytest.approx(math.sqrt(125))
    # normalised by GT size (10, 20): dx=0.5, dy=0.5
    assert normalized_center_error(pred, gt)[0] == pytest.approx(math.sqrt(0.5))
    # floor of 1 (got10k toolkit) does not change sizes > 1, but does for tiny GT boxes
    tiny = np.array([[0.0, 0.0, 0.5, 0.5]])
    assert normalized_center_error(tiny + [[2, 0, 0, 0]], tiny, size_floor=1.0)[0] == pytest.approx(2.0)


def test_clip_to_image_got10k_rule():
    boxes = np.array([[-5.0, 90.0, 20.0, 20.0]])
    # x -> 0, y stays 90, w -> min(20, 100-0)=20, h -> min(20, 100-90)=10
    np.testing.assert_allclose(clip_to_image(boxes, (100, 100)), [[0, 90, 20, 10]])


def test_shape_errors_name_the_argument():
    with pytest.raises(ValueError, match="pred must be an \\(N, 4\\)"):
        iou_xywh(np.zeros((3, 3)), np.zeros((3, 4)))


coord = st.floats(-1000, 1000, allow_nan=False)
size = st.floats(0.5, 500, allow_nan=False)
box = st.tuples(coord, coord, size, size)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(box, box), min_size=1, max_size=20))
def test_iou_symmetric_and_bounded(pairs):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    ab, ba = iou_xywh(a, b), iou_xywh(b, a)
    np.testing.assert_allclose(ab, ba, rtol=1e-12, atol=1e-12)
    assert np.all(ab >= 0.0) and np.all(ab <= 1.0)
    np.testing.assert_allclose(iou_xywh(a, a), 1.0)


@settings(max_examples=200, deadline=None)
@given(box, box, st.floats(-500, 500), st.floats(-500, 500))
def test_iou_translation_invariant(a, b, dx, dy):
    a, b = np.array([a]), np.array([b])
    shift = np.array([[dx, dy, 0.0, 0.0]])
    np.testing.assert_allclose(iou_xywh(a + shift, b + shift), iou_xywh(a, b), atol=1e-9)
