"""Initial augmentation: every augmented crop's box lies on the target's pixels."""

import pytest
import torch

from pytracking.tracker.dimp.augment import augmented_samples, feature_dropout, gaussian_blur
from pytracking.tracker.dimp.params import AugmentationParams

BOX = torch.tensor([80.0, 60.0, 30.0, 20.0])


def scene():
    frame = torch.zeros(3, 160, 200)
    x, y, w, h = (int(v) for v in BOX)
    frame[:, y : y + h, x : x + w] = 255.0
    return frame


def mean_inside(crop, box, shrink=0.25):
    x, y, w, h = box.tolist()
    x0, x1 = round(x + shrink * w), round(x + (1 - shrink) * w)
    y0, y1 = round(y + shrink * h), round(y + (1 - shrink) * h)
    return float(crop[:, y0:y1, x0:x1].mean())


def test_boxes_follow_the_target():
    aug = AugmentationParams()
    s = augmented_samples(
        scene(),
        BOX,
        crop_size=64,
        search_area_factor=4.0,
        aug=aug,
        generator=torch.Generator().manual_seed(3),
    )
    assert s.crops.shape == (aug.num_image_samples, 3, 64, 64) == (13, 3, 64, 64)
    assert s.boxes.shape == (13, 4)
    # identity sample: its box is the image box mapped with the returned transform, at the crop centre
    assert s.boxes[0].tolist() == pytest.approx(s.identity_transform.image_to_crop(BOX).tolist(), abs=1e-4)
    centre = s.boxes[0, :2] + 0.5 * s.boxes[0, 2:]
    assert centre.tolist() == pytest.approx([32.0, 32.0], abs=1e-4)
    scale = 64 / (4.0 * (30 * 20) ** 0.5)
    assert s.boxes[0, 2:].tolist() == pytest.approx([30 * scale, 20 * scale], rel=1e-5)
    for i in range(13):
        inside = mean_inside(s.crops[i], s.boxes[i], shrink=0.3)
        assert inside > 200, f"sample {i}: target not under its box (mean {inside:.0f})"
    # shifted samples really moved the target away from the centre
    shifted = s.boxes[9:, :2] + 0.5 * s.boxes[9:, 2:]
    assert ((shifted - 32.0).abs() > 5).all()
    # the flipped sample is mirrored: same box size
    assert s.boxes[1, 2:].tolist() == pytest.approx(s.boxes[0, 2:].tolist())


def test_blur_and_dropout():
    img = torch.zeros(1, 1, 9, 9)
    img[..., 4, 4] = 1.0
    out = gaussian_blur(img, 2.0, 0.0)
    assert float(out.sum()) == pytest.approx(1.0, abs=1e-5)
    assert float(out[..., 4, :].sum()) == pytest.approx(1.0, abs=1e-5)  # blurred along x only
    assert float(out[..., 4, 4]) < 0.3
    feats = torch.ones(1, 100, 2, 2)
    drop = feature_dropout(feats, 2, 0.2, torch.Generator().manual_seed(0))
    assert drop.shape == (2, 100, 2, 2)
    kept = drop[:, :, 0, 0] > 0
    assert 0.6 < float(kept.float().mean()) < 0.95
    assert torch.allclose(drop[kept[..., None, None].expand_as(drop)], torch.tensor(1.25))
