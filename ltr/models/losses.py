"""Training losses of DiMPNet: the classifier's hinge-MSE over the filter iterates and the EBM box loss.

Box loss: any method of :mod:`ltr.ebm` on the energy box head. The sampling methods (``ml_is``, ``kld_is``,
``nce``, ``nce_plus``) score the batch's pre-drawn proposals (drawn by the data pipeline with the method's own
``sample``, in the *relative* box space of :mod:`ltr.ops.boxes` around the ground truth) and call
``loss_from_scores``. The score-function methods (``dsm``, ``ml_mcmc``, ``sm``) get a score function that maps
relative-space candidates to boxes and box-head scores; their label is the ground truth, rel = 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ltr.ebm import KLDIS, Candidates
from ltr.ops.boxes import rel_to_xywh

BoxScoreFn = Callable[[Tensor], Tensor]


def hinge_mse(scores: Tensor, labels: Tensor, *, threshold: float = 0.05) -> Tensor:
    """DiMP's hinge-MSE: mean squared error where the prediction goes through ReLU where label < threshold.

    Where ``label < threshold`` the target is 0 and only positive scores are penalised; elsewhere the target
    is the label. ``scores`` and ``labels`` have the same shape (any); returns a scalar.
    """
    if scores.shape != labels.shape:
        raise ValueError(f"hinge_mse: scores {tuple(scores.shape)} and labels {tuple(labels.shape)} differ")
    negative = labels < threshold
    prediction = torch.where(negative, torch.relu(scores), scores)
    target = torch.where(negative, torch.zeros_like(labels), labels)
    return torch.mean((prediction - target) ** 2)


@dataclass(frozen=True)
class ClassifierLossWeights:
    """Weights of the classifier loss over the filter iterates: the final filter, the initial filter and the
    intermediate iterates (``intermediate`` in total, spread evenly)."""

    final: float = 100.0
    initial: float = 100.0
    intermediate: float = 400.0


class ClassifierLoss(NamedTuple):
    """total: weighted scalar; per_iterate: (num_iter + 1,) unweighted hinge-MSE per iterate (detached)."""

    total: Tensor
    per_iterate: Tensor


def classifier_loss(
    score_iterates: Tensor,
    labels: Tensor,
    weights: ClassifierLossWeights = ClassifierLossWeights(),  # noqa: B008 (frozen dataclass)
    *,
    threshold: float = 0.05,
) -> ClassifierLoss:
    """Weighted hinge-MSE over the iterates.

    Args:
        score_iterates: (I, S_te, B, H', W') scores of the initial filter (index 0) to the final one (I - 1).
        labels: (S_te, B, H', W') test labels.
        weights: per-iterate weights; with I = 1 the single iterate gets ``initial + final``.
        threshold: the hinge threshold.
    """
    if score_iterates.dim() != labels.dim() + 1 or score_iterates.shape[1:] != labels.shape:
        raise ValueError(
            f"classifier_loss: score iterates {tuple(score_iterates.shape)} do not match labels "
            f"{tuple(labels.shape)} (expected (I, *labels.shape)); the labels must have the score map size"
        )
    losses = torch.stack([hinge_mse(s, labels, threshold=threshold) for s in score_iterates])
    num = losses.shape[0]
    coef = torch.zeros(num, dtype=losses.dtype, device=losses.device)
    coef[0] += weights.initial
    coef[-1] += weights.final
    if num > 2:
        coef[1:-1] += weights.intermediate / (num - 2)
    return ClassifierLoss((coef * losses).sum(), losses.detach())


class BoxLoss(NamedTuple):
    """loss: scalar; stats: detached scalars (the method's stats plus ``score_gt`` and ``score_gap``)."""

    loss: Tensor
    stats: dict[str, Tensor]


def is_sampling_method(method: Any) -> bool:
    """True for methods that take pre-drawn candidates (``sample`` / ``loss_from_scores``)."""
    return hasattr(method, "loss_from_scores") and hasattr(method, "sample")


def sampling_box_loss(
    method: Any, scores: Tensor, candidates: Candidates, *, score_gt: Tensor | None = None
) -> BoxLoss:
    """Box loss of a sampling method (``ml_is``, ``kld_is``, ``nce``, ``nce_plus``) from box-head scores.

    Args:
        method: the method object (has ``loss_from_scores``).
        scores: (N, S) f at the candidates (column 0 the positive for ml_is/nce/nce_plus).
        candidates: ``Candidates(y_rel (N, S, 4), log_q (N, S), log_p (N, S) or None)``.
        score_gt: (N,) f at the ground-truth box (statistics only): adds ``score_gt`` and makes
            ``score_gap`` the ground truth's mean score minus the samples'.
    """
    result = method.loss_from_scores(scores, candidates)
    noise = scores if isinstance(method, KLDIS) else scores[:, 1:]  # the others: column 0 = positive
    stats = {k: v.detach() for k, v in result.stats.items()}
    stats["score_samples"] = noise.detach().mean()
    if score_gt is not None:
        stats["score_gt"] = score_gt.detach().mean()
        stats["score_gap"] = stats["score_gt"] - stats["score_samples"]
    return BoxLoss(result.loss, stats)


def score_function_box_loss(method: Any, score_boxes: BoxScoreFn, gt_boxes: Tensor) -> BoxLoss:
    """Box loss of a score-function method (``dsm``, ``ml_mcmc``, ``sm``) in the relative box space.

    The method sees ``f(y_rel) = score_boxes(rel_to_xywh(y_rel, gt))`` with the label y = 0 (the ground
    truth). Every call also scores the ground-truth box (an extra column kept out of the loss) for the
    ``score_gt`` / ``score_gap`` statistics; ``sm`` has no samples and reports no gap.

    Args:
        method: the method object (callable as ``method(score_fn, labels)``).
        score_boxes: (N, S, 4) xywh boxes -> (N, S) box-head scores, differentiable w.r.t. the boxes.
        gt_boxes: (N, 4) xywh ground truth (the reference of the relative space).
    """
    n = gt_boxes.shape[0]
    gt_col = gt_boxes.detach()[:, None]
    recorded: list[Tensor] = []

    def score_fn(y_rel: Tensor) -> Tensor:
        boxes = rel_to_xywh(y_rel, gt_col.to(y_rel.dtype))
        out = score_boxes(torch.cat([boxes, gt_col.to(boxes.dtype)], dim=1))
        recorded.append(out[:, -1].detach())
        return out[:, :-1]

    labels = torch.zeros(n, 4, dtype=gt_boxes.dtype, device=gt_boxes.device)
    result = method(score_fn, labels)
    stats = {k: v.detach() for k, v in result.stats.items()}
    stats["score_gt"] = recorded[-1].mean()
    if "score_samples" in stats:
        stats["score_gap"] = stats["score_gt"] - stats["score_samples"]
    return BoxLoss(result.loss, stats)


def box_loss(
    method: Any,
    score_boxes: BoxScoreFn,
    gt_boxes: Tensor,
    *,
    proposals: Tensor | None = None,
    proposals_rel: Tensor | None = None,
    proposal_log_q: Tensor | None = None,
    proposal_log_p: Tensor | None = None,
) -> BoxLoss:
    """The EBM box loss of ``method`` (an :func:`ltr.ebm.build_method` object) on N test images.

    Sampling methods score ``proposals`` plus the ground truth in one ``score_boxes`` call (in train mode the
    box head's BatchNorm sees that extra box too: 1 of S + 1) and go through :func:`sampling_box_loss`; the
    others through :func:`score_function_box_loss`. ``score_gap`` = mean f(ground truth) - mean f(noise /
    proposal / MCMC / noisy samples).

    Args:
        method: the EBM training method.
        score_boxes: (N, S, 4) xywh boxes -> (N, S) box-head scores, differentiable w.r.t. the boxes.
        gt_boxes: (N, 4) xywh ground truth.
        proposals: (N, S, 4) xywh candidates (sampling methods; column 0 the positive for ml_is/nce/nce_plus).
        proposals_rel: (N, S, 4) the same candidates in rel space w.r.t. ``gt_boxes``.
        proposal_log_q: (N, S) their proposal/noise log density (rel space).
        proposal_log_p: (N, S) their label-density log density (``kld_is`` only).
    """
    if not is_sampling_method(method):
        return score_function_box_loss(method, score_boxes, gt_boxes)
    n = gt_boxes.shape[0]
    if proposals is None or proposals_rel is None or proposal_log_q is None:
        raise ValueError(
            f"box loss {type(method).__name__} needs the batch's proposals, proposals_rel, proposal_log_q"
        )
    if proposals.shape[0] != n or proposals.shape[-1] != 4:
        raise ValueError(f"proposals must be ({n}, S, 4) xywh, got {tuple(proposals.shape)}")
    s = proposals.shape[1]
    scores = score_boxes(torch.cat([proposals, gt_boxes.detach()[:, None].to(proposals.dtype)], dim=1))
    candidates = Candidates(proposals_rel, proposal_log_q, proposal_log_p)
    return sampling_box_loss(method, scores[:, :s], candidates, score_gt=scores[:, s])


__all__ = [
    "BoxLoss",
    "ClassifierLoss",
    "ClassifierLossWeights",
    "box_loss",
    "classifier_loss",
    "hinge_mse",
    "is_sampling_method",
    "sampling_box_loss",
    "score_function_box_loss",
]
