"""Fixed (not learned) colour and gradient-orientation features at the classifier's stride.

Correlation-filter trackers (KCF's HOG, CSRT's HOG and colour names) learn their target model online on
hand-made features, which work on any footage. :class:`GradientColourFeatures` gives DiMP's online filter
the same kind of channels next to the learned ones (``NetConfig.fixed_clf_features``), for networks trained
on data that may not look like the footage they track.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class GradientColourFeatures(nn.Module):
    """(N, 3, H, W) ImageNet-normalised RGB -> ``{stride: (N, C, ceil(H / stride), ceil(W / stride))}``.

    Per ``cell`` x ``cell`` pixel cell: the mean colour (3 channels) and a histogram of unsigned gradient
    orientations (``bins`` channels, magnitude-weighted, each bin's weight ``max(0, cos 2(theta - theta_b))``)
    divided by the mean gradient magnitude of the 3 x 3 cells around it (HOG's contrast normalisation). For
    each of ``strides``, the ``stride / cell`` squared cells of every output position become channels (pixel
    unshuffle), so ``C = channels[stride] = (3 + bins) * (stride / cell)^2``; each channel has its spatial
    mean removed per image, so the features describe the crop relative to itself. The cells are computed
    once for all strides, on the image padded (replicated edges) to a multiple of the largest stride. No
    parameters.
    """

    def __init__(self, *, strides: Sequence[int] = (16,), cell: int = 4, bins: int = 6) -> None:
        super().__init__()
        if not strides:
            raise ValueError("GradientColourFeatures: strides must name at least one stride")
        bad = [s for s in strides if s % cell]
        if bad:
            raise ValueError(f"GradientColourFeatures: strides {bad} must be multiples of cell ({cell})")
        self.strides = tuple(int(s) for s in strides)
        self.cell, self.bins = cell, bins
        self.channels = {s: (3 + bins) * (s // cell) ** 2 for s in self.strides}
        sobel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 8
        self.register_buffer("sobel", torch.stack([sobel, sobel.t()])[:, None], persistent=False)
        angles = torch.arange(bins, dtype=torch.float32) * (2 * math.pi / bins)  # 2 theta_b
        dirs = torch.stack([angles.cos(), angles.sin()], 1)  # (bins, 2): a 1 x 1 conv over (cos, sin)
        self.register_buffer("bin_dirs", dirs[:, :, None, None], persistent=False)

    def forward(self, images: Tensor) -> dict[int, Tensor]:
        if images.dim() != 4 or images.shape[1] != 3:
            raise ValueError(f"images must be (N, 3, H, W), got shape {tuple(images.shape)}")
        h, w = images.shape[-2:]
        multiple = max(self.strides)
        ph, pw = -h % multiple, -w % multiple
        if ph or pw:
            images = F.pad(images, (0, pw, 0, ph), mode="replicate")
        grey = images.mean(dim=1, keepdim=True)
        g = F.conv2d(F.pad(grey, (1, 1, 1, 1), mode="replicate"), self.sobel)  # (N, 2, H, W): gx, gy
        gx, gy = g[:, :1], g[:, 1:]
        # clamped rather than offset: exporters may fold an added tiny constant away, and a flat patch would
        # then give 0 / 0
        mag = (gx * gx + gy * gy).clamp_min(1e-8).sqrt()
        # (cos 2 theta, sin 2 theta) * mag, then each bin's cosine weight
        double = torch.cat([gx * gx - gy * gy, 2 * gx * gy], dim=1) / mag
        hist = torch.relu(F.conv2d(double, self.bin_dirs))
        hist = F.avg_pool2d(hist, self.cell)
        contrast = F.avg_pool2d(F.avg_pool2d(mag, self.cell), 3, stride=1, padding=1, count_include_pad=False)
        cells = torch.cat([F.avg_pool2d(images, self.cell), hist / (contrast + 0.05)], dim=1)
        out = {}
        for stride in self.strides:
            r = stride // self.cell
            rows, cols = -(-h // stride) * r, -(-w // stride) * r  # the cells of ceil(H / stride) positions
            part = cells[..., :rows, :cols]
            # all colour channels first, then all orientation channels
            f = torch.cat([F.pixel_unshuffle(part[:, :3], r), F.pixel_unshuffle(part[:, 3:], r)], dim=1)
            out[stride] = f - f.mean(dim=(2, 3), keepdim=True)
        return out
