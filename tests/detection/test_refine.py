"""Algorithm S1 with per-dimension step lengths on boxes in the rel space."""

import torch

from ltr.ebm import gradient_ascent
from ltr.ops.boxes import rel_to_xywh, xywh_to_rel


def _score_towards(target_xywh: torch.Tensor, reference: torch.Tensor):
    """f(rel) = -|rel - rel(target)|^2 / 2: a concave score peaked at the target box."""
    goal = xywh_to_rel(target_xywh, reference)  # (N, 4)

    def score(rel):  # (N, S, 4) -> (N, S)
        return -0.5 * ((rel - goal[:, None]) ** 2).sum(-1)

    return score


def test_separate_position_and_size_steps_on_boxes():
    reference = torch.tensor([[10.0, 20.0, 40.0, 30.0], [100.0, 50.0, 20.0, 60.0]])
    target = torch.tensor([[14.0, 18.0, 44.0, 27.0], [96.0, 55.0, 22.0, 66.0]])
    score = _score_towards(target, reference)
    y0 = torch.zeros(2, 1, 4)
    # position steps only: the size must stay exactly that of the reference, the centre must converge
    res = gradient_ascent(score, y0, step_length=[0.5, 0.5, 0.0, 0.0], num_iters=10, decay=0.5)
    boxes = rel_to_xywh(res.y[:, 0], reference)
    assert torch.allclose(boxes[:, 2:], reference[:, 2:])
    centre = boxes[:, :2] + boxes[:, 2:] / 2
    goal_centre = target[:, :2] + target[:, 2:] / 2
    start_err = ((reference[:, :2] + reference[:, 2:] / 2) - goal_centre).abs()
    assert ((centre - goal_centre).abs() < 1e-2 * start_err + 1e-3).all()
    # both: the whole box converges to the target
    res = gradient_ascent(score, y0, step_length=[0.5, 0.5, 0.5, 0.5], num_iters=20, decay=0.5)
    assert torch.allclose(rel_to_xywh(res.y[:, 0], reference), target, atol=1e-2)


def test_s1_rejects_overshooting_steps_and_decays():
    reference = torch.tensor([[0.0, 0.0, 10.0, 10.0]])
    target = torch.tensor([[1.0, 0.0, 10.0, 10.0]])
    score = _score_towards(target, reference)
    # a step of 3 overshoots (f falls), so S1 must reject and halve until it improves
    res = gradient_ascent(score, torch.zeros(1, 1, 4), step_length=[3.0, 3.0, 1e-3, 1e-3], num_iters=10)
    f0 = score(torch.zeros(1, 1, 4))
    assert (res.scores >= f0).all()
    assert res.accepted.item() < 10
    assert abs(res.y[0, 0, 0].item() - 0.1) < 0.02  # rel x of the target = 1 / 10
