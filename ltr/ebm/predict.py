"""Prediction by gradient ascent on f(x, y) (the paper's Algorithm S1), batched.

``y0`` holds S starting points for each of N inputs, (N, S, D); the score function maps (N, S, D) -> (N, S).
Every starting point runs its own ascent (own step length, own accept/reject decisions) and all of them are
evaluated together, one forward and one backward pass per iteration (a forward pass only in the last one, whose
gradient would go unused). There is no host synchronisation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

import torch
from torch import Tensor

ScoreFn = Callable[[Tensor], Tensor]
AscentMode = Literal["s1", "plain"]


class AscentResult(NamedTuple):
    """y: (N, S, D) refined targets; scores: (N, S) f at them; accepted: (N, S) number of accepted steps."""

    y: Tensor
    scores: Tensor
    accepted: Tensor


def value_and_grad(score_fn: ScoreFn, y: Tensor) -> tuple[Tensor, Tensor]:
    """f (N, S) and df/dy (N, S, D) at y (N, S, D) by autograd (also inside ``torch.no_grad``)."""
    with torch.enable_grad():
        y = y.detach().requires_grad_(True)
        f = score_fn(y)
        (g,) = torch.autograd.grad(f.sum(), y)
    return f.detach(), g.detach()


def gradient_ascent(
    score_fn: ScoreFn,
    y0: Tensor,
    *,
    step_length: float | Sequence[float] | Tensor,
    num_iters: int,
    decay: float = 0.5,
    mode: AscentMode = "s1",
) -> AscentResult:
    """Refine starting points y0 (N, S, D) by T = ``num_iters`` gradient-ascent steps y <- y + lambda * df/dy.

    Args:
        step_length: lambda, a float or one per target dimension (D,) (e.g. separate steps for position and
            size).
        decay: eta. In ``mode="s1"`` (Algorithm S1) a step is taken only if f increases, otherwise that
            point's lambda is multiplied by eta. In ``mode="plain"`` every step is taken and lambda is
            multiplied by eta after each iteration (the reference trackers' update; decay=1 keeps it fixed).
    """
    if mode not in ("s1", "plain"):
        raise ValueError(f"ascent mode must be 's1' or 'plain', got {mode!r}")
    if isinstance(step_length, (int, float)):  # a host number: no device round trip
        lam = torch.full_like(y0, float(step_length))
    else:
        step = torch.as_tensor(step_length, dtype=y0.dtype, device=y0.device)
        lam = step.expand(y0.shape).clone()
    y = y0.detach()

    f, g = value_and_grad(score_fn, y)
    accepted = torch.zeros(f.shape, dtype=torch.long, device=y.device)
    for it in range(num_iters):
        y_new = y + lam * g
        if it == num_iters - 1:  # the last gradient would go unused: forward only
            with torch.no_grad():
                f_new = score_fn(y_new).detach()
            g_new = g
        else:
            f_new, g_new = value_and_grad(score_fn, y_new)
        if mode == "plain":
            y, f, g = y_new, f_new, g_new
            lam = lam * decay
            accepted += 1
            continue
        better = f_new > f
        acc = better.unsqueeze(-1)
        y = torch.where(acc, y_new, y)
        g = torch.where(acc, g_new, g)
        f = torch.where(better, f_new, f)
        lam = torch.where(acc, lam, lam * decay)
        accepted += better.long()
    return AscentResult(y, f, accepted)
