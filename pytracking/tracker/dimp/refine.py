"""Box refinement by gradient ascent on the box head's f(x, y), all candidate boxes as one batch.

Candidates: the classifier's box (its position with the current size) and ``num_random`` jittered copies
(centre moved by up to +-``jitter_pos``/2 x sqrt(w h), sizes by up to +-``jitter_size``/2 x sqrt(w h),
uniform; edges kept >= a third of the shorter side). Every candidate ascends f in the rel space of its own
start box (cx/w0, cy/h0, log w, log h; ``ltr.ops.boxes``) with :func:`ltr.ebm.predict.gradient_ascent`:

- ``mode="plain"``: the reference trackers' update, every step taken, step 2.5e-3, decay 1, 10 steps;
- ``mode="s1"``: the paper's Algorithm S1, a step is kept only if f increases, else its step is decayed.

Then boxes with an aspect ratio outside [1/``max_aspect_ratio``, ``max_aspect_ratio``] (or non-finite) are
dropped and the ``top_k`` best by f averaged (xywh). With no usable box the classifier's box is returned.
No host synchronisation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from ltr.ebm.predict import ValueAndGradFn, gradient_ascent
from ltr.models.box_score_grad import BoxValueAndGrad

BoxScoreFn = Callable[[Tensor], Tensor]  # (1, S, 4) xywh -> (1, S)


class RefineResult(NamedTuple):
    """box: (4,) xywh refined box; boxes: (S, 4) xywh all refined candidates; scores: (S,) f at them;
    used: (S,) bool, the candidates averaged into ``box``. Same coordinates as the input box."""

    box: Tensor
    boxes: Tensor
    scores: Tensor
    used: Tensor


def jitter_draws(num_random: int, generator: torch.Generator) -> Tensor:
    """(num_random, 4) float64 uniform [0, 1) draws for :func:`candidate_boxes`, on the generator's device (a
    generator on the box's device draws there: no upload)."""
    return torch.rand(num_random, 4, generator=generator, dtype=torch.float64, device=generator.device)


def candidate_boxes(
    box_xywh: Tensor,
    num_random: int,
    jitter_pos: float,
    jitter_size: float,
    generator: torch.Generator | None = None,
    *,
    draws: Tensor | None = None,
) -> Tensor:
    """(1 + num_random, 4) xywh: ``box_xywh`` (4,) first, then its random jitters (see module docstring).

    The jitters come from ``draws`` (num_random, 4) (:func:`jitter_draws`) if given, else from ``generator``;
    a caller that replays this arithmetic as a CUDA graph draws outside the graph and passes ``draws``.
    """
    box = box_xywh.reshape(4)
    if num_random == 0:
        return box[None]
    if draws is None:
        if generator is None:
            raise ValueError("candidate_boxes needs a generator or the draws")
        draws = jitter_draws(num_random, generator)
    if tuple(draws.shape) != (num_random, 4):
        raise ValueError(f"candidate_boxes: draws must be ({num_random}, 4), got {tuple(draws.shape)}")
    side = torch.sqrt(box[2] * box[3])
    u = draws.to(box.dtype) - 0.5
    factor = torch.stack([side * jitter_pos, side * jitter_pos, side * jitter_size, side * jitter_size])
    delta = u * factor
    min_edge = box[2:].min() / 3
    size = (box[2:] + delta[:, 2:]).clamp(min=min_edge)
    centre = box[:2] + 0.5 * box[2:] + delta[:, :2]
    return torch.cat([box[None], torch.cat([centre - 0.5 * size, size], dim=-1)])


def clip_xywh(boxes: Tensor, bounds_xyxy: Tensor) -> Tensor:
    """Boxes (..., 4) xywh with their edges clipped into ``bounds_xyxy`` (4,) (x1, y1, x2, y2)."""
    lo, hi = bounds_xyxy[:2], bounds_xyxy[2:]
    p1 = torch.minimum(torch.maximum(boxes[..., :2], lo), hi)
    p2 = torch.minimum(torch.maximum(boxes[..., :2] + boxes[..., 2:], lo), hi)
    return torch.cat([p1, p2 - p1], dim=-1)


def select_boxes(boxes: Tensor, scores: Tensor, fallback: Tensor, *, max_aspect_ratio: float, top_k: int):
    """Average of the ``top_k`` best valid boxes (S, 4) xywh by score (S,); ``fallback`` (4,) if none is
    valid.

    Returns (box (4,), used (S,) bool).
    """
    ratio = boxes[:, 2] / boxes[:, 3]
    valid = (
        torch.isfinite(boxes).all(-1)
        & torch.isfinite(scores)
        & (boxes[:, 2] > 0)
        & (boxes[:, 3] > 0)
        & (ratio < max_aspect_ratio)
        & (ratio > 1.0 / max_aspect_ratio)
    )
    masked = torch.where(valid, scores, torch.full_like(scores, float("-inf")))
    k = min(top_k, boxes.shape[0])
    top = masked.topk(k).indices
    used = torch.zeros_like(valid).index_fill(0, top, True) & valid  # fewer than k valid: only the valid ones
    weights = used.to(boxes.dtype)
    count = weights.sum()
    safe = torch.where(used[:, None], boxes, torch.zeros_like(boxes))
    mean = (safe * weights[:, None]).sum(0) / count.clamp(min=1)
    return torch.where(count > 0, mean, fallback), used


class RelBoxes:
    """The refinement's boxes as a function of its ascent variable, and the chain rule back, in few ops.

    ``boxes(rel)`` is ``clip_xywh(rel_to_xywh(rel, start), bounds_xyxy)`` (the same arithmetic in the same
    order, so the same numbers) and :meth:`vjp` its chain rule, autograd's numbers through those two
    functions for finite boxes (``tests/tracker/test_refine_chain.py``; a NaN corner gets a NaN gradient).
    Both axes and both corners are done at once and the clipping is one ``clamp``: the ascent calls them at
    every step, where each operation's dispatch costs about as much as its arithmetic on (1, S, 4) tensors.

    Args:
        start: (1, S, 4) xywh start boxes (rel 0).
        bounds_xyxy: None (no clipping), or (4,) (x1, y1, x2, y2), may be infinite.
    """

    def __init__(self, start: Tensor, bounds_xyxy: Tensor | None) -> None:
        self.size0 = start[..., 2:]  # (1, S, 2) w0, h0
        self.centre0 = start[..., :2] + 0.5 * self.size0  # as xywh_to_cxcywh
        self.lo = self.hi = None
        if bounds_xyxy is not None:
            self.lo = bounds_xyxy[:2].repeat(2)  # (4,): both corners
            self.hi = bounds_xyxy[2:].repeat(2)

    def corners(self, rel: Tensor) -> tuple[Tensor, Tensor]:
        """(unclipped xyxy corners (1, S, 4), sizes w h (1, S, 2)) of rel (1, S, 4)."""
        centre = self.centre0 + rel[..., :2] * self.size0
        size = self.size0 * torch.exp(rel[..., 2:])
        start = centre - 0.5 * size
        return torch.cat([start, start + size], dim=-1), size

    def boxes(self, rel: Tensor) -> Tensor:
        """(1, S, 4) xywh clipped boxes of rel (1, S, 4)."""
        return self.clipped(*self.corners(rel))

    def clipped(self, corners: Tensor, size: Tensor) -> Tensor:
        """(1, S, 4) xywh clipped boxes from :meth:`corners`' output."""
        if self.lo is None:
            return torch.cat([corners[..., :2], size], dim=-1)  # as rel_to_xywh
        corners = torch.clamp(corners, self.lo, self.hi)  # min(max(x, lo), hi), as clip_xywh
        return torch.cat([corners[..., :2], corners[..., 2:] - corners[..., :2]], dim=-1)

    def vjp(self, grad_boxes: Tensor, corners: Tensor, size: Tensor) -> Tensor:
        """d f / d rel (1, S, 4) from d f / d boxes (1, S, 4) xywh (the clipped boxes of :meth:`boxes`).

        ``corners``, ``size``: :meth:`corners` of the rel. A clipped corner gets no gradient, a corner
        exactly on a bound half of it (autograd's ``torch.maximum`` / ``torch.minimum`` tie convention).
        """
        end = grad_boxes[..., 2:]
        grad = torch.cat([grad_boxes[..., :2] - end, end], dim=-1)  # d f / d (x1, y1, x2, y2)
        if self.lo is not None:
            # (1 + sign(x - lo)) / 2 is 1 above the bound, 1/2 on it, 0 below; likewise below hi
            inner = torch.sign(corners - self.lo).add_(1.0)
            outer = torch.sign(self.hi - torch.maximum(corners, self.lo)).add_(1.0)
            grad = grad * inner.mul_(outer).mul_(0.25).to(grad.dtype)
        g_start, g_end = grad[..., :2], grad[..., 2:]
        # x1 = cx0 + r0 w0 - w / 2, x2 = cx0 + r0 w0 + w / 2, w = w0 exp(r2); likewise in y
        return torch.cat([(g_start + g_end) * self.size0, 0.5 * (g_end - g_start) * size], dim=-1)


def rel_value_and_grad(
    box_value_and_grad: BoxValueAndGrad, start: Tensor, bounds_xyxy: Tensor | None
) -> ValueAndGradFn:
    """rel (1, S, 4) -> (f (1, S), d f / d rel (1, S, 4)) for the boxes ``clip_xywh(rel_to_xywh(rel, start))``,
    from ``box_value_and_grad``: boxes (1, S, 4) xywh -> (f, d f / d boxes); ``start`` (1, S, 4) xywh."""
    chain = RelBoxes(start, bounds_xyxy)

    def value_and_grad(rel: Tensor) -> tuple[Tensor, Tensor]:
        corners, size = chain.corners(rel)
        scores, grad = box_value_and_grad(chain.clipped(corners, size))
        return scores, chain.vjp(grad, corners, size).to(rel.dtype)  # chain rule through rel and clip

    return value_and_grad


def refine_box(
    score_fn: BoxScoreFn,
    box_xywh: Tensor,
    *,
    mode: str,
    num_iters: int,
    step_length: float,
    decay: float,
    num_random: int,
    jitter_pos: float,
    jitter_size: float,
    max_aspect_ratio: float,
    top_k: int,
    generator: torch.Generator | None = None,
    bounds_xyxy: Tensor | None = None,
    box_value_and_grad: BoxValueAndGrad | None = None,
    draws: Tensor | None = None,
) -> RefineResult:
    """Refine ``box_xywh`` (4,) by gradient ascent of ``score_fn`` over it and its random jitters.

    ``bounds_xyxy`` (4,) (x1, y1, x2, y2, may be infinite): boxes are clipped to it wherever they are scored
    and returned (a projection: a clipped edge gets no gradient and stays at the bound).
    ``box_value_and_grad``: optional (1, S, 4) xywh -> (f (1, S), df/dboxes (1, S, 4)) computing the same f as
    ``score_fn`` with its gradient (``ltr.models.box_score_grad.BoxScorer``); the ascent then needs no
    autograd, and ``score_fn`` only scores its last step.
    ``draws``: the candidates' random draws (num_random, 4) (:func:`jitter_draws`) instead of ``generator``.
    """
    start = candidate_boxes(box_xywh, num_random, jitter_pos, jitter_size, generator, draws=draws)[None]
    to_boxes = RelBoxes(start, bounds_xyxy).boxes  # clip_xywh(rel_to_xywh(rel, start), bounds_xyxy)

    def score_rel(rel: Tensor) -> Tensor:
        return score_fn(to_boxes(rel))

    result = gradient_ascent(
        score_rel,
        torch.zeros_like(start),
        step_length=step_length,
        num_iters=num_iters,
        decay=decay,
        mode=mode,
        value_and_grad=None
        if box_value_and_grad is None
        else rel_value_and_grad(box_value_and_grad, start, bounds_xyxy),
    )
    boxes = to_boxes(result.y)[0]
    scores = result.scores[0]
    box, used = select_boxes(
        boxes, scores, box_xywh.reshape(4), max_aspect_ratio=max_aspect_ratio, top_k=top_k
    )
    return RefineResult(box, boxes, scores, used)
