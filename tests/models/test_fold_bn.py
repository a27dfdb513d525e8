"""Folding eval-mode BatchNorm into convolutions: same outputs, no BatchNorm2d left, only known pairs."""

import copy

import pytest
import torch
from torch import nn

from ltr.models.backbone import InstanceBatchNorm2d, ResNetBackbone
from ltr.models.fold_bn import fold_batchnorm
from ltr.models.tracking import BOX_LAYERS, CLF_LAYER, build_dimpnet
from tests.tracker.helpers import tiny_config


def _randomise_batchnorm(net: nn.Module, seed: int = 0) -> None:
    """Non-trivial statistics and affine parameters, so a fold that ignores any of them shows."""
    g = torch.Generator().manual_seed(seed)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g))
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            m.weight.data.copy_(torch.randn(n, generator=g))
            m.bias.data.copy_(torch.randn(n, generator=g))


def test_folded_network_computes_the_same_features():
    torch.manual_seed(0)
    net = build_dimpnet(tiny_config(96).net).eval()
    _randomise_batchnorm(net)
    folded = copy.deepcopy(net)
    count = fold_batchnorm(folded)
    before = sum(isinstance(m, nn.BatchNorm2d) for m in net.modules())
    assert count == before > 10
    assert not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    images = torch.randn(2, 3, 96, 96)
    with torch.no_grad():
        a, b = net.backbone(images), folded.backbone(images)
        for layer in a:
            torch.testing.assert_close(b[layer], a[layer], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(
            folded.classifier.extract_features(b[CLF_LAYER]), net.classifier.extract_features(a[CLF_LAYER])
        )
        feats = [a[n] for n in BOX_LAYERS]
        boxes = torch.tensor([[20.0, 24.0, 30.0, 28.0], [40.0, 30.0, 20.0, 36.0]])
        for x, y in zip(
            net.box_head.get_modulation(feats, boxes), folded.box_head.get_modulation(feats, boxes)
        ):
            torch.testing.assert_close(y, x, rtol=1e-4, atol=1e-4)
        for x, y in zip(net.box_head.get_test_features(feats), folded.box_head.get_test_features(feats)):
            torch.testing.assert_close(y, x, rtol=1e-4, atol=1e-4)
    # the fold really changed the weights (the statistics are not the identity)
    assert not torch.allclose(folded.backbone.conv1.weight, net.backbone.conv1.weight)


def test_ibn_backbones_fold_the_batch_half_and_keep_the_instance_half():
    torch.manual_seed(0)
    net = ResNetBackbone(arch="resnet18", pretrained=False, base_width=8, norm="ibn").eval()
    _randomise_batchnorm(net)
    for m in net.modules():
        if isinstance(m, nn.InstanceNorm2d):
            m.weight.data.normal_()
            m.bias.data.normal_()
    folded = copy.deepcopy(net)
    assert fold_batchnorm(folded) == sum(isinstance(m, nn.BatchNorm2d) for m in net.modules())
    assert not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    halves = [m for m in folded.modules() if isinstance(m, InstanceBatchNorm2d)]
    assert len(halves) == 6 and all(isinstance(m.instance, nn.InstanceNorm2d) for m in halves)
    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        a, b = net(images), folded(images)
    for layer in a:
        torch.testing.assert_close(b[layer], a[layer], rtol=1e-4, atol=1e-4)


def test_training_mode_is_refused():
    with pytest.raises(ValueError, match="eval"):
        fold_batchnorm(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)))


class _BnFirst(nn.Module):
    """A BatchNorm registered after the convolution but applied before it: not a foldable pair."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.conv(self.bn(x))


def test_only_pairs_of_known_order_are_folded():
    model = nn.Sequential(
        nn.BatchNorm2d(3), nn.Conv2d(3, 4, 1), nn.ReLU(), nn.BatchNorm2d(4), _BnFirst()
    ).eval()
    assert fold_batchnorm(model) == 0  # BN before conv, a ReLU in between, an unknown module
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.ReLU()).eval()
    _randomise_batchnorm(model)
    x = torch.randn(1, 3, 5, 5)
    expected = model(x)
    assert fold_batchnorm(model) == 1 and isinstance(model[1], nn.Identity)
    torch.testing.assert_close(model(x), expected)
