"""Localisation: pytracking's DiMP rules on hand-made score maps."""

from __future__ import annotations

import pytest
import torch

from pytracking.tracker.dimp.localize import (
    HARD_NEGATIVE,
    NORMAL,
    NOT_FOUND,
    UNCERTAIN,
    LocalizationThresholds,
    localize,
    localize_batch,
    motion_window,
)

T = LocalizationThresholds()
SIZE = torch.tensor([2.0, 2.0])  # target size in cells: neighbourhood 4.4 cells


def score_map(peaks: dict[tuple[int, int], float], shape=(23, 23)) -> torch.Tensor:
    s = torch.zeros(shape)
    for (r, c), v in peaks.items():
        s[r, c] = v
    return s


def test_single_peak_is_normal_with_its_displacement_from_the_centre():
    loc = localize(score_map({(14, 8): 1.0}), torch.zeros(2), SIZE, T)
    assert loc.state == NORMAL and loc.max_score == 1.0
    torch.testing.assert_close(loc.disp, torch.tensor([3.0, -3.0]))


def test_low_peak_is_not_found():
    assert localize(score_map({(11, 11): 0.2}), torch.zeros(2), SIZE, T).state == NOT_FOUND


def test_second_peak_inside_the_neighbourhood_is_ignored():
    # neighbourhood rows round(11 - 2.2) .. round(11 + 2.2 + 1) = 9 .. 14 (exclusive)
    loc = localize(score_map({(11, 11): 1.0, (13, 13): 0.9}), torch.zeros(2), SIZE, T)
    assert loc.state == NORMAL
    loc = localize(score_map({(11, 11): 1.0, (14, 11): 0.9}), torch.zeros(2), SIZE, T)
    assert loc.state == UNCERTAIN  # just outside, strong, both peaks near the previous position


def test_distractor_rules():
    limit = 0.8 * 23 / 2  # displacement threshold in cells: 9.2
    far = (11, 11 + 10)  # 10 cells right of the centre
    # the first peak near the previous position, the second far: the first, hard negative
    loc = localize(score_map({(11, 11): 1.0, far: 0.9}), torch.zeros(2), SIZE, T)
    assert loc.state == HARD_NEGATIVE and loc.disp.tolist() == [0.0, 0.0]
    # the first peak far, the second near: the second is taken
    loc = localize(score_map({far: 1.0, (11, 11): 0.9}), torch.zeros(2), SIZE, T)
    assert loc.state == HARD_NEGATIVE and loc.disp.tolist() == [0.0, 0.0]
    # both far from the previous position (the previous position at the top-left): uncertain, the first
    prev = torch.tensor([-11.0, -11.0])
    assert limit < 11 * 2**0.5
    loc = localize(score_map({(22, 22): 1.0, (22, 0): 0.9}), prev, SIZE, T)
    assert loc.state == UNCERTAIN and loc.disp.tolist() == [11.0, 11.0]


def test_weaker_second_peak_gives_a_hard_negative_above_half_the_first():
    assert localize(score_map({(11, 11): 1.0, (0, 0): 0.6}), torch.zeros(2), SIZE, T).state == HARD_NEGATIVE
    assert localize(score_map({(11, 11): 1.0, (0, 0): 0.4}), torch.zeros(2), SIZE, T).state == NORMAL
    # above half the first but below the not-found threshold: normal
    loc = localize(score_map({(11, 11): 0.3, (0, 0): 0.2}), torch.zeros(2), SIZE, T)
    assert loc.state == NORMAL


def test_simple_localisation_takes_the_highest_peak():
    loc = localize(score_map({(2, 3): 0.1}), torch.zeros(2), SIZE, T, advanced=False)
    assert loc.state == NORMAL and loc.disp.tolist() == [-9.0, -8.0]


def test_non_finite_scores_do_not_win():
    s = score_map({(5, 5): 1.0})
    s[0, 0] = float("nan")
    assert localize(s, torch.zeros(2), SIZE, T).disp.tolist() == [-6.0, -6.0]


def test_motion_window():
    w = motion_window((5, 5), torch.tensor([2.0, 2.0]), 1.0)
    assert w[2, 2] == 1.0 and float(w[0, 0]) == pytest.approx(0.25**2, abs=1e-6)
    assert torch.all(motion_window((5, 5), torch.tensor([2.0, 2.0]), 0.0) == 1)


def test_a_batch_of_maps_gets_each_map_its_own_localisation():
    """localize_batch on many maps: each map's state, displacement and score as localize gives it alone,
    over maps built to meet every state (ties included: flat maps, equal peaks) and random target sizes."""
    gen = torch.Generator().manual_seed(0)
    maps, prevs, sizes = [], [], []
    for i in range(64):
        kind = i % 4
        s = torch.rand(23, 23, generator=gen) * 0.2
        r, c = (torch.randint(0, 23, (2,), generator=gen)).tolist()
        s[r, c] = 1.0
        r2, c2 = (torch.randint(0, 23, (2,), generator=gen)).tolist()
        if kind == 1:  # a distractor, near or far
            s[r2, c2] = 0.9
        elif kind == 2:  # a weaker second peak: hard negative unless inside the neighbourhood
            s[r2, c2] = 0.6
        elif kind == 3:  # ties: flat, or two equal peaks
            s = torch.zeros(23, 23) if i % 8 == 3 else s
            s[r2, c2] = float(s.max())
        if i % 16 == 5:
            s = s * 0.1  # not found
        maps.append(s)
        prevs.append((torch.rand(2, generator=gen) - 0.5) * 30)
        sizes.append(torch.rand(2, generator=gen) * 8)
    scores, prev, size = torch.stack(maps), torch.stack(prevs), torch.stack(sizes)
    batch = localize_batch(scores, prev, size, T)
    states = set()
    for i, loc in enumerate(batch):
        alone = localize(scores[i], prev[i], size[i], T)
        assert loc.state == alone.state
        assert torch.equal(loc.disp, alone.disp)
        assert loc.max_score == alone.max_score
        assert torch.equal(loc.scores, alone.scores)
        states.add(loc.state)
    assert states == {NOT_FOUND, UNCERTAIN, HARD_NEGATIVE, NORMAL}
    simple = localize_batch(scores, prev, size, T, advanced=False)
    assert [loc.disp.tolist() for loc in simple] == [
        localize(m, p, z, T, advanced=False).disp.tolist() for m, p, z in zip(scores, prev, size, strict=True)
    ]


def test_localize_batch_refuses_a_single_map():
    with pytest.raises(ValueError, match=r"\(B, H', W'\)"):
        localize_batch(torch.zeros(23, 23), torch.zeros(1, 2), SIZE[None], T)
