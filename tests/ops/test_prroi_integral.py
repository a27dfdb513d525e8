"""Tests for ltr.ops.prroi_integral: PrRoIPool from summed-area tables against ltr.ops.prroi_pool (values and
box gradients, float64 to rounding, float32 to a stated tolerance on tracker-like boxes), edge cases."""

from __future__ import annotations

import pytest
import torch

from ltr.ops.prroi_integral import SummedAreaTable, prroi_pool_integral, summed_area_table
from ltr.ops.prroi_pool import prroi_pool_dense


def random_boxes(gen: torch.Generator, batch: int, num: int, dtype: torch.dtype) -> torch.Tensor:
    """(batch, num, 4) xyxy pixels on a 9 x 11 map at stride 4: anywhere, partly or wholly off the map."""
    xy = torch.rand(batch, num, 2, generator=gen, dtype=torch.float64) * 60 - 12
    wh = torch.rand(batch, num, 2, generator=gen, dtype=torch.float64) * 30
    return torch.cat([xy, xy + wh], dim=-1).to(dtype)


def test_values_and_box_gradients_are_prroi_pools_in_float64():
    gen = torch.Generator().manual_seed(0)
    features = torch.randn(2, 5, 9, 11, generator=gen, dtype=torch.float64) + 1.0
    boxes = random_boxes(gen, 2, 12, torch.float64)
    boxes[0, 0] = torch.tensor([-30.0, -30.0, -10.0, -8.0], dtype=torch.float64)  # beyond the map's support
    boxes[0, 1] = torch.tensor([30.0, 20.0, 70.0, 90.0], dtype=torch.float64)  # over the other end
    boxes[1, 0] = torch.tensor([10.0, 11.0, 10.3, 11.2], dtype=torch.float64)  # smaller than a cell
    boxes = boxes.requires_grad_(True)
    for size in (1, 3, (2, 5)):
        want = prroi_pool_dense(features, boxes, size, 1 / 4)
        got = prroi_pool_integral(summed_area_table(features), boxes, size, 1 / 4)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
        weights = torch.randn(want.shape, generator=gen, dtype=torch.float64)
        (g_want,) = torch.autograd.grad((want * weights).sum(), boxes)
        (g_got,) = torch.autograd.grad((got * weights).sum(), boxes)
        torch.testing.assert_close(g_got, g_want, rtol=1e-9, atol=1e-9)
        assert g_want[1].abs().max() > 0.1  # gradients flow (the comparison is not of zeros)
    assert torch.all(got[0, 0] == 0) and got[0, 1].abs().sum() > 0


def test_float32_on_tracker_like_boxes_within_a_few_millionths_of_the_largest_value():
    # a smooth map (as network features are) with a large mean, and boxes of a tracker's refinement: near the
    # crop's centre, about a sixth of it wide (SuperDiMP's layer2 geometry: 44 x 44 cells at stride 8)
    gen = torch.Generator().manual_seed(1)
    raw = torch.randn(1, 32, 44, 44, generator=gen, dtype=torch.float64).relu() * 3 + 2
    features = torch.nn.functional.avg_pool2d(raw, 5, 1, 2)
    centre = 176 + 30 * torch.randn(1, 40, 2, generator=gen, dtype=torch.float64)
    size = 59 * torch.exp(0.3 * torch.randn(1, 40, 2, generator=gen, dtype=torch.float64))
    boxes = torch.cat([centre - size / 2, centre + size / 2], dim=-1)
    want = prroi_pool_dense(features, boxes, 5, 1 / 8)
    got = prroi_pool_integral(summed_area_table(features.float()), boxes.float(), 5, 1 / 8)
    assert got.dtype == torch.float32
    error = (got.double() - want).abs().max() / want.abs().max()
    assert error < 3e-6, error


def test_empty_and_nan_boxes():
    features = torch.rand(1, 3, 6, 6, dtype=torch.float64)
    boxes = torch.tensor(
        [[[4.0, 4.0, 4.0, 10.0], [3.0, 5.0, 9.0, 2.0], [1.0, 1.0, 8.0, 8.0], [float("nan"), 1.0, 5.0, 5.0]]],
        dtype=torch.float64,
        requires_grad=True,
    )
    pooled = prroi_pool_integral(summed_area_table(features), boxes, 2, 1.0)
    assert pooled.shape == (1, 4, 3, 2, 2)
    assert torch.all(pooled[0, :2] == 0) and torch.all(pooled[0, 2] > 0)  # zero width, inverted height
    assert torch.isnan(pooled[0, 3]).all()  # a NaN box gives NaN bins, not an indexing error
    (grad,) = torch.autograd.grad(pooled[0, :3].sum(), boxes)
    assert torch.all(grad[0, :2] == 0) and grad[0, 2].abs().sum() > 0


def test_table_is_small_near_the_centre_and_checks_its_input():
    features = torch.full((1, 2, 7, 7), 5.0, dtype=torch.float64)
    features[0, 0, 3, 3] = 6.0
    sat = summed_area_table(features)
    assert isinstance(sat, SummedAreaTable) and sat.table.shape == (1, 8, 8, 2) and sat.mean.shape == (1, 2)
    # constant channel: nothing left after its mean; sums from the centre keep entries at most the one deviation
    assert sat.table[..., 1].abs().max() < 1e-12
    assert sat.table[..., 0].abs().max() < 1.0 + 1e-12
    with pytest.raises(ValueError, match="must be \\(B, C, H, W\\)"):
        summed_area_table(features[0])
    with pytest.raises(ValueError, match="must agree on B"):
        prroi_pool_integral(sat, torch.zeros(2, 1, 4, dtype=torch.float64), 2, 1.0)
