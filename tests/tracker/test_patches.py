"""The tracker's patches against pytracking's ``sample_patch`` / ``sample_patch_multiscale``.

The numbers in ``tests/golden/patches.npz`` come from running pytracking's own functions on a seeded uint8
image; regenerate them with ``python scripts/pytracking_golden.py patches --pytracking PATH``. Both sides
compute the window in the same float32 arithmetic and resample with the same PyTorch bilinear kernel, so the
coordinates must be equal and the pixels equal up to float32 rounding: ``PIXEL_ATOL`` allows a few units in the
last place at 255 for a CPU whose vectorised kernels sum in another order (on the machine that wrote the file
the difference is zero).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from pytracking.tracker.dimp.patches import (
    BORDER_MODES,
    patch_window,
    sample_patch,
    sample_patch_multiscale,
    sample_patch_transformed,
    sample_patches,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "patches.npz"
PIXEL_ATOL = 2e-4


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def image(golden) -> torch.Tensor:
    return torch.from_numpy(golden["image"]).float()


def _none_if(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def test_sample_patch_matches_reference(golden, image):
    shapes = golden["patch__shape"]
    offsets = np.concatenate([[0], np.cumsum(np.prod(shapes, axis=1))])
    assert len(shapes) > 100
    for i in range(len(shapes)):
        out = golden["patch__output_sz"][i]
        patch, coord = sample_patch(
            image,
            torch.from_numpy(golden["patch__pos"][i]),
            torch.from_numpy(golden["patch__sample_sz"][i]),
            None if out[0] < 0 else out.tolist(),
            mode=BORDER_MODES[golden["patch__mode"][i]],
            max_scale_change=_none_if(golden["patch__max_scale_change"][i]),
        )
        ref = torch.from_numpy(golden["patch__values"][offsets[i] : offsets[i + 1]].reshape(shapes[i]))
        case = f"case {i}: pos {golden['patch__pos'][i]}, size {golden['patch__sample_sz'][i]}"
        assert torch.equal(coord, torch.from_numpy(golden["patch__coord"][i])[None]), case
        assert patch.shape == ref.shape, case
        torch.testing.assert_close(patch, ref, rtol=0, atol=PIXEL_ATOL, msg=case)


def test_multiscale_matches_reference(golden, image):
    for i in range(3):
        key = f"multiscale__{i}__"
        patches, coords = sample_patch_multiscale(
            image,
            torch.from_numpy(golden[key + "pos"]),
            golden[key + "scales"].tolist(),
            torch.from_numpy(golden[key + "image_sz"]),
            mode=BORDER_MODES[int(golden[key + "mode"])],
            max_scale_change=_none_if(float(golden[key + "max_scale_change"])),
        )
        assert torch.equal(coords, torch.from_numpy(golden[key + "coords"]))
        torch.testing.assert_close(
            patches, torch.from_numpy(golden[key + "patches"]), rtol=0, atol=PIXEL_ATOL
        )


def test_whole_pixel_cut_without_output_size():
    # centre (30, 40), 4 x 5 pixels: the window spans [28.5, 33) x [38, 43.5), cut from int(start) to
    # int(end): rows 28..32 (n + 1 for even n) and columns 38..42 (n for odd n)
    im = torch.arange(60 * 80, dtype=torch.float32).reshape(1, 1, 60, 80)
    patch, coord = sample_patch(im, torch.tensor([30.7, 40.2]), torch.tensor([4.0, 5.0]))
    assert torch.equal(patch, im[:, :, 28:33, 38:43])
    assert coord.tolist() == [[28.5, 38.0, 33.0, 43.5]]


def test_subsampling_takes_every_kth_pixel_through_the_centre():
    # 50 / 12 = 4.17 -> stride int(4.17 - 0.1) = 4 on the grid through the centre pixel (30, 41): rows 2 + 4i,
    # columns 1 + 4j, centre at grid (7, 10); round(50 / 4) = 12 (half to even) grid pixels, window
    # [c - 5.5, c + 7): grid rows 1..13 and columns 4..16, then a bilinear resize of the 13 x 13 cut to 12 x 12
    im = torch.arange(60 * 80, dtype=torch.float32).reshape(1, 1, 60, 80)
    window = patch_window((60, 80), [30.0, 41.0], [50.0, 50.0], [12, 12])
    assert window == (4, (2, 1), (1.5, 4.5), (14.0, 17.0))
    patch, coord = sample_patch(im, torch.tensor([30.0, 41.0]), torch.tensor([50.0, 50.0]), [12, 12])
    assert coord.tolist() == [[6.0, 18.0, 56.0, 68.0]]  # 4 * window, without the grid offset
    rows = 2 + 4 * torch.arange(1, 14)
    cols = 1 + 4 * torch.arange(4, 17)
    cut = im[:, :, rows][:, :, :, cols]
    expected = torch.nn.functional.interpolate(cut, size=[12, 12], mode="bilinear", align_corners=False)
    assert torch.equal(patch, expected)


def test_inside_mode_moves_the_window_into_the_image():
    im = torch.rand(1, 3, 60, 80)
    _, coord = sample_patch(
        im, torch.tensor([5.0, 75.0]), torch.tensor([30.0, 30.0]), [30, 30], mode="inside"
    )
    y1, x1, y2, x2 = coord[0].tolist()
    assert y1 >= 0 and x1 >= 0 and y2 <= 60 and x2 <= 80
    # replicate keeps it where it is
    _, coord = sample_patch(im, torch.tensor([5.0, 75.0]), torch.tensor([30.0, 30.0]), [30, 30])
    assert coord[0, 0] < 0 and coord[0, 3] > 80


def test_transformed_applies_every_transform_to_one_patch(image):
    patch, _ = sample_patch(image, torch.tensor([30.0, 40.0]), torch.tensor([32.0, 32.0]), [16, 16])
    out = sample_patch_transformed(
        image, torch.tensor([30.0, 40.0]), 2.0, [16, 16], [lambda x: x, lambda x: -x]
    )
    assert torch.equal(out, torch.cat([patch, -patch]))


def test_unknown_border_mode_is_refused(image):
    with pytest.raises(ValueError, match="border mode"):
        sample_patch(image, torch.tensor([30.0, 40.0]), torch.tensor([20.0, 20.0]), [16, 16], mode="zeros")


@pytest.mark.parametrize("mode", BORDER_MODES)
def test_patches_cut_together_are_each_patch_cut_alone(golden, mode):
    """sample_patches over images of different sizes, positions inside, at and beyond the borders and sizes
    from a few pixels to several times the image (subsampled): each patch and its coordinates bit for bit
    those sample_patch gives alone; a uint8 image gives the same patch as its float copy."""
    base = torch.from_numpy(golden["image"])  # (1, 3, H, W) uint8
    gen = torch.Generator().manual_seed(0)
    images, pos, size = [], [], []
    for i in range(24):
        h = int(torch.randint(20, base.shape[2] + 1, (1,), generator=gen))
        w = int(torch.randint(20, base.shape[3] + 1, (1,), generator=gen))
        im = base[:, :, :h, :w]
        images.append(im if i % 2 else im.float())
        pos.append((torch.rand(2, generator=gen) * 1.4 - 0.2) * torch.tensor([float(h), float(w)]))
        size.append(torch.rand(1, generator=gen) * 4 * max(h, w) + 3 * torch.rand(2, generator=gen))
    pos_t, size_t = torch.stack(pos), torch.stack(size)
    patches, coords = sample_patches(images, pos_t, size_t, [22, 22], mode=mode, max_scale_change=1.5)
    assert patches.shape == (24, 3, 22, 22) and patches.dtype == torch.float32
    for i, im in enumerate(images):
        want, want_coord = sample_patch(im.float(), pos_t[i], size_t[i], [22, 22], mode, 1.5)
        assert torch.equal(patches[i : i + 1], want), i
        assert torch.equal(coords[i : i + 1], want_coord), i


def test_patches_of_many_images_need_an_output_size(image):
    with pytest.raises(ValueError, match="need an output_sz"):
        sample_patches([image, image], torch.zeros(2, 2), torch.full((2, 2), 10.0))
