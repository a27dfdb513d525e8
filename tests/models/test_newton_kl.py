"""PrDiMP's filter optimizer (KL steepest descent, Newton step length), its softmax, and the NetConfig switch."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from ltr.admin.config import from_dict, to_dict
from ltr.models.target_classifier import (
    SteepestDescentGN,
    SteepestDescentNewtonKL,
    apply_filter,
    softmax_reg,
)
from ltr.models.tracking import NetConfig, build_dimpnet, tiny_net_config


def _inputs(
    seed: int = 0, s: int = 3, b: int = 2, c: int = 6, size: int = 5, k: int = 4, dtype=torch.float64
):
    gen = torch.Generator().manual_seed(seed)
    feats = torch.randn(s, b, c, size, size, generator=gen, dtype=dtype) / math.sqrt(c * k * k)
    filters = torch.randn(b, c, k, k, generator=gen, dtype=dtype)
    centre = 16 * size * (0.3 + 0.4 * torch.rand(s, b, 2, generator=gen, dtype=dtype))
    wh = 16 + 24 * torch.rand(s, b, 2, generator=gen, dtype=dtype)
    return feats, filters, torch.cat([centre - wh / 2, wh], -1)


def test_softmax_reg_is_the_softmax_with_an_extra_logit():
    x = torch.tensor([[1.0, 2.0, -1.0], [1000.0, 999.0, 998.0]], dtype=torch.float64)
    torch.testing.assert_close(softmax_reg(x, dim=-1), torch.softmax(x, dim=-1))
    p = softmax_reg(x, dim=-1, reg=0.5)
    with_extra = torch.softmax(torch.cat([x, torch.full((2, 1), 0.5, dtype=x.dtype)], -1), dim=-1)[:, :3]
    torch.testing.assert_close(p, with_extra)
    assert torch.isfinite(p).all()  # large scores do not overflow
    assert p[0].sum() < 1 - 0.05 and math.isclose(p[1].sum().item(), 1.0, rel_tol=1e-12)
    maps = x.reshape(2, 1, 3, 1)
    torch.testing.assert_close(softmax_reg(maps, dim=(-2, -1), reg=0.5), p.reshape(2, 1, 3, 1))


def test_label_density_is_a_normalised_gaussian_at_the_target_centre():
    opt = SteepestDescentNewtonKL(label_sigma=0.9, feature_stride=16)
    # centre (x, y) = (48, 80) px = cells (3, 5); even filters: cell j is pixel 16 j
    boxes = torch.tensor([[[38.0, 70.0, 20.0, 20.0]]])
    y = opt.label_density(boxes, (9, 8), filter_size=4)
    assert y.shape == (1, 1, 9, 8)
    assert math.isclose(y.sum().item(), 1.0, rel_tol=1e-6)
    assert divmod(int(y.argmax()), 8) == (5, 3)
    torch.testing.assert_close(y[0, 0, 5, 4] / y[0, 0, 5, 3], torch.tensor(math.exp(-0.5 / 0.81)))
    # odd filters: cell j is pixel 16 (j + 1/2), so the same box peaks half a cell earlier (between 2.5 -> 2/3)
    odd = opt.label_density(torch.tensor([[[40.0, 72.0, 16.0, 16.0]]]), (8, 7), filter_size=3)
    assert divmod(int(odd.argmax()), 7) == (4, 2) and math.isclose(
        odd[0, 0, 4, 2].item(), odd[0, 0, 5, 3].item()
    )
    one_hot = SteepestDescentNewtonKL(label_sigma=0.0).label_density(boxes, (9, 8), filter_size=4)
    assert one_hot.sum() == 1 and one_hot[0, 0, 5, 3] == 1
    mixed = SteepestDescentNewtonKL(label_sigma=0.9, uniform_weight=0.2, label_shrink=0.1)
    y2 = mixed.label_density(boxes, (9, 8), filter_size=4)
    torch.testing.assert_close(y2, 0.9 * (0.8 * y + 0.2 / 72))


def _objective(feats, w, label, g, reg, softmax_r):
    """L(w) of the module docstring, written out independently."""
    scores = apply_filter(feats, w).flatten(-2)
    if softmax_r is not None:
        scores_ext = torch.cat([scores, torch.full_like(scores[..., :1], softmax_r)], -1)
    else:
        scores_ext = scores
    data = torch.logsumexp(scores_ext, -1) - (label.flatten(-2) * scores).sum(-1)
    return (g * data).sum() + 0.5 * reg * (w * w).sum()


@pytest.mark.parametrize("softmax_r", [None, -0.5])
def test_one_step_is_the_exact_newton_step_along_the_gradient(softmax_r):
    feats, w0, boxes = _inputs(b=1)
    opt = SteepestDescentNewtonKL(
        init_filter_reg=0.1, min_filter_reg=0.01, alpha_eps=0.0, softmax_reg=softmax_r
    )
    opt.double()
    g = torch.tensor([[0.5], [0.3], [0.2]], dtype=torch.float64)
    w1 = opt(w0, feats, boxes, sample_weight=g, num_iter=1).filters.detach()
    label = opt.label_density(boxes, (6, 6), 4)
    w = w0.clone().requires_grad_(True)
    reg = opt.filter_reg.item() ** 2  # 0.1 rounded to float32 when the parameter was made
    (grad,) = torch.autograd.grad(_objective(feats, w, label, g, reg, softmax_r), w, create_graph=True)
    (hess_grad,) = torch.autograd.grad((grad * grad.detach()).sum(), w)  # H grad
    alpha = (grad * grad).sum() / (grad * hess_grad).sum()  # minimiser of the quadratic model along grad
    torch.testing.assert_close(w1, (w0 - alpha * grad).detach(), rtol=1e-9, atol=1e-12)


def test_steps_lower_the_objective_and_losses_report_it():
    feats, w0, boxes = _inputs(seed=3)
    opt = SteepestDescentNewtonKL()
    result = opt(w0.float(), feats.float(), boxes.float(), num_iter=5, compute_losses=True)
    assert result.losses.shape == (6,) and len(result.iterates) == 6
    assert (result.losses.diff() < 0).all()
    label = opt.label_density(boxes.float(), (6, 6), 4)
    g = torch.full((3, 1), 1 / 3)
    for w, loss in zip(result.iterates, result.losses, strict=True):
        expected = _objective(feats.float(), w, label, g, 0.05**2, None) / 2
        torch.testing.assert_close(loss, expected.detach(), rtol=1e-5, atol=1e-6)


def test_sample_weight_layouts_and_default():
    feats, w0, boxes = _inputs(seed=4)
    opt = SteepestDescentNewtonKL().double()
    default = opt(w0, feats, boxes, num_iter=2).filters
    equal = opt(w0, feats, boxes, sample_weight=torch.full((3, 1), 1 / 3, dtype=torch.float64), num_iter=2)
    torch.testing.assert_close(equal.filters, default)
    weights = torch.tensor([[0.6], [0.3], [0.1]], dtype=torch.float64)
    shared = opt(w0, feats, boxes, sample_weight=weights, num_iter=2).filters
    per_seq = opt(w0, feats, boxes, sample_weight=weights.expand(3, 2), num_iter=2).filters
    torch.testing.assert_close(per_seq, shared)
    assert (shared - default).abs().max() > 1e-3
    # a sample of weight 0 has no influence
    zero = torch.tensor([[0.7], [0.3], [0.0]], dtype=torch.float64)
    other = feats.clone()
    other[2] = torch.randn_like(other[2])
    torch.testing.assert_close(
        opt(w0, feats, boxes, sample_weight=zero).filters, opt(w0, other, boxes, sample_weight=zero).filters
    )
    with pytest.raises(ValueError, match="sample_weight"):
        opt(w0, feats, boxes, sample_weight=torch.ones(3, dtype=torch.float64))


def test_low_precision_features_run_in_float32():
    feats, w0, boxes = _inputs(seed=5, dtype=torch.float32)
    opt = SteepestDescentNewtonKL()
    out = opt(w0.bfloat16(), feats.bfloat16(), boxes, num_iter=2).filters
    assert out.dtype == torch.float32 and torch.isfinite(out).all()


def test_net_config_selects_the_optimizer_and_old_configs_load_as_dimp():
    config = dataclasses.replace(tiny_net_config(), filter_optimizer="newton_kl", kl_softmax_reg=-1.0)
    net = build_dimpnet(config)
    opt = net.classifier.optimizer
    assert isinstance(opt, SteepestDescentNewtonKL) and opt.softmax_reg == -1.0
    keys = {k for k in net.state_dict() if k.startswith("classifier.optimizer.")}
    assert keys == {"classifier.optimizer.log_step_length", "classifier.optimizer.filter_reg"}
    assert from_dict(NetConfig, to_dict(config)) == config

    old = to_dict(tiny_net_config())
    for name in [f.name for f in dataclasses.fields(NetConfig)]:
        if name == "filter_optimizer" or name.startswith("kl_"):
            del old[name]
    dimp = build_dimpnet(from_dict(NetConfig, old))
    assert isinstance(dimp.classifier.optimizer, SteepestDescentGN)
    assert dimp.classifier.optimizer.softmax_reg is None

    with pytest.raises(ValueError, match="filter_optimizer"):
        build_dimpnet(dataclasses.replace(tiny_net_config(), filter_optimizer="lbfgs"))


def test_prdimp_network_trains_end_to_end():
    torch.manual_seed(0)
    net = build_dimpnet(dataclasses.replace(tiny_net_config(), filter_optimizer="newton_kl"))
    images = torch.randn(
        2, 2, 3, 64, 64
    )  # 2 train frames of 2 sequences (BatchNorm in train mode needs B >= 2)
    boxes = torch.tensor([[20.0, 20.0, 24.0, 24.0], [22.0, 18.0, 24.0, 26.0]]).expand(2, 2, 4)
    proposals = torch.tensor([[20.0, 20.0, 24.0, 24.0], [10.0, 12.0, 30.0, 20.0]]).expand(1, 2, 2, 4)
    out = net(images, images[:1], boxes, proposals)
    assert out.clf_scores.shape == (6, 1, 2, *net.score_map_size((64, 64)))
    out.clf_scores[-1].logsumexp(dim=(-2, -1)).sum().backward()
    assert net.classifier.optimizer.log_step_length.grad.abs() > 0
    assert net.classifier.optimizer.filter_reg.grad.abs() > 0
