"""ResNet backbone returning a dict of intermediate layers, with frozen layers and offline-only weights.

Layers and strides (input (N, 3, H, W)): ``conv1`` (after BN + ReLU, before max-pool) stride 2, ``layer1``
stride 4, ``layer2`` stride 8, ``layer3`` stride 16, ``layer4`` stride 32. Channels for ``base_width`` w:
ResNet-18 (w, w, 2w, 4w, 8w), ResNet-50 (w, 4w, 8w, 16w, 32w); torchvision's networks have w = 64.

Only the layers up to the deepest requested output are built, so a tracker that uses layer2 + layer3 never
computes layer4. ``base_width < 64`` gives the reduced-width networks used by the CPU-sized tiny settings
(ResNet-18 with w = 16 has 1/16 of the parameters and about 1/16 of the multiply-adds); they have no
pretrained weights.

``norm="ibn"`` makes the trunk IBN-a (Pan et al., "Two at Once: Enhancing Learning and Generalization Capacities
via IBN-Net", ECCV 2018): in layer1-layer3 the first normalisation of every residual block normalises half of
its channels per image (:class:`InstanceBatchNorm2d`). Instance normalisation takes each image's contrast and
colour statistics out of the shallow features, which makes features learnt on one kind of image carry over to
another (here: synthetic training videos, real footage).

Pretrained ImageNet weights (torchvision ``IMAGENET1K_V1``) are read only from the local torch hub cache; the
file is checked before torchvision is asked, so nothing is ever downloaded. A missing file raises
:class:`MissingWeightsError` naming the exact path to put it at.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
import torchvision
from torch import Tensor, nn
from torchvision.models.resnet import BasicBlock, Bottleneck

from ltr.admin.registry import Registry
from ltr.models.fixed_features import GradientColourFeatures

#: normalisation of the residual trunk: "batch" (torchvision's, the reference) or "ibn" (IBN-a, module docstring)
NORMS = ("batch", "ibn")
#: the layers whose blocks get IBN-a's instance-normalised half (the paper's conv2_x to conv4_x)
IBN_LAYERS = ("layer1", "layer2", "layer3")

LAYERS = ("conv1", "layer1", "layer2", "layer3", "layer4")
STRIDES = {"conv1": 2, "layer1": 4, "layer2": 8, "layer3": 16, "layer4": 32}

#: arch name (``NetConfig.backbone``) -> (block, blocks per stage, torchvision weights enum name)
ARCHS: Registry[tuple[type[nn.Module], tuple[int, int, int, int], str]] = Registry(
    "backbone arch",
    {
        "resnet18": (BasicBlock, (2, 2, 2, 2), "ResNet18_Weights"),
        "resnet50": (Bottleneck, (3, 4, 6, 3), "ResNet50_Weights"),
    },
)


class MissingWeightsError(FileNotFoundError):
    """Pretrained weights are not in the local torch hub cache; the message names the file and its place."""


def pretrained_weights_path(arch: str) -> Path:
    """Where the ImageNet weights file of ``arch`` must lie: ``torch.hub.get_dir()/checkpoints/<file>``."""
    weights = _weights_enum(arch)
    return Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name


def _weights_enum(arch: str):
    return getattr(torchvision.models, ARCHS[arch][2]).IMAGENET1K_V1


def layer_channels(arch: str, base_width: int = 64) -> dict[str, int]:
    """Output channels of every layer of ``arch`` with stem width ``base_width``."""
    expansion = ARCHS[arch][0].expansion
    w = base_width
    return {
        "conv1": w,
        "layer1": w * expansion,
        "layer2": 2 * w * expansion,
        "layer3": 4 * w * expansion,
        "layer4": 8 * w * expansion,
    }


class InstanceBatchNorm2d(nn.Module):
    """IBN-a's normalisation of ``channels`` (N, C, H, W) channels: the first ``C // 2`` by an affine
    ``InstanceNorm2d`` (statistics of each image alone, in training and inference), the others by a
    ``BatchNorm2d`` (an ``nn.Identity`` once :func:`ltr.models.fold_bn.fold_batchnorm` has folded it into the
    convolution before). Shape-preserving; in eval mode each image's output depends on no other image.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.split = channels // 2
        self.instance = nn.InstanceNorm2d(self.split, affine=True)
        self.batch = nn.BatchNorm2d(channels - self.split)

    def forward(self, x: Tensor) -> Tensor:
        a, b = x[:, : self.split], x[:, self.split :]
        return torch.cat([self.instance(a), self.batch(b)], dim=1)


def _build_trunk(arch: str, base_width: int, num_stages: int, norm: str = "batch") -> nn.ModuleDict:
    """A torchvision-layout ResNet trunk (conv1, bn1, layer1..layer<num_stages>) of torchvision blocks; with
    ``norm="ibn"`` the ``bn1`` of every block in :data:`IBN_LAYERS` is an :class:`InstanceBatchNorm2d`."""
    block, counts, _ = ARCHS[arch]
    w = base_width
    modules: dict[str, nn.Module] = {
        "conv1": nn.Conv2d(3, w, kernel_size=7, stride=2, padding=3, bias=False),
        "bn1": nn.BatchNorm2d(w),
    }
    inplanes = w
    for stage in range(num_stages):
        planes = w * 2**stage
        stride = 1 if stage == 0 else 2
        out = planes * block.expansion
        downsample = None
        if stride != 1 or inplanes != out:
            downsample = nn.Sequential(
                nn.Conv2d(inplanes, out, kernel_size=1, stride=stride, bias=False), nn.BatchNorm2d(out)
            )
        blocks = [block(inplanes, planes, stride, downsample)]
        blocks += [block(out, planes) for _ in range(counts[stage] - 1)]
        modules[f"layer{stage + 1}"] = nn.Sequential(*blocks)
        inplanes = out
    for m in modules.values():
        for sub in m.modules():
            if isinstance(sub, nn.Conv2d):
                nn.init.kaiming_normal_(sub.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(sub, nn.BatchNorm2d):
                nn.init.ones_(sub.weight)
                nn.init.zeros_(sub.bias)
    if norm == "ibn":
        for name in IBN_LAYERS:
            for block in modules.get(name, ()):
                block.bn1 = InstanceBatchNorm2d(block.bn1.num_features)
    return nn.ModuleDict(modules)


class ResNetBackbone(nn.Module):
    """ResNet-18/50 feature extractor: ``forward(images (N, 3, H, W)) -> {layer: (N, C_layer, H/s, W/s)}``.

    Args:
        arch: ``"resnet18"`` or ``"resnet50"``.
        output_layers: which of ``conv1, layer1, layer2, layer3, layer4`` to return.
        pretrained: load torchvision's ImageNet weights from the local hub cache (``base_width`` must be 64).
        frozen_layers: layers (``conv1`` means conv1 + bn1) whose parameters get ``requires_grad=False`` and
            whose BatchNorm layers stay in eval mode even when the module is in train mode.
        base_width: stem width; 64 for the standard networks, smaller for reduced-width CPU variants.
        fixed_features: layers (``layer2``, ``layer3``) to which
            :class:`~ltr.models.fixed_features.GradientColourFeatures` of the images, at that layer's stride, are
            appended after the learned channels (``channels`` counts both; ``fixed_channels`` the appended ones).
        norm: ``"batch"`` (torchvision's trunk) or ``"ibn"`` (IBN-a; module docstring); ``"ibn"`` has no
            pretrained weights.
    """

    def __init__(
        self,
        *,
        arch: str = "resnet50",
        output_layers: Sequence[str] = ("layer2", "layer3"),
        pretrained: bool = True,
        frozen_layers: Sequence[str] = (),
        base_width: int = 64,
        fixed_features: Sequence[str] = (),
        norm: str = "batch",
    ) -> None:
        super().__init__()
        channels = layer_channels(arch, base_width)  # an unknown arch is the first error
        for name, names in (
            ("output_layers", output_layers),
            ("frozen_layers", frozen_layers),
            ("fixed_features", fixed_features),
        ):
            bad = [n for n in names if n not in LAYERS]
            if bad:
                raise ValueError(f"{name} has unknown layer(s) {bad}; known: {list(LAYERS)}")
        if not output_layers:
            raise ValueError("output_layers must name at least one layer")
        if base_width < 1:
            raise ValueError(f"base_width must be positive, got {base_width}")
        if pretrained and base_width != 64:
            raise ValueError(f"pretrained weights exist only for base_width=64, got base_width={base_width}")
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {list(NORMS)}, got {norm!r}")
        if pretrained and norm != "batch":
            raise ValueError(f"pretrained weights exist only for norm='batch', got norm={norm!r}")
        self.arch = arch
        self.output_layers = tuple(output_layers)
        self.frozen_layers = tuple(frozen_layers)
        self.base_width = base_width
        self.norm = norm
        self.strides = dict(STRIDES)
        # one module for all layers: the cell maps are shared between strides
        self.fixed = (
            GradientColourFeatures(strides=[STRIDES[n] for n in fixed_features]) if fixed_features else None
        )
        self.fixed_channels = (
            {n: self.fixed.channels[STRIDES[n]] for n in fixed_features} if self.fixed else {}
        )
        self.channels = {n: c + self.fixed_channels.get(n, 0) for n, c in channels.items()}
        deepest = max(LAYERS.index(n) for n in self.output_layers)
        self._run_layers = LAYERS[: deepest + 1]
        num_stages = deepest  # conv1 is index 0, layer_k is index k

        trunk = _build_trunk(arch, base_width, num_stages, norm)
        if pretrained:
            trunk.load_state_dict(_pretrained_state(arch, num_stages))
        self.conv1 = trunk["conv1"]
        self.bn1 = trunk["bn1"]
        for k in range(1, num_stages + 1):
            setattr(self, f"layer{k}", trunk[f"layer{k}"])
        for name in self.frozen_layers:
            for p in self._layer_modules(name).parameters():
                p.requires_grad_(False)
        # the longest prefix of layers that is fully frozen can run without building a graph
        self._frozen_prefix = 0
        for name in self._run_layers:
            if name not in self.frozen_layers:
                break
            self._frozen_prefix += 1

    def _layer_modules(self, name: str) -> nn.Module:
        if name == "conv1":
            return nn.ModuleList([self.conv1, self.bn1])
        if not hasattr(self, name):
            raise ValueError(
                f"layer {name!r} is not built (deepest output layer is {self._run_layers[-1]!r})"
            )
        return getattr(self, name)

    def train(self, mode: bool = True) -> ResNetBackbone:
        """Set train/eval mode; BatchNorm inside frozen layers always stays in eval mode."""
        super().train(mode)
        for name in self.frozen_layers:
            if name in self._run_layers:
                for m in self._layer_modules(name).modules():
                    if isinstance(m, nn.modules.batchnorm._BatchNorm):
                        m.eval()
        return self

    def _run(self, name: str, x: Tensor) -> Tensor:
        if name == "conv1":
            return torch.relu(self.bn1(self.conv1(x)))
        if name == "layer1":
            x = nn.functional.max_pool2d(x, kernel_size=3, stride=2, padding=1)
        return getattr(self, name)(x)

    def forward(self, images: Tensor, output_layers: Sequence[str] | None = None) -> dict[str, Tensor]:
        """Features of ``images`` (N, 3, H, W), ImageNet-normalised RGB.

        Returns ``{layer: (N, C_layer, ceil(H / stride), ceil(W / stride))}`` for ``output_layers`` (default:
        the constructor's).
        """
        if images.dim() != 4 or images.shape[1] != 3:
            raise ValueError(f"images must be (N, 3, H, W), got shape {tuple(images.shape)}")
        wanted = self.output_layers if output_layers is None else tuple(output_layers)
        missing = [n for n in wanted if n not in self._run_layers]
        if missing:
            raise ValueError(
                f"layers {missing} are not built; this backbone stops at {self._run_layers[-1]!r}"
            )
        last = max(self._run_layers.index(n) for n in wanted)
        out: dict[str, Tensor] = {}
        x = images
        for i, name in enumerate(self._run_layers[: last + 1]):
            if i < self._frozen_prefix:
                with torch.no_grad():
                    x = self._run(name, x)
            else:
                x = self._run(name, x)
            if name in wanted:
                out[name] = x
        appended = [n for n in self.fixed_channels if n in out]
        if appended:
            fixed = self.fixed(images)
            for name in appended:
                out[name] = torch.cat([out[name], fixed[STRIDES[name]]], dim=1)
        return out


def _pretrained_state(arch: str, num_stages: int) -> dict[str, Tensor]:
    """The trunk part of torchvision's ImageNet state dict, read from the hub cache only (no download)."""
    path = pretrained_weights_path(arch)
    if not path.is_file():
        weights = _weights_enum(arch)
        raise MissingWeightsError(
            f"pretrained {arch} weights not found: put the file {path.name} (from {weights.url}) at {path} "
            f"(torch hub cache = torch.hub.get_dir(), set TORCH_HOME to move it), or build the backbone with "
            f"pretrained=False"
        )
    # the file is in the cache, so torchvision's weights API reads it from there (no download)
    state = _weights_enum(arch).get_state_dict(progress=False, map_location="cpu", weights_only=True)
    keep = ("conv1.", "bn1.") + tuple(f"layer{k}." for k in range(1, num_stages + 1))
    return {k: v for k, v in state.items() if k.startswith(keep)}


__all__ = [
    "LAYERS",
    "STRIDES",
    "MissingWeightsError",
    "ResNetBackbone",
    "layer_channels",
    "pretrained_weights_path",
]
