"""MixStyle (Zhou, Yang, Qiao and Xiang, "Domain Generalization with MixStyle", ICLR 2021): in training, the
per-image channel statistics of a feature map are mixed with those of another image of the batch.

A feature map's per-channel mean and standard deviation over space carry an image's style (contrast,
colour, texture energy) more than its content. Replacing them, with probability ``p`` per batch, by a convex
mixture of the image's own and those of a randomly chosen other image of the batch (weights drawn from
Beta(alpha, alpha) per image) shows the later layers the same content in many styles, so what they learn
depends less on the styles of the training images. Identity in eval mode, so trackers, exports and folded
networks never see it.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class MixStyle(nn.Module):
    """``forward(x (N, C, H, W)) -> (N, C, H, W)``: in train mode, with probability ``p``, every image's
    per-channel spatial mean ``mu`` and standard deviation ``sigma`` become ``lam * own + (1 - lam) *
    other``, ``other`` the statistics of image ``perm[i]`` of a random permutation of the batch and ``lam``
    drawn from Beta(``alpha``, ``alpha``) per image; the statistics are taken without gradient, as in the
    paper. Identity in eval mode, for ``p == 0`` and for batches of one image. Random numbers come from
    torch's global generator (seeded by the trainer)."""

    def __init__(self, p: float = 0.5, alpha: float = 0.1, eps: float = 1e-6) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"MixStyle p must be in [0, 1], got {p!r}")
        if alpha <= 0.0:
            raise ValueError(f"MixStyle alpha must be positive, got {alpha!r}")
        self.p = p
        self.alpha = alpha
        self.eps = eps

    def extra_repr(self) -> str:
        return f"p={self.p}, alpha={self.alpha}"

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0 or x.shape[0] < 2:
            return x
        if torch.rand(()).item() >= self.p:
            return x
        n = x.shape[0]
        mu = x.mean(dim=(2, 3), keepdim=True).detach()
        sigma = (x.var(dim=(2, 3), keepdim=True) + self.eps).sqrt().detach()
        normed = (x - mu) / sigma
        lam = torch.distributions.Beta(self.alpha, self.alpha).sample((n, 1, 1, 1)).to(x)
        perm = torch.randperm(n, device=x.device)
        mu_mix = lam * mu + (1 - lam) * mu[perm]
        sigma_mix = lam * sigma + (1 - lam) * sigma[perm]
        return normed * sigma_mix + mu_mix
