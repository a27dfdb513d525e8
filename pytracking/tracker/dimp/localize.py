"""Target localisation on the classifier's score map, with DiMP's four states and distractor handling.

States (codes are ints so the decision stays a device tensor until the tracker reads it once):

- ``NOT_FOUND``: the highest score is below ``target_not_found_threshold``; the tracker keeps its position.
- ``UNCERTAIN``: a second peak outside the target neighbourhood scores above ``distractor_threshold`` times
  the first and the displacements do not tell which one is the target (both near the previous position or
  both far from it); the first peak is taken, the sample is not learned.
- ``HARD_NEGATIVE``: a strong second peak (above ``distractor_threshold`` times the first) and exactly one of
  the two peaks is near the previous position (within ``displacement_scale`` x half the score map size); that
  one is taken. Also when the second peak is above ``hard_negative_threshold`` times the first and above the
  not-found threshold. The sample is learned with a higher rate and the filter updated at once.
- ``NORMAL``: otherwise.

With ``window_strength`` s > 0 the scores are first multiplied by a motion prior, ``(1 - s) + s * hann``:
a separable Hann window of the score map's size centred on the previous position (zero half a map beyond
it), so a look-alike far from where the target was must score higher than the target to win. s = 1 is the
reference trackers' ``window_output``, which centres the same window on the map (our crops can be shifted
inside the image, so the window follows the previous position instead). Every state is decided on the
windowed scores.

The target neighbourhood masked out around the first peak is ``target_neighborhood_scale`` times the target
size. Positions are in crop pixels via the score-map convention of
:func:`ltr.models.target_classifier.score_cell_to_pixel` (cell j <-> pixel ``scale * j + offset``).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

NOT_FOUND, UNCERTAIN, HARD_NEGATIVE, NORMAL = 0, 1, 2, 3
STATE_NAMES = {
    NOT_FOUND: "not_found",
    UNCERTAIN: "uncertain",
    HARD_NEGATIVE: "hard_negative",
    NORMAL: "normal",
}


class Localization(NamedTuple):
    """position: (2,) x, y crop pixels of the chosen peak; state: () int64 state code; max_score: () the
    highest score; peaks: (2, 2) x, y crop pixels of the first and second peak; scores: (H', W') the map the
    decision was made on (NaN-free, motion prior applied)."""

    position: Tensor
    state: Tensor
    max_score: Tensor
    peaks: Tensor
    scores: Tensor


class LocalizationThresholds(NamedTuple):
    target_not_found: float = 0.25
    distractor: float = 0.8
    hard_negative: float = 0.5
    target_neighborhood_scale: float = 2.2
    displacement_scale: float = 0.8


def motion_window(shape: tuple[int, int], centre_cells: Tensor, strength: float) -> Tensor:
    """(H', W') weights ``(1 - strength) + strength * hann``: the product of 1D Hann windows of length H' + 1
    and W' + 1 cells (``0.5 * (1 + cos(2 pi d / (N + 1)))`` at distance d, zero beyond (N + 1) / 2) centred on
    ``centre_cells`` (2,) x, y in score-map cells (fractional; may lie outside the map)."""
    h, w = shape
    dtype = centre_cells.dtype if centre_cells.is_floating_point() else torch.float32
    axes = []
    for n, c in ((h, centre_cells[1]), (w, centre_cells[0])):
        d = torch.arange(n, device=centre_cells.device, dtype=dtype) - c
        half = 0.5 * (n + 1)
        hann = 0.5 * (1 + torch.cos(torch.pi * d / half))
        axes.append(torch.where(d.abs() < half, hann, torch.zeros_like(hann)))
    return (1 - strength) + strength * (axes[0][:, None] * axes[1][None, :])


def localize(
    scores: Tensor,
    previous_xy: Tensor,
    target_size_wh: Tensor,
    *,
    cell_to_pixel: tuple[float, float],
    thresholds: LocalizationThresholds,
    window_strength: float = 0.0,
) -> Localization:
    """Choose the target position and state from one score map.

    Args:
        scores: (H', W') classifier scores.
        previous_xy: (2,) previous target centre in crop pixels.
        target_size_wh: (2,) target size in crop pixels.
        cell_to_pixel: (scale, offset) of the score-map convention.
        thresholds: see the module docstring.
        window_strength: in [0, 1], the motion prior's strength (module docstring); 0 = none.
    """
    if scores.dim() != 2:
        raise ValueError(f"localize: scores must be (H', W'), got {tuple(scores.shape)}")
    if not 0.0 <= window_strength <= 1.0:
        raise ValueError(f"localize: window_strength must be in [0, 1], got {window_strength!r}")
    h, w = scores.shape
    scale, offset = cell_to_pixel
    scores = torch.nan_to_num(scores, nan=-1e4, posinf=1e4, neginf=-1e4)
    if window_strength > 0:
        prev = (previous_xy.to(scores.dtype) - offset) / scale
        scores = scores * motion_window((h, w), prev, window_strength)
    flat = scores.flatten()
    max1, idx1 = flat.max(0)
    r1, c1 = idx1 // w, idx1 % w
    rows = torch.arange(h, device=scores.device)[:, None]
    cols = torch.arange(w, device=scores.device)[None, :]
    neigh = thresholds.target_neighborhood_scale * target_size_wh / scale  # (w, h) in cells
    near = ((rows - r1).abs() <= 0.5 * neigh[1]) & ((cols - c1).abs() <= 0.5 * neigh[0])
    masked = scores.masked_fill(near, float("-inf"))
    max2, idx2 = masked.flatten().max(0)
    r2, c2 = idx2 // w, idx2 % w
    cells = torch.stack([torch.stack([c1, r1]), torch.stack([c2, r2])]).to(scores.dtype)  # (2, 2) x, y
    peaks = cells * scale + offset
    prev_cells = (previous_xy.to(scores.dtype) - offset) / scale
    disp = torch.linalg.vector_norm(cells - prev_cells, dim=-1)  # (2,) in cells
    threshold = thresholds.displacement_scale * (h * w) ** 0.5 / 2
    far1, far2 = disp[0] > threshold, disp[1] > threshold
    distractor = max2 > thresholds.distractor * max1
    take_second = distractor & ~far2 & far1
    hard = (distractor & (far1 != far2)) | (
        ~distractor & (max2 > thresholds.hard_negative * max1) & (max2 > thresholds.target_not_found)
    )
    state = torch.full((), NORMAL, dtype=torch.long, device=scores.device)
    state = torch.where(hard, HARD_NEGATIVE, state)
    state = torch.where(distractor & (far1 == far2), UNCERTAIN, state)
    state = torch.where(max1 < thresholds.target_not_found, NOT_FOUND, state)
    position = torch.where(take_second, peaks[1], peaks[0])
    return Localization(position, state, max1, peaks, scores)
