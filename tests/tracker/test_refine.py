"""Box refinement on an energy with a known maximum, S1 vs plain ascent, box selection."""

import pytest
import torch

from ltr.ops.boxes import box_iou, xywh_to_rel
from pytracking.tracker.dimp.refine import candidate_boxes, refine_box, select_boxes

TARGET = torch.tensor([40.0, 30.0, 24.0, 16.0])  # xywh


def quadratic_energy(boxes: torch.Tensor) -> torch.Tensor:
    """f = -100 |rel(box; TARGET)|^2: maximal (0) exactly at TARGET. (1, S, 4) xywh -> (1, S)."""
    return -100.0 * xywh_to_rel(boxes, TARGET).pow(2).sum(-1)


def run(mode, step, decay, start, num_random=9, seed=0):
    return refine_box(
        quadratic_energy,
        start,
        mode=mode,
        num_iters=10,
        step_length=step,
        decay=decay,
        num_random=num_random,
        jitter_pos=0.1,
        jitter_size=0.5,
        max_aspect_ratio=6.0,
        top_k=3,
        generator=torch.Generator().manual_seed(seed),
    )


@pytest.mark.parametrize(("mode", "decay"), [("plain", 1.0), ("s1", 0.5)])
def test_moves_boxes_to_the_energy_maximum(mode, decay):
    start = torch.tensor([45.0, 26.0, 19.0, 20.0])
    before = float(box_iou(start, TARGET))
    result = run(mode, 2.5e-3, decay, start)
    after = float(box_iou(result.box, TARGET))
    assert before < 0.7
    assert after > 0.97
    assert result.boxes.shape == (10, 4) and result.scores.shape == (10,)
    assert int(result.used.sum()) == 3
    # every candidate improved
    start_scores = quadratic_energy(
        candidate_boxes(start, 9, 0.1, 0.5, torch.Generator().manual_seed(0))[None]
    )
    assert (result.scores > start_scores[0]).all()


def test_s1_never_decreases_f_where_plain_overshoots():
    start = torch.tensor([44.0, 27.0, 20.0, 19.0])
    gen_start = quadratic_energy(candidate_boxes(start, 9, 0.1, 0.5, torch.Generator().manual_seed(0))[None])[
        0
    ]
    too_big = 2.5e-2  # 10x the reference step: the fixed-step update overshoots and diverges
    plain = run("plain", too_big, 1.0, start)
    s1 = run("s1", too_big, 0.5, start)
    assert (s1.scores >= gen_start).all()
    assert float(box_iou(s1.box, TARGET)) > 0.9
    assert not (plain.scores >= gen_start).all()


def test_candidates_jitter_ranges():
    box = torch.tensor([10.0, 20.0, 30.0, 30.0])
    c = candidate_boxes(box, 500, 0.1, 0.5, torch.Generator().manual_seed(1))
    assert torch.equal(c[0], box)
    centre = c[:, :2] + 0.5 * c[:, 2:]
    assert ((centre - torch.tensor([25.0, 35.0])).abs() <= 0.05 * 30 + 1e-4).all()
    assert ((c[1:, 2:] - 30.0).abs() <= 0.25 * 30 + 1e-4).all()
    assert (centre - torch.tensor([25.0, 35.0])).abs().max() > 0.04 * 30  # the range is used


def test_select_filters_aspect_ratio_and_averages_top_k():
    boxes = torch.tensor(
        [
            [0.0, 0.0, 70.0, 10.0],
            [0.0, 0.0, 10.0, 10.0],
            [2.0, 0.0, 12.0, 10.0],
            [4.0, 0.0, 8.0, 10.0],
            [0.0, 0.0, 5.0, 5.0],
        ]
    )
    scores = torch.tensor([9.0, 3.0, 2.0, 1.0, 0.0])
    box, used = select_boxes(boxes, scores, torch.zeros(4), max_aspect_ratio=6.0, top_k=3)
    assert used.tolist() == [False, True, True, True, False]  # ratio 7 dropped despite the best score
    assert box.tolist() == pytest.approx([2.0, 0.0, 10.0, 10.0])


def test_select_falls_back_when_nothing_is_valid():
    boxes = torch.tensor([[0.0, 0.0, 100.0, 1.0], [0.0, 0.0, float("nan"), 3.0]])
    fallback = torch.tensor([1.0, 2.0, 3.0, 4.0])
    box, used = select_boxes(boxes, torch.tensor([1.0, 2.0]), fallback, max_aspect_ratio=6.0, top_k=3)
    assert torch.equal(box, fallback)
    assert not used.any()


@pytest.mark.parametrize("bounds", [None, torch.tensor([38.0, -float("inf"), 66.0, 48.0])])
def test_box_value_and_grad_gives_the_autograd_refinement(bounds):
    """The ascent through a caller's (f, df/dboxes) equals the one through autograd, clipping included."""

    def value_and_grad(boxes):
        b = boxes.detach().requires_grad_(True)
        f = quadratic_energy(b)
        (g,) = torch.autograd.grad(f.sum(), b)
        return f.detach(), g

    kwargs = dict(
        mode="s1",
        num_iters=10,
        step_length=2.5e-3,
        decay=0.5,
        num_random=9,
        jitter_pos=0.1,
        jitter_size=0.5,
        max_aspect_ratio=6.0,
        top_k=3,
        bounds_xyxy=bounds,
    )
    start = torch.tensor([45.0, 26.0, 19.0, 20.0])
    expected = refine_box(quadratic_energy, start, generator=torch.Generator().manual_seed(0), **kwargs)
    got = refine_box(
        quadratic_energy,
        start,
        generator=torch.Generator().manual_seed(0),
        box_value_and_grad=value_and_grad,
        **kwargs,
    )
    torch.testing.assert_close(got.boxes, expected.boxes, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(got.box, expected.box, rtol=1e-6, atol=1e-5)
    assert not torch.allclose(
        expected.boxes, candidate_boxes(start, 9, 0.1, 0.5, torch.Generator().manual_seed(0))
    )
