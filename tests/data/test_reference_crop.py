"""The whole-pixel training crop (pytracking's geometry; ``test_processing_golden.py`` compares it with
pytracking's own crops). Here: its rules on hand-made cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ltr.data.reference_crop import reference_crop_region, sample_reference_crops


def test_region_rounds_as_the_reference():
    # side ceil(sqrt(30 * 20) * 4) = ceil(97.98) = 98; corner round(45 + 15 - 49) = 11, round(30 + 10 - 49) = -9
    # -> moved inside: y1 = 0
    assert reference_crop_region(np.array([45.0, 30.0, 30.0, 20.0]), 4.0, 64, (200, 150)) == (11, 0, 109, 98)
    # half-pixel corners round half to even: 53.5 - 25 = 28.5 -> 28, 54.5 - 25 = 29.5 -> 30
    assert reference_crop_region(np.array([41.0, 42.0, 25.0, 25.0]), 2.0, 50, (200, 200))[:2] == (28, 30)


def test_inside_major_shrinks_then_centres():
    # side 6 * 100 = 600 on a 300 x 500 image: inside_major shrinks by min(2, 1.2) = 1.2 -> 500, which fits
    # the height (shifted inside) and is centred on the width: (200 + 0) // 2 = 100 each side
    box = np.array([100.0, 200.0, 100.0, 100.0])
    x1, y1, x2, y2 = reference_crop_region(box, 6.0, 352, (300, 500), "inside_major", 1.5)
    assert (x2 - x1, y2 - y1) == (500, 500) and (x1, y1) == (-100, 0)
    # capped by max_scale_change: floor(600 / 1.5) = 400 on a 200 x 200 image, centred
    assert reference_crop_region(box, 6.0, 352, (200, 200), "inside_major", 1.5) == (-100, -100, 300, 300)
    assert reference_crop_region(box, 6.0, 352, (200, 200), "inside", math.inf) == (0, 0, 200, 200)


def test_far_border_repeats_the_last_but_one_pixel():
    # value = column index. A 12-pixel region on a 10-pixel image is centred (one column out on each side);
    # the reference's padding cuts one column less than the image has on the far side, so column 9 never
    # appears and column 8 is repeated instead
    image = np.tile(np.arange(10, dtype=np.uint8)[None, :, None], (10, 1, 3))
    crops, transform = sample_reference_crops([image], np.array([[2.0, 2.0, 6.0, 6.0]]), 2.0, 12, "replicate")
    assert tuple(transform.offset[0]) == (-1.0, -1.0) and transform.scale[0] == 1.0
    assert crops[0, 5, :, 0].tolist() == [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 8]
    # every mode moves a region inside where it fits (replicate too): [4, 12) -> [2, 10)
    crops, transform = sample_reference_crops([image], np.array([[6.0, 3.0, 4.0, 4.0]]), 2.0, 8, "replicate")
    assert tuple(transform.offset[0]) == (2.0, 1.0)
    assert crops[0, 0, :, 0].tolist() == [2, 3, 4, 5, 6, 7, 8, 8]


@pytest.mark.parametrize("box", [[3.0, 3.0, 0.0, 0.0], [3.0, 3.0, 1e-4, 1e-4], [-50.0, -50.0, 2.0, 2.0]])
def test_degenerate_boxes_still_crop(box):
    image = np.full((6, 1, 3), 7, dtype=np.uint8)  # one pixel wide
    crops, transform = sample_reference_crops([image], np.array([box]), 6.0, 16, "inside_major", 1.5)
    assert crops.shape == (1, 16, 16, 3) and (crops == 7).all() and np.isfinite(transform.scale).all()
