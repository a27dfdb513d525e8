"""VOT regions to the tracker's box: rectangles as given, polygons by the rule pytracking's VOT runner uses.

A polygon (x1, y1, x2, y2, ...) becomes an axis-aligned xywh box (image pixels, 0-based):

- ``preserve_area`` (the default, pytracking's ``vot_anno_conversion_type`` for its DiMP parameter sets):
  centred on the mean of the vertices, with the aspect of the vertices' min/max bounds and the area of the
  rotated rectangle the first three vertices span (|p1 - p2| * |p2 - p3|), plus one pixel on each side
  length, as the reference does. Needs exactly four vertices (the VOT2016-2019 short-term annotations).
- ``union``: the min/max bounds of the vertices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

PolygonRule = Literal["preserve_area", "union"]
POLYGON_RULES: tuple[str, ...] = ("preserve_area", "union")


class RegionError(ValueError):
    """A region the tracker cannot start from (wrong number of values, not finite)."""


def polygon_to_box(points: Sequence[float], rule: PolygonRule = "preserve_area") -> np.ndarray:
    """(4,) float64 xywh box of the polygon ``points`` = (x1, y1, x2, y2, ...) by ``rule`` (module doc)."""
    p = np.asarray(points, dtype=np.float64).reshape(-1)
    if p.size < 6 or p.size % 2 or not np.isfinite(p).all():
        raise RegionError(f"a polygon needs at least 3 finite (x, y) vertices, got {p.size} values")
    xs, ys = p[0::2], p[1::2]
    x1, x2, y1, y2 = xs.min(), xs.max(), ys.min(), ys.max()
    if rule == "union":
        return np.array([x1, y1, x2 - x1, y2 - y1])
    if rule != "preserve_area":
        raise RegionError(f"unknown polygon rule {rule!r}; choose one of {list(POLYGON_RULES)}")
    if p.size != 8:
        raise RegionError(f"the preserve_area rule needs a 4-vertex polygon, got {p.size // 2} vertices")
    bounds_area = (x2 - x1) * (y2 - y1)
    if bounds_area <= 0:
        raise RegionError("the polygon has no area")
    area = np.linalg.norm(p[0:2] - p[2:4]) * np.linalg.norm(p[2:4] - p[4:6])
    scale = np.sqrt(area / bounds_area)
    w, h = scale * (x2 - x1) + 1, scale * (y2 - y1) + 1
    return np.array([xs.mean() - w / 2, ys.mean() - h / 2, w, h])


def region_to_box(values: Sequence[float], rule: PolygonRule = "preserve_area") -> np.ndarray:
    """(4,) float64 xywh of a region given as its numbers: 4 = rectangle x, y, w, h; 6 or more = polygon."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 4:
        if not np.isfinite(v).all():
            raise RegionError(f"the rectangle {v.tolist()} is not finite")
        return v.copy()
    return polygon_to_box(v, rule)
