"""Box refinement by gradient ascent on the box head's f(x, y), all candidate boxes as one batch.

The ascent takes f and df/dbox from one function (:data:`ScoreGradFn`: autograd of the box head, or a model
that returns both); the step in the relative space applies the chain rule written out
(:func:`relative_gradient`).

Candidates (pytracking's DiMP rules): the classifier's box and ``num_random`` jittered copies, centre moved by
U(-1/2, 1/2) x ``jitter_pos`` x sqrt(w h) and sizes by U(-1/2, 1/2) x ``jitter_size`` x sqrt(w h), each side
kept >= a third of the classifier box's shorter side. Then ``num_iters`` steps of

- ``space="default"`` (DiMP-50): xywh += step x df/dxywh x (w, h, w, h);
- ``space="relative"`` (SuperDiMP, PrDiMP): every box in the rel space of the classifier box (``ltr.ops.boxes``;
  the reference's (cx/w0, cy/h0, log w, log h) up to constant offsets, so the same steps), rel += step x df/drel;

with the step multiplied by ``decay`` after each iteration. ``mode="s1"`` replaces the fixed-step update by
the paper's Algorithm S1 in the relative space (a step is kept only if f increases, else that box's step is
multiplied by ``decay``); it is our option, not the reference's.

Selection: sizes clamped to >= 1, boxes with an aspect ratio outside (1/``max_aspect_ratio``,
``max_aspect_ratio``) dropped, and the ``top_k`` best averaged (xywh), ranked by f as last evaluated: in the
fixed-step modes that is f before the last step, as in the reference. With no usable box the result is None.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import torch
from torch import Tensor

from ltr.ebm.predict import gradient_ascent, value_and_grad
from ltr.ops.boxes import rel_to_xywh, xywh_to_rel

BoxScoreFn = Callable[[Tensor], Tensor]  # (B, S, 4) xywh -> f (B, S)
ScoreGradFn = Callable[[Tensor], tuple[Tensor, Tensor]]  # (B, S, 4) xywh -> f (B, S), df/dxywh (B, S, 4)
RefineSpace = Literal["default", "relative"]
RefineMode = Literal["plain", "s1"]


class RefineResult(NamedTuple):
    """box: (4,) xywh refined box, or None when every candidate was dropped; boxes: (S, 4) xywh refined
    candidates (sizes clamped to >= 1); scores: (S,) f used for ranking; used: (S,) bool, the candidates
    averaged into ``box``. Same coordinates as the input box."""

    box: Tensor | None
    boxes: Tensor
    scores: Tensor
    used: Tensor


def candidate_boxes(
    box_xywh: Tensor, num_random: int, jitter_pos: float, jitter_size: float, draws: Tensor
) -> Tensor:
    """(..., 1 + num_random, 4) xywh: each box of ``box_xywh`` (..., 4) first, then its jitters from ``draws``
    (..., num_random, 4) uniform [0, 1) numbers (see the module docstring). Each box's candidates are those it
    gets alone, bit for bit (the shorter side's third is rounded from float64, as a Python number would be)."""
    box = box_xywh[..., None, :]
    if num_random == 0:
        return box.clone()
    side = box[..., 2:].prod(-1, keepdim=True).sqrt()
    factor = side * torch.tensor(
        [jitter_pos, jitter_pos, jitter_size, jitter_size], dtype=box.dtype, device=box.device
    )
    jitter = (draws.to(box.dtype) - 0.5) * factor
    least = (box[..., 2:].amin(-1, keepdim=True).double() / 3).to(box.dtype)
    size = torch.maximum(box[..., 2:] + jitter[..., 2:], least)
    centre = box[..., :2] + box[..., 2:] / 2 + jitter[..., :2]
    return torch.cat([box, torch.cat([centre - size / 2, size], dim=-1)], dim=-2)


def _step_tensor(step_length: float | tuple[float, float], like: Tensor) -> Tensor:
    """(4,) step of (x, y, w, h), filled by kernels on ``like``'s device (no copy from the host, which a CUDA
    graph's capture forbids): one value for all four, or (position, size)."""
    values = torch.as_tensor(step_length, dtype=torch.float64).reshape(-1).tolist()  # host numbers
    position, size = values * 2 if len(values) == 1 else values
    step = like.new_empty(4)
    step[:2] = position
    step[2:] = size
    return step


def score_and_grad(score_fn: BoxScoreFn) -> ScoreGradFn:
    """The :data:`ScoreGradFn` of a differentiable score: f and df/dboxes by autograd."""
    return lambda boxes: value_and_grad(score_fn, boxes)


class _FromScoreGrad(torch.autograd.Function):
    """f(boxes) whose backward is the gradient ``score_grad`` computed with it (for Algorithm S1, which
    takes gradients in the relative space by autograd)."""

    @staticmethod
    def forward(ctx: Any, boxes: Tensor, score_grad: ScoreGradFn) -> Tensor:  # type: ignore[override]
        scores, grad = score_grad(boxes)
        ctx.save_for_backward(grad)
        return scores

    @staticmethod
    def backward(ctx: Any, grad_scores: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (grad,) = ctx.saved_tensors
        return grad_scores[..., None] * grad, None


def ascend(
    score_grad: ScoreGradFn,
    boxes: Tensor,
    *,
    space: RefineSpace,
    mode: RefineMode,
    num_iters: int,
    step_length: float | tuple[float, float],
    decay: float,
) -> tuple[Tensor, Tensor]:
    """Refine (B, S, 4) xywh ``boxes`` by the scores and gradients of ``score_grad`` (:func:`score_and_grad`
    of a differentiable score, or a model that computes both); returns the boxes (B, S, 4) and the scores
    (B, S) to rank them by."""
    step = _step_tensor(step_length, boxes)
    reference = boxes[:, :1].clone()
    if mode == "s1":
        result = gradient_ascent(
            lambda rel: _FromScoreGrad.apply(rel_to_xywh(rel, reference), score_grad),
            xywh_to_rel(boxes, reference),
            step_length=step.expand(4),
            num_iters=num_iters,
            decay=decay,
            mode="s1",
        )
        return rel_to_xywh(result.y, reference), result.scores
    scores = boxes.new_zeros(boxes.shape[:2])
    if space == "default":
        for _ in range(num_iters):
            scores, grad = score_grad(boxes)
            boxes = boxes + step * grad * boxes[..., 2:].repeat(1, 1, 2)
            step = step * decay
        return boxes, scores
    if space != "relative":
        raise ValueError(f"refinement space must be 'default' or 'relative', got {space!r}")
    rel = xywh_to_rel(boxes, reference)
    for _ in range(num_iters):
        boxes = rel_to_xywh(rel, reference)
        scores, grad = score_grad(boxes)
        rel = rel + step * relative_gradient(grad, boxes, reference)
        step = step * decay
    return rel_to_xywh(rel, reference), scores


def relative_gradient(grad_xywh: Tensor, boxes: Tensor, reference: Tensor) -> Tensor:
    """df/drel (..., 4) from df/dxywh (..., 4) at ``boxes`` (..., 4) xywh, for the rel coordinates of
    ``reference`` (broadcastable (..., 4) xywh; ``ltr.ops.boxes.xywh_to_rel``): the chain rule through
    x = cx0 + rel0 w0 - w / 2, w = w0 exp(rel2) (and the same for y, h), written out instead of taken by
    autograd, which costs more than the rest of a step on a CPU; equal to autograd's up to float32 rounding."""
    position, size = grad_xywh[..., :2], grad_xywh[..., 2:]
    return torch.cat([position * reference[..., 2:], (size - 0.5 * position) * boxes[..., 2:]], dim=-1)


class AscentOptions(NamedTuple):
    """The ascent's rules (:func:`ascend`'s keywords; the module docstring), hashable so that a backend can
    key what it prepares for them (``step_length`` a float or a (position, size) tuple)."""

    space: RefineSpace = "relative"
    mode: RefineMode = "plain"
    num_iters: int = 10
    step_length: float | tuple[float, float] = 2.5e-3
    decay: float = 1.0


def select_refined(
    boxes: Tensor, scores: Tensor, *, max_aspect_ratio: float = 6.0, top_k: int = 3
) -> list[RefineResult]:
    """One :class:`RefineResult` per image of refined candidates (B, S, 4) xywh and their scores (B, S), on any
    device (see the module docstring, "Selection"); the results are on the CPU (rows of batched tensors).

    All images are decided at once: the usable candidates' ``top_k`` best by one ``topk`` over scores with
    the unusable ones at -inf, averaged in the order of their scores, as for each image alone (equal scores
    may be taken in another order)."""
    boxes, scores = boxes.detach().cpu(), scores.detach().cpu()  # one transfer; the selection is tiny
    boxes = torch.cat([boxes[..., :2], boxes[..., 2:].clamp(min=1)], dim=-1)
    aspect = boxes[..., 2] / boxes[..., 3]
    keep = (aspect < max_aspect_ratio) & (aspect > 1 / max_aspect_ratio) & torch.isfinite(scores)
    k = min(top_k, scores.shape[1])
    order = scores.masked_fill(~keep, -math.inf).topk(k, dim=1).indices  # (B, k), best first
    counts = keep.sum(dim=1).clamp(max=k)
    picked = boxes.gather(1, order[..., None].expand(-1, -1, 4))  # (B, k, 4)
    used = torch.zeros_like(keep).scatter_(1, order, torch.arange(k) < counts[:, None])
    full = picked.mean(dim=1)  # the images with k usable candidates (nearly all)
    results = []
    # each image's rows as views, one unbind per tensor instead of one indexing per image
    rows = zip(*(t.unbind(0) for t in (full, picked, boxes, scores, used)), strict=True)
    for n, (mean, best, candidates, values, averaged) in zip(counts.tolist(), rows, strict=True):
        box = None if n == 0 else mean if n == k else best[:n].mean(dim=0)
        results.append(RefineResult(box, candidates, values, averaged))
    return results
