"""The first frame's augmented samples against pytracking's ``DiMP.generate_init_samples`` and its dropout.

The numbers in ``tests/golden/patches.npz`` (``init__*``) come from pytracking's tracker on a seeded uint8
image, its global RNG seeded with the case's seed; here a ``torch.Generator`` seeded the same way feeds the same
draws. Regenerate with ``python scripts/pytracking_golden.py patches --pytracking PATH``. Both sides run the
same float32 PyTorch kernels and OpenCV's ``warpAffine``, so shifts, kinds and the sample position and scale
must be equal and the pixels equal up to float32 rounding (``PIXEL_ATOL``: a few units in the last place at
255, for a CPU whose vectorised kernels sum in another order; zero on the machine that wrote the file).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pytracking.tracker.dimp.init_augment import (
    Blur,
    Identity,
    InitAugmentation,
    Translation,
    crop_to_output,
    feature_dropout,
    generate_init_patches,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "patches.npz"
CASES = ["super_dimp", "inside_border", "plain_nonsquare"]
PIXEL_ATOL = 2e-4


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("name", CASES)
def test_init_samples_and_dropout_match_reference(golden, name):
    key = f"init__{name}__"
    case = json.loads(str(golden[key + "config"]))
    aug = InitAugmentation.from_pytracking(
        case["augmentation"],
        expansion_factor=case["augmentation_expansion_factor"],
        random_shift_factor=case["random_shift_factor"],
    )
    generator = torch.Generator().manual_seed(case["seed"])
    init = generate_init_patches(
        torch.from_numpy(golden["image"]).float(),
        torch.tensor(case["pos"]),
        torch.tensor(case["target_scale"]),
        torch.tensor([float(v) for v in case["img_sample_sz"]]),
        aug,
        border_mode=case["border_mode"],
        max_scale_change=case["patch_max_scale_change"],
        generator=generator,
    )
    assert [type(t).__name__ for t in init.transforms] == golden[key + "kind"].tolist()
    assert [list(t.shift) for t in init.transforms] == golden[key + "shift"].tolist()
    assert len(init.transforms) == aug.num_transforms
    assert torch.equal(init.init_sample_pos, torch.from_numpy(golden[key + "init_sample_pos"]))
    assert torch.equal(init.init_sample_scale, torch.from_numpy(golden[key + "init_sample_scale"]))
    ref = torch.from_numpy(golden[key + "patches"])
    assert init.patches.shape == ref.shape
    torch.testing.assert_close(init.patches, ref, rtol=0, atol=PIXEL_ATOL)

    # the dropout copies come next from the same generator, as the reference's come from its global RNG
    num, prob = case["augmentation"]["dropout"]
    dropped = feature_dropout(torch.from_numpy(golden[key + "features"]), num, prob, generator)
    torch.testing.assert_close(dropped, torch.from_numpy(golden[key + "dropout"]), rtol=1e-6, atol=0)


def test_default_augmentation_is_pytrackings_dimp50():
    aug = InitAugmentation()
    assert aug == InitAugmentation.from_pytracking(
        {
            "fliplr": True,
            "rotate": [10, -10, 45, -45],
            "blur": [(3, 1), (1, 3), (2, 2)],
            "relativeshift": [(0.6, 0.6), (-0.6, 0.6), (0.6, -0.6), (-0.6, -0.6)],
            "dropout": (2, 0.2),
        },
        expansion_factor=2,
        random_shift_factor=1 / 3,
    )
    assert (aug.num_transforms, aug.num_samples) == (13, 15)
    off = InitAugmentation.from_pytracking({"fliplr": True, "dropout": (2, 0.2)}, use_augmentation=False)
    assert (off.num_transforms, off.num_samples) == (1, 1)
    with pytest.raises(ValueError, match="unknown pytracking augmentation keys"):
        InitAugmentation.from_pytracking({"fliplr": True, "hue": 0.1})


def test_shift_moves_the_content_by_shift():
    # a content point at p in the centred cut lands at p + shift: the target box moves by +shift (dy, dx)
    image = torch.zeros(1, 1, 12, 12)
    image[0, 0, 6, 5] = 1.0
    centred = crop_to_output(image, (8, 8), (0, 0))  # rows/cols 2..9
    moved = Translation(output_sz=(8, 8), shift=(2, -3), translation=(2, -3))(image)
    (y0, x0), (y1, x1) = centred[0, 0].nonzero()[0].tolist(), moved[0, 0].nonzero()[0].tolist()
    assert (y0, x0) == (4, 3) and (y1 - y0, x1 - x0) == (2, -3)
    # past the image, the border repeats
    far = Identity(output_sz=(4, 4), shift=(0, 9))(torch.arange(16.0).reshape(1, 1, 4, 4))
    assert torch.equal(far[0, 0], torch.zeros(4, 4) + torch.tensor([0.0, 4.0, 8.0, 12.0])[:, None])
    # odd size differences: output i reads input i - floor((out - in) / 2), so cutting drops the first row
    # and column and padding repeats the last
    five = torch.arange(25.0).reshape(1, 1, 5, 5)
    assert torch.equal(crop_to_output(five, (4, 4), (0, 0)), five[:, :, 1:, 1:])
    four = torch.arange(16.0).reshape(1, 1, 4, 4)
    assert torch.equal(
        crop_to_output(four, (5, 5), (0, 0)), four[:, :, [0, 1, 2, 3, 3]][:, :, :, [0, 1, 2, 3, 3]]
    )


def test_blur_sigma_is_y_then_x():
    image = torch.zeros(1, 1, 21, 21)
    image[0, 0, 10, 10] = 1.0
    out = Blur(sigma=(3.0, 1.0))(image)[0, 0]
    assert out.sum().item() == pytest.approx(1.0, abs=1e-6)
    spread_y = (out.sum(1) * (torch.arange(21.0) - 10) ** 2).sum()
    spread_x = (out.sum(0) * (torch.arange(21.0) - 10) ** 2).sum()
    assert spread_y > 4 * spread_x  # 13 taps of sigma 3 along y, 5 taps of sigma 1 along x
    assert Blur(sigma=(3.0, 1.0)).kernel(0).numel() == 13 and Blur(sigma=(3.0, 1.0)).kernel(1).numel() == 5


def test_feature_dropout_draws_like_dropout2d():
    x = torch.randn(3, 16, 4, 4)
    torch.manual_seed(7)
    ref = F.dropout2d(x[0:1].expand(5, -1, -1, -1), p=0.3, training=True)
    torch.manual_seed(7)
    assert torch.equal(feature_dropout(x, 5, 0.3, None), ref)
    ours = feature_dropout(x, 5, 0.3, torch.Generator().manual_seed(7))
    assert torch.equal(ours, ref)
    kept = ours.flatten(2).abs().sum(2) > 0  # whole channels dropped, the rest scaled by 1 / (1 - p)
    torch.testing.assert_close(ours[kept], (x[0:1].expand(5, -1, -1, -1) / 0.7)[kept])
