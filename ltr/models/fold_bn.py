"""Fold eval-mode BatchNorm2d layers into the convolutions before them, for inference.

In eval mode ``bn(conv(x))`` is one affine map per output channel, so the pair is one convolution with scaled
weights and a shifted bias, which saves the separate, memory-bound BatchNorm pass on a CPU. Folding changes
results only by rounding (about 1e-6 relative in float32).

Only pairs whose order of application is known are folded, never guessed from attribute order:
consecutive ``(Conv2d, BatchNorm2d)`` children of an ``nn.Sequential``; ``(conv1, bn1)`` ... ``(conv3, bn3)``
of torchvision's ResNet ``BasicBlock`` / ``Bottleneck``; ``(conv1, bn1)`` of
:class:`ltr.models.backbone.ResNetBackbone`. A folded BatchNorm becomes ``nn.Identity``. An IBN-a
normalisation (:class:`ltr.models.backbone.InstanceBatchNorm2d`) in such a pair has its BatchNorm half folded
into the convolution's channels it normalises; its instance-normalised half stays.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_conv_bn_weights
from torchvision.models.resnet import BasicBlock, Bottleneck

from ltr.models.backbone import InstanceBatchNorm2d, ResNetBackbone

_NAMED_PAIRS: dict[type, tuple[tuple[str, str], ...]] = {
    BasicBlock: (("conv1", "bn1"), ("conv2", "bn2")),
    Bottleneck: (("conv1", "bn1"), ("conv2", "bn2"), ("conv3", "bn3")),
    ResNetBackbone: (("conv1", "bn1"),),
}


def _has_statistics(bn: nn.Module) -> bool:
    return isinstance(bn, nn.BatchNorm2d) and bn.track_running_stats and bn.running_mean is not None


def _foldable(conv: nn.Module, bn: nn.Module) -> bool:
    if not isinstance(conv, nn.Conv2d):
        return False
    if isinstance(bn, InstanceBatchNorm2d):  # its BatchNorm half normalises the convolution's last channels
        return _has_statistics(bn.batch) and conv.out_channels == bn.split + bn.batch.num_features
    return _has_statistics(bn) and conv.out_channels == bn.num_features


def _fold_batch_half(conv: nn.Conv2d, norm: InstanceBatchNorm2d) -> nn.Conv2d:
    """``conv`` with ``norm.batch`` folded into its output channels ``norm.split:`` (a copy, with a bias)."""
    bn, s = norm.batch, norm.split
    weight, bias = conv.weight.detach(), conv.bias
    bias = (
        torch.zeros(weight.shape[0], dtype=weight.dtype, device=weight.device)
        if bias is None
        else bias.detach()
    )
    tail_w, tail_b = fuse_conv_bn_weights(
        weight[s:], bias[s:], bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    fused = copy.deepcopy(conv)
    fused.weight = nn.Parameter(torch.cat([weight[:s], tail_w.detach()]), conv.weight.requires_grad)
    fused.bias = nn.Parameter(torch.cat([bias[:s], tail_b.detach()]), conv.weight.requires_grad)
    return fused


def _pairs(module: nn.Module) -> list[tuple[str, str]]:
    if isinstance(module, nn.Sequential):
        names = [name for name, _ in module.named_children()]
        return list(zip(names, names[1:], strict=False))
    for cls, pairs in _NAMED_PAIRS.items():
        if isinstance(module, cls):
            return list(pairs)
    return []


def fold_batchnorm(module: nn.Module) -> int:
    """Fold every recognised (Conv2d, BatchNorm2d) pair in ``module`` (in place); returns how many.

    The module must be in eval mode (a training-mode BatchNorm normalises by batch and cannot be folded).
    """
    if module.training:
        raise ValueError("fold_batchnorm: call .eval() first (training-mode BatchNorm cannot be folded)")
    folded = 0
    for parent in list(module.modules()):
        for conv_name, bn_name in _pairs(parent):
            conv, bn = getattr(parent, conv_name, None), getattr(parent, bn_name, None)
            if conv is None or bn is None or not _foldable(conv, bn):
                continue
            if isinstance(bn, InstanceBatchNorm2d):
                setattr(parent, conv_name, _fold_batch_half(conv, bn))
                bn.batch = nn.Identity()
                folded += 1
                continue
            fused = fuse_conv_bn_eval(conv, bn)
            for p_new, p_old in zip(fused.parameters(), conv.parameters(), strict=False):
                p_new.requires_grad_(p_old.requires_grad)
            setattr(parent, conv_name, fused)
            setattr(parent, bn_name, nn.Identity())
            folded += 1
    return folded
