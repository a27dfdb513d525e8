"""Fold eval-mode BatchNorm2d layers into the convolutions before them, for inference.

In eval mode ``bn(conv(x))`` is one affine map per output channel, so the pair is one convolution with scaled
weights and a shifted bias, which saves the separate, memory-bound BatchNorm pass on a CPU. Folding changes
results only by rounding (about 1e-6 relative in float32).

Only pairs whose order of application is known are folded, never guessed from attribute order:
consecutive ``(Conv2d, BatchNorm2d)`` children of an ``nn.Sequential``; ``(conv1, bn1)`` ... ``(conv3, bn3)``
of torchvision's ResNet ``BasicBlock`` / ``Bottleneck``; ``(conv1, bn1)`` of
:class:`ltr.models.backbone.ResNetBackbone`. A folded BatchNorm becomes ``nn.Identity``.
"""

from __future__ import annotations

from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval
from torchvision.models.resnet import BasicBlock, Bottleneck

from ltr.models.backbone import ResNetBackbone

_NAMED_PAIRS: dict[type, tuple[tuple[str, str], ...]] = {
    BasicBlock: (("conv1", "bn1"), ("conv2", "bn2")),
    Bottleneck: (("conv1", "bn1"), ("conv2", "bn2"), ("conv3", "bn3")),
    ResNetBackbone: (("conv1", "bn1"),),
}


def _foldable(conv: nn.Module, bn: nn.Module) -> bool:
    return (
        isinstance(conv, nn.Conv2d)
        and isinstance(bn, nn.BatchNorm2d)
        and bn.track_running_stats
        and bn.running_mean is not None
        and conv.out_channels == bn.num_features
    )


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
            fused = fuse_conv_bn_eval(conv, bn)
            for p_new, p_old in zip(fused.parameters(), conv.parameters(), strict=False):
                p_new.requires_grad_(p_old.requires_grad)
            setattr(parent, conv_name, fused)
            setattr(parent, bn_name, nn.Identity())
            folded += 1
    return folded
