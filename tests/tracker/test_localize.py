"""Localisation states on hand-made score maps (9 x 9 cells, 16 px per cell, target 32 x 32 px)."""

import math

import pytest
import torch

from pytracking.tracker.dimp.localize import (
    HARD_NEGATIVE,
    NORMAL,
    NOT_FOUND,
    UNCERTAIN,
    LocalizationThresholds,
    localize,
    motion_window,
)

STRIDE = 16.0


def run(peaks, previous_cell=(4, 4), base=0.0, window=0.0):
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
        window_strength=window,
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


def test_motion_window_is_the_reference_hann_window_when_centred():
    # pytracking's centred hann1d(N): 0.5 (1 - cos(2 pi k / (N + 1))), k = 1..N
    n = 9
    k = torch.arange(1, n + 1, dtype=torch.float64)
    hann = 0.5 * (1 - torch.cos(2 * torch.pi * k / (n + 1)))
    win = motion_window((n, n), torch.tensor([4.0, 4.0], dtype=torch.float64), 1.0)
    torch.testing.assert_close(win, hann[:, None] * hann[None, :])
    assert float(win[4, 4]) == 1.0


def test_motion_window_follows_the_centre_and_blends():
    win = motion_window((5, 7), torch.tensor([0.0, 4.0]), 1.0)  # x = 0, y = 4: a corner of the 5 x 7 map
    assert float(win[4, 0]) == pytest.approx(1.0)
    # x distance 4 cells = (7 + 1) / 2: zero from there on; y distance 4 > (5 + 1) / 2 = 3: zero
    assert win[:, 4:].abs().max() == 0.0
    assert win[:2, :].abs().max() == 0.0
    assert float(win[4, 2]) == pytest.approx(0.5)  # cos(pi * 2 / 4) = 0
    half = motion_window((5, 7), torch.tensor([0.0, 4.0]), 0.5)
    torch.testing.assert_close(half, 0.5 + 0.5 * win)
    assert (motion_window((5, 7), torch.tensor([3.0, 2.0]), 0.0) == 1.0).all()


def test_window_prefers_the_peak_near_the_previous_position():
    peaks = {(4, 4): 0.7, (4, 7): 1.0}  # 3 cells apart: without a prior the higher, farther peak wins
    assert run(peaks).position.tolist() == pytest.approx(xy((4, 7)))
    # with the window centred on (4, 4), (4, 7) scores 1.0 x 0.345 < 0.7
    loc = run(peaks, window=1.0)
    assert loc.position.tolist() == pytest.approx(xy((4, 4)))
    assert float(loc.max_score) == pytest.approx(0.7)
    # the map it decided on (what the live view shows) is the windowed one
    assert float(loc.scores[4, 7]) == pytest.approx(0.5 * (1 + math.cos(math.pi * 3 / 5)))
    assert float(loc.scores[4, 4]) == pytest.approx(0.7)
    # the window follows the previous position: from (4, 7) the higher peak is also the nearer one
    assert run(peaks, previous_cell=(4, 7), window=1.0).position.tolist() == pytest.approx(xy((4, 7)))
    # a weak prior does not overturn a clear score difference: 1.0 x (0.8 + 0.2 x 0.345) = 0.869 > 0.7
    assert run(peaks, window=0.2).position.tolist() == pytest.approx(xy((4, 7)))


def test_window_strength_is_checked():
    with pytest.raises(ValueError, match="window_strength"):
        run({(4, 4): 1.0}, window=1.5)
