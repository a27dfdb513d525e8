"""Classification feature head: 3x3 conv on backbone layer3, then instance L2 normalisation."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

#: root-mean-square below which fixed features are not normalised to full size: well below that of a
#: textured crop's GradientColourFeatures, well above a uniform crop's rounding noise
FIXED_RMS_FLOOR = 0.01


class InstanceL2Norm(nn.Module):
    """Scale every feature map to a fixed L2 norm over (C, H, W).

    ``y = scale * x * sqrt(C H W / (sum_{c,h,w} x^2 + eps + C H W rms_floor^2))``, so ``||y||_2 = scale *
    sqrt(C H W)`` per sample and the root-mean-square element is ``scale`` (less for inputs whose own
    root-mean-square is not well above ``rms_floor``: those are not blown up to full size). Input and output
    (N, C, H, W).
    """

    def __init__(self, *, scale: float = 1.0, eps: float = 1e-5, rms_floor: float = 0.0) -> None:
        super().__init__()
        self.scale = scale
        self.eps = eps
        self.rms_floor = rms_floor

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4:
            raise ValueError(f"InstanceL2Norm: input must be (N, C, H, W), got shape {tuple(x.shape)}")
        numel = x.shape[1] * x.shape[2] * x.shape[3]
        sq = x.pow(2).sum(dim=(1, 2, 3), keepdim=True)
        return x * (self.scale * (numel / (sq + self.eps + numel * self.rms_floor**2)).sqrt())


class ClassifierFeatureHead(nn.Module):
    """Conv3x3 (in_channels -> out_channels, no bias) + :class:`InstanceL2Norm` with scale
    ``sqrt(1 / (C_out * filter_size^2))``.

    With that scale a filter of size ``filter_size`` correlated with a feature patch of the same norm gives
    scores of order one. ``forward((N, C_in + fixed_channels, H, W)) -> (N, C_out, H, W)``, C_out =
    out_channels + fixed_channels: the last ``fixed_channels`` input channels (not learned features, see
    ``ResNetBackbone(fixed_features=("layer3",))``) skip the conv and are normalised on their own, with the same
    scale, so both parts keep their share of the norm. Their norm has a floor (:data:`FIXED_RMS_FLOOR`): on
    a nearly uniform crop they are all close to zero, and normalising them to full size would turn rounding
    noise into features.
    """

    def __init__(
        self,
        *,
        in_channels: int = 1024,
        out_channels: int = 512,
        filter_size: int = 4,
        fixed_channels: int = 0,
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)
        total = out_channels + fixed_channels
        self.norm = InstanceL2Norm(scale=math.sqrt(1.0 / (total * filter_size * filter_size)))
        self.fixed_norm = (
            InstanceL2Norm(scale=self.norm.scale, rms_floor=FIXED_RMS_FLOOR) if fixed_channels else None
        )
        nn.init.kaiming_normal_(self.conv.weight, mode="fan_out", nonlinearity="relu")
        self.fixed_channels = fixed_channels
        self.out_channels = total

    def forward(self, x: Tensor) -> Tensor:
        if self.fixed_norm is None:
            return self.norm(self.conv(x))
        learned, fixed = x[:, : -self.fixed_channels], x[:, -self.fixed_channels :]
        return torch.cat([self.norm(self.conv(learned)), self.fixed_norm(fixed)], dim=1)
