"""f(x, y) for boxes as an :mod:`ltr.ebm` score function over the rel space around reference boxes.

Parameterisation (documented choice, see docs/detection.md): a candidate box is given in the rel space of
:mod:`ltr.ops.boxes` around a reference box (the ground truth in training, the detection being refined in
prediction): y = ((cx - cx0)/w0, (cy - cy0)/h0, log(w/w0), log(h/h0)). The sampling sigmas of appendix C
(0.0375 ... 0.3) are therefore fractions of the box size, and the label is y = 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ltr.detection.detector import LevelSpec
from ltr.models.detection import DetectionEnergyHead
from ltr.ops.boxes import rel_to_xywh, xywh_to_xyxy
from ltr.ops.prroi_pool import prroi_pool


class BoxScorer:
    """Score function (N, S, 4) rel candidates -> (N, S) f, for N reference boxes on a batch of images.

    Args:
        head: the energy head.
        features: one (B, C, h_l, w_l) tensor per level of ``levels`` (network-input resolution).
        levels: level names/strides and the size -> level rule.
        reference: (N, 4) xywh reference boxes in network-input pixels.
        image_index: (N,) long, which image of the batch each reference box belongs to.

    The pooling level of each box is fixed by its reference box, so f is smooth in y during refinement.
    """

    def __init__(
        self,
        head: DetectionEnergyHead,
        features: list[Tensor],
        levels: LevelSpec,
        reference: Tensor,
        image_index: Tensor,
    ) -> None:
        if reference.ndim != 2 or reference.shape[1] != 4:
            raise ValueError(f"reference must be (N, 4) xywh, got {tuple(reference.shape)}")
        if image_index.shape != reference.shape[:1]:
            raise ValueError(f"image_index must be (N,)={reference.shape[0]}, got {tuple(image_index.shape)}")
        self.head = head
        self.features = features
        self.levels = levels
        self.reference = reference
        self.image_index = image_index
        level = levels.assign(reference)
        self.groups = []
        for lv in sorted(set(level.tolist())):
            idx = (level == lv).nonzero().squeeze(1)
            # Pool only the images with boxes on this level, ordered by ascending box count. (Besides saving
            # work, this keeps prroi_pool's padded path correct: it takes the roi layout as dense when the
            # slots are the identity, which with this order happens only if all counts are equal.)
            images, local = torch.unique(image_index[idx], sorted=True, return_inverse=True)
            order = torch.argsort(torch.bincount(local, minlength=len(images)), stable=True)
            position = torch.empty_like(order)
            position[order] = torch.arange(len(order), device=order.device)
            self.groups.append((lv, idx, images[order], position[local]))

    def boxes(self, rel: Tensor) -> Tensor:
        """(N, S, 4) rel -> (N, S, 4) xywh network-input pixels."""
        return rel_to_xywh(rel, self.reference.unsqueeze(1))

    def __call__(self, rel: Tensor) -> Tensor:
        n, s, d = rel.shape
        if n != self.reference.shape[0] or d != 4:
            raise ValueError(
                f"candidates must be (N={self.reference.shape[0]}, S, 4), got {tuple(rel.shape)}"
            )
        xyxy = xywh_to_xyxy(self.boxes(rel))
        out = rel.new_empty(n, s)
        for lv, idx, images, local in self.groups:
            feats = self.features[lv].index_select(0, images)
            batch = local.to(rel.dtype)[:, None, None].expand(len(idx), s, 1)
            rois = torch.cat([batch, xyxy[idx]], dim=-1).reshape(-1, 5)
            pooled = prroi_pool(feats, rois, self.head.pool_size, 1.0 / self.levels.strides[lv])
            out = out.index_copy(0, idx, self.head(pooled).reshape(len(idx), s))
        return out
