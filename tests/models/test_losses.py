"""Classifier hinge-MSE over the iterates and the EBM box-loss wrapper."""

from __future__ import annotations

import pytest
import torch

from ltr.ebm import Candidates, build_method
from ltr.models.losses import ClassifierLossWeights, box_loss, classifier_loss, hinge_mse
from ltr.ops.boxes import rel_to_xywh, xywh_to_rel


def test_hinge_mse_known_values():
    labels = torch.tensor([0.0, 0.01, 0.5, 1.0])
    scores = torch.tensor([-2.0, 0.3, 0.1, 1.5])
    # negatives (label < 0.05): relu(-2)=0 -> 0, relu(0.3)=0.3 -> 0.09; positives: (0.1-0.5)^2, (1.5-1)^2
    expected = (0.0 + 0.09 + 0.16 + 0.25) / 4
    assert hinge_mse(scores, labels).item() == pytest.approx(expected)
    assert hinge_mse(scores, labels, threshold=0.0).item() == pytest.approx((4 + 0.29**2 + 0.16 + 0.25) / 4)


def test_classifier_loss_weights_the_iterates():
    torch.manual_seed(0)
    labels = torch.rand(2, 3, 5, 5)
    scores = torch.randn(6, 2, 3, 5, 5)
    per = torch.stack([hinge_mse(s, labels) for s in scores])
    out = classifier_loss(scores, labels)
    expected = 100 * per[-1] + 100 * per[0] + 400 / 4 * per[1:-1].sum()
    assert out.total.item() == pytest.approx(expected.item(), rel=1e-6)
    torch.testing.assert_close(out.per_iterate, per)
    two = classifier_loss(
        scores[:2], labels, ClassifierLossWeights(final=1.0, initial=2.0, intermediate=50.0)
    )
    assert two.total.item() == pytest.approx((2 * per[0] + per[1]).item(), rel=1e-6)
    with pytest.raises(ValueError, match="labels"):
        classifier_loss(scores, labels[..., :4, :4])


def _quadratic_head(gt):
    """A box 'head' whose score peaks at the ground truth: f = -|rel(box)|^2."""

    def score_boxes(boxes):
        return -xywh_to_rel(boxes, gt[:, None]).square().sum(-1) * 10

    return score_boxes


def test_sampling_method_path_equals_loss_from_scores():
    g = torch.Generator().manual_seed(0)
    gt = torch.tensor([[30.0, 40.0, 20.0, 30.0], [50.0, 20.0, 40.0, 10.0]])
    method = build_method("nce_plus", num_samples=15, sigmas=((0.05,) * 4, (0.5,) * 4), beta=0.1)
    cand = method.sample(torch.zeros(2, 4), generator=g)
    proposals = rel_to_xywh(cand.y, gt[:, None])
    score_boxes = _quadratic_head(gt)
    out = box_loss(
        method, score_boxes, gt, proposals=proposals, proposals_rel=cand.y, proposal_log_q=cand.log_q
    )
    expected = method.loss_from_scores(score_boxes(proposals), Candidates(cand.y, cand.log_q)).loss
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert out.stats["score_gt"].item() == pytest.approx(0.0, abs=1e-5)
    noise_mean = score_boxes(proposals)[:, 1:].mean()
    assert out.stats["score_gap"].item() == pytest.approx(-noise_mean.item(), rel=1e-5)
    assert out.stats["score_gap"] > 0
    with pytest.raises(ValueError, match="proposals"):
        box_loss(method, score_boxes, gt)


def test_score_function_path_works_in_relative_space():
    gt = torch.tensor([[30.0, 40.0, 20.0, 30.0], [50.0, 20.0, 40.0, 10.0]])
    method = build_method("dsm", num_samples=8, sigma=0.1)
    torch.manual_seed(3)
    out = box_loss(method, _quadratic_head(gt), gt)
    # the same loss straight on the rel-space score f(y) = -10 |y|^2
    torch.manual_seed(3)
    direct = method(lambda y: -10 * y.square().sum(-1), torch.zeros(2, 4))
    assert out.loss.item() == pytest.approx(direct.loss.item(), rel=1e-4)
    assert out.stats["score_gap"] > 0
    mcmc = box_loss(build_method("ml_mcmc", num_samples=4, num_steps=2), _quadratic_head(gt), gt)
    assert torch.isfinite(mcmc.loss) and "score_gap" in mcmc.stats
