"""VOT regions to the tracker's box, against pytracking's conversion (tests/golden/vot_regions.npz)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytracking.vot.regions import RegionError, polygon_to_box, region_to_box

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "vot_regions.npz"


@pytest.mark.parametrize("rule", ["preserve_area", "union"])
def test_polygons_as_pytracking_converts_them(rule: str) -> None:
    golden = np.load(GOLDEN)
    ours = np.stack([polygon_to_box(p, rule) for p in golden["polygons"]])
    np.testing.assert_allclose(ours, golden[rule], rtol=0, atol=1e-9)


def test_preserve_area_keeps_centre_and_rotated_area() -> None:
    # a 40 x 20 rectangle turned by 30 degrees about (100, 50)
    angle = np.deg2rad(30)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    corners = np.array([[-20, -10], [20, -10], [20, 10], [-20, 10]]) @ rot.T + [100, 50]
    x, y, w, h = polygon_to_box(corners.reshape(-1))
    assert (x + w / 2, y + h / 2) == pytest.approx((100, 50))
    assert (w - 1) * (h - 1) == pytest.approx(800)


def test_rectangles_pass_through_and_bad_regions_are_refused() -> None:
    np.testing.assert_array_equal(region_to_box([1.5, 2, 30, 40]), [1.5, 2, 30, 40])
    with pytest.raises(RegionError, match="4-vertex"):
        polygon_to_box([0, 0, 10, 0, 10, 10, 5, 15, 0, 10])
    with pytest.raises(RegionError, match="at least 3"):
        region_to_box([0, 0, 10, 0, 10])
    with pytest.raises(RegionError, match="not finite"):
        region_to_box([0, float("nan"), 10, 10])
    with pytest.raises(RegionError, match="no area"):
        polygon_to_box([0, 0, 10, 0, 10, 0, 0, 0])
