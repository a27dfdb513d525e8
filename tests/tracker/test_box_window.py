"""Tests for pytracking.tracker.dimp.box_window: boxes that a window holds pool the same values from the window's
summed-area table as from the whole map's (float64, to rounding), a box one read beyond the window does not (the
rule is tight), the test branches' halo, the windows chosen for tracker-like boxes, and the PyTorch stages' box
score on windows against the whole maps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from ltr.ops.prroi_integral import SummedAreaTable, prroi_pool_integral, summed_area_table
from pytracking.tracker.dimp.box_window import BoxWindow, WindowRule, conv_halo, cut_cells, paste_cells
from pytracking.tracker.dimp.network import random_network
from pytracking.tracker.dimp.stages import TorchStages

STRIDE = 8
SIZE = (44, 40)  # rows, columns of the map


def window_table(features: torch.Tensor, cells: tuple[int, int, int, int]) -> SummedAreaTable:
    """The table of the window's ``cells`` of ``features`` placed at their place in a whole-map table (zeros
    elsewhere), as the ONNX Runtime backend hands it to the box score."""
    r0, c0, r1, c1 = cells
    sat = summed_area_table(features[..., r0:r1, c0:c1])
    batch, _, h, w = features.shape
    whole = torch.zeros(batch, h + 1, w + 1, features.shape[1], dtype=features.dtype)
    whole[:, r0 : r1 + 1, c0 : c1 + 1] = sat.table
    return SummedAreaTable(whole, sat.mean)


def pool(sat: SummedAreaTable, boxes_xywh: torch.Tensor) -> torch.Tensor:
    xyxy = torch.cat([boxes_xywh[..., :2], boxes_xywh[..., :2] + boxes_xywh[..., 2:]], dim=-1)
    return prroi_pool_integral(sat, xyxy[None], 5, 1.0 / STRIDE)[0]


@pytest.fixture(scope="module")
def features() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(1, 6, *SIZE, generator=gen, dtype=torch.float64) + 0.5


def test_boxes_a_window_holds_pool_as_from_the_whole_map(features):
    rule = WindowRule(strides=(STRIDE,), halos=(0,))
    whole = summed_area_table(features)
    gen = torch.Generator().manual_seed(1)
    held = 0
    for _ in range(20):
        centre = torch.rand(2, generator=gen, dtype=torch.float64) * torch.tensor([320.0, 352.0])
        size = 20 + 60 * torch.rand(2, generator=gen, dtype=torch.float64)
        start = torch.cat([centre - size / 2, size])[None].repeat(10, 1)
        start += 6 * (torch.rand(10, 4, generator=gen, dtype=torch.float64) - 0.5)
        window = rule.window(start.numpy(), [SIZE])
        assert window.holds(start.numpy())
        moved = start + 20 * (torch.rand(10, 4, generator=gen, dtype=torch.float64) - 0.5)  # some leave it
        boxes = moved if window.holds(moved.numpy()) else start
        held += boxes is moved
        torch.testing.assert_close(
            pool(window_table(features, window.cells[0]), boxes), pool(whole, boxes), rtol=1e-10, atol=1e-10
        )
    assert 0 < held < 20


@pytest.mark.parametrize("side", ["left", "right", "top", "bottom"])
def test_a_box_one_read_beyond_the_window_is_refused_and_would_pool_other_values(features, side):
    cells = (10, 12, 30, 28)  # rows 10-29, columns 12-27: inner edges on every side
    window = BoxWindow((cells,), (cells,), (SIZE,), (STRIDE,))
    sat, whole = window_table(features, cells), summed_area_table(features)
    # in cells: a box [a, b] reads table entries floor(a) .. floor(b) + 2, which must lie in [first, end]
    edges = {
        "left": ((12.3, 14.0), (11.7, 14.0)),
        "right": ((20.0, 26.6), (20.0, 27.2)),
        "top": ((10.0, 15.0), (9.5, 15.0)),
        "bottom": ((15.0, 28.9), (15.0, 29.1)),
    }[side]
    other = (14.0, 20.0)  # the other axis, well inside
    results = []
    for a, b in edges:
        x, y = ((a, b), other) if side in ("left", "right") else (other, (a, b))
        box = torch.tensor([[x[0], y[0], x[1] - x[0], y[1] - y[0]]], dtype=torch.float64) * STRIDE
        results.append((window.holds(box.numpy()), (pool(sat, box) - pool(whole, box)).abs().max().item()))
    (inside, inside_error), (outside, outside_error) = results
    assert inside and inside_error < 1e-10
    assert not outside and outside_error > 1e-3


def test_a_window_at_the_maps_edge_holds_boxes_past_it_as_the_whole_map_does(features):
    rule = WindowRule(strides=(STRIDE,), halos=(0,))
    box = np.array([[300.0, 330.0, 40.0, 30.0]])  # over the right and bottom ends of the 320 x 352 map
    window = rule.window(box, [SIZE])
    r0, c0, r1, c1 = window.cells[0]
    assert (r1, c1) == SIZE and r0 > 0 and c0 > 0 and window.holds(box)
    boxes = torch.from_numpy(box)
    torch.testing.assert_close(
        pool(window_table(features, window.cells[0]), boxes),
        pool(summed_area_table(features), boxes),
        rtol=1e-10,
        atol=1e-10,
    )


def test_nan_boxes_take_the_whole_map():
    rule = WindowRule(strides=(8, 16), halos=(2, 2))
    sizes = [(44, 44), (22, 22)]
    nan = np.array([[np.nan, 10.0, 20.0, 20.0]])
    assert rule.window(nan, sizes).is_whole
    window = rule.window(np.array([[150.0, 150.0, 50.0, 50.0]]), sizes)
    assert not window.is_whole and not window.holds(nan)
    assert BoxWindow.whole(sizes, (8, 16)).holds(nan)


def test_the_test_branches_read_their_halo_and_no_further():
    head = random_network("nce_plus_tiny", crop_size=64).net.box_head
    branch = head.test_conv2
    assert conv_halo(branch) == 2 and conv_halo(head.test_conv3) == 2
    gen = torch.Generator().manual_seed(2)
    layer = torch.randn(1, branch[0][0].in_channels, 24, 24, generator=gen)
    with torch.no_grad():
        want = branch(layer)[..., 8:16, 6:14]
        for halo, equal in ((2, True), (1, False)):
            got = branch(layer[..., 8 - halo : 16 + halo, 6 - halo : 14 + halo])[..., halo:-halo, halo:-halo]
            assert torch.allclose(got, want, atol=1e-6) is equal
    with pytest.raises(ValueError, match="stride"):
        conv_halo(nn.Conv2d(3, 3, 3, stride=2))


def test_superdimp_candidates_take_about_a_quarter_of_the_box_maps():
    """A 59-pixel box (a target in SuperDiMP's 352-pixel crop) with jittered candidates."""
    rule = WindowRule(strides=(8, 16), halos=(2, 2))
    rng = np.random.default_rng(0)
    box = np.array([146.0, 146.0, 59.0, 59.0])
    jitter = (rng.random((9, 4)) - 0.5) * 59 * np.array([0.1, 0.1, 0.5, 0.5])
    candidates = np.vstack([box, box + jitter])
    window = rule.window(candidates, [(44, 44), (22, 22)])
    assert window.holds(candidates)
    areas = [
        (r1 - r0) * (c1 - c0) / (44 * 44 if n == 0 else 22 * 22)
        for n, (r0, c0, r1, c1) in enumerate(window.inputs)
    ]
    assert 0.15 < areas[0] < 0.35 and areas[1] < 0.5
    # the pixel window starts at the same place on both layers
    (r2, c2, _, _), (r3, c3, _, _) = window.cells
    assert (r2 * 8, c2 * 8) == (r3 * 16, c3 * 16)


def test_cells_are_cut_and_pasted_at_each_maps_own_place():
    gen = torch.Generator().manual_seed(3)
    maps = torch.randn(2, 3, 10, 12, generator=gen)
    starts = torch.tensor([[1, 2], [4, 0]])
    cut = cut_cells(maps, starts, (3, 5))
    torch.testing.assert_close(cut[0], maps[0, :, 1:4, 2:7], rtol=0, atol=0)
    torch.testing.assert_close(cut[1], maps[1, :, 4:7, 0:5], rtol=0, atol=0)
    out = torch.zeros(3, 3, 10, 12)
    paste_cells(out, torch.tensor([2, 0]), cut, starts)
    assert out[1].abs().sum() == 0
    torch.testing.assert_close(out[2, :, 1:4, 2:7], maps[0, :, 1:4, 2:7], rtol=0, atol=0)
    torch.testing.assert_close(out[0, :, 4:7, 0:5], maps[1, :, 4:7, 0:5], rtol=0, atol=0)
    assert int((out != 0).sum()) == 2 * 3 * 15


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")),
    ],
)
def test_torch_stages_score_boxes_on_windows_as_on_the_whole_maps(device):
    """Three images of a 256-pixel crop network: two windows of other places and one whole map (a box over
    most of the crop); f and df/dboxes within float32 rounding of the whole maps'."""
    loaded = random_network("nce_plus_tiny", device=device, crop_size=256)
    stages = TorchStages(loaded.net)
    head = loaded.net.box_head
    gen = torch.Generator().manual_seed(4)
    with torch.no_grad():
        feats = stages.backbone(torch.randn(3, 3, 256, 256, generator=gen).to(device))
        modulation = stages.modulation(
            {k: v[:1] for k, v in feats.items()}, torch.tensor([[60.0, 60.0, 40, 40]], device=device)
        )
    modulation = tuple(m.expand(3, -1) for m in modulation)
    inputs = stages.box_features(feats, modulation)
    places = torch.tensor([[20.0, 30.0, 30.0, 34.0], [160.0, 150.0, 36.0, 28.0], [10.0, 10.0, 230.0, 230.0]])
    boxes = (places[:, None] + 4 * (torch.rand(3, 10, 4, generator=gen) - 0.5)).to(device)
    features, limits = stages.modulated(inputs, boxes)
    assert torch.isfinite(limits[:2]).any(dim=1).all() and torch.isinf(limits[2]).all()
    whole = head.modulate(modulation, head.get_test_features([feats["layer2"], feats["layer3"]]))
    assert (features[0][0] == 0).float().mean() > 0.3  # the first window leaves much of the map out
    scores, grad = stages.box_score_grad(inputs, boxes)
    want_scores, want_grad = stages._score_grad(whole, boxes)
    torch.testing.assert_close(scores, want_scores, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, want_grad, rtol=1e-4, atol=1e-5)
    assert grad.abs().max() > 1e-3


def test_a_window_over_three_quarters_of_the_first_map_is_the_whole_maps():
    """A 250-pixel box in a 352-pixel crop: its window's inputs would take over 3/4 of layer2's 44 x 44 map, not
    worth the cuts and checks, so the whole maps; with the bound raised, the window itself."""
    box = np.array([[50.0, 50.0, 250.0, 250.0]])
    sizes = [(44, 44), (22, 22)]
    assert WindowRule(strides=(8, 16), halos=(2, 2)).window(box, sizes).is_whole
    window = WindowRule(strides=(8, 16), halos=(2, 2), most=0.95).window(box, sizes)
    r0, c0, r1, c1 = window.inputs[0]
    assert not window.is_whole and 0.75 < (r1 - r0) * (c1 - c0) / (44 * 44) <= 0.95
