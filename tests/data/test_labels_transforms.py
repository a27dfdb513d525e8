import numpy as np
import pytest
import torch

from ltr.data.labels import gaussian_label, label_sigma_cells
from ltr.data.transforms import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    brightness_normalize,
    brightness_normalize_lut,
    draw_augmentation,
    flip_width,
    grayscale_frame,
    hflip,
    to_grayscale,
)


def test_label_peaks_at_target_centre_even_filter():
    # stride 16; even filter: index j sits at crop pixel 16 j
    centres = torch.tensor([[160.0, 96.0], [16.0, 320.0]])
    lab = gaussian_label(centres, crop_size=352, feature_size=22, sigma_cells=0.9, filter_size=4)
    assert lab.shape == (2, 22, 22)
    for k, (cx, cy) in enumerate(centres.tolist()):
        r, c = divmod(int(lab[k].argmax()), 22)
        assert (c, r) == (int(cx / 16), int(cy / 16))
        assert lab[k, r, c] == pytest.approx(1.0)
    # one cell away the value is exp(-0.5 / sigma^2)
    assert lab[0, 6, 11] == pytest.approx(np.exp(-0.5 / 0.81), rel=1e-5)


def test_label_odd_filter_and_end_pad():
    lab = gaussian_label(
        torch.tensor([[40.0, 8.0]]), crop_size=64, feature_size=4, sigma_cells=0.5, filter_size=3
    )
    r, c = divmod(int(lab[0].argmax()), 4)
    assert (c, r) == (2, 0) and lab[0, r, c] == pytest.approx(1.0)  # odd: cell centres (j + 0.5) * 16
    padded = gaussian_label(
        torch.tensor([[64.0, 64.0]]),
        crop_size=64,
        feature_size=4,
        sigma_cells=0.5,
        filter_size=4,
        label_size=5,
    )
    assert padded.shape == (1, 5, 5) and padded[0, 4, 4] == pytest.approx(1.0)


def test_label_between_cells_is_symmetric():
    lab = gaussian_label(
        torch.tensor([[168.0, 168.0]]), crop_size=352, feature_size=22, sigma_cells=1, filter_size=4
    )
    assert lab[0, 10, 10] == pytest.approx(lab[0, 11, 11].item())
    assert label_sigma_cells(22, 0.25, 6.0) == pytest.approx(22 / 24)


def test_hflip_moves_pattern_with_box():
    img = torch.zeros(1, 3, 8, 10, dtype=torch.uint8)
    img[0, :, 2:4, 1:3] = 255  # box x=1, y=2, w=2, h=2
    box = torch.tensor([[1.0, 2.0, 2.0, 2.0]])
    fimg, fbox = hflip(img, box)
    torch.testing.assert_close(fbox, torch.tensor([[7.0, 2.0, 2.0, 2.0]]))
    ys, xs = torch.nonzero(fimg[0, 0] == 255, as_tuple=True)
    assert xs.min().item() == 7 and xs.max().item() == 8 and ys.min().item() == 2


def test_grayscale_weights_and_shape():
    img = torch.tensor([255, 0, 0], dtype=torch.uint8).reshape(1, 3, 1, 1).expand(1, 3, 2, 2)
    g = to_grayscale(img)
    assert g.shape == (1, 3, 2, 2) and g.dtype == torch.uint8
    assert (g == round(0.299 * 255)).all()


def test_brightness_normalize_torch_and_lut_agree():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(4, 3, 5, 6), dtype=np.uint8)
    factors = [0.8, 1.0, 1.2, 1.2]
    ref = (np.minimum(img * np.array(factors)[:, None, None, None] / 255.0, 1.0)) - np.reshape(
        IMAGENET_MEAN, (3, 1, 1)
    )
    ref = ref / np.reshape(IMAGENET_STD, (3, 1, 1))
    a = brightness_normalize(torch.from_numpy(img), torch.tensor(factors))
    b = brightness_normalize_lut(img, factors)
    np.testing.assert_allclose(a.numpy(), ref, atol=1e-5)
    np.testing.assert_allclose(b, ref, atol=1e-5)
    assert b.dtype == np.float32


def test_draw_augmentation_probabilities():
    rng = np.random.default_rng(1)
    kwargs = dict(grayscale_prob=0.05, joint_flip_prob=0.5, flip_prob=0.5, brightness_jitter=0.2)
    draws = [draw_augmentation(rng, 6, **kwargs) for _ in range(4000)]
    gray = np.mean([d.grayscale for d in draws])
    joint = np.mean([d.joint_flip for d in draws])
    flips = np.array([d.flips for d in draws])
    b = np.array([d.brightness for d in draws])
    assert flips.shape == b.shape == (4000, 6)
    assert 0.03 < gray < 0.07 and 0.45 < joint < 0.55 and abs(flips.mean() - 0.5) < 0.02
    # per frame: the frames of a sample flip independently, brightness factors differ
    assert abs(np.mean(flips[:, 0] == flips[:, 1]) - 0.5) < 0.03
    assert b.min() >= 0.8 and b.max() <= 1.2 and abs(b.mean() - 1.0) < 0.01
    assert (b[:, 0] != b[:, 1]).all()
    one = draw_augmentation(rng, 6, **{**kwargs, "flip_prob": 1.0, "brightness_jitter": 0.0}, flip_joint=True)
    assert one.flips == (True,) * 6 and one.brightness == (1.0,) * 6
    one = draw_augmentation(rng, 6, **{**kwargs, "flip_prob": 0.5}, flip_joint=True)
    assert len(set(one.flips)) == 1
    with pytest.raises(ValueError, match="joint_flip_prob"):
        draw_augmentation(rng, 2, **{**kwargs, "joint_flip_prob": 2})


def test_flip_conventions():
    img = torch.zeros(1, 3, 8, 10, dtype=torch.uint8)
    box = torch.tensor([[1.0, 2.0, 2.0, 2.0]])
    _, continuous = hflip(img, box, "continuous")
    _, reference = hflip(img, box, "reference")
    torch.testing.assert_close(continuous, torch.tensor([[7.0, 2.0, 2.0, 2.0]]))
    torch.testing.assert_close(reference, torch.tensor([[6.0, 2.0, 2.0, 2.0]]))  # x' = W - 1 - x - w
    assert flip_width(10, "reference") == 9 and flip_width(10, "continuous") == 10
    with pytest.raises(ValueError, match="flip convention"):
        flip_width(10, "mirror")


def test_grayscale_frame_is_opencvs_luma():
    rng = np.random.default_rng(2)
    frame = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    gray = grayscale_frame(frame)
    assert gray.shape == frame.shape and gray.dtype == np.uint8
    assert (gray[..., 0] == gray[..., 1]).all() and (gray[..., 0] == gray[..., 2]).all()
    luma = frame.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    assert np.abs(gray[..., 0] - luma).max() <= 0.51
