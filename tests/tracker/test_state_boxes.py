"""The tracker's state <-> box conversions: pytracking's conventions, and rows computed as each alone."""

from __future__ import annotations

import numpy as np
import torch

from pytracking.tracker.dimp.state_boxes import box_in_crop, boxes_in_image, target_boxes

CROP = torch.tensor([64.0, 64.0])


def test_a_target_box_has_its_centre_at_the_position():
    # pixel centres at integer coordinates: a box 10 wide starting at x = 5 covers 5..14, centre 9.5
    box = target_boxes(torch.tensor([20.0, 9.5]), torch.tensor([4.0, 10.0]))
    assert box.dtype == np.float64 and box.tolist() == [5.0, 18.5, 10.0, 4.0]


def test_a_target_at_the_crop_centre_sits_in_the_crop_middle_at_its_scale():
    # a crop centred on the target: the box's centre is the crop's (31.5, 31.5), its size the target's / 2
    box = box_in_crop(
        torch.tensor([100.0, 200.0]),
        torch.tensor([20.0, 40.0]),
        torch.tensor([100.0, 200.0]),
        torch.tensor(2.0),
        CROP,
    )
    assert box.tolist() == [31.5 - 9.5, 31.5 - 4.5, 20.0, 10.0]


def test_boxes_in_image_invert_box_in_crop_and_rows_are_each_alone():
    gen = torch.Generator().manual_seed(0)
    pos = torch.rand(6, 2, generator=gen) * 300
    size = torch.rand(6, 2, generator=gen) * 50 + 5
    sample_pos = pos + (torch.rand(6, 2, generator=gen) - 0.5) * 40
    scale = torch.rand(6, generator=gen) + 0.5
    boxes = box_in_crop(pos, size, sample_pos, scale[:, None], CROP)
    back = boxes_in_image(boxes[:, None], sample_pos[:, None], scale[:, None, None], CROP)[:, 0]
    torch.testing.assert_close(back, torch.from_numpy(target_boxes(pos, size)).float(), rtol=0, atol=1e-4)
    for i in range(6):
        assert torch.equal(box_in_crop(pos[i], size[i], sample_pos[i], scale[i], CROP), boxes[i])
        alone = boxes_in_image(boxes[i : i + 1], sample_pos[i], scale[i], CROP)
        assert torch.equal(alone[0], back[i])
        assert np.array_equal(target_boxes(pos[i], size[i]), target_boxes(pos, size)[i])
