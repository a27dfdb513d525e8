"""BoxScorer: the box head's score and its closed-form box gradient against score_modulated and autograd."""

from __future__ import annotations

import pytest
import torch

from ltr.ebm.predict import gradient_ascent
from ltr.models.bbreg import EnergyBoxHead
from ltr.models.box_score_grad import BoxScorer, fold_box_layers, int8_box_layers
from ltr.ops.boxes import rel_to_xywh
from ltr.ops.int8_matmul import int8_mm_available
from pytracking.tracker.dimp.refine import RelBoxes, clip_xywh, rel_value_and_grad

# boxes (xywh image pixels) over the maps below (layer2 13 x 11 cells at stride 8: 88 x 104 pixels): inside,
# partly outside on each side, tiny, larger than the map, entirely outside, of zero and negative size
BOXES = [
    [10.0, 20.0, 30.0, 40.0],
    [-20.0, -10.0, 50.0, 30.0],
    [60.0, 70.0, 100.0, 90.0],
    [30.3, 40.1, 0.5, 0.7],
    [41.7, 12.2, 0.01, 0.02],
    [-200.0, -300.0, 1000.0, 900.0],
    [500.0, 20.0, 30.0, 30.0],
    [8.0, 16.0, 16.0, 32.0],  # edges on cells of both levels
    [5.0, 5.0, 0.0, 10.0],
    [5.0, 5.0, -3.0, 10.0],
]


def _head(dtype: torch.dtype, seed: int, linear=(9, 5), mod=(6, 7)) -> EnergyBoxHead:
    """A random head in eval mode with non-trivial BatchNorm statistics and biases."""
    torch.manual_seed(seed)
    head = EnergyBoxHead(in_channels=(4, 4), ref_channels=(4, 4), mod_channels=mod, linear_channels=linear)
    with torch.no_grad():
        for bn in (head.box_fc2.bn, head.box_fc3.bn):
            bn.running_mean.normal_()
            bn.running_var.uniform_(0.3, 3.0)
            bn.weight.normal_()
            bn.bias.normal_()
        for linear_layer in (head.box_fc2.linear, head.box_fc3.linear, head.predictor):
            linear_layer.bias.normal_()
    return head.to(dtype).eval()


def _maps(dtype: torch.dtype, seed: int, channels=(6, 7), size2=(13, 11), size3=(7, 6)):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(1, channels[0], *size2, generator=g, dtype=dtype),
        torch.randn(1, channels[1], *size3, generator=g, dtype=dtype),
    )


def _autograd(head: EnergyBoxHead, maps, boxes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    boxes = boxes.clone().requires_grad_(True)
    scores = head.score_modulated(maps, boxes)
    (grad,) = torch.autograd.grad(scores.sum(), boxes)
    return scores.detach(), grad


def _jittered_boxes(dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    base = torch.tensor(BOXES, dtype=torch.float64)
    jitter = torch.randn(len(BOXES), 4, generator=g, dtype=torch.float64) * 2.0
    jitter[8:] = 0  # keep the zero and negative sizes
    return (base + jitter).to(dtype)[None]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float64_scores_and_gradients_equal_score_modulated_and_autograd(seed):
    head, maps = _head(torch.float64, seed), _maps(torch.float64, seed + 10)
    boxes = _jittered_boxes(torch.float64, seed)
    expected_scores, expected_grad = _autograd(head, maps, boxes)
    scores, grad = BoxScorer(head, maps)(boxes)
    assert scores.shape == (1, len(BOXES)) and grad.shape == (1, len(BOXES), 4)
    torch.testing.assert_close(scores, expected_scores, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-10, atol=1e-12)
    # the boxes test what they should: most gradients are non-zero, empty boxes pool to zero
    assert (grad[0, :8].abs().sum(-1) > 0).sum() >= 6
    torch.testing.assert_close(BoxScorer(head, maps).score(boxes), expected_scores, rtol=1e-12, atol=1e-12)


def test_float32_scores_and_gradients_match_autograd():
    head, maps = _head(torch.float32, 3), _maps(torch.float32, 13)
    boxes = _jittered_boxes(torch.float32, 3)
    expected_scores, expected_grad = _autograd(head, maps, boxes)
    scorer = BoxScorer(head, maps)
    scores, grad = scorer(boxes)
    assert scores.dtype == torch.float32 and grad.dtype == torch.float32
    scale = expected_grad.abs().max()
    torch.testing.assert_close(scores, expected_scores, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-5 * float(scale))
    torch.testing.assert_close(scorer.score(boxes), scores)


def test_gradient_matches_finite_differences():
    head, maps = _head(torch.float64, 4), _maps(torch.float64, 14)
    boxes = torch.tensor([[[12.3, 17.9, 41.2, 33.3], [-7.1, 50.2, 30.4, 20.6]]], dtype=torch.float64)
    scorer = BoxScorer(head, maps)
    _, grad = scorer(boxes)
    eps = 1e-6
    numeric = torch.zeros_like(boxes)
    for k in range(4):
        step = torch.zeros_like(boxes)
        step[..., k] = eps
        numeric[..., k] = (scorer.score(boxes + step) - scorer.score(boxes - step)) / (2 * eps)
    torch.testing.assert_close(grad, numeric, rtol=1e-5, atol=1e-7)


def test_default_widths_head_with_given_strides():
    """The real widths (256 channels, 6400 -> 256 linear), maps of the tracker's window size."""
    torch.manual_seed(5)
    head = EnergyBoxHead(in_channels=(8, 8), ref_channels=(8, 8)).eval()
    with torch.no_grad():
        for bn in (head.box_fc2.bn, head.box_fc3.bn):
            bn.running_mean.normal_(0.0, 0.1)
            bn.running_var.uniform_(0.5, 2.0)
    maps = (torch.randn(1, 256, 23, 23), torch.randn(1, 256, 12, 12))
    boxes = torch.tensor([[[40.0, 50.0, 60.0, 70.0], [-10.0, 100.0, 90.0, 110.0], [150.0, 30.0, 8.0, 200.0]]])
    expected_scores, expected_grad = _autograd(head, maps, boxes)
    scores, grad = BoxScorer(head, maps, (8, 16))(boxes)
    torch.testing.assert_close(scores, expected_scores, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-5 * float(expected_grad.abs().max()))


def test_other_strides_are_used():
    head, maps = _head(torch.float64, 6), _maps(torch.float64, 16)
    head.strides = (4, 8)  # score_modulated reads head.strides; the scorer takes them as given
    boxes = _jittered_boxes(torch.float64, 6)
    expected_scores, expected_grad = _autograd(head, maps, boxes)
    scores, grad = BoxScorer(head, maps, (4, 8))(boxes)
    torch.testing.assert_close(scores, expected_scores, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-10, atol=1e-12)
    default_scores, _ = BoxScorer(head, maps)(boxes)  # head.strides by default
    torch.testing.assert_close(default_scores, expected_scores, rtol=1e-12, atol=1e-12)


def test_training_mode_is_refused():
    head, maps = _head(torch.float64, 0), _maps(torch.float64, 0)
    head.train()
    with pytest.raises(RuntimeError, match="training mode"):
        BoxScorer(head, maps)


def test_bad_inputs_are_clear_errors():
    head, maps = _head(torch.float64, 0), _maps(torch.float64, 0)
    with pytest.raises(ValueError, match="one image"):
        BoxScorer(head, (maps[0].expand(2, -1, -1, -1), maps[1].expand(2, -1, -1, -1)))
    with pytest.raises(TypeError, match="one dtype"):
        BoxScorer(head, (maps[0].float(), maps[1].float()))
    with pytest.raises(ValueError, match="inputs"):
        BoxScorer(head, (maps[1], maps[0]))  # channel counts swapped
    with pytest.raises(ValueError, match=r"\(1, S, 4\)"):
        BoxScorer(head, maps)(torch.zeros(2, 3, 4, dtype=torch.float64))


def test_folded_layers_follow_in_place_parameter_changes():
    head, maps = _head(torch.float64, 7), _maps(torch.float64, 17)
    boxes = _jittered_boxes(torch.float64, 7)
    first = fold_box_layers(head)
    assert fold_box_layers(head) is first  # cached
    with torch.no_grad():
        head.box_fc2.bn.running_mean.add_(0.5)  # what BatchNorm does in a training step
        head.predictor.weight.mul_(-2.0)
    second = fold_box_layers(head)
    assert second is not first
    head.box_fc3.linear.weight.data = head.box_fc3.linear.weight.data * 0.5  # new data, same version counter
    assert fold_box_layers(head) is not second
    expected_scores, expected_grad = _autograd(head, maps, boxes)
    scores, grad = BoxScorer(head, maps)(boxes)
    torch.testing.assert_close(scores, expected_scores, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-10, atol=1e-12)


def test_ascent_with_the_scorer_follows_the_autograd_ascent():
    """The tracker's refinement in rel space: autograd through score_modulated vs the scorer and the vjp."""
    head, maps = _head(torch.float64, 9), _maps(torch.float64, 19)
    start = torch.tensor([[[20.0, 25.0, 30.0, 35.0], [-5.0, 10.0, 40.0, 30.0], [50.0, 60.0, 25.0, 30.0]]]).to(
        torch.float64
    )
    bounds = torch.tensor([0.0, 0.0, 80.0, 96.0], dtype=torch.float64)
    scorer = BoxScorer(head, maps)

    def boxes_of(rel):
        return clip_xywh(rel_to_xywh(rel, start), bounds)

    def score_rel(rel):
        return head.score_modulated(maps, boxes_of(rel))

    value_and_grad = rel_value_and_grad(scorer, start, bounds)  # the tracker's chain (RelBoxes)

    kwargs = dict(step_length=[0.05, 0.05, 0.02, 0.02], num_iters=8, decay=0.5, mode="s1")
    expected = gradient_ascent(score_rel, torch.zeros_like(start), **kwargs)
    got = gradient_ascent(score_rel, torch.zeros_like(start), value_and_grad=value_and_grad, **kwargs)
    torch.testing.assert_close(got.y, expected.y, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(got.scores, expected.scores, rtol=1e-9, atol=1e-12)
    assert torch.equal(got.accepted, expected.accepted)
    assert (expected.accepted > 0).any() and (expected.y != 0).any()  # the ascent moved


def test_gradient_dtype_follows_the_boxes_and_scores_the_features():
    head, maps = _head(torch.float32, 10), _maps(torch.float32, 20)
    boxes = _jittered_boxes(torch.float64, 10)
    scores, grad = BoxScorer(head, maps)(boxes)
    assert scores.dtype == torch.float32 and grad.dtype == torch.float64
    expected_scores, expected_grad = _autograd(head, maps, boxes)  # score_modulated casts the boxes likewise
    torch.testing.assert_close(scores, expected_scores, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-5 * float(expected_grad.abs().max()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cuda_matches_autograd(dtype):
    head, maps = _head(dtype, 11), _maps(dtype, 21)
    head, maps = head.cuda(), tuple(m.cuda() for m in maps)
    boxes = _jittered_boxes(dtype, 11).cuda()
    expected_scores, expected_grad = _autograd(head, maps, boxes)
    scores, grad = BoxScorer(head, maps)(boxes)
    assert scores.device == grad.device == boxes.device
    tight = dtype == torch.float64
    torch.testing.assert_close(
        scores, expected_scores, rtol=1e-12 if tight else 1e-5, atol=1e-12 if tight else 1e-5
    )
    scale = float(expected_grad.abs().max())
    torch.testing.assert_close(
        grad, expected_grad, rtol=1e-10 if tight else 1e-4, atol=1e-12 if tight else 1e-5 * scale
    )


# clusters of boxes (xywh, over the maps of _maps: layer2 13 x 11 cells at stride 8), as one refinement's
# candidates are: inside, over the left and the bottom edge, beyond the right edge, with an empty one
CLUSTERS = [
    [[20.0, 30.0, 14.0, 18.0], [22.5, 27.0, 10.0, 21.0], [18.1, 33.3, 16.0, 12.0]],
    [[-6.0, 70.0, 20.0, 40.0], [-3.0, 74.0, 16.0, 35.5]],
    [[95.0, 10.0, 12.0, 9.0], [99.0, 12.0, 8.0, 8.0]],
    [[40.0, 48.0, 0.0, 16.0], [41.0, 50.0, 12.0, 10.0], [39.0, 47.0, 13.0, -2.0]],
]


@pytest.mark.parametrize("cluster", range(len(CLUSTERS)))
def test_products_over_the_boxes_cells_only_give_the_whole_maps_numbers(cluster):
    head, maps = _head(torch.float64, 14), _maps(torch.float64, 24)
    boxes = torch.tensor([CLUSTERS[cluster]], dtype=torch.float64)
    restricted, whole = BoxScorer(head, maps), BoxScorer(head, maps, restrict_cells=False)
    assert restricted.restrict and not whole.restrict  # on a CPU, restricted by default
    cells = restricted._cells(restricted._xyxy(boxes))
    (_, h2, w2), (_, h3, w3) = restricted.shapes
    # the products run over fewer cells than the maps have...
    assert all(
        xs.stop - xs.start < w and ys.stop - ys.start < h for (xs, ys), w, h in zip(cells, (w2, w3), (h2, h3))
    )
    # ...and no bin weighs on a cell outside them (the bins' weights and tents of the gradient)
    geo = restricted._geometry(restricted._xyxy(boxes), tents=True)
    for (xs, ys), rows, (_, height, width) in zip(cells, restricted.rows, restricted.shapes, strict=True):
        for axis, (kept, size) in enumerate(((xs, width), (ys, height))):
            outside = torch.ones(geo.weights.shape[-1], dtype=torch.bool)
            outside[kept] = False
            outside[size:] = False
            assert (geo.weights[axis, :, rows][..., outside] == 0).all()
            edges = slice(rows.start, rows.stop + 1)
            assert (geo.tents[axis, :, edges][..., outside] == 0).all()
    scores, grad = restricted(boxes)
    whole_scores, whole_grad = whole(boxes)
    expected_scores, expected_grad = _autograd(head, maps, boxes)
    torch.testing.assert_close(scores, whole_scores, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(grad, whole_grad, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(scores, expected_scores, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(restricted.score(boxes), expected_scores, rtol=1e-12, atol=1e-12)


def test_a_non_finite_coordinate_makes_the_products_run_over_that_axis_whole():
    head, maps = _head(torch.float64, 15), _maps(torch.float64, 25)
    boxes = torch.tensor([[[20.0, 30.0, 14.0, 18.0], [float("nan"), 30.0, 14.0, 18.0]]], dtype=torch.float64)
    scorer = BoxScorer(head, maps)
    cells = scorer._cells(scorer._xyxy(boxes))
    # the NaN is in x: all columns; the rows stay restricted to the boxes'
    assert [(xs.stop - xs.start, ys.stop - ys.start) for xs, ys in cells] == [(11, 4), (6, 3)]
    scores, grad = scorer(boxes)
    whole_scores, whole_grad = BoxScorer(head, maps, restrict_cells=False)(boxes)
    torch.testing.assert_close(scores, whole_scores, rtol=1e-13, atol=1e-13, equal_nan=True)
    torch.testing.assert_close(grad, whole_grad, rtol=1e-12, atol=1e-13, equal_nan=True)
    assert torch.isfinite(scores[0, 0]) and torch.isnan(scores[0, 1])


def test_no_boxes():
    head, maps = _head(torch.float64, 12), _maps(torch.float64, 22)
    scores, grad = BoxScorer(head, maps)(torch.zeros(1, 0, 4, dtype=torch.float64))
    assert scores.shape == (1, 0) and grad.shape == (1, 0, 4)
    assert BoxScorer(head, maps).score(torch.zeros(1, 0, 4, dtype=torch.float64)).shape == (1, 0)


def test_no_host_reads():
    """Building the scorer, scoring with and without the gradient and the rel chain read no device value."""
    from pytracking.tracker.host_reads import HostReads

    head, maps = _head(torch.float32, 13), _maps(torch.float32, 23)
    start = _jittered_boxes(torch.float32, 13)[:, :8]
    bounds = torch.tensor([0.0, -float("inf"), 80.0, 96.0])
    fold_box_layers(head)  # the per-head fold (once per network) is not part of a frame
    with HostReads() as reads:
        # the GPU's path: the restriction reads the cells on the host, the CPU kernel a few values
        scorer = BoxScorer(head, maps, restrict_cells=False, kernel=False)
        chain = RelBoxes(start, bounds)
        corners, size = chain.corners(torch.zeros_like(start))
        scores, grad = scorer(chain.clipped(corners, size))
        chain.vjp(grad, corners, size)
        scorer.score(start)
    assert reads.names == []
    assert torch.isfinite(scores).all() and (grad != 0).any()


def _wide_problem(seed: int):
    """The paper's widths (256 channels, Linear 6400 -> 256 and 2304 -> 256), maps of a refinement window, ten
    boxes around one target: the int8 scorer's case."""
    torch.manual_seed(seed)
    head = EnergyBoxHead(in_channels=(8, 8), ref_channels=(8, 8)).eval()
    with torch.no_grad():
        for bn in (head.box_fc2.bn, head.box_fc3.bn):
            bn.running_mean.normal_(0.0, 0.1)
            bn.running_var.uniform_(0.5, 2.0)
    maps = (torch.randn(1, 256, 21, 19).relu(), torch.randn(1, 256, 10, 11).relu())
    g = torch.Generator().manual_seed(seed)
    boxes = torch.tensor([50.0, 60.0, 48.0, 71.0]) + torch.randn(10, 4, generator=g) * 4.0
    return head, maps, boxes[None]


@pytest.mark.skipif(not int8_mm_available(), reason="no int8 matrix product in this torch build")
def test_int8_scores_and_gradients_are_close_to_float32():
    head, maps, boxes = _wide_problem(30)
    scores, grad = BoxScorer(head, maps)(boxes)
    scorer8 = BoxScorer(head, maps, int8=True)
    scores8, grad8 = scorer8(boxes)
    assert scorer8.int8 is int8_box_layers(head)  # quantised once per head
    # quantised (not the float path), by a few percent of the scores' and the gradients' norms (the score is
    # a sum over 512 hidden units, much smaller than its terms: their ~1% noise adds up)
    assert 1e-5 < float((scores8 - scores).norm() / scores.norm()) < 0.05
    assert 1e-5 < float((grad8 - grad).norm() / grad.norm()) < 0.08
    # the same directions: over seeds 30-39 the least aligned box of a problem had a cosine of 0.93-1.0 either
    # way of int8_mm, most boxes above 0.99
    cosine = torch.nn.functional.cosine_similarity(grad8[0], grad[0], dim=1)
    assert cosine.min() > 0.93 and cosine.mean() > 0.98
    torch.testing.assert_close(scorer8.score(boxes), scores8)
    # the per-box layers' weights in int8: per output column forward, per input column backward
    layers, folded = int8_box_layers(head), fold_box_layers(head)
    assert layers.forward[0].values.shape == (6400, 256) and layers.backward[0].values.shape == (256, 6400)
    torch.testing.assert_close(
        layers.forward[0].dequantized(),
        folded.weights_t[0],
        rtol=0,
        atol=0.01 * float(folded.weights_t[0].abs().max()),
    )


@pytest.mark.skipif(not int8_mm_available(), reason="no int8 matrix product in this torch build")
def test_int8_ascent_follows_the_float32_ascent():
    """The tracker's refinement (10 plain steps, rel space): int8 products end within a fraction of the
    distance the boxes moved, and within half a pixel."""
    head, maps, start = _wide_problem(31)
    kwargs = dict(step_length=2.5e-3, num_iters=10, decay=1.0, mode="plain")

    def ascent(scorer: BoxScorer) -> torch.Tensor:
        result = gradient_ascent(
            lambda rel: scorer.score(rel_to_xywh(rel, start)),
            torch.zeros_like(start),
            value_and_grad=rel_value_and_grad(scorer, start, None),  # the tracker's chain, no bounds
            **kwargs,
        )
        return rel_to_xywh(result.y, start)

    moved, moved8 = ascent(BoxScorer(head, maps)), ascent(BoxScorer(head, maps, int8=True))
    distance = (moved - start).norm(dim=-1)
    assert distance.min() > 0.5  # every box moved (pixels)
    deviation = (moved8 - moved).norm(dim=-1)
    assert (deviation < 0.2 * distance).all() and (deviation < 0.5).all()
    assert not torch.equal(moved8, moved)


@pytest.mark.skipif(not int8_mm_available(), reason="no int8 matrix product in this torch build")
def test_int8_needs_float32_on_the_cpu_and_follows_parameter_changes():
    head, maps = _head(torch.float64, 40), _maps(torch.float64, 41)
    with pytest.raises(ValueError, match="int8 needs float32"):
        BoxScorer(head, maps, int8=True)
    head, maps, boxes = _wide_problem(42)
    first = int8_box_layers(head)
    assert int8_box_layers(head) is first
    with torch.no_grad():
        head.box_fc2.linear.weight.mul_(2.0)
    second = int8_box_layers(head)
    assert second is not first
    torch.testing.assert_close(second.forward[0].scale, 2.0 * first.forward[0].scale)
