"""Localisation states on hand-made score maps (9 x 9 cells, 16 px per cell, target 32 x 32 px)."""

import pytest
import torch

from pytracking.tracker.dimp.localize import (
    HARD_NEGATIVE,
    NORMAL,
    NOT_FOUND,
    UNCERTAIN,
    LocalizationThresholds,
    localize,
)

STRIDE = 16.0


def run(peaks, previous_cell=(4, 4), base=0.0):
    scores = torch.full((9, 9), base)
    for (r, c), v in peaks.items():
        scores[r, c] = v
    prev = torch.tensor([previous_cell[1] * STRIDE, previous_cell[0] * STRIDE])
    return localize(
        scores,
        prev,
        torch.tensor([32.0, 32.0]),
        cell_to_pixel=(STRIDE, 0.0),
        thresholds=LocalizationThresholds(),
    )


def xy(cell):
    return [cell[1] * STRIDE, cell[0] * STRIDE]


@pytest.mark.parametrize(
    ("peaks", "state", "chosen"),
    [
        ({(4, 4): 0.2}, NOT_FOUND, (4, 4)),  # best score below 0.25
        ({(4, 4): 1.0}, NORMAL, (4, 4)),
        ({(4, 5): 1.0, (3, 5): 0.95}, NORMAL, (4, 5)),  # second peak inside the target neighbourhood
        ({(4, 4): 1.0, (4, 8): 0.6}, HARD_NEGATIVE, (4, 4)),  # 0.5 < 0.6/1.0 < 0.8: weak distractor
        ({(4, 4): 1.0, (4, 8): 0.2}, NORMAL, (4, 4)),  # far second peak below the not-found threshold
        ({(0, 0): 1.0, (4, 4): 0.9}, HARD_NEGATIVE, (4, 4)),  # strong distractor far away, second is near
        ({(4, 4): 1.0, (0, 0): 0.9}, HARD_NEGATIVE, (4, 4)),  # strong distractor far, first is near
        ({(4, 2): 1.0, (4, 6): 0.9}, UNCERTAIN, (4, 2)),  # both near the previous position
        ({(0, 0): 1.0, (8, 8): 0.9}, UNCERTAIN, (0, 0)),  # both far from it
    ],
)
def test_states(peaks, state, chosen):
    loc = run(peaks)
    assert int(loc.state) == state
    assert loc.position.tolist() == pytest.approx(xy(chosen))
    assert float(loc.max_score) == pytest.approx(max(peaks.values()))


def test_nan_scores_do_not_propagate():
    scores = torch.full((5, 5), float("nan"))
    scores[2, 3] = 1.0
    loc = localize(
        scores,
        torch.tensor([32.0, 32.0]),
        torch.tensor([16.0, 16.0]),
        cell_to_pixel=(16.0, 0.0),
        thresholds=LocalizationThresholds(),
    )
    assert int(loc.state) == NORMAL
    assert loc.position.tolist() == [48.0, 32.0]


def test_rejects_batched_maps():
    with pytest.raises(ValueError, match="scores must be"):
        localize(
            torch.zeros(1, 5, 5),
            torch.zeros(2),
            torch.ones(2),
            cell_to_pixel=(16.0, 0.0),
            thresholds=LocalizationThresholds(),
        )
