"""The box pooling kernel against the PyTorch box scorer and autograd through PrRoIPool (float32, CPU)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr.models.bbreg import EnergyBoxHead
from ltr.models.box_score_grad import BoxScorer
from ltr.ops import box_pool_kernel
from tests.models.test_box_score_grad import BOXES, _autograd, _head, _maps

pytestmark = pytest.mark.skipif(not box_pool_kernel.available(), reason="no C++ compiler for the kernel")


def _scorers(head: EnergyBoxHead, maps, **kwargs) -> tuple[BoxScorer, BoxScorer]:
    return BoxScorer(head, maps, kernel=True, **kwargs), BoxScorer(head, maps, kernel=False, **kwargs)


def test_used_by_default_for_float32_on_a_cpu_only():
    head, maps = _head(torch.float32, 0), _maps(torch.float32, 1)
    assert BoxScorer(head, maps).kernel
    head64, maps64 = _head(torch.float64, 0), _maps(torch.float64, 1)
    assert not BoxScorer(head64, maps64).kernel
    with pytest.raises(ValueError, match="float32 CPU"):
        BoxScorer(head64, maps64, kernel=True)


def test_edge_cases_match_autograd_and_the_pytorch_scorer():
    """Inside, partly outside on every side, tiny, larger than the map, outside, of zero and negative size."""
    head, maps = _head(torch.float32, 2), _maps(torch.float32, 3)
    boxes = torch.tensor([BOXES], dtype=torch.float32)
    kernel, plain = _scorers(head, maps)
    scores, grad = kernel(boxes)
    expected_scores, expected_grad = _autograd(head, maps, boxes)
    plain_scores, plain_grad = plain(boxes)
    scale = float(expected_grad.abs().max())
    torch.testing.assert_close(scores, expected_scores, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-5 * scale)
    torch.testing.assert_close(scores, plain_scores, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, plain_grad, rtol=1e-4, atol=1e-5 * scale)
    torch.testing.assert_close(kernel.score(boxes), expected_scores, rtol=1e-5, atol=1e-5)
    # the zero- and negative-size boxes pool to zeros and get no gradient
    assert (grad[0, 8:] == 0).all()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    channels=st.sampled_from([(1, 3), (7, 5), (16, 17), (33, 40)]),
    size=st.tuples(st.integers(1, 19), st.integers(1, 19)),
    centre=st.tuples(st.floats(-40, 200), st.floats(-40, 200)),
    side=st.floats(0.5, 120),
    count=st.integers(1, 12),
)
def test_random_clusters_match_the_pytorch_scorer(seed, channels, size, centre, side, count):
    """Clusters of jittered boxes as one refinement has, over maps of any size and channel count (the
    vectorised loops' remainders), anywhere around the map."""
    head = _head(torch.float32, seed % 7, mod=channels)
    height, width = size
    maps = _maps(torch.float32, seed, channels, (height, width), ((height + 1) // 2, (width + 1) // 2))
    g = torch.Generator().manual_seed(seed)
    jitter = (torch.rand(count, 4, generator=g) - 0.5) * side * torch.tensor([0.2, 0.2, 0.6, 0.6])
    boxes = (torch.tensor([centre[0] - side / 2, centre[1] - side / 2, side, side]) + jitter)[None]
    kernel, plain = _scorers(head, maps)
    scores, grad = kernel(boxes)
    plain_scores, plain_grad = plain(boxes)
    score_scale = max(1.0, float(plain_scores.abs().max()))
    grad_scale = max(1e-3, float(plain_grad.abs().max()))
    torch.testing.assert_close(scores, plain_scores, rtol=1e-5, atol=1e-5 * score_scale)
    torch.testing.assert_close(grad, plain_grad, rtol=1e-4, atol=1e-5 * grad_scale)


def test_int8_layers_give_the_pytorch_scorers_numbers():
    head, maps = _head(torch.float32, 4, linear=(32, 24), mod=(16, 16)), _maps(torch.float32, 5, (16, 16))
    boxes = torch.tensor([BOXES[:4]], dtype=torch.float32)
    kernel, plain = _scorers(head, maps, int8=True)
    scores, grad = kernel(boxes)
    plain_scores, plain_grad = plain(boxes)
    # the int8 products quantise their inputs per tensor: the pooled bins agree to rounding, so do the rest
    torch.testing.assert_close(scores, plain_scores, rtol=1e-4, atol=1e-4 * float(plain_scores.abs().max()))
    torch.testing.assert_close(grad, plain_grad, rtol=1e-3, atol=1e-4 * float(plain_grad.abs().max()))


def test_a_non_finite_box_takes_the_pytorch_path():
    head, maps = _head(torch.float32, 6), _maps(torch.float32, 7)
    boxes = torch.tensor([[[20.0, 30.0, 14.0, 18.0], [float("inf"), 30.0, 14.0, 18.0]]])
    kernel, plain = _scorers(head, maps)
    xyxy = kernel._xyxy(boxes)
    assert box_pool_kernel.pool_forward(kernel.maps_hwc[0], xyxy, 1 / 8, 5) is None
    grad = torch.zeros(2, 4, dtype=torch.float64)
    assert not box_pool_kernel.pool_backward(kernel.maps_hwc[0], xyxy, 1 / 8, 5, torch.ones(2, 150), grad)
    assert (grad == 0).all()
    scores, grads = kernel(boxes)
    plain_scores, plain_grads = plain(boxes)
    torch.testing.assert_close(scores, plain_scores, equal_nan=True)
    torch.testing.assert_close(grads, plain_grads, equal_nan=True)
    assert torch.isfinite(scores[0, 0]) and not torch.isfinite(scores[0, 1])


def test_inputs_are_checked():
    maps = torch.zeros(4, 5, 3)
    boxes = torch.zeros(2, 4)
    with pytest.raises(ValueError, match="contiguous float32 \\(H, W, C\\)"):
        box_pool_kernel.pool_forward(maps.double(), boxes, 0.125, 5)
    with pytest.raises(ValueError, match="contiguous float32 \\(H, W, C\\)"):
        box_pool_kernel.pool_forward(maps.permute(1, 0, 2), boxes, 0.125, 5)
    with pytest.raises(ValueError, match="boxes must be float32 \\(S, 4\\)"):
        box_pool_kernel.pool_forward(maps, boxes[:, :3], 0.125, 5)
    with pytest.raises(ValueError, match="1 to 16 bins"):
        box_pool_kernel.pool_forward(maps, boxes, 0.125, 17)
    with pytest.raises(ValueError, match="grad_pooled must be float32 \\(2, 75\\)"):
        box_pool_kernel.pool_backward(maps, boxes, 0.125, 5, torch.zeros(2, 74), torch.zeros(2, 4).double())
    with pytest.raises(ValueError, match="grad_boxes must be contiguous float64"):
        box_pool_kernel.pool_backward(maps, boxes, 0.125, 5, torch.zeros(2, 75), torch.zeros(2, 4))


def test_head_output_adds_the_biases_and_scores_like_the_layers():
    g = torch.Generator().manual_seed(8)
    raw = (torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g))
    biases = (torch.randn(6, generator=g), torch.randn(3, generator=g))
    predictor = (torch.randn(6, generator=g), torch.randn(3, generator=g))
    hidden = torch.cat([raw[0] + biases[0], raw[1] + biases[1]], dim=1)
    u = torch.cat(predictor)
    grads = (torch.empty(4, 6), torch.empty(4, 3))
    scores = box_pool_kernel.head_output((raw[0].clone(), raw[1].clone()), biases, predictor, 0.25, grads)
    torch.testing.assert_close(scores, torch.relu(hidden) @ u + 0.25)
    torch.testing.assert_close(torch.cat(grads, dim=1), u * (hidden > 0).float(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="contiguous float32"):
        box_pool_kernel.head_output((raw[0].double(), raw[1]), biases, predictor, 0.0)
    with pytest.raises(ValueError, match="raw \\(S, O\\), bias \\(O,\\)"):
        box_pool_kernel.head_output(raw, (biases[0][:5].contiguous(), biases[1]), predictor, 0.0)
    with pytest.raises(ValueError, match="grads must be shaped as raw"):
        box_pool_kernel.head_output(raw, biases, predictor, 0.0, (torch.empty(4, 6), torch.empty(4, 2)))
