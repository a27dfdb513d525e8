"""Target localisation on the classifier's score map: DiMP's four states and distractor handling.

The rules are those of pytracking's DiMP tracker (``localize_advanced``):

- ``not_found``: the highest score is below ``target_not_found``; the tracker keeps its position.
- a second peak is searched outside the target neighbourhood (``target_neighborhood_scale`` times the target
  size, in cells, around the first peak; rounded to whole cells and cut at the map's edges);
- if it scores above ``distractor`` times the first: the peaks' displacements from the previous position
  (in cells) are compared with ``displacement_scale * sqrt(H' W') / 2``. Exactly one peak near: that one,
  ``hard_negative``. Both far or both near: the first peak, ``uncertain``;
- else if it scores above ``hard_negative`` times the first and above ``target_not_found``: the first peak,
  ``hard_negative``;
- else ``normal``.

Positions are displacements in score cells from the map's centre ((H' - 1) / 2, (W' - 1) / 2), (y, x).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

NOT_FOUND, UNCERTAIN, HARD_NEGATIVE, NORMAL = "not_found", "uncertain", "hard_negative", "normal"
STATES = (NOT_FOUND, UNCERTAIN, HARD_NEGATIVE, NORMAL)


class LocalizationThresholds(NamedTuple):
    target_not_found: float = 0.25
    distractor: float = 0.8
    hard_negative: float = 0.5
    target_neighborhood_scale: float = 2.2
    displacement_scale: float = 0.8


class Localization(NamedTuple):
    """disp: (2,) float32 (y, x) displacement of the chosen peak from the map centre, in cells; state: one of
    :data:`STATES`; max_score: the highest score; scores: (H', W') the map the decision was made on."""

    disp: Tensor
    state: str
    max_score: float
    scores: Tensor


def motion_window(shape: tuple[int, int], centre_cells: Tensor, strength: float) -> Tensor:
    """(H', W') weights ``(1 - strength) + strength * hann`` (an option of ours, not the reference's): the
    product of 1D Hann windows of length H' + 1 and W' + 1 cells centred on ``centre_cells`` (2,) (y, x) in
    cells (fractional; may lie outside the map), zero half a window beyond it."""
    h, w = shape
    axes = []
    for n, c in ((h, centre_cells[0]), (w, centre_cells[1])):
        d = torch.arange(n, device=centre_cells.device, dtype=torch.float32) - c
        half = 0.5 * (n + 1)
        hann = 0.5 * (1 + torch.cos(torch.pi * d / half))
        axes.append(torch.where(d.abs() < half, hann, torch.zeros_like(hann)))
    return (1 - strength) + strength * (axes[0][:, None] * axes[1][None, :])


def _argmax2d(scores: Tensor) -> tuple[list[float], Tensor]:
    """The highest value of each (H', W') map of (B, H', W') ``scores`` (the first in row-major order on ties)
    and its cell (B, 2) float32 (y, x), on the CPU."""
    value, index = scores.reshape(scores.shape[0], -1).max(1)
    w = scores.shape[-1]
    return value.tolist(), torch.stack([index // w, index % w], dim=1).float().cpu()


def localize(
    scores: Tensor,
    previous_disp: Tensor,
    target_size_cells: Tensor,
    thresholds: LocalizationThresholds,
    *,
    advanced: bool = True,
) -> Localization:
    """Choose the target's displacement and state from one (H', W') score map (:func:`localize_batch` of
    one map).

    Args:
        scores: (H', W') preprocessed classifier scores.
        previous_disp: (2,) (y, x) previous target position relative to the map centre, in cells.
        target_size_cells: (2,) (h, w) target size in cells.
        thresholds: see the module docstring.
        advanced: False: the highest peak, always ``normal`` (the reference's simple localisation).
    """
    if scores.dim() != 2:
        raise ValueError(f"localize: scores must be (H', W'), got {tuple(scores.shape)}")
    return localize_batch(
        scores[None],
        previous_disp.reshape(1, 2),
        target_size_cells.reshape(1, 2),
        thresholds,
        advanced=advanced,
    )[0]


def localize_batch(
    scores: Tensor,
    previous_disp: Tensor,
    target_size_cells: Tensor,
    thresholds: LocalizationThresholds,
    *,
    advanced: bool = True,
) -> list[Localization]:
    """:func:`localize` of B maps at once: (B, H', W') scores, (B, 2) previous displacements and (B, 2) target
    sizes in cells; one :class:`Localization` per map, each the one its map gets alone (the same float32
    arithmetic row by row; the neighbourhood's bounds are rounded in float64 as Python numbers would be)."""
    if scores.dim() != 3:
        raise ValueError(f"localize_batch: scores must be (B, H', W'), got {tuple(scores.shape)}")
    scores = torch.nan_to_num(scores, nan=-1e4, posinf=1e4, neginf=-1e4)
    b, h, w = scores.shape
    centre = torch.tensor([(h - 1) / 2, (w - 1) / 2])
    max1, peak1 = _argmax2d(scores)
    disp1 = peak1 - centre
    maps = scores.unbind(0)  # the rows' views in one call, not one indexing per map
    if not advanced:
        return [Localization(d, NORMAL, m, s) for d, m, s in zip(disp1.unbind(0), max1, maps, strict=True)]
    # the neighbourhood of the first peak, [top, bottom) x [left, right) cells, is masked for the second
    neigh = (thresholds.target_neighborhood_scale * target_size_cells.float().cpu()).double() / 2
    peak = peak1.double()
    low = torch.round(peak - neigh).clamp(min=0)
    high = torch.minimum(
        torch.round(peak + neigh + 1), torch.tensor([float(h), float(w)], dtype=torch.float64)
    )
    rows, cols = torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64)
    in_rows = (rows >= low[:, :1]) & (rows < high[:, :1])  # (B, H')
    in_cols = (cols >= low[:, 1:]) & (cols < high[:, 1:])  # (B, W')
    masked = scores.masked_fill(in_rows[:, :, None] & in_cols[:, None, :], 0.0)
    max2, peak2 = _argmax2d(masked)
    disp2 = peak2 - centre
    distractor = [m2 > thresholds.distractor * m1 for m1, m2 in zip(max1, max2, strict=True)]
    if any(distractor):  # the peaks' distances from the previous position decide
        prev = previous_disp.float().cpu()
        norm1 = torch.linalg.vector_norm(disp1 - prev, dim=1).tolist()
        norm2 = torch.linalg.vector_norm(disp2 - prev, dim=1).tolist()
    limit = thresholds.displacement_scale * (h * w) ** 0.5 / 2
    out = []
    for i, (first, second, heatmap) in enumerate(zip(disp1.unbind(0), disp2.unbind(0), maps, strict=True)):
        disp, state = first, NORMAL
        if max1[i] < thresholds.target_not_found:
            state = NOT_FOUND
        elif distractor[i]:
            if norm2[i] > limit and norm1[i] < limit:
                state = HARD_NEGATIVE
            elif norm2[i] < limit and norm1[i] > limit:
                disp, state = second, HARD_NEGATIVE
            else:
                state = UNCERTAIN
        elif max2[i] > thresholds.hard_negative * max1[i] and max2[i] > thresholds.target_not_found:
            state = HARD_NEGATIVE
        out.append(Localization(disp, state, max1[i], heatmap))
    return out
