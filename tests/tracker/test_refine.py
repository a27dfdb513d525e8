"""Box refinement: pytracking's candidate, ascent and selection rules, and the paper's Algorithm S1 option."""

from __future__ import annotations

import pytest
import torch

from ltr.ebm.predict import value_and_grad
from ltr.ops.boxes import box_iou, rel_to_xywh, xywh_to_rel
from pytracking.tracker.dimp.refine import (
    AscentOptions,
    ascend,
    candidate_boxes,
    relative_gradient,
    score_and_grad,
    select_refined,
)

TARGET = torch.tensor([40.0, 30.0, 24.0, 16.0])  # xywh


def quadratic_energy(boxes: torch.Tensor) -> torch.Tensor:
    """f = -100 |rel(box; TARGET)|^2: maximal (0) exactly at TARGET. (1, S, 4) xywh -> (1, S)."""
    return -100.0 * xywh_to_rel(boxes, TARGET).pow(2).sum(-1)


def test_candidates_follow_the_jitter_rule():
    box = torch.tensor([10.0, 20.0, 30.0, 12.0])
    draws = torch.tensor([[0.0, 1.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5], [1.0, 0.0, 0.2, 0.9]])
    c = candidate_boxes(box, 3, 0.1, 0.5, draws)
    side = (30.0 * 12.0) ** 0.5
    assert c.shape == (4, 4) and torch.equal(c[0], box)
    centre = box[:2] + box[2:] / 2
    # draw 0: centre (-0.05, +0.05) * side, size (-0.25, +0.25) * side, width clamped to >= 12 / 3
    size0 = torch.tensor([max(30.0 - 0.25 * side, 4.0), 12.0 + 0.25 * side])
    want0 = torch.cat([centre + torch.tensor([-0.05, 0.05]) * side - size0 / 2, size0])
    torch.testing.assert_close(c[1], want0)
    torch.testing.assert_close(c[2], box)  # draws of 0.5: no jitter
    assert torch.all(c[:, 2:] >= 4.0)


def test_candidates_of_a_batch_are_each_box_s_own_bit_for_bit():
    gen = torch.Generator().manual_seed(5)
    boxes = torch.rand(6, 4, generator=gen) * torch.tensor([80.0, 80.0, 40.0, 40.0]) + 0.3
    boxes[0, 2:] = torch.tensor([3.1, 37.0])  # a tall box: its narrowest candidate is clamped to 3.1 / 3
    draws = torch.rand(6, 9, 4, generator=gen)
    draws[0, 0, 2] = 0.0
    together = candidate_boxes(boxes, 9, 0.1, 0.5, draws)
    assert together.shape == (6, 10, 4)
    for b, d, c in zip(boxes, draws, together, strict=True):
        assert torch.equal(candidate_boxes(b, 9, 0.1, 0.5, d), c)
    least = torch.tensor(float(torch.tensor(3.1)) / 3)  # the third of float32 3.1, rounded from float64
    assert torch.equal(together[0, :, 2].min(), least)


def test_default_space_step_scales_the_gradient_by_the_box_size_and_ranks_by_the_last_evaluated_score():
    a = torch.tensor([1.0, -2.0, 0.5, 0.25])

    def linear(boxes: torch.Tensor) -> torch.Tensor:
        return (boxes * a).sum(-1)

    start = torch.tensor([[[0.0, 0.0, 10.0, 20.0]]])
    boxes, scores = ascend(
        score_and_grad(linear), start, space="default", mode="plain", num_iters=2, step_length=0.1, decay=0.5
    )
    b1 = start + 0.1 * a * torch.tensor([10.0, 20.0, 10.0, 20.0])
    b2 = b1 + 0.05 * a * b1[..., [2, 3, 2, 3]]
    torch.testing.assert_close(boxes, b2)
    torch.testing.assert_close(scores, linear(b1))  # f before the last step, as the reference ranks


def test_relative_space_steps_in_units_of_the_first_box():
    def linear_rel(boxes: torch.Tensor) -> torch.Tensor:
        rel = xywh_to_rel(boxes, torch.tensor([0.0, 0.0, 10.0, 20.0]))
        return rel @ torch.tensor([1.0, 1.0, 0.0, 0.0])

    start = torch.tensor([[[0.0, 0.0, 10.0, 20.0], [5.0, 5.0, 4.0, 4.0]]])
    boxes, _ = ascend(
        score_and_grad(linear_rel),
        start,
        space="relative",
        mode="plain",
        num_iters=3,
        step_length=(0.1, 0.0),
        decay=1.0,
    )
    # every box moves by 3 x 0.1 x (w0, h0) of the first box, sizes unchanged
    torch.testing.assert_close(boxes - start, torch.tensor([3.0, 6.0, 0.0, 0.0]).expand(1, 2, 4))


def refine(score_fn, boxes, draws, *, jitter_pos=0.1, jitter_size=0.5, **options):
    """The tracker's refinement of (B, 4) boxes with (B, R, 4) draws: candidates, :func:`ascend` of
    ``score_fn``, selection; ``options`` mixes the ascent's and the selection's keywords."""
    rules = AscentOptions(**{k: options.pop(k) for k in AscentOptions._fields if k in options})
    start = candidate_boxes(boxes, draws.shape[1], jitter_pos, jitter_size, draws)
    return select_refined(*ascend(score_and_grad(score_fn), start, **rules._asdict()), **options)


def refine_box(score_fn, box, draws, **options):
    """One box through the batched refinement."""
    return refine(score_fn, box[None], draws[None], **options)[0]


def test_the_written_out_relative_gradient_is_autograd_s():
    """relative_gradient against autograd through rel_to_xywh (the reference's way), on random boxes and
    gradients: equal up to float32 rounding (autograd multiplies by w0 and exp(rel) in turn, we by w)."""
    gen = torch.Generator().manual_seed(0)
    reference = torch.rand(3, 1, 4, generator=gen) * 50 + 5
    rel = (torch.rand(3, 10, 4, generator=gen) - 0.5) * 0.4
    weights = torch.randn(3, 10, 4, generator=gen)

    def score(boxes):  # any smooth f of xywh boxes
        return (weights * boxes).sum(-1) + 0.01 * (boxes * boxes).sum(-1)

    _, want = value_and_grad(lambda r: score(rel_to_xywh(r, reference)), rel)
    boxes = rel_to_xywh(rel, reference)
    _, grad = value_and_grad(score, boxes)
    got = relative_gradient(grad, boxes, reference)
    torch.testing.assert_close(got, want, rtol=4e-7, atol=0)
    assert torch.equal(got[..., :2], want[..., :2])  # the position's products are the same ones


@pytest.mark.parametrize("mode", ["plain", "s1"])
@pytest.mark.parametrize("space", ["default", "relative"])
def test_a_batch_of_boxes_is_refined_as_each_box_alone(mode, space):
    gen = torch.Generator().manual_seed(3)
    starts = torch.tensor([[45.0, 26.0, 19.0, 20.0], [30.0, 40.0, 25.0, 12.0], [50.0, 20.0, 8.0, 30.0]])
    draws = torch.rand(3, 6, 4, generator=gen)
    options = dict(space=space, mode=mode, step_length=(2e-3, 4e-3), decay=0.7, num_iters=4, top_k=2)
    batched = refine(quadratic_energy, starts, draws, **options)
    for start, d, together in zip(starts, draws, batched, strict=True):
        alone = refine_box(quadratic_energy, start, d, **options)
        torch.testing.assert_close(together.boxes, alone.boxes, rtol=0, atol=1e-5)
        assert together.used.tolist() == alone.used.tolist()
        torch.testing.assert_close(together.box, alone.box, rtol=0, atol=1e-5)
    assert not torch.allclose(batched[0].box, batched[1].box)


@pytest.mark.parametrize(("mode", "step", "decay"), [("plain", 2.5e-3, 1.0), ("s1", 2.5e-3, 0.5)])
def test_moves_boxes_to_the_energy_maximum(mode, step, decay):
    start = torch.tensor([45.0, 26.0, 19.0, 20.0])
    draws = torch.rand(9, 4, generator=torch.Generator().manual_seed(0))
    result = refine_box(
        quadratic_energy, start, draws, space="relative", mode=mode, step_length=step, decay=decay
    )
    assert result.box is not None
    assert float(box_iou(start, TARGET)) < 0.7 and float(box_iou(result.box, TARGET)) > 0.9
    assert int(result.used.sum()) == 3


def test_s1_never_accepts_a_worse_box():
    start = torch.tensor([[[45.0, 26.0, 19.0, 20.0]]])
    f0 = quadratic_energy(start)
    boxes, scores = ascend(
        score_and_grad(quadratic_energy),
        start,
        space="relative",
        mode="s1",
        num_iters=5,
        step_length=10.0,
        decay=0.5,
    )
    assert float(scores[0, 0]) >= float(f0[0, 0])
    torch.testing.assert_close(scores, quadratic_energy(boxes))


def test_selection_drops_extreme_aspect_ratios_and_returns_none_without_boxes():
    def flat(boxes: torch.Tensor) -> torch.Tensor:
        return boxes[..., 0]  # prefers boxes further right; no size gradient

    wide = torch.tensor([0.0, 0.0, 70.0, 10.0])  # aspect 7 > 6
    result = refine_box(flat, wide, torch.zeros(0, 4), space="default", num_iters=1, step_length=0.0)
    assert result.box is None and not result.used.any()
    ok = torch.tensor([0.0, 0.0, 20.0, 10.0])
    draws = torch.tensor([[1.0, 0.5, 0.5, 0.5], [0.0, 0.5, 0.5, 0.5]])
    result = refine_box(flat, ok, draws, space="default", num_iters=1, step_length=0.0, top_k=2)
    # the two rightmost of the three candidates are averaged
    assert result.used.tolist() == [True, True, False]
    torch.testing.assert_close(result.box, result.boxes[:2].mean(0))


def test_sizes_are_clamped_to_one_pixel_before_selection():
    def shrink(boxes: torch.Tensor) -> torch.Tensor:
        return -boxes[..., 2:].sum(-1)

    box = torch.tensor([0.0, 0.0, 2.0, 2.0])
    result = refine_box(shrink, box, torch.zeros(0, 4), space="default", num_iters=1, step_length=0.9)
    assert result.box is not None and torch.all(result.box[2:] == 1.0)


def test_a_batch_of_images_is_selected_as_each_image_alone():
    """select_refined on many images (some candidates of extreme aspect, NaN scores or boxes, images with
    fewer usable candidates than top_k or none): each image's result is the one it gets alone."""
    gen = torch.Generator().manual_seed(0)
    boxes = torch.rand(40, 6, 4, generator=gen) * 40 + 0.5
    boxes[..., 2:] *= torch.where(torch.rand(40, 6, 1, generator=gen) < 0.4, 10.0, 1.0)
    scores = torch.randn(40, 6, generator=gen)
    scores[torch.rand(40, 6, generator=gen) < 0.2] = float("nan")
    scores[7] = float("nan")  # an image without usable candidates
    boxes[torch.rand(40, 6, generator=gen) < 0.05] = float("nan")
    together = select_refined(boxes, scores, top_k=3)
    counts = set()
    for b, result in enumerate(together):
        (alone,) = select_refined(boxes[b : b + 1], scores[b : b + 1], top_k=3)
        counts.add(int(alone.used.sum()))
        assert (result.box is None) == (alone.box is None)
        if alone.box is not None:
            assert torch.equal(result.box, alone.box)
        assert torch.equal(result.used, alone.used)
    assert counts == {0, 1, 2, 3}  # every case met
