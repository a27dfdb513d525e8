import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr.data.crop import CropTransform, crop_region, sample_target_crop, sample_target_crops
from tests.data.helpers import TARGET_COLOR, draw_box, textured_background

H, W = 120, 160
OUT = 64


def scene(box):
    return draw_box(textured_background(H, W, seed=3), box)


def check_pattern(crop_hwc: np.ndarray, transform: CropTransform, box, *, margin_img: float = 1.0):
    """The target colour fills the crop exactly where the transformed box (clipped to the image) says."""
    scale, offset = float(transform.scale), np.asarray(transform.offset, dtype=np.float64)
    centres = (np.arange(OUT) + 0.5) / scale  # crop pixel centres -> image coordinates
    xs, ys = centres + offset[0], centres + offset[1]
    x, y, w, h = box
    margin = margin_img + 1.0 / scale  # one source pixel of interpolation + one output pixel
    inside_img_x = (xs > margin) & (xs < W - margin)
    inside_img_y = (ys > margin) & (ys < H - margin)
    in_x = (xs > x + margin) & (xs < x + w - margin)
    in_y = (ys > y + margin) & (ys < y + h - margin)
    out_x = (xs < x - margin) | (xs > x + w + margin)
    out_y = (ys < y - margin) | (ys > y + h + margin)
    inner = in_y[:, None] & in_x[None, :] & inside_img_y[:, None] & inside_img_x[None, :]
    outer = (out_y[:, None] | out_x[None, :]) & inside_img_y[:, None] & inside_img_x[None, :]
    is_target = np.all(np.abs(crop_hwc.astype(int) - np.array(TARGET_COLOR)) <= 3, axis=-1)
    assert inner.sum() > 20, "test geometry leaves too few target pixels to check"
    assert is_target[inner].all(), f"{(~is_target[inner]).sum()} target pixels missing"
    assert not is_target[outer].any(), f"{is_target[outer].sum()} target-coloured pixels outside the box"
    # the box mapped into the crop really covers the detected target pixels
    mapped = transform.image_to_crop(np.asarray(box, dtype=np.float64))
    rows, cols = np.nonzero(is_target & inside_img_y[:, None] & inside_img_x[None, :])
    assert cols.min() + 0.5 >= mapped[0] - 1.5 and cols.max() + 0.5 <= mapped[0] + mapped[2] + 1.5
    assert rows.min() + 0.5 >= mapped[1] - 1.5 and rows.max() + 0.5 <= mapped[1] + mapped[3] + 1.5


BOXES = [
    (60.0, 40.0, 30.0, 20.0),  # middle
    (2.0, 3.0, 24.0, 18.0),  # touching the top-left corner
    (140.0, 100.0, 30.0, 30.0),  # over the bottom-right border
    (-10.0, 50.0, 25.0, 20.0),  # over the left border
    (20.5, 30.25, 9.5, 60.0),  # thin, fractional
]


@pytest.mark.parametrize("mode", ["replicate", "inside_major", "inside"])
@pytest.mark.parametrize("box", BOXES)
def test_pattern_lands_where_the_box_says_numpy(mode, box):
    crop, t = sample_target_crop(scene(box), np.array(box), 4.0, OUT, mode=mode, max_scale_change=1.5)
    assert crop.shape == (OUT, OUT, 3) and crop.dtype == np.uint8
    check_pattern(crop, t, box)


@pytest.mark.parametrize("mode", ["replicate", "inside_major"])
@pytest.mark.parametrize("box", BOXES)
def test_pattern_lands_where_the_box_says_torch(mode, box):
    image = torch.from_numpy(scene(box)).permute(2, 0, 1)
    crop, t = sample_target_crop(image, torch.tensor(box), 4.0, OUT, mode=mode, max_scale_change=1.5)
    assert crop.shape == (3, OUT, OUT) and crop.dtype == torch.float32
    check_pattern(
        crop.permute(1, 2, 0).round().numpy(), CropTransform(t.scale.numpy(), t.offset.numpy()), box
    )


def test_replicate_padding_repeats_the_border():
    image = np.tile(np.arange(W, dtype=np.uint8)[None, :, None], (H, 1, 3))  # value = column index
    box = np.array([-60.0, 40.0, 20.0, 20.0])  # region far left of the image
    for img in (image, torch.from_numpy(image).permute(2, 0, 1)):
        crop, t = sample_target_crop(img, box, 5.0, OUT, mode="replicate")
        crop = crop if isinstance(crop, np.ndarray) else crop.permute(1, 2, 0).numpy()
        xs = (np.arange(OUT) + 0.5) / float(t.scale) + float(t.offset[0])
        left = xs < -1
        assert left.any() and np.allclose(crop[:, left, 0], 0, atol=0.5)


def test_inside_major_geometry():
    # a big target: the region shrinks by at most 1.5 and is shifted inside the image
    box = np.array([100.0, 70.0, 40.0, 40.0])  # side 40 * 4 = 160 > H = 120
    region = crop_region(box, 4.0, (W, H), mode="inside_major", max_scale_change=1.5)
    assert region[2] == region[3]
    assert region[2] == pytest.approx(160.0 / (160.0 / 160.0))  # ratio_w = 1 -> no shrink (min of 1, 1.33)
    assert region[0] == pytest.approx(0.0)  # fits in x: shifted inside
    assert region[1] == pytest.approx((H - 160.0) / 2)  # larger than H: centred
    big = crop_region(
        np.array([50.0, 40.0, 60.0, 60.0]), 4.0, (W, H), mode="inside_major", max_scale_change=1.5
    )
    assert big[2] == pytest.approx(240.0 / 1.5)  # shrink limited to 1.5
    inside = crop_region(np.array([50.0, 40.0, 60.0, 60.0]), 4.0, (W, H), mode="inside", max_scale_change=10)
    assert inside[2] == pytest.approx(H) and 0 <= inside[0] <= W - H and inside[1] == pytest.approx(0)
    rep = crop_region(np.array([50.0, 40.0, 60.0, 60.0]), 4.0, (W, H), mode="replicate")
    np.testing.assert_allclose(rep, [80 - 120, 70 - 120, 240, 240])


def test_numpy_and_torch_agree_on_integer_regions():
    image = textured_background(H, W, seed=5)
    # region: side sqrt(16*16)*4 = 64 = OUT (scale 1) and 32 (upscale 2); corners on whole pixels
    for box in ([40.0, 30.0, 16.0, 16.0], [60.0, 50.0, 8.0, 8.0], [-20.0, -12.0, 16.0, 16.0]):
        a, ta = sample_target_crop(image, np.array(box), 4.0, OUT)
        b, tb = sample_target_crop(torch.from_numpy(image).permute(2, 0, 1), torch.tensor(box), 4.0, OUT)
        assert float(ta.scale) == pytest.approx(float(tb.scale))
        np.testing.assert_allclose(ta.offset, tb.offset.numpy(), atol=1e-5)
        diff = np.abs(a.astype(np.float32) - b.permute(1, 2, 0).numpy())
        # cv2.resize sees only the region, so within half a source pixel of its edge it repeats the edge
        # pixel where grid_sample reads the next image pixel: compare inside that ring
        ring = math.ceil(0.5 * float(ta.scale))
        assert diff[ring:-ring, ring:-ring].max() <= 1.5, diff.max()


def test_batched_equals_single_and_transform_round_trip():
    image = textured_background(H, W, seed=7)
    boxes = torch.tensor([[40.0, 30.0, 20.0, 10.0], [100.0, 80.0, 50.0, 30.0], [-5.0, 10.0, 15.0, 15.0]])
    crops, t = sample_target_crops(
        torch.from_numpy(image).permute(2, 0, 1), boxes, 3.0, OUT, "inside_major", 1.5
    )
    assert crops.shape == (3, 3, OUT, OUT) and t.scale.shape == (3,) and t.offset.shape == (3, 2)
    for i in range(3):
        c, ti = sample_target_crop(
            torch.from_numpy(image).permute(2, 0, 1), boxes[i], 3.0, OUT, "inside_major", 1.5
        )
        torch.testing.assert_close(c, crops[i], atol=2e-3, rtol=1e-5)  # slices differ: rounding
        torch.testing.assert_close(ti.scale, t.scale[i])
    torch.testing.assert_close(t.crop_to_image(t.image_to_crop(boxes)), boxes, atol=1e-4, rtol=1e-5)
    np_crops, nt = sample_target_crops([image] * 3, boxes.numpy(), 3.0, OUT, "inside_major", 1.5)
    assert np_crops.shape == (3, OUT, OUT, 3)
    np.testing.assert_allclose(nt.crop_to_image(nt.image_to_crop(boxes.numpy())), boxes.numpy(), atol=1e-4)


def test_target_at_crop_centre_in_replicate_mode():
    box = np.array([37.3, 41.7, 12.2, 30.9])
    _, t = sample_target_crop(textured_background(H, W, 1), box, 5.0, OUT, mode="replicate")
    crop_box = t.image_to_crop(box)
    centre = crop_box[:2] + crop_box[2:] / 2
    np.testing.assert_allclose(centre, [OUT / 2, OUT / 2], atol=0.51)  # integer rounding of the region
    assert math.sqrt(crop_box[2] * crop_box[3]) * 5.0 == pytest.approx(OUT, rel=0.02)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="crop mode"):
        sample_target_crop(np.zeros((10, 10, 3), np.uint8), np.array([1.0, 1, 2, 2]), 2.0, 8, mode="zeros")
    with pytest.raises(ValueError, match="box_xywh"):
        sample_target_crop(np.zeros((10, 10, 3), np.uint8), np.array([1.0, 1, 2]), 2.0, 8)
    with pytest.raises(ValueError, match="2 images but 1 boxes"):
        sample_target_crops([np.zeros((10, 10, 3), np.uint8)] * 2, np.array([[1.0, 1, 2, 2]]), 2.0, 8)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_crops_match_cpu():
    image = torch.from_numpy(textured_background(H, W, seed=9)).permute(2, 0, 1)
    boxes = torch.tensor([[40.0, 30.0, 20.0, 10.0], [-5.0, 10.0, 15.0, 15.0]])
    cpu, tc = sample_target_crops(image, boxes, 4.0, OUT, "inside_major", 1.5)
    gpu, tg = sample_target_crops(image.cuda(), boxes.cuda(), 4.0, OUT, "inside_major", 1.5)
    assert gpu.device.type == "cuda" and tg.scale.device.type == "cuda"
    torch.testing.assert_close(gpu.cpu(), cpu, atol=1e-3, rtol=1e-4)
    torch.testing.assert_close(tg.offset.cpu(), tc.offset)


@settings(max_examples=80, deadline=None)
@given(
    box=st.tuples(st.floats(-200, 400), st.floats(-200, 400), st.floats(0.5, 300), st.floats(0.5, 300)),
    size=st.tuples(st.integers(16, 500), st.integers(16, 500)),
    factor=st.floats(1.0, 8.0),
)
def test_crop_region_properties(box, size, factor):
    box = np.array(box)
    side = max(math.sqrt(box[2] * box[3]) * factor, 1.0)  # min_side 1
    rep = crop_region(box, factor, size, mode="replicate")
    np.testing.assert_allclose(rep[:2] + rep[2:] / 2, box[:2] + box[2:] / 2, atol=1e-6)  # centred
    for mode in ("inside", "inside_major"):
        r = crop_region(box, factor, size, mode=mode, max_scale_change=1.5)
        assert r[2] == pytest.approx(r[3])
        assert side / 1.5 - 1e-6 <= r[2] <= side + 1e-6  # shrunk by at most 1.5, never grown
        for start, extent in ((r[0], size[0]), (r[1], size[1])):
            if r[2] <= extent + 1e-9:
                assert -1e-6 <= start and start + r[2] <= extent + 1e-6  # fits: inside the image
            else:
                assert start == pytest.approx((extent - r[2]) / 2)  # larger: centred
    t = crop_region(torch.tensor(box), factor, size, mode="inside_major", max_scale_change=1.5)
    # torch and numpy round sqrt and products differently: 0 in one is -2.8e-14 in the other (hypothesis found
    # box (0, 0, 58.4375, 155.96875), image (16, 429), factor 4.75)
    np.testing.assert_allclose(
        t.numpy(),
        crop_region(box, factor, size, mode="inside_major", max_scale_change=1.5),
        rtol=1e-9,
        atol=1e-9,
    )


def test_cpu_slicing_matches_sampling_the_whole_frame():
    # the CPU route cuts the frame to the regions before grid_sample: compare with an independent
    # full-frame grid_sample of the same transform (inside, over the border, fully outside)
    image = torch.from_numpy(textured_background(H, W, seed=4)).permute(2, 0, 1)
    boxes = torch.tensor([[50.3, 40.7, 20.0, 12.0], [140.0, 100.0, 30.0, 30.0], [-90.0, 20.0, 10.0, 10.0]])
    crops, t = sample_target_crops(image, boxes, 3.0, OUT, "replicate")
    j = torch.arange(OUT, dtype=torch.float32) + 0.5
    for i in range(3):
        xs = t.offset[i, 0] + j / t.scale[i]
        ys = t.offset[i, 1] + j / t.scale[i]
        grid = torch.stack(torch.meshgrid(2 * xs / W - 1, 2 * ys / H - 1, indexing="xy"), dim=-1)
        ref = torch.nn.functional.grid_sample(
            image.float()[None], grid[None], padding_mode="border", align_corners=False
        )[0]
        torch.testing.assert_close(crops[i], ref, atol=1e-3, rtol=1e-5)
