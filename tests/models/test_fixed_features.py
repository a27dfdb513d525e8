"""GradientColourFeatures and the classifier's fixed channels (NetConfig.fixed_clf_features)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.nn import functional as F

from ltr.models.fixed_features import GradientColourFeatures
from ltr.models.target_classifier import ClassifierFeatureHead
from ltr.models.target_classifier.features import FIXED_RMS_FLOOR
from ltr.models.tracking import build_dimpnet, tiny_net_config

COLOUR = 3 * 16  # colour channels of a stride-16, cell-4 map


def _cells(features: torch.Tensor, first: int, count: int) -> torch.Tensor:
    """Channels [first, first + count * 16) back to (N, count, H * 4, W * 4) cells."""
    return F.pixel_shuffle(features[:, first : first + count * 16], 4)


def _edge(vertical: bool) -> torch.Tensor:
    x = torch.zeros(1, 3, 64, 64)
    if vertical:
        x[..., 32:] = 1.0
    else:
        x[..., 32:, :] = 1.0
    return x


def _stride16(images: torch.Tensor) -> torch.Tensor:
    return GradientColourFeatures()(images)[16]


def test_shape_channels_and_padding() -> None:
    g = GradientColourFeatures(strides=(8, 16))
    assert g.channels == {8: (3 + 6) * 4, 16: (3 + 6) * 16}
    out = g(torch.rand(2, 3, 128, 128))
    assert tuple(out[16].shape) == (2, 144, 8, 8) and tuple(out[8].shape) == (2, 36, 16, 16)
    out = g(torch.rand(1, 3, 100, 70))
    assert tuple(out[16].shape) == (1, 144, 7, 5)  # ceil(H / 16), as layer3
    assert tuple(out[8].shape) == (1, 36, 13, 9)  # ceil(H / 8), as layer2
    with pytest.raises(ValueError, match="multiples of cell"):
        GradientColourFeatures(strides=(16,), cell=5)
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        g(torch.rand(3, 64, 64))


def test_strides_share_cells_and_agree_with_one_stride_alone() -> None:
    # for sizes that are multiples of the largest stride (every crop the trackers take), the shared cells give
    # each stride exactly what a module of that stride alone gives
    x = torch.rand(2, 3, 96, 128) * 2 - 1
    both = GradientColourFeatures(strides=(8, 16))(x)
    for s in (8, 16):
        torch.testing.assert_close(both[s], GradientColourFeatures(strides=(s,))(x)[s], rtol=0, atol=0)


def test_a_uniform_image_gives_zeros_not_nans() -> None:
    f = _stride16(torch.full((1, 3, 64, 64), 0.3))
    assert torch.isfinite(f).all() and float(f.abs().max()) < 1e-6


def test_every_channel_has_zero_spatial_mean() -> None:
    f = _stride16(torch.rand(2, 3, 64, 96) * 3)
    assert f.mean(dim=(2, 3)).abs().max() < 1e-5
    assert f.std() > 0.01


@pytest.mark.parametrize(("vertical", "strongest"), [(True, 0), (False, 3)])
def test_orientation_bins(vertical: bool, strongest: int) -> None:
    # a vertical edge has its gradient along x (theta = 0, bin 0); a horizontal one along y (90 deg, bin 3)
    hist = _cells(_stride16(_edge(vertical)), COLOUR, 6)[0]
    peak = hist.amax(dim=(1, 2))
    assert int(peak.argmax()) == strongest
    # the bins 60 and more degrees away get nothing
    far = [(strongest + k) % 6 for k in (2, 3, 4)]
    assert float(peak[far].max() - hist[far].amin()) < 1e-6


def test_gradients_ignore_brightness_and_colour_sees_it() -> None:
    g = _stride16
    x = torch.rand(1, 3, 64, 64)
    a, b = g(x), g(x + 0.7)
    torch.testing.assert_close(a[:, COLOUR:], b[:, COLOUR:], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(a[:, :COLOUR], b[:, :COLOUR], atol=1e-5, rtol=1e-4)  # mean removed
    red = torch.zeros(1, 3, 64, 64)
    red[:, 0, 16:48, 16:48] = 2.0
    colour = _cells(g(red), 0, 3)[0]  # (3, 16, 16) cells of 4 x 4 pixels
    assert float(colour[0, 4:12, 4:12].min()) > float(colour[0].mean()) + 0.5
    assert float(colour[1:].abs().max()) < 1e-6


def test_feature_head_passes_fixed_channels_through_its_own_norm() -> None:
    torch.manual_seed(0)
    head = ClassifierFeatureHead(in_channels=8, out_channels=4, filter_size=4, fixed_channels=6)
    assert head.out_channels == 10 and head.conv.in_channels == 8
    x = torch.randn(2, 14, 5, 5)
    with torch.no_grad():
        y = head(x)
    assert tuple(y.shape) == (2, 10, 5, 5)
    scale2 = 1.0 / (10 * 16)
    fixed = x[:, 8:]
    numel = fixed[0].numel()
    sq = fixed.pow(2).sum(dim=(1, 2, 3), keepdim=True)
    expected = fixed * (scale2 * numel / (sq + 1e-5 + numel * FIXED_RMS_FLOOR**2)).sqrt()
    torch.testing.assert_close(y[:, 4:], expected)
    # each part's squared norm is its share of the channels (the fixed part's floor is far below RMS 1)
    torch.testing.assert_close(y[:, :4].pow(2).sum(dim=(1, 2, 3)), torch.full((2,), 4 * 25 * scale2))
    torch.testing.assert_close(
        y[:, 4:].pow(2).sum(dim=(1, 2, 3)), torch.full((2,), 6 * 25 * scale2), rtol=1e-3, atol=0
    )
    # nearly zero fixed features stay nearly zero instead of being blown up to full size
    x[:, 8:] *= 1e-6
    with torch.no_grad():
        small = head(x)
    assert float(small[:, 4:].abs().max()) < 1e-3 * float(y[:, 4:].abs().max())  # without the floor: 1


def test_network_with_fixed_features() -> None:
    config = dataclasses.replace(
        tiny_net_config(feature_size=8, search_area_factor=3.0),
        fixed_clf_features=True,
        fixed_box_features=True,
    )
    net = build_dimpnet(config).eval()
    plain = build_dimpnet(tiny_net_config(feature_size=8, search_area_factor=3.0))
    assert net.backbone.fixed_channels == {"layer2": 36, "layer3": 144}  # (3 + 6) x (8 / 4)^2, x (16 / 4)^2
    assert net.backbone.channels["layer3"] == plain.backbone.channels["layer3"] + 144
    assert net.backbone.channels["layer2"] == plain.backbone.channels["layer2"] + 36
    assert net.classifier.feature_head.out_channels == config.clf_feature_dim + 144
    assert sum(p.numel() for p in net.backbone.parameters()) == sum(
        p.numel() for p in plain.backbone.parameters()
    )
    assert plain.backbone.fixed_channels == {} and plain.backbone.fixed is None
    images = torch.rand(1, 2, 3, 128, 128)
    boxes = torch.tensor([[[40.0, 40.0, 48.0, 40.0]]])
    with torch.no_grad():
        out = net(images, images.flip(1), boxes.expand(1, 2, 4), boxes[None].expand(1, 2, 3, 4))
        feats = net.backbone(images[0])
    assert out.clf_scores.shape[-2:] == (9, 9) and torch.isfinite(out.clf_scores).all()
    assert out.box_scores.shape == (1, 2, 3) and torch.isfinite(out.box_scores).all()
    # each layer's output ends with the fixed features of the same images at its stride
    torch.testing.assert_close(
        feats["layer3"][:, -144:], GradientColourFeatures(strides=(16,))(images[0])[16]
    )
    torch.testing.assert_close(feats["layer2"][:, -36:], GradientColourFeatures(strides=(8,))(images[0])[8])
    assert feats["layer2"].shape[-2:] == (16, 16)
