import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr.ops import boxes as B

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
positive = st.floats(1e-2, 1e3, allow_nan=False, allow_infinity=False)
xywh_strategy = st.tuples(finite, finite, positive, positive)


def test_known_values_all_formats():
    xywh = np.array([10.0, 20.0, 30.0, 40.0])
    np.testing.assert_allclose(B.xywh_to_xyxy(xywh), [10, 20, 40, 60])
    np.testing.assert_allclose(B.xywh_to_cxcywh(xywh), [25, 40, 30, 40])
    np.testing.assert_allclose(B.xyxy_to_cxcywh(np.array([10.0, 20, 40, 60])), [25, 40, 30, 40])
    np.testing.assert_allclose(B.cxcywh_to_xyxy(np.array([25.0, 40, 30, 40])), [10, 20, 40, 60])


def test_rel_known_values():
    ref = np.array([10.0, 20.0, 30.0, 40.0])  # centre (25, 40)
    box = np.array([13.0, 16.0, 60.0, 20.0])  # centre (43, 26)
    rel = B.xywh_to_rel(box, ref)
    np.testing.assert_allclose(rel, [18 / 30, -14 / 40, np.log(2.0), np.log(0.5)])
    np.testing.assert_allclose(B.xywh_to_rel(ref, ref), [0, 0, 0, 0])


@settings(max_examples=60, deadline=None)
@given(box=xywh_strategy, ref=xywh_strategy)
def test_round_trips(box, ref):
    b = torch.tensor(box, dtype=torch.float64)
    r = torch.tensor(ref, dtype=torch.float64)
    torch.testing.assert_close(B.xyxy_to_xywh(B.xywh_to_xyxy(b)), b)
    torch.testing.assert_close(B.cxcywh_to_xywh(B.xywh_to_cxcywh(b)), b)
    torch.testing.assert_close(B.rel_to_xywh(B.xywh_to_rel(b, r), r), b, rtol=1e-9, atol=1e-7)
    # numpy gives the same numbers as torch
    np.testing.assert_allclose(B.xywh_to_rel(np.array(box), np.array(ref)), B.xywh_to_rel(b, r).numpy())


def test_batched_broadcast_and_dtype_kept():
    ref = torch.tensor([[0.0, 0.0, 10.0, 10.0], [5.0, 5.0, 2.0, 4.0]])  # (2, 4)
    rel = torch.zeros(2, 7, 4)
    out = B.rel_to_xywh(rel, ref[:, None, :])
    assert out.shape == (2, 7, 4) and out.dtype == torch.float32
    torch.testing.assert_close(out, ref[:, None, :].expand(2, 7, 4))


def test_iou_values():
    a = np.array([[0.0, 0.0, 10.0, 10.0]])
    b = np.array([[5.0, 0, 10, 10], [20.0, 20, 1, 1], [0.0, 0, 10, 10], [0.0, 0, 0, 5]])
    np.testing.assert_allclose(B.box_iou(a, b), [50 / 150, 0.0, 1.0, 0.0])
    t = B.box_iou(torch.tensor(a), torch.tensor(b))
    np.testing.assert_allclose(t.numpy(), [50 / 150, 0.0, 1.0, 0.0])
    pair = B.box_iou(torch.tensor(a)[:, None], torch.tensor(b)[None, :])
    assert pair.shape == (1, 4)


def test_scale_and_flip():
    box = torch.tensor([[2.0, 3.0, 4.0, 5.0]])
    scaled = B.scale_xywh(box, 2.0, torch.tensor([1.0, -1.0]))
    torch.testing.assert_close(scaled, torch.tensor([[5.0, 5, 8, 10]]))
    flipped = B.flip_xywh_horizontal(box, 10.0)
    torch.testing.assert_close(flipped, torch.tensor([[4.0, 3, 4, 5]]))
    torch.testing.assert_close(B.flip_xywh_horizontal(flipped, 10.0), box)


def test_bad_shape_is_named():
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 4\)"):
        B.xywh_to_xyxy(np.zeros((3, 5)))
    with pytest.raises(TypeError, match="numpy"):
        B.xywh_to_xyxy([1, 2, 3, 4])
