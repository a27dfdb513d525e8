"""The training processing against pytracking's SuperDiMP ``KLDiMPProcessing`` on the same draws.

``tests/golden/training_processing.npz`` holds what pytracking's processing did with 4 samples of 3 train + 3
test frames cut from a photograph (``python scripts/pytracking_golden.py training_processing --pytracking
PATH``): its random draws and the values of every stage. The draws are fed to this toolkit
(:meth:`DiMPProcessing.apply` with a :class:`SampleDraws` of the recorded values; the proposals from a torch
generator seeded as pytracking's global one was) and every stage is compared:

- jittered boxes: float64 here, float32 there: ``rtol`` 1e-6;
- crop regions (whole pixels): equal; crop pixels (row and column sums, a strided subsample of the uint8
  crops): equal on the machine that wrote the file (``PIXEL_SUM_ATOL`` / ``PIXEL_ATOL`` leave room for an
  OpenCV build that rounds a few pixels the other way);
- boxes in crop pixels, before and after the per-frame flip: 1e-4 px;
- normalised images: equal (the look-up table here is computed in the reference's float32 operations);
- labels and label densities (23 x 23 with DiMP's end padding): 1e-5;
- proposals: 5e-4 px (float32 boxes of a few hundred pixels); log proposal density 1e-5 and log ground-truth
  density 5e-5 (pytracking stores densities; where its float32 density underflowed below 1e-30 ours must be
  below that too).

The configuration compared is this toolkit's KLD-IS setting's data config (``base_config("kld_is").data``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from ltr.data.labels import gaussian_label
from ltr.data.processing import DiMPProcessing, FrameSet, SampleDraws, apply_jitter
from ltr.data.reference_crop import sample_reference_crops
from ltr.data.transforms import AugmentationDraw, grayscale_frame
from ltr.ops.boxes import xywh_to_cxcywh
from ltr.train_settings.dimp.base import base_config
from tests.golden.training_frames import window_frames

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "training_processing.npz"
NUM_TRAIN = 3
PIXEL_ATOL = 1
PIXEL_SUM_ATOL = 352


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def config():
    return base_config("kld_is").data


def _frames(golden, i):
    return window_frames(golden["windows"][i])


def _factors(config) -> tuple[np.ndarray, np.ndarray]:
    n_te = 6 - NUM_TRAIN
    center = np.array([config.center_jitter_train] * NUM_TRAIN + [config.center_jitter_test] * n_te)
    scale = np.array([config.scale_jitter_train] * NUM_TRAIN + [config.scale_jitter_test] * n_te)
    return center, scale


def _draws(golden, i) -> SampleDraws:
    aug = AugmentationDraw(
        grayscale=bool(golden["gray"][i]),
        joint_flip=bool(golden["joint_flip"][i]),
        flips=tuple(bool(v) for v in golden["flip"][i]),
        brightness=tuple(float(v) for v in golden["brightness"][i]),
    )
    return SampleDraws(golden["jitter_randn"][i], golden["jitter_rand"][i], aug)


def test_golden_covers_the_cases(golden):
    assert golden["gray"].any() and golden["joint_flip"].any() and not golden["joint_flip"].all()
    assert golden["flip"].any() and not golden["flip"].all()
    regions = golden["crop_regions"]
    assert (regions[..., :2] < 0).any()  # padded regions
    sizes = golden["windows"][..., 2:]
    assert (regions[..., 0] + regions[..., 2] == sizes[..., 0]).any()  # reaching the last column


def test_config_is_superdimps(golden, config):
    ref = json.loads(str(golden["config"]))
    assert config.search_area_factor == ref["search_area_factor"] and config.crop_size == ref["output_sz"]
    assert (config.center_jitter_train, config.center_jitter_test) == tuple(
        ref["center_jitter_factor"][k] for k in ("train", "test")
    )
    assert (config.scale_jitter_train, config.scale_jitter_test) == tuple(
        ref["scale_jitter_factor"][k] for k in ("train", "test")
    )
    assert (config.crop_mode, config.max_scale_change) == (ref["crop_type"], ref["max_scale_change"])
    assert (config.crop_geometry, config.flip_convention) == ("reference", "reference")
    assert (
        config.grayscale_prob == ref["grayscale_prob"]
        and config.brightness_jitter == ref["brightness_jitter"]
    )
    assert (config.joint_flip_prob, config.flip_prob, config.flip_joint) == (
        ref["joint_flip_prob"],
        ref["flip_prob"],
        False,
    )
    assert tuple(config.normalize_mean) == tuple(ref["mean"]) and tuple(config.normalize_std) == tuple(
        ref["std"]
    )
    label = ref["label_function_params"]
    assert config.feature_size == label["feature_sz"] and config.filter_size == label["kernel_sz"]
    assert config.label_sigma_cells == pytest.approx(label["sigma_factor"] * label["feature_sz"], rel=1e-12)
    assert config.label_size == label["feature_sz"] + 1  # the reference's end padding for an even kernel
    proposals = ref["proposal_params"]
    kwargs = config.box_method_kwargs
    assert config.box_method == "kld_is" and kwargs["num_samples"] == proposals["boxes_per_frame"]
    assert [tuple(s) for s in kwargs["sigmas"]] == [(c, c, s, s) for c, s in proposals["proposal_sigma"]]
    assert kwargs["label_sigma"] == proposals["gt_sigma"][0] == proposals["gt_sigma"][1]


@pytest.mark.parametrize("i", range(4))
def test_jitter_matches(golden, config, i):
    center, scale = _factors(config)
    ours = apply_jitter(
        golden["joint_boxes"][i], center, scale, golden["jitter_randn"][i], golden["jitter_rand"][i]
    )
    np.testing.assert_allclose(ours, golden["jittered"][i], rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize("i", range(4))
def test_crops_match_given_the_jittered_boxes(golden, config, i):
    images = _frames(golden, i)
    if golden["gray"][i]:
        images = [grayscale_frame(im) for im in images]
    if golden["joint_flip"][i]:
        images = [np.fliplr(im) for im in images]
    crops, transform = sample_reference_crops(
        images,
        golden["jittered"][i],
        config.search_area_factor,
        config.crop_size,
        config.crop_mode,
        config.max_scale_change,
    )
    side = config.crop_size / transform.scale
    regions = np.column_stack([transform.offset, side, side])
    np.testing.assert_allclose(regions, golden["crop_regions"][i], atol=1e-9, rtol=0)  # whole pixels
    crops = crops.astype(np.int64)
    np.testing.assert_allclose(
        crops.sum(axis=(2, 3)), golden["crop_row_sums"][i], atol=PIXEL_SUM_ATOL, rtol=0
    )
    np.testing.assert_allclose(
        crops.sum(axis=(1, 3)), golden["crop_col_sums"][i], atol=PIXEL_SUM_ATOL, rtol=0
    )
    np.testing.assert_allclose(crops[:, 8::32, 8::32], golden["crop_sub"][i], atol=PIXEL_ATOL, rtol=0)
    boxes = transform.image_to_crop(golden["joint_boxes"][i].astype(np.float64))
    np.testing.assert_allclose(boxes, golden["crop_boxes"][i], atol=1e-4, rtol=0)


@pytest.fixture(scope="module")
def samples(golden, config):
    proc = DiMPProcessing(config)
    out = []
    for i in range(len(golden["windows"])):
        images = _frames(golden, i)
        boxes = golden["boxes"][i].astype(np.float64)
        frames = FrameSet(images[:NUM_TRAIN], boxes[:NUM_TRAIN], images[NUM_TRAIN:], boxes[NUM_TRAIN:])
        generator = torch.Generator().manual_seed(int(golden["proposal_seed"][i]))
        out.append(proc.apply(frames, _draws(golden, i), generator))
    return out


def _both(sample, key):
    return torch.cat([sample[f"train_{key}"], sample[f"test_{key}"]]).numpy()


@pytest.mark.parametrize("i", range(4))
def test_processing_matches_on_the_same_draws(golden, samples, i):
    sample = samples[i]
    np.testing.assert_allclose(_both(sample, "boxes"), golden["final_boxes"][i], atol=1e-4, rtol=0)
    images = _both(sample, "images")
    np.testing.assert_array_equal(images[:, :, 8::32, 8::32], golden["image_sub"][i])
    np.testing.assert_allclose(
        images.astype(np.float64).sum(axis=(2, 3)), golden["image_sums"][i], rtol=1e-12
    )
    np.testing.assert_allclose(sample["proposals"].numpy(), golden["proposals"][i], atol=5e-4, rtol=0)
    log_q = sample["proposal_log_q"].numpy()
    np.testing.assert_allclose(log_q, np.log(golden["proposal_density"][i]), atol=1e-5, rtol=0)
    gt = golden["gt_density"][i].astype(np.float64)
    log_p = sample["proposal_log_p"].numpy()
    normal = gt > 1e-30
    assert normal.sum() > 50 and (~normal).sum() > 50
    np.testing.assert_allclose(log_p[normal], np.log(gt[normal]), atol=5e-5, rtol=0)
    assert (log_p[~normal] < math.log(1e-30) + 1e-3).all()


def test_labels_and_label_densities_match(golden, config, samples):
    for row, i in enumerate(golden["label_samples"]):
        sample = samples[int(i)]
        np.testing.assert_allclose(_both(sample, "label"), golden["label"][row], atol=1e-5, rtol=0)
        centres = xywh_to_cxcywh(torch.from_numpy(_both(sample, "boxes")))[:, :2]
        density = gaussian_label(
            centres,
            crop_size=config.crop_size,
            feature_size=config.feature_size,
            sigma_cells=config.label_sigma_cells,
            filter_size=config.filter_size,
            label_size=config.label_size,
            density=True,
        )
        np.testing.assert_allclose(density.numpy(), golden["label_density"][row], atol=1e-5, rtol=1e-5)
