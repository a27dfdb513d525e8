"""ResNet backbone: layer shapes, frozen layers, offline-only pretrained weights."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

from ltr.models.backbone import (
    InstanceBatchNorm2d,
    MissingWeightsError,
    ResNetBackbone,
    layer_channels,
    pretrained_weights_path,
)


def test_layer_shapes_reduced_width():
    torch.manual_seed(0)
    net = ResNetBackbone(
        arch="resnet18",
        pretrained=False,
        base_width=16,
        output_layers=("conv1", "layer1", "layer2", "layer3", "layer4"),
    )
    out = net(torch.randn(2, 3, 128, 96))
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "conv1": (2, 16, 64, 48),
        "layer1": (2, 16, 32, 24),
        "layer2": (2, 32, 16, 12),
        "layer3": (2, 64, 8, 6),
        "layer4": (2, 128, 4, 3),
    }
    assert layer_channels("resnet50") == {
        "conv1": 64,
        "layer1": 256,
        "layer2": 512,
        "layer3": 1024,
        "layer4": 2048,
    }


def test_only_needed_layers_are_built_and_odd_sizes_round_up():
    net = ResNetBackbone(arch="resnet18", pretrained=False, base_width=8)
    assert not hasattr(net, "layer4")
    out = net(torch.randn(1, 3, 100, 100))
    assert tuple(out["layer3"].shape) == (1, 32, 7, 7)  # ceil(100 / 16)
    with pytest.raises(ValueError, match="not built"):
        net(torch.randn(1, 3, 64, 64), output_layers=("layer4",))


def test_frozen_layers_get_no_gradient_and_keep_bn_in_eval():
    torch.manual_seed(0)
    net = ResNetBackbone(
        arch="resnet18", pretrained=False, base_width=8, frozen_layers=("conv1", "layer1", "layer2")
    )
    net.train()
    assert not net.bn1.training
    assert not net.layer2[0].bn1.training
    assert net.layer3[0].bn1.training
    before = net.layer1[0].bn1.running_mean.clone()
    out = net(torch.randn(2, 3, 64, 64))
    out["layer3"].square().mean().backward()
    assert torch.equal(net.layer1[0].bn1.running_mean, before)  # eval-mode BN: statistics untouched
    for name, p in net.named_parameters():
        if name.startswith(("conv1", "bn1", "layer1", "layer2")):
            assert not p.requires_grad and p.grad is None, name
        else:
            assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert net.layer3[0].conv1.weight.grad.abs().sum() > 0
    assert not out["layer2"].requires_grad  # the fully frozen prefix runs without a graph


def test_missing_pretrained_weights_name_the_expected_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    expected = tmp_path / "hub" / "checkpoints" / "resnet50-0676ba61.pth"
    assert pretrained_weights_path("resnet50") == expected
    with pytest.raises(MissingWeightsError) as err:
        ResNetBackbone(arch="resnet50", pretrained=True)
    assert str(expected) in str(err.value)
    assert "https://download.pytorch.org/models/resnet50-0676ba61.pth" in str(err.value)
    assert not expected.exists()  # nothing was downloaded or created


def test_pretrained_weights_are_read_from_the_hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    torch.manual_seed(1)
    reference = torchvision.models.resnet18(weights=None)
    path = pretrained_weights_path("resnet18")
    path.parent.mkdir(parents=True)
    torch.save(reference.state_dict(), path)
    net = ResNetBackbone(arch="resnet18", pretrained=True)
    assert torch.equal(net.conv1.weight, reference.conv1.weight)
    assert torch.equal(net.layer3[1].bn2.running_var, reference.layer3[1].bn2.running_var)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="frozen_layers"):
        ResNetBackbone(arch="resnet18", pretrained=False, frozen_layers=("layer9",))
    with pytest.raises(ValueError, match="base_width"):
        ResNetBackbone(arch="resnet18", pretrained=True, base_width=16)
    with pytest.raises(
        ValueError, match=r"unknown backbone arch 'vgg16'; choose one of \['resnet18', 'resnet50'\]"
    ):
        ResNetBackbone(arch="vgg16", pretrained=False, frozen_layers=("layer9",))  # the arch is named first


def test_instance_batch_norm_normalises_half_the_channels_per_image():
    torch.manual_seed(0)
    norm = InstanceBatchNorm2d(6)
    norm.batch.running_mean.copy_(torch.tensor([1.0, -2.0, 0.5]))
    norm.batch.running_var.copy_(torch.tensor([4.0, 0.25, 1.0]))
    norm.eval()
    x = torch.randn(3, 6, 5, 7) * 3 + 2
    y = norm(x)
    # the first half: each image's channels to zero mean and unit variance on their own
    first = y[:, :3].reshape(3, 3, -1)
    torch.testing.assert_close(first.mean(-1), torch.zeros(3, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(first.var(-1, unbiased=False), torch.ones(3, 3), atol=1e-3, rtol=0)
    # the second half: the running statistics
    expected = (x[:, 3:] - norm.batch.running_mean[:, None, None]) / (
        norm.batch.running_var[:, None, None] + 1e-5
    ).sqrt()
    torch.testing.assert_close(y[:, 3:], expected)
    # an image's output does not depend on the others in the batch
    torch.testing.assert_close(norm(x[1:2]), y[1:2])
    # nor, in the first half, on the image's contrast and brightness
    torch.testing.assert_close(norm(x * 5 - 3)[:, :3], y[:, :3], atol=1e-4, rtol=1e-4)


def test_ibn_backbone_replaces_the_first_norm_of_every_block_in_layer1_to_layer3():
    net = ResNetBackbone(
        arch="resnet18", pretrained=False, base_width=8, norm="ibn", output_layers=("layer3",)
    )
    assert isinstance(net.bn1, nn.BatchNorm2d)  # the stem keeps BatchNorm
    for name in ("layer1", "layer2", "layer3"):
        for block in getattr(net, name):
            assert isinstance(block.bn1, InstanceBatchNorm2d)
            assert block.bn1.split == block.conv1.out_channels // 2
            assert isinstance(block.bn2, nn.BatchNorm2d)
    assert net(torch.randn(2, 3, 64, 64))["layer3"].shape == (2, 32, 4, 4)
    plain = ResNetBackbone(arch="resnet18", pretrained=False, base_width=8, output_layers=("layer3",))
    assert not any(isinstance(m, InstanceBatchNorm2d) for m in plain.modules())


def test_bad_norms_are_named():
    with pytest.raises(ValueError, match=r"norm must be one of \['batch', 'ibn'\], got 'group'"):
        ResNetBackbone(arch="resnet18", pretrained=False, norm="group")
    with pytest.raises(ValueError, match="pretrained weights exist only for norm='batch'"):
        ResNetBackbone(arch="resnet18", pretrained=True, norm="ibn")


def test_configs_saved_before_the_norm_option_build_batchnorm_networks():
    from ltr.admin.config import from_dict, to_dict
    from ltr.models.tracking import NetConfig, build_dimpnet, tiny_net_config

    old = to_dict(tiny_net_config())
    del old["backbone_norm"]
    config = from_dict(NetConfig, old)
    assert config.backbone_norm == "batch"
    net = build_dimpnet(config)
    assert net.backbone.norm == "batch"
    assert not any(isinstance(m, InstanceBatchNorm2d) for m in net.modules())
    ibn = build_dimpnet(from_dict(NetConfig, {**old, "backbone_norm": "ibn"}))
    assert "backbone.layer1.0.bn1.instance.weight" in ibn.state_dict()
    assert "backbone.layer1.0.bn1.running_mean" in net.state_dict()
