"""Energy box head: shapes, caching API, gradients w.r.t. box coordinates, per-box independence in eval."""

from __future__ import annotations

import torch

from ltr.models.bbreg import EnergyBoxHead


def _head_and_feats(seed=0):
    torch.manual_seed(seed)
    head = EnergyBoxHead(
        in_channels=(12, 20), ref_channels=(8, 16), mod_channels=(16, 24), linear_channels=(16, 8)
    )
    ref = (torch.randn(3, 12, 16, 16), torch.randn(3, 20, 8, 8))
    test = (torch.randn(3, 12, 16, 16), torch.randn(3, 20, 8, 8))
    ref_boxes = torch.tensor([[30.0, 40.0, 50.0, 40.0], [10.0, 10.0, 60.0, 80.0], [64.0, 64.0, 20.0, 30.0]])
    boxes = ref_boxes[:, None] + torch.randn(3, 7, 4) * torch.tensor([4.0, 4.0, 2.0, 2.0])
    return head, ref, test, ref_boxes, boxes


def test_shapes_and_cached_parts_equal_forward():
    head, ref, test, ref_boxes, boxes = _head_and_feats()
    head.eval()
    mod = head.get_modulation(ref, ref_boxes)
    assert [tuple(m.shape) for m in mod] == [(3, 16), (3, 24)]
    feats = head.get_test_features(test)
    assert [tuple(f.shape) for f in feats] == [(3, 16, 16, 16), (3, 24, 8, 8)]
    scores = head.score(mod, feats, boxes)
    assert scores.shape == (3, 7)
    torch.testing.assert_close(head(ref, ref_boxes, test, boxes), scores)
    assert scores.std() > 0  # boxes at different places score differently


def test_eval_scores_are_independent_per_box():
    head, ref, test, ref_boxes, boxes = _head_and_feats()
    head.eval()
    mod, feats = head.get_modulation(ref, ref_boxes), head.get_test_features(test)
    full = head.score(mod, feats, boxes)
    part = head.score(mod, feats, boxes[:, 2:5])
    torch.testing.assert_close(part, full[:, 2:5], rtol=1e-5, atol=1e-6)


def test_gradient_wrt_boxes_is_finite_and_nonzero():
    head, ref, test, ref_boxes, boxes = _head_and_feats()
    head.eval()
    mod, feats = head.get_modulation(ref, ref_boxes), head.get_test_features(test)
    boxes = boxes.clone().requires_grad_(True)
    head.score(mod, feats, boxes).sum().backward()
    assert torch.isfinite(boxes.grad).all()
    assert (boxes.grad.abs().sum(dim=-1) > 0).all()


def test_train_mode_gradients_reach_every_parameter():
    head, ref, test, ref_boxes, boxes = _head_and_feats()
    head.train()
    head(ref, ref_boxes, test, boxes).square().mean().backward()
    for name, p in head.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_single_image_scoring_matches_the_batched_path():
    head, ref, test, ref_boxes, boxes = _head_and_feats()
    head.eval()
    mod, feats = head.get_modulation(ref, ref_boxes), head.get_test_features(test)
    batched = head.score(mod, feats, boxes)  # N = 3: prroi_pool with rois
    for i in range(3):
        single = head.score(
            tuple(m[i : i + 1] for m in mod), tuple(f[i : i + 1] for f in feats), boxes[i : i + 1]
        )
        torch.testing.assert_close(single, batched[i : i + 1], rtol=1e-5, atol=1e-6)
