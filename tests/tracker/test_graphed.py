"""The refinement's ascent as a replayed CUDA graph (``cuda_graph=True``) against the eager ascent."""

from __future__ import annotations

import pytest
import torch

from pytracking.tracker.dimp import random_network
from pytracking.tracker.dimp.box_window import ascend_within
from pytracking.tracker.dimp.graphed import GraphedAscent, graphed_ascent, padded_size
from pytracking.tracker.dimp.refine import AscentOptions, ascend, score_and_grad
from pytracking.tracker.dimp.stages import TorchStages

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_batches_are_padded_to_powers_of_two():
    assert [padded_size(n) for n in (1, 2, 3, 4, 5, 8, 9, 33, 64)] == [1, 2, 4, 4, 8, 8, 16, 64, 64]
    with pytest.raises(ValueError, match="n >= 1"):
        padded_size(0)


def test_on_a_cpu_the_option_leaves_the_eager_ascent():
    loaded = random_network("nce_plus_tiny", crop_size=64)
    assert TorchStages(loaded.net, cuda_graph=True)._graphed is None


def test_one_graphed_ascent_per_box_head_outside_its_state():
    a, b = (random_network("nce_plus_tiny", crop_size=64).net.box_head for _ in range(2))
    keys = set(a.state_dict())
    assert graphed_ascent(a) is graphed_ascent(a) and graphed_ascent(b) is not graphed_ascent(a)
    assert set(a.state_dict()) == keys


def unlimited(n: int) -> torch.Tensor:
    """(n, 4) window limits that hold every box."""
    inf = float("inf")
    return torch.tensor([[-inf, -inf, inf, inf]], device="cuda").repeat(n, 1)


def features_and_boxes(loaded, n: int, seed: int):
    """Modulated test features of ``n`` random crops and (n, 10, 4) xywh candidates inside them."""
    gen = torch.Generator().manual_seed(seed)
    device = next(loaded.net.parameters()).device
    stages = TorchStages(loaded.net)
    crops = torch.randn(n, 3, 64, 64, generator=gen).to(device)
    feats = stages.backbone(crops)
    first = {k: v[:1] for k, v in feats.items()}
    modulation = stages.modulation(first, torch.tensor([[20.0, 18.0, 24.0, 28.0]], device=device))
    modulation = tuple(m.expand(n, -1) for m in modulation)
    head = loaded.net.box_head
    modulated = head.modulate(modulation, head.get_test_features([feats["layer2"], feats["layer3"]]))
    centre = 32 + 8 * (torch.rand(n, 10, 2, generator=gen) - 0.5)
    size = 16 + 12 * torch.rand(n, 10, 2, generator=gen)
    return modulated, torch.cat([centre - size / 2, size], dim=-1).to(device)


@cuda
@torch.no_grad()
def test_the_replayed_ascent_gives_the_eager_boxes_and_scores():
    """Batches of 3 (padded to 4), 4 (the same graph) and 1: the windowed eager ascent's boxes within 1e-4 px
    and scores within 1e-4 of the largest; one graph per padded batch; results are copies."""
    loaded = random_network("nce_plus_tiny", device="cuda", crop_size=64)
    head = loaded.net.box_head
    graphed = GraphedAscent(head)
    options = AscentOptions(space="relative", mode="plain", num_iters=10, step_length=(2e-3, 4e-3))
    kept = None
    for n, seed in ((3, 0), (4, 1), (1, 2), (3, 3)):
        modulated, boxes = features_and_boxes(loaded, n, seed)
        out_boxes, out_scores, held = graphed(modulated, boxes, unlimited(n), options)
        want_boxes, want_scores = ascend(
            score_and_grad(lambda b, m=modulated: head.score_modulated(m, b)), boxes, **options._asdict()
        )
        assert out_boxes.shape == (n, 10, 4) and out_scores.shape == (n, 10) and bool(held.all())
        assert float((out_boxes - boxes).abs().max()) > 1e-2  # the ascent moved the boxes
        torch.testing.assert_close(out_boxes, want_boxes, rtol=0, atol=1e-4)
        scale = float(want_scores.abs().max())
        torch.testing.assert_close(out_scores, want_scores, rtol=0, atol=1e-4 * scale)
        if kept is None:
            kept = (out_boxes, out_boxes.clone())
    assert sorted(key[0] for key in graphed._graphs) == [1, 4]
    torch.testing.assert_close(kept[0], kept[1], rtol=0, atol=0)  # later replays did not overwrite it


@cuda
def test_algorithm_s1_is_not_graphed():
    loaded = random_network("nce_plus_tiny", device="cuda", crop_size=64)
    modulated, boxes = features_and_boxes(loaded, 2, 0)
    with pytest.raises(ValueError, match="only the plain ascent"):
        GraphedAscent(loaded.net.box_head)(modulated, boxes, unlimited(2), AscentOptions(mode="s1"))


@cuda
@torch.no_grad()
def test_the_replayed_ascent_says_which_images_boxes_left_their_limits():
    """The same limits checked by the eager ascent (:func:`ascend_within`) and the replayed one: the image whose
    limits its boxes cross at some step is the one not held, in both."""
    loaded = random_network("nce_plus_tiny", device="cuda", crop_size=64)
    head = loaded.net.box_head
    modulated, boxes = features_and_boxes(loaded, 3, 5)
    options = AscentOptions(space="relative", mode="plain", num_iters=10, step_length=(2e-3, 4e-3))
    limits = unlimited(3)
    limits[1, 0] = float(boxes[1, :, 0].min()) + 1e-3  # image 1's leftmost box starts left of it
    limits[2, 2] = 1e4  # image 2: far limits, held
    _, _, held = GraphedAscent(head)(modulated, boxes, limits, options)
    score = score_and_grad(lambda b: head.score_modulated(modulated, b))
    _, _, eager = ascend_within(score, boxes, limits, options)
    assert held.tolist() == eager.tolist() == [True, False, True]


@cuda
def test_trackers_of_one_network_share_its_graphs():
    loaded = random_network("nce_plus_tiny", device="cuda", crop_size=64)
    first, second = (TorchStages(loaded.net, cuda_graph=True) for _ in range(2))
    assert first._graphed is second._graphed is graphed_ascent(loaded.net.box_head)
    other = random_network("nce_plus_tiny", device="cuda", crop_size=64)
    assert TorchStages(other.net, cuda_graph=True)._graphed is not first._graphed
