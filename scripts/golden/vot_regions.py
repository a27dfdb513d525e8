"""VOT polygon regions to boxes, from pytracking's own conversion.

Runs pytracking's ``convert_vot_anno_to_rect`` (``pytracking/utils/convert_vot_anno_to_rect.py``, the rule its
VOT runner applies with ``vot_anno_conversion_type``) on seeded polygons (rotated and axis-aligned
rectangles, skewed quadrilaterals) with both of its rules, and writes inputs and outputs to one ``.npz`` that
``tests/vot/test_regions.py`` compares with :func:`pytracking.vot.regions.polygon_to_box`.

File layout: ``polygons`` (K, 8) float64 x1, y1, ..., x4, y4; ``preserve_area`` and ``union`` (K, 4) xywh.
"""

from __future__ import annotations

import argparse

import numpy as np

from scripts.golden.reference import import_reference

OUT = "vot_regions.npz"


def _polygons(rng: np.random.Generator, count: int) -> np.ndarray:
    rows = []
    for k in range(count):
        cx, cy = rng.uniform(20, 600), rng.uniform(20, 400)
        w, h = rng.uniform(4, 200), rng.uniform(4, 200)
        angle = 0.0 if k % 4 == 0 else rng.uniform(-np.pi, np.pi)
        corners = np.array([[-w, -h], [w, -h], [w, h], [-w, h]]) / 2
        rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
        points = corners @ rot.T + [cx, cy]
        if k % 4 == 3:  # not a rectangle: each vertex moved a little
            points = points + rng.uniform(-3, 3, points.shape)
        rows.append(points.reshape(-1))
    return np.array(rows)


def run(args: argparse.Namespace) -> dict[str, np.ndarray]:
    ref = import_reference(args.pytracking, convert="pytracking.utils.convert_vot_anno_to_rect")
    polygons = _polygons(np.random.default_rng(2020), 64)
    out = {"polygons": polygons}
    for rule in ("preserve_area", "union"):
        out[rule] = np.array(
            [ref.convert.convert_vot_anno_to_rect(list(p), rule) for p in polygons], dtype=np.float64
        )
    return out
