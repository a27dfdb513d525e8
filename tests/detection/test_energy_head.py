"""A toy energy head trained a few dozen steps: its box gradient is finite and points to the ground truth."""

import torch

from ltr.detection.detector import LevelSpec
from ltr.detection.energy import BoxScorer
from ltr.ebm import build_method
from ltr.models.detection import DetectionEnergyHead
from ltr.ops.boxes import xywh_to_rel

LEVELS = LevelSpec(("0",), (2,), 32.0, 0)


def _image_features(gt_boxes: torch.Tensor, size: int = 64) -> torch.Tensor:
    """(1, 6, size/2, size/2): a textured background with bright rectangles, through a fixed conv."""
    gen = torch.Generator().manual_seed(0)
    image = 0.3 * torch.rand(1, 3, size, size, generator=gen)
    for x, y, w, h in gt_boxes.tolist():
        image[:, :, int(y) : int(y + h), int(x) : int(x + w)] += torch.tensor([0.9, 0.4, 0.1])[:, None, None]
    conv = torch.nn.Conv2d(3, 6, 3, stride=2, padding=1)
    with torch.no_grad():
        conv.weight.copy_(torch.randn(conv.weight.shape, generator=gen))
        conv.bias.zero_()
        return torch.relu(conv(image))


def test_trained_head_gradient_points_to_gt():
    torch.manual_seed(0)
    gt = torch.tensor([[12.0, 16.0, 24.0, 20.0], [36.0, 30.0, 18.0, 26.0]])
    feats = [_image_features(gt)]
    head = DetectionEnergyHead(in_channels=6, pool_size=4, hidden=64)
    index = torch.zeros(2, dtype=torch.long)
    scorer = BoxScorer(head, feats, LEVELS, gt, index)
    loss_fn = build_method("nce_plus", sigmas=(0.075, 0.15, 0.3), num_samples=31, beta=0.1)
    opt = torch.optim.Adam(head.parameters(), lr=2e-3)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(60):
        result = loss_fn(scorer, torch.zeros(2, 4), generator=gen)
        opt.zero_grad()
        result.loss.backward()
        opt.step()
        losses.append(float(result.loss.detach()))
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10 - 0.3
    # boxes shifted and rescaled away from the ground truth, in the rel space around the gt
    shifts = torch.tensor(
        [[0.15, 0.0, 0.0, 0.0], [0.0, -0.15, 0.0, 0.0], [0.0, 0.0, 0.2, 0.0], [-0.1, 0.1, 0.0, -0.2]]
    )
    y = shifts.unsqueeze(0).expand(2, -1, -1).clone().requires_grad_(True)  # (2 gts, 4 shifts, 4)
    f = scorer(y)
    (grad,) = torch.autograd.grad(f.sum(), y)
    assert torch.isfinite(grad).all()
    towards_gt = -y.detach()  # gt - box in the rel space (the gt is rel 0)
    dots = (grad * towards_gt).sum(-1)
    assert (dots > 0).all(), dots
    # and f is higher at the gt than at the shifted boxes
    assert (scorer(torch.zeros(2, 1, 4)) > f.detach().max(dim=1, keepdim=True).values).all()


def test_scorer_uses_the_reference_level_and_is_finite_for_tiny_boxes():
    feats = [torch.randn(2, 3, 8, 8), torch.randn(2, 3, 4, 4)]
    levels = LevelSpec(("0", "1"), (8, 16), 24.0, 1)
    ref = torch.tensor([[4.0, 4.0, 8.0, 8.0], [10.0, 10.0, 50.0, 40.0], [0.0, 0.0, 0.5, 0.5]])
    assert levels.assign(ref).tolist() == [0, 1, 0]
    head = DetectionEnergyHead(in_channels=3, pool_size=2, hidden=8)
    scorer = BoxScorer(head, feats, levels, ref, torch.tensor([1, 0, 1]))
    y = torch.zeros(3, 5, 4, requires_grad=True)
    f = scorer(y)
    assert f.shape == (3, 5)
    (g,) = torch.autograd.grad(f.sum(), y)
    assert torch.isfinite(g).all()
    # the same box scored alone (image 1 only) gives the same value: examples are independent
    alone = BoxScorer(head, [feats[0][1:], feats[1][1:]], levels, ref[:1], torch.tensor([0]))
    assert torch.allclose(alone(torch.zeros(1, 5, 4)), f[:1].detach(), atol=1e-6)


def test_scores_do_not_depend_on_the_batch_composition():
    gen = torch.Generator().manual_seed(2)
    feats = [torch.randn(3, 4, 12, 12, generator=gen)]
    levels = LevelSpec(("0",), (8,), 32.0, 0)
    index = torch.tensor([2, 0, 2, 1, 2, 0])  # every image present, uneven counts, unsorted
    ref = torch.cat([torch.rand(6, 2, generator=gen) * 50, torch.rand(6, 2, generator=gen) * 30 + 10], 1)
    head = DetectionEnergyHead(in_channels=4, pool_size=3, hidden=16)
    y = 0.1 * torch.randn(6, 4, 4, generator=gen)
    full = BoxScorer(head, feats, levels, ref, index)(y)
    for b in range(3):
        sel = (index == b).nonzero().squeeze(1)
        one = BoxScorer(
            head, [feats[0][b : b + 1]], levels, ref[sel], torch.zeros(len(sel), dtype=torch.long)
        )
        assert torch.allclose(one(y[sel]), full[sel], atol=1e-5)


def test_rel_space_of_gt_is_zero():
    gt = torch.tensor([[3.0, 4.0, 10.0, 20.0]])
    assert torch.allclose(xywh_to_rel(gt, gt), torch.zeros(1, 4))
