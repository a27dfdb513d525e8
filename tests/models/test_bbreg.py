"""Energy box head: shapes, caching API, gradients w.r.t. box coordinates, per-box independence in eval."""

from __future__ import annotations

import math

import pytest
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


def _double_head(seed=1):
    torch.manual_seed(seed)
    head = EnergyBoxHead(
        in_channels=(12, 20), ref_channels=(8, 16), mod_channels=(16, 24), linear_channels=(16, 8)
    )
    head = head.double().eval()
    test = (torch.randn(1, 12, 44, 44, dtype=torch.float64), torch.randn(1, 20, 22, 22, dtype=torch.float64))
    ref_box = torch.tensor([[100.0, 120.0, 60.0, 50.0]], dtype=torch.float64)
    return head, head.get_modulation(test, ref_box), test


def _boxes_in(region, count, generator):
    """(1, count, 4) xywh boxes with all edges inside the finite region (x1, y1, x2, y2)."""
    x1, y1, x2, y2 = region
    u = torch.rand(count, 4, generator=generator, dtype=torch.float64)
    xs = torch.sort(x1 + (x2 - x1) * u[:, [0, 2]], dim=1).values
    ys = torch.sort(y1 + (y2 - y1) * u[:, [1, 3]], dim=1).values
    return torch.stack([xs[:, 0], ys[:, 0], xs[:, 1] - xs[:, 0], ys[:, 1] - ys[:, 0]], dim=1)[None]


def _window(head, test, window, host_reads=False):
    """The window features for a host (x1, y1, x2, y2), its own extent as the size bound."""
    w = torch.tensor(window, dtype=torch.float64)
    extent = (window[2] - window[0], window[3] - window[1])
    return head.get_test_features_window(test, w, extent, host_reads=host_reads)


@pytest.mark.parametrize(
    "window",
    [
        (90.0, 100.0, 170.0, 180.0),  # interior: every side clipped
        (0.0, 0.0, 50.0, 60.0),  # top-left corner of the map
        (300.0, 290.0, 351.0, 351.0),  # bottom-right corner
        (-20.0, -30.0, 400.0, 400.0),  # larger than the map: the whole maps
        (333.0, 10.0, 345.0, 30.0),  # thin, at the right border
    ],
)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("host_reads", [False, True])
def test_windowed_test_features_score_exactly_as_the_full_maps(window, channels_last, host_reads):
    head, mod, test = _double_head()
    if channels_last:  # the tracker's layout: the window is gathered as whole channel vectors
        head = head.to(memory_format=torch.channels_last)
        test = tuple(t.contiguous(memory_format=torch.channels_last) for t in test)
    full = head.modulate(mod, head.get_test_features(test))
    # host_reads: a window inside the map (the first case's) is a view of it, the others are gathered
    part = _window(head, test, window, host_reads)
    assert part.origin[0] % 16 == 0 and part.origin[1] % 16 == 0
    valid = part.valid_xyxy.tolist()
    lo, hi = valid[:2], valid[2:]
    assert lo[0] <= max(window[0], 0) and lo[1] <= max(window[1], 0)
    assert hi[0] >= min(window[2], 351) and hi[1] >= min(window[3], 351)
    # the valid region where it is finite, else 20 px beyond the map (boxes may leave the map there)
    region = [v if math.isfinite(v) else (-20.0 if i < 2 else 372.0) for i, v in enumerate(valid)]
    boxes = _boxes_in(region, 64, torch.Generator().manual_seed(0))
    shift = torch.cat([part.origin, torch.zeros(2, dtype=torch.float64)])
    expected = head.score_modulated(full, boxes)
    got = head.score_modulated(head.modulate(mod, part.feats), boxes - shift)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)
    if window[2] - window[0] < 200:  # a real window computes less
        assert part.feats[0].shape[-1] * part.feats[0].shape[-2] < 44 * 44 / 2
    # placed on the host or on the device: the same window, bounds and features
    other = _window(head, test, window, not host_reads)
    assert torch.equal(part.origin, other.origin) and torch.equal(part.valid_xyxy, other.valid_xyxy)
    for a, b in zip(part.feats, other.feats, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_windowed_features_differ_beyond_the_valid_region():
    """The check above can fail: a box reaching past a clipped side scores differently."""
    head, mod, test = _double_head()
    full = head.modulate(mod, head.get_test_features(test))
    part = _window(head, test, (90.0, 100.0, 170.0, 180.0))
    right = float(part.valid_xyxy[2])
    box = torch.tensor([[[120.0, 120.0, right - 120.0 + 30.0, 40.0]]], dtype=torch.float64)
    shift = torch.cat([part.origin, torch.zeros(2, dtype=torch.float64)])
    a = head.score_modulated(full, box)
    b = head.score_modulated(head.modulate(mod, part.feats), box - shift)
    assert (a - b).abs().item() > 1e-6


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


def test_bad_window_is_a_clear_error():
    head, _, test = _double_head()
    with pytest.raises(ValueError, match="extent_wh"):
        head.get_test_features_window(test, torch.zeros(4), (-5.0, 10.0))
    with pytest.raises(ValueError, match="window_xyxy"):
        head.get_test_features_window(test, (10.0, 10.0, 5.0, 20.0), (5.0, 10.0))


def test_conv2d_hook_evaluates_the_test_branch_convolutions():
    """``conv2d=`` replaces every test-branch convolution (with the padding the path needs) and nothing else:
    a float convolution through the hook gives the module's numbers, a scaled one changes them."""
    head, mod, test = _double_head()
    calls = []

    def float_conv(conv, x, padding, scale=1.0):
        calls.append(padding)
        return scale * torch.nn.functional.conv2d(x, conv.weight, conv.bias, conv.stride, padding)

    full = head.get_test_features(test)
    hooked = head.get_test_features(test, conv2d=float_conv)
    assert calls == [(1, 1)] * 4
    for a, b in zip(hooked, full, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    window = torch.tensor([90.0, 100.0, 170.0, 180.0], dtype=torch.float64)
    part = head.get_test_features_window(test, window, (80.0, 80.0))
    calls.clear()
    hooked = head.get_test_features_window(test, window, (80.0, 80.0), conv2d=float_conv)
    assert calls == [(0, 0)] * 4  # the window's convolutions run unpadded
    for a, b in zip(hooked.feats, part.feats, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    doubled = head.get_test_features(test, conv2d=lambda c, x, p: float_conv(c, x, p, scale=2.0))
    assert not torch.allclose(doubled[0], full[0])
