"""RelBoxes: the refinement's rel -> clipped boxes map, the same numbers as the reference functions
(rel_to_xywh, clip_xywh), and its chain rule, autograd's through them."""

from __future__ import annotations

import pytest
import torch

from ltr.ops.boxes import rel_to_xywh
from pytracking.tracker.dimp.refine import RelBoxes, clip_xywh, rel_value_and_grad

INF = float("inf")


def _problem(dtype: torch.dtype, seed: int = 8):
    g = torch.Generator().manual_seed(seed)
    start = (torch.tensor([[30.0, 40.0, 20.0, 25.0]]) + torch.rand(8, 4, generator=g) * 10).to(dtype)[None]
    rel = (torch.randn(1, 8, 4, generator=g) * 0.3).to(dtype)
    grad_boxes = torch.randn(1, 8, 4, generator=g).to(dtype)
    unclipped = rel_to_xywh(rel, start)
    # bounds cutting boxes on every side, one corner exactly on a low bound and one on a high bound (ties)
    bounds = torch.tensor([35.0, 45.0, 60.0, 70.0], dtype=dtype)
    bounds[0] = unclipped[0, 2, 0]
    bounds[3] = unclipped[0, 4, 1] + unclipped[0, 4, 3]
    return start, rel, grad_boxes, bounds


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_boxes_equal_the_reference_functions_and_vjp_equals_autograd(dtype):
    start, rel, grad_boxes, bounds = _problem(dtype)
    infinite = torch.tensor([-INF, -INF, INF, INF], dtype=dtype)
    half_open = torch.tensor([-INF, 42.0, 58.0, INF], dtype=dtype)
    for b in (None, bounds, infinite, half_open):
        chain = RelBoxes(start, b)
        unclipped = rel_to_xywh(rel, start)
        expected_boxes = unclipped if b is None else clip_xywh(unclipped, b)
        corners, size = chain.corners(rel)
        assert torch.equal(chain.boxes(rel), expected_boxes)
        assert torch.equal(chain.clipped(corners, size), expected_boxes)
        # the chain rule: autograd through the reference functions (ties included: half the gradient)
        r = rel.clone().requires_grad_(True)
        boxes = rel_to_xywh(r, start)
        boxes = boxes if b is None else clip_xywh(boxes, b)
        (expected,) = torch.autograd.grad(boxes, r, grad_boxes)
        tight = dtype == torch.float64
        torch.testing.assert_close(
            chain.vjp(grad_boxes, corners, size), expected, rtol=1e-12 if tight else 1e-6, atol=1e-12
        )
    # the problem tests what it should: boxes clipped on several sides, and the two ties
    unclipped = rel_to_xywh(rel, start)
    assert ((clip_xywh(unclipped, bounds) != unclipped).any(-1)).sum() >= 3
    corners = RelBoxes(start, bounds).corners(rel)[0]
    assert (corners[..., 0] == bounds[0]).sum() == 1 and (corners[..., 3] == bounds[3]).sum() == 1


def test_rel_value_and_grad_chains_the_box_gradient():
    """A linear score of the clipped boxes: its rel gradient from the chain equals autograd's."""
    start, rel, _, bounds = _problem(torch.float64, seed=9)
    weights = torch.tensor([0.3, -1.2, 0.7, 2.0], dtype=torch.float64)

    def box_value_and_grad(boxes):
        return (boxes * weights).sum(-1), weights.expand_as(boxes)

    scores, grad = rel_value_and_grad(box_value_and_grad, start, bounds)(rel)
    r = rel.clone().requires_grad_(True)
    expected_scores = (clip_xywh(rel_to_xywh(r, start), bounds) * weights).sum(-1)
    (expected,) = torch.autograd.grad(expected_scores.sum(), r)
    torch.testing.assert_close(scores, expected_scores.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-12)
    assert (grad == 0).any() and (grad != 0).sum() > 16  # some corners clipped, most not
