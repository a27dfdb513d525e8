"""DiMP target classifier: normalisation, filter correlation, initializer, steepest-descent optimizer."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ltr.models.target_classifier import (
    ClassifierFeatureHead,
    FilterInitializer,
    InstanceL2Norm,
    LinearFilterClassifier,
    SteepestDescentGN,
    apply_filter,
    apply_filter_transpose,
    distance_bins,
    score_map_size,
)


def test_instance_l2_norm_sets_the_norm():
    torch.manual_seed(0)
    x = torch.randn(3, 8, 5, 6) * torch.tensor([0.1, 1.0, 30.0])[:, None, None, None]
    y = InstanceL2Norm(scale=0.25)(x)
    norms = y.flatten(1).norm(dim=1)
    torch.testing.assert_close(norms, torch.full((3,), 0.25 * math.sqrt(8 * 5 * 6)), rtol=1e-5, atol=0)


def test_feature_head_scale_gives_rms_one_over_sqrt_c_k2():
    torch.manual_seed(0)
    head = ClassifierFeatureHead(in_channels=16, out_channels=32, filter_size=4)
    y = head(torch.randn(2, 16, 7, 7))
    assert y.shape == (2, 32, 7, 7)
    rms = y.pow(2).mean(dim=(1, 2, 3)).sqrt()
    torch.testing.assert_close(rms, torch.full((2,), math.sqrt(1 / (32 * 16))), rtol=1e-4, atol=0)


@pytest.mark.parametrize("k", [3, 4, 5])
def test_filter_per_sequence_and_its_transpose(k):
    torch.manual_seed(0)
    feat = torch.randn(3, 2, 5, 6, 7, dtype=torch.float64)
    w = torch.randn(2, 5, k, k, dtype=torch.float64, requires_grad=True)
    scores = apply_filter(feat, w)
    assert scores.shape == (3, 2, *score_map_size((6, 7), k))
    for b in range(2):  # each sequence sees only its own filter
        ref = F.conv2d(feat[:, b], w[b : b + 1], padding=k // 2)[:, 0]
        torch.testing.assert_close(scores[:, b], ref)
    maps = torch.randn_like(scores)
    (grad,) = torch.autograd.grad((scores * maps).sum(), w)
    torch.testing.assert_close(apply_filter_transpose(feat, maps, k), grad)


@pytest.mark.parametrize("k", [3, 4])
def test_filter_is_differentiable_in_both_arguments_and_takes_any_layout(k):
    # training backpropagates through the scores into the features and the (optimised) filters
    torch.manual_seed(2)
    feat = torch.randn(2, 2, 3, 5, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 3, k, k, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(apply_filter, (feat, w))
    assert torch.autograd.gradgradcheck(apply_filter, (feat, w))
    # channels_last image features (the tracker's backbone output) and a non-contiguous filter view
    images = torch.randn(6, 8, 9, 7).contiguous(memory_format=torch.channels_last)
    wide = torch.randn(2, 8, k, k + 2)
    got = apply_filter(images.view(3, 2, 8, 9, 7), wide[..., :k])
    ref = torch.stack(
        [
            F.conv2d(images.view(3, 2, 8, 9, 7)[:, b], wide[b : b + 1, :, :, :k], padding=k // 2)[:, 0]
            for b in (0, 1)
        ],
        dim=1,
    )
    torch.testing.assert_close(got, ref)


def test_filter_transpose_is_differentiable_in_both_arguments_and_takes_any_layout():
    # the optimizer runs inside the training graph: its filter gradient is differentiated again
    torch.manual_seed(1)
    feat = torch.randn(2, 2, 3, 5, 4, dtype=torch.float64, requires_grad=True)
    maps = torch.randn(2, 2, *score_map_size((5, 4), 4), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda f, m: apply_filter_transpose(f, m, 4), (feat, maps))
    # channels_last image features (what the tracker's backbone gives) and a non-contiguous map view
    images = torch.randn(6, 8, 9, 7).contiguous(memory_format=torch.channels_last)
    wide = torch.randn(3, 2, 10, 8)
    got = apply_filter_transpose(images.view(3, 2, 8, 9, 7), wide[..., :8], 4)
    want = apply_filter_transpose(images.contiguous().view(3, 2, 8, 9, 7), wide[..., :8].contiguous(), 4)
    torch.testing.assert_close(got, want)


def test_distance_bins_interpolate_and_sum_to_one():
    centre = torch.tensor([[0.0, 0.0], [2.0, 1.5]])
    bins = distance_bins(centre, (4, 5), num_bins=10, bin_displacement=0.5)
    assert bins.shape == (2, 10, 4, 5)
    torch.testing.assert_close(bins.sum(dim=1), torch.ones(2, 4, 5))
    # cell (0, 3) is 3 cells from (0, 0): all weight on bin 6
    assert bins[0, 6, 0, 3] == pytest.approx(1.0)
    # cell (0, 1) is 1 cell from (0, 0) -> bin 2; cell (2, 2) is 0.5 from (2, 1.5) -> bin 1
    assert bins[0, 2, 0, 1] == pytest.approx(1.0)
    assert bins[1, 1, 2, 2] == pytest.approx(1.0)
    # distance sqrt(2) = 2.83 bins: 0.17 on bin 2, 0.83 on bin 3
    assert bins[0, 2, 1, 1] == pytest.approx(3 - math.sqrt(2) / 0.5, abs=1e-6)
    assert bins[0, 3, 1, 1] == pytest.approx(math.sqrt(2) / 0.5 - 2, abs=1e-6)
    # beyond the last bin (4.5 cells) everything lands in the last one
    far = distance_bins(torch.tensor([[0.0, 0.0]]), (1, 20), num_bins=10, bin_displacement=0.5)
    assert far[0, -1, 0, 15] == 1.0 and far[0, :-1, 0, 15].sum() == 0


def test_predictor_initial_values_match_their_formulas():
    opt = SteepestDescentGN(num_bins=100, bin_displacement=0.1, label_init_sigma=0.9, mask_init_factor=3.0)
    d = torch.arange(100) * 0.1
    gauss = torch.exp(-0.5 * (d / 0.9) ** 2)
    torch.testing.assert_close(opt.label_predictor.weight.flatten(), gauss - gauss.min())
    torch.testing.assert_close(opt.mask_predictor.weight.flatten(), 3.0 * torch.tanh(2.0 - d))
    assert torch.equal(opt.weight_predictor.weight.flatten(), torch.ones(100))
    assert torch.exp(opt.log_step_length).item() == pytest.approx(0.9)
    assert opt.filter_reg.item() == pytest.approx(0.1)
    # the maps: a target centred on score cell (3, 3) of a 9x9 map (stride 16, even filter -> pixel 48)
    box = torch.tensor([[[48.0 - 20, 48.0 - 10, 40.0, 20.0]]])
    label, mask, weight = opt.maps(box, (9, 9), filter_size=4)
    assert label[0, 0, 3, 3].item() == pytest.approx(1 - gauss.min().item(), abs=1e-6)
    assert label[0, 0, 3, 5].item() == pytest.approx(gauss[20].item() - gauss.min().item(), abs=1e-6)
    assert mask[0, 0, 3, 3].item() == pytest.approx(torch.sigmoid(3 * torch.tanh(torch.tensor(2.0))).item())
    assert mask[0, 0, 3, 8].item() == pytest.approx(torch.sigmoid(3 * torch.tanh(torch.tensor(-3.0))).item())
    torch.testing.assert_close(weight, torch.ones(1, 1, 9, 9))
    # odd filters: score cell j stands for pixel 16 (j + 1/2)
    label_odd, _, _ = opt.maps(box + torch.tensor([8.0, 8.0, 0, 0]), (8, 8), filter_size=3)
    assert label_odd[0, 0, 3, 3].item() == pytest.approx(1 - gauss.min().item(), abs=1e-6)


def _toy_problem(seed=0):
    g = torch.Generator().manual_seed(seed)
    feat = torch.randn(3, 2, 8, 9, 9, generator=g, dtype=torch.float64) * 0.3
    boxes = torch.tensor([[40.0, 50.0, 32.0, 40.0], [70.0, 30.0, 24.0, 24.0]], dtype=torch.float64)
    boxes = boxes.expand(3, 2, 4) + torch.randn(3, 2, 4, generator=g, dtype=torch.float64)
    w0 = torch.randn(2, 8, 4, 4, generator=g, dtype=torch.float64) * 0.01
    opt = SteepestDescentGN(num_iter=5, label_init_sigma=1.0).double()
    return opt, w0, feat, boxes


def test_one_step_matches_the_formula():
    opt, w0, feat, boxes = _toy_problem()
    w0 = w0.requires_grad_(True)
    label, mask, spatial = opt.maps(boxes, (10, 10), 4)
    v = spatial / math.sqrt(3)
    lam = opt.filter_reg.detach() ** 2

    def residual(w):
        s = apply_filter(feat, w)
        sign = torch.sign(s.detach())
        act_lin = (0.5 * (1 - mask) * sign + 0.5 * (1 + mask)) * s  # equals act, with act' fixed at s
        return v * (act_lin - label)

    objective = 0.5 * (residual(w0).square().sum() + lam * w0.square().sum())
    (g,) = torch.autograd.grad(objective, w0)
    _, jg = torch.autograd.functional.jvp(residual, w0.detach(), g)  # J g
    alpha = g.square().sum(dim=(1, 2, 3)) / (
        jg.square().sum(dim=(0, 2, 3)) + lam * g.square().sum(dim=(1, 2, 3))
    )
    expected = w0.detach() - 0.9 * alpha.reshape(-1, 1, 1, 1) * g
    result = opt(w0.detach(), feat, boxes, num_iter=1)
    torch.testing.assert_close(result.filters.detach(), expected, rtol=1e-6, atol=1e-10)


def test_steepest_descent_reduces_the_objective():
    opt, w0, feat, boxes = _toy_problem()
    result = opt(w0, feat, boxes, compute_losses=True)
    losses = result.losses
    assert len(result.iterates) == 6 and losses.shape == (6,)
    assert (losses[1:] < losses[:-1]).all(), losses
    assert losses[-1] < 0.5 * losses[0], losses


def test_filter_initializer_pools_the_target_region():
    init = FilterInitializer(channels=2, filter_size=4, feature_stride=16)
    with torch.no_grad():  # identity conv: the filter is the pooled feature itself
        init.conv.weight.zero_()
        init.conv.weight[0, 0, 1, 1] = 1.0
        init.conv.weight[1, 1, 1, 1] = 1.0
    feat = torch.zeros(2, 1, 2, 10, 10)
    feat[0, 0, 0] = 1.0  # channel 0 constant 1 in image 0, 3 in image 1 -> mean 2
    feat[1, 0, 0] = 3.0
    feat[:, 0, 1, :, :] = torch.arange(10.0)  # channel 1 = column index
    boxes = torch.tensor([[[32.0, 32.0, 64.0, 64.0]], [[32.0, 32.0, 64.0, 64.0]]])  # cells 2..6
    w = init(feat, boxes)
    assert w.shape == (1, 2, 4, 4)
    torch.testing.assert_close(w[0, 0], torch.full((4, 4), 2.0))
    # column bins [2, 3], [3, 4], [4, 5], [5, 6]: mean of x over each
    torch.testing.assert_close(w[0, 1], torch.tensor([2.5, 3.5, 4.5, 5.5]).expand(4, 4))


def test_classifier_returns_scores_of_every_iterate_with_gradients():
    torch.manual_seed(0)
    clf = LinearFilterClassifier(
        feature_head=ClassifierFeatureHead(in_channels=12, out_channels=16, filter_size=4),
        initializer=FilterInitializer(channels=16, filter_size=4, feature_stride=16),
        optimizer=SteepestDescentGN(num_iter=5, num_bins=20, bin_displacement=0.25),
    )
    train = torch.randn(3, 2, 12, 8, 8)
    test = torch.randn(2, 2, 12, 8, 8)
    boxes = torch.tensor([40.0, 40.0, 40.0, 30.0]).expand(3, 2, 4)
    out = clf(train, test, boxes)
    assert out.scores.shape == (6, 2, 2, 9, 9)
    assert out.filters.shape == (2, 16, 4, 4)
    out.scores[-1].square().mean().backward()
    for name, p in clf.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert clf.optimizer.log_step_length.grad.abs().item() > 0
    assert clf.optimizer.label_predictor.weight.grad.abs().sum().item() > 0


def test_optimizer_runs_in_float32_under_autocast():
    opt, w0, feat, boxes = _toy_problem()
    opt = opt.float()
    feat16 = feat.to(torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = opt(w0.float(), feat16, boxes.float(), compute_losses=True)
    plain = opt(w0.float(), feat16.float(), boxes.float(), compute_losses=True)
    assert mixed.filters.dtype == torch.float32
    torch.testing.assert_close(mixed.filters, plain.filters)
    assert mixed.losses[-1] < 0.5 * mixed.losses[0]


def test_sample_weights_select_images():
    opt, w0, feat, boxes = _toy_problem()
    weights = torch.tensor([[1.0], [0.0], [0.0]], dtype=torch.float64)
    weighted = opt(w0, feat, boxes, sample_weight=weights, num_iter=3)
    alone = opt(w0, feat[:1], boxes[:1], num_iter=3)
    torch.testing.assert_close(weighted.filters, alone.filters)
    uniform = opt(w0, feat, boxes, sample_weight=torch.full((3, 2), 1 / 3, dtype=torch.float64), num_iter=3)
    torch.testing.assert_close(uniform.filters, opt(w0, feat, boxes, num_iter=3).filters)
    with pytest.raises(ValueError, match="sample_weight"):
        opt(w0, feat, boxes, sample_weight=torch.ones(3, dtype=torch.float64))
