"""Guided NMS (IoU-guided NMS, Jiang et al. ECCV 2018), vectorised.

Greedy per-class NMS ranks the boxes by a *localisation* confidence (here the energy f(x, y) at the box, as
the energy head takes the place of IoU-Net's IoU predictor) instead of the classification score. Each kept
box then takes the highest classification score of its cluster: the kept box itself and every box it
suppressed. With ``localisation = scores`` this is plain NMS.

Vectorisation: the greedy pass itself is torchvision's NMS on the ranks; the clusters follow from one IoU
matrix, since greedy NMS removes box j when it meets the first kept box (in rank order) of j's class that is
ranked before j and overlaps it by more than the threshold.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor
from torchvision.ops import batched_nms, box_iou


class NMSResult(NamedTuple):
    """keep: (K,) indices into the input, by descending localisation; scores: (K,) cluster-max scores;
    cluster: (N,) for every input box, the position in ``keep`` of the box that absorbed it."""

    keep: Tensor
    scores: Tensor
    cluster: Tensor


def guided_nms(
    boxes: Tensor, scores: Tensor, localisation: Tensor, labels: Tensor, iou_threshold: float
) -> NMSResult:
    """Guided NMS of one image.

    Args:
        boxes: (N, 4) xyxy.
        scores: (N,) classification scores.
        localisation: (N,) localisation confidence that ranks the boxes (higher = better).
        labels: (N,) class labels; boxes of different classes never suppress each other.
        iou_threshold: a box is suppressed by a kept box of its class with IoU strictly above this.
    """
    n = boxes.shape[0]
    for name, t in (("scores", scores), ("localisation", localisation), ("labels", labels)):
        if t.shape != (n,):
            raise ValueError(f"guided_nms: {name} must be ({n},), got {tuple(t.shape)}")
    if n == 0:
        empty = torch.zeros(0, dtype=torch.long, device=boxes.device)
        return NMSResult(empty, scores.new_zeros(0), empty)
    order = torch.sort(localisation, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank[order] = torch.arange(n, device=boxes.device)
    # ranks as the NMS score: ties in the localisation are broken by input order, the same order as below
    keep = batched_nms(boxes.float(), (n - rank).float(), labels, iou_threshold)
    keep = keep[torch.argsort(rank[keep])]
    iou = box_iou(boxes[keep].float(), boxes.float())  # (K, N)
    absorbs = (
        (labels[keep][:, None] == labels[None, :])
        & (rank[keep][:, None] <= rank[None, :])
        & ((iou > iou_threshold) | (keep[:, None] == torch.arange(n, device=boxes.device)[None, :]))
    )
    cluster = absorbs.to(torch.int8).argmax(dim=0)  # first kept box (in rank order) that absorbs each box
    new_scores = scores[keep].scatter_reduce(0, cluster, scores, reduce="amax", include_self=True)
    return NMSResult(keep, new_scores, cluster)
