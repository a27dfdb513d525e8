"""Filter initializer: 3x3 conv, then PrRoIPool of the target box to a k x k filter, mean over images."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ltr.ops.prroi_pool import prroi_pool


def boxes_to_rois(boxes_xywh: Tensor) -> Tensor:
    """(S, B, 4) xywh image-pixel boxes -> (S*B, 5) rois ``(index, x1, y1, x2, y2)``, index = s * B + b."""
    if boxes_xywh.dim() != 3 or boxes_xywh.shape[-1] != 4:
        raise ValueError(f"boxes must be (S, B, 4) xywh, got shape {tuple(boxes_xywh.shape)}")
    flat = boxes_xywh.reshape(-1, 4)
    index = torch.arange(flat.shape[0], device=flat.device, dtype=flat.dtype)
    return torch.stack(
        [index, flat[:, 0], flat[:, 1], flat[:, 0] + flat[:, 2], flat[:, 1] + flat[:, 3]], dim=1
    )


class FilterInitializer(nn.Module):
    """Initial filter of each sequence from its train images.

    ``forward(features (S, B, C, H, W), boxes (S, B, 4) xywh image px) -> filters (B, C, k, k)``: a 3x3 conv
    (C -> C, bias), PrRoIPool of the box to k x k bins at ``1 / feature_stride``, mean over the S images.
    """

    def __init__(self, *, channels: int = 512, filter_size: int = 4, feature_stride: int = 16) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.filter_size = filter_size
        self.feature_stride = feature_stride
        nn.init.kaiming_normal_(self.conv.weight, mode="fan_out", nonlinearity="relu")
        nn.init.zeros_(self.conv.bias)

    def forward(self, features: Tensor, boxes_xywh: Tensor) -> Tensor:
        if features.dim() != 5:
            raise ValueError(
                f"FilterInitializer: features must be (S, B, C, H, W), got {tuple(features.shape)}"
            )
        if tuple(boxes_xywh.shape) != (*features.shape[:2], 4):
            raise ValueError(
                f"FilterInitializer: boxes must be ({features.shape[0]}, {features.shape[1]}, 4) xywh, "
                f"got {tuple(boxes_xywh.shape)}"
            )
        s, b = features.shape[:2]
        x = self.conv(features.reshape(s * b, *features.shape[2:]))
        rois = boxes_to_rois(boxes_xywh.to(x.dtype))
        pooled = prroi_pool(x, rois, self.filter_size, 1.0 / self.feature_stride)  # (S*B, C, k, k)
        return pooled.reshape(s, b, *pooled.shape[1:]).mean(dim=0)
