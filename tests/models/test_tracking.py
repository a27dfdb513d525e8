"""DiMPNet: forward shapes, rebuilding from the config's plain data, gradients, frozen parts."""

from __future__ import annotations

import pytest
import torch

from ltr.admin.config import from_dict, to_dict
from ltr.models.tracking import NetConfig, build_dimpnet, lr_groups, tiny_net_config


def _inputs(b=2, s=5, size=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    train = torch.randn(3, b, 3, size, size, generator=g)
    test = torch.randn(3, b, 3, size, size, generator=g)
    boxes = torch.tensor([40.0, 44.0, 36.0, 28.0]).expand(3, b, 4).clone()
    proposals = boxes[:, :, None] + torch.randn(3, b, s, 4, generator=g) * 3
    return train, test, boxes, proposals


def test_forward_shapes_and_score_map_size():
    torch.manual_seed(0)
    net = build_dimpnet(tiny_net_config())
    assert net.score_map_size((128, 128)) == (9, 9)
    assert net.score_map_size((352, 288)) == (23, 19)
    out = net(*_inputs())
    assert out.clf_scores.shape == (6, 3, 2, 9, 9)
    assert out.box_scores.shape == (3, 2, 5)
    assert torch.isfinite(out.clf_scores).all() and torch.isfinite(out.box_scores).all()


def test_rebuild_from_plain_config_gives_the_same_network():
    cfg = tiny_net_config()
    torch.manual_seed(0)
    net = build_dimpnet(cfg).eval()
    rebuilt = build_dimpnet(from_dict(NetConfig, to_dict(cfg))).eval()
    rebuilt.load_state_dict(net.state_dict(), strict=True)
    inputs = _inputs()
    a, b = net(*inputs), rebuilt(*inputs)
    torch.testing.assert_close(a.clf_scores, b.clf_scores)
    torch.testing.assert_close(a.box_scores, b.box_scores)


def test_gradients_present_except_in_frozen_layers():
    torch.manual_seed(0)
    cfg = NetConfig(**{**to_dict(tiny_net_config()), "frozen_layers": ("conv1", "layer1", "layer2")})
    cfg = from_dict(NetConfig, to_dict(cfg))
    net = build_dimpnet(cfg).train()
    assert not net.backbone.layer2[0].bn1.training and net.box_head.test_conv2[0][1].training
    out = net(*_inputs())
    (out.clf_scores.square().mean() + out.box_scores.square().mean()).backward()
    for name, p in net.named_parameters():
        frozen = name.startswith(("backbone.conv1", "backbone.bn1", "backbone.layer1", "backbone.layer2"))
        if frozen:
            assert p.grad is None, name
        else:
            assert p.grad is not None and torch.isfinite(p.grad).all(), name


def test_context_output_scores_boxes_like_forward():
    torch.manual_seed(0)
    net = build_dimpnet(tiny_net_config()).eval()
    train, test, boxes, proposals = _inputs()
    full = net(train, test, boxes, proposals)
    out = net(train, test, boxes, None, return_context=True)
    assert out.box_scores is None
    torch.testing.assert_close(out.clf_scores, full.clf_scores)
    torch.testing.assert_close(net.score_boxes(out.box_context, proposals), full.box_scores)
    with pytest.raises(ValueError, match="test_proposals"):
        net(train, test, boxes, None)


def test_lr_groups_cover_every_trainable_parameter():
    from ltr.trainers.optim import resolve_param_groups

    cfg = NetConfig(**{**to_dict(tiny_net_config()), "frozen_layers": ("conv1", "layer1", "layer2")})
    net = build_dimpnet(from_dict(NetConfig, to_dict(cfg)))
    groups = {g.name: g for g in resolve_param_groups(net, lr_groups())}
    assert groups["classifier.optimizer"].lr == 5e-4 and groups["box_head"].lr == 1e-3
    assert all(n.startswith("backbone.layer3") for n in groups["backbone"].param_names)
    trainable = {n for n, p in net.named_parameters() if p.requires_grad}
    assert set().union(*(g.param_names for g in groups.values())) == trainable


def test_single_reference_in_train_mode_is_a_clear_error():
    net = build_dimpnet(tiny_net_config()).train()
    with pytest.raises(ValueError, match="at least 2 reference images"):
        net(*_inputs(b=1))


@pytest.mark.slow
def test_full_size_superdimp50_shapes():
    torch.manual_seed(0)
    net = build_dimpnet(NetConfig(pretrained=False)).eval()
    assert net.classifier.feature_head.conv.in_channels == 1024
    assert net.classifier.feature_head.conv.out_channels == 512
    assert net.box_head.ref_conv2[0].in_channels == 512 and net.box_head.test_conv3[0][0].in_channels == 1024
    with torch.no_grad():
        out = net(*_inputs(b=1, s=4, size=352))
    assert out.clf_scores.shape == (6, 3, 1, 23, 23)
    assert out.box_scores.shape == (3, 1, 4)
