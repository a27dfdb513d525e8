import math

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

from ltr.data.config import DataConfig
from ltr.data.processing import BATCH_KEYS, DiMPProcessing, FrameSet, jitter_boxes
from ltr.ebm import build_method
from ltr.ops.boxes import box_iou, rel_to_xywh, xywh_to_cxcywh
from tests.data.helpers import draw_box, textured_background

CROP = 64


def frame_set(n_tr=3, n_te=3, seed=0):
    rng = np.random.default_rng(seed)
    images, boxes = [], []
    for _ in range(n_tr + n_te):
        box = np.array([rng.uniform(20, 60), rng.uniform(20, 40), rng.uniform(12, 24), rng.uniform(10, 20)])
        images.append(draw_box(textured_background(90, 120, seed), box))
        boxes.append(box)
    boxes = np.array(boxes)
    return FrameSet(images[:n_tr], boxes[:n_tr], images[n_tr:], boxes[n_tr:])


def run(config, seed=0, augment=True, frames=None):
    proc = DiMPProcessing(config, augment=augment)
    return proc(frames or frame_set(), np.random.default_rng(seed), torch.Generator().manual_seed(seed))


def test_sample_matches_contract_shapes():
    cfg = DataConfig(crop_size=CROP)
    s = run(cfg)
    fs = CROP // 16
    expected = {
        "train_images": (3, 3, CROP, CROP),
        "test_images": (3, 3, CROP, CROP),
        "train_boxes": (3, 4),
        "test_boxes": (3, 4),
        "train_label": (3, fs, fs),
        "test_label": (3, fs, fs),
        "proposals": (3, 128, 4),
        "proposals_rel": (3, 128, 4),
        "proposal_log_q": (3, 128),
    }
    assert set(s) == set(BATCH_KEYS)
    for k, shape in expected.items():
        assert tuple(s[k].shape) == shape, k
        assert s[k].dtype == torch.float32, k


def mixture_log_q(rel: np.ndarray, sigmas) -> np.ndarray:
    """Equal-weight zero-mean diagonal Gaussian mixture log density, by hand, float64 (log-sum-exp)."""
    comps = []
    for sig in sigmas:
        sig = np.asarray(sig, dtype=np.float64)
        z = rel / sig
        comps.append(-0.5 * (z**2).sum(-1) - np.log(sig).sum() - 0.5 * len(sig) * math.log(2 * math.pi))
    return logsumexp(np.stack(comps), axis=0) - math.log(len(sigmas))


def test_proposal_log_density_matches_mixture_formula_nce_plus():
    cfg = DataConfig(crop_size=CROP)
    s = run(cfg, seed=3)
    rel = s["proposals_rel"].double().numpy()
    sigmas = cfg.box_method_kwargs["sigmas"]
    np.testing.assert_allclose(s["proposal_log_q"].numpy(), mixture_log_q(rel, sigmas), rtol=1e-4, atol=1e-4)
    # column 0 is the NCE+ positive: beta = 0.1 times the noise stds, so it stays close to the label
    assert np.abs(rel[:, 0]).max() < 0.5 * 5 * 0.1
    # proposals are the rel candidates mapped around the test box
    back = rel_to_xywh(s["proposals_rel"], s["test_boxes"][:, None, :])
    torch.testing.assert_close(back, s["proposals"])
    iou0 = box_iou(s["proposals"][:, 0], s["test_boxes"])
    assert (iou0 > 0.5).all()


def test_kld_is_adds_label_density():
    kwargs = {"sigmas": ((0.05,) * 4, (0.5,) * 4), "label_sigma": 0.05, "num_samples": 128}
    cfg = DataConfig(crop_size=CROP, box_method="kld_is", box_method_kwargs=kwargs)
    s = run(cfg, seed=1)
    assert s["proposal_log_p"].shape == (3, 128)
    rel = s["proposals_rel"].double().numpy()
    np.testing.assert_allclose(
        s["proposal_log_p"].numpy(), mixture_log_q(rel, [(0.05,) * 4]), rtol=1e-4, atol=1e-3
    )
    np.testing.assert_allclose(
        s["proposal_log_q"].numpy(), mixture_log_q(rel, kwargs["sigmas"]), rtol=1e-4, atol=1e-4
    )


def test_methods_without_sampling_have_no_proposals():
    s = run(DataConfig(crop_size=CROP, box_method="dsm", box_method_kwargs={"sigma": 0.1}))
    assert "proposals" not in s and "train_label" in s


def test_same_generators_same_sample_and_proposals_reuse_ebm_sampler():
    cfg = DataConfig(crop_size=CROP)
    a, b = run(cfg, seed=5), run(cfg, seed=5)
    for k in a:
        torch.testing.assert_close(a[k], b[k])
    # the candidates are exactly the ltr.ebm method's own draws, one test frame after another (the torch
    # generator is used for nothing else)
    method = build_method(cfg.box_method, **cfg.box_method_kwargs)
    generator = torch.Generator().manual_seed(5)
    cands = [method.sample(torch.zeros(1, 4), generator=generator) for _ in range(3)]
    torch.testing.assert_close(a["proposals_rel"], torch.cat([c.y for c in cands]))
    torch.testing.assert_close(a["proposal_log_q"], torch.cat([c.log_q for c in cands]))


def test_labels_peak_at_the_crop_box_centre():
    cfg = DataConfig(crop_size=CROP * 2, scale_jitter_test=0.0, center_jitter_test=0.0)
    s = run(cfg, seed=2, augment=False)
    fs = cfg.feature_size
    for key_box, key_lab in (("train_boxes", "train_label"), ("test_boxes", "test_label")):
        centres = xywh_to_cxcywh(s[key_box])[:, :2]
        for c, lab in zip(centres, s[key_lab], strict=True):
            r, col = divmod(int(lab.argmax()), fs)
            assert abs(col - c[0].item() / 16) <= 0.5 + 1e-4 and abs(r - c[1].item() / 16) <= 0.5 + 1e-4


def test_boxes_point_at_the_target_in_the_normalised_crop():
    # without jitter and augmentation the crop pixels inside test_boxes are the target colour (red)
    cfg = DataConfig(crop_size=CROP, center_jitter_test=0.0, scale_jitter_test=0.0, crop_mode="replicate")
    s = run(cfg, augment=False)
    red = s["test_images"][:, 0] * IMAGENET_STD0 + IMAGENET_MEAN0
    for img_r, box in zip(red, s["test_boxes"], strict=True):
        x, y, w, h = box.tolist()
        inner = img_r[int(y + 2) : int(y + h - 2), int(x + 2) : int(x + w - 2)]
        assert inner.numel() > 0 and (inner > 0.95).all()


IMAGENET_MEAN0, IMAGENET_STD0 = 0.485, 0.229


@pytest.mark.parametrize("convention", ["reference", "continuous"])
def test_flip_keeps_boxes_on_the_target(convention):
    common = dict(
        crop_size=CROP,
        center_jitter_test=1.0,
        scale_jitter_test=0.0,
        grayscale_prob=0.0,
        joint_flip_prob=0.0,
        flip_convention=convention,
    )
    flipped = run(DataConfig(**common, flip_prob=1.0), seed=4)
    plain = run(DataConfig(**common, flip_prob=0.0), seed=4)
    # same jitter draws (flip decisions come after), so the flipped boxes mirror the plain ones: in the crop
    # width (continuous) or one pixel less (pytracking's convention)
    width = CROP - 1 if convention == "reference" else CROP
    mirrored = plain["test_boxes"].clone()
    mirrored[:, 0] = width - mirrored[:, 0] - mirrored[:, 2]
    torch.testing.assert_close(flipped["test_boxes"], mirrored)
    red = flipped["test_images"][:, 0] * IMAGENET_STD0 + IMAGENET_MEAN0
    for img_r, box in zip(red, flipped["test_boxes"], strict=True):
        x, y, w, h = box.tolist()
        inner = img_r[max(int(y + 2), 0) : int(y + h - 2), max(int(x + 2), 0) : int(x + w - 2)]
        assert inner.numel() > 0 and (inner > 0.75).all()


@pytest.mark.parametrize("geometry", ["reference", "continuous"])
def test_whole_frame_flip_keeps_boxes_on_the_target(geometry):
    cfg = DataConfig(
        crop_size=CROP,
        grayscale_prob=0.0,
        joint_flip_prob=1.0,
        flip_prob=0.0,
        crop_geometry=geometry,
        flip_convention="continuous",
    )
    s = run(cfg, seed=6, augment=False)
    red = s["train_images"][:, 0] * IMAGENET_STD0 + IMAGENET_MEAN0
    for img_r, box in zip(red, s["train_boxes"], strict=True):
        x, y, w, h = box.tolist()
        inner = img_r[max(int(y + 2), 0) : int(y + h - 2), max(int(x + 2), 0) : int(x + w - 2)]
        assert inner.numel() > 0 and (inner > 0.75).all()


def test_jitter_statistics():
    rng = np.random.default_rng(0)
    boxes = np.tile([[100.0, 100.0, 40.0, 10.0]], (20000, 1))
    j = jitter_boxes(boxes, 3.0, 0.25, rng)
    log_ratio = np.log(j[:, 2:] / boxes[:, 2:])
    assert abs(log_ratio.std() - 0.25) < 0.01 and abs(log_ratio.mean()) < 0.01
    centre_shift = (j[:, :2] + j[:, 2:] / 2) - (boxes[:, :2] + boxes[:, 2:] / 2)
    bound = 0.5 * np.sqrt(j[:, 2] * j[:, 3]) * 3.0
    assert (np.abs(centre_shift) <= bound[:, None] + 1e-9).all()
    assert np.abs(centre_shift).max() > 0.9 * bound.min()
    zero = jitter_boxes(boxes[:3], 0.0, 0.0, rng)
    np.testing.assert_allclose(zero, boxes[:3])


def test_tiny_and_huge_boxes_do_not_crash():
    frames = frame_set()
    frames.train_boxes[0] = [30.0, 30.0, 0.3, 0.2]
    frames.test_boxes[0] = [-500.0, -400.0, 2000.0, 1500.0]
    s = run(DataConfig(crop_size=CROP), frames=frames)
    assert torch.isfinite(s["train_images"]).all() and torch.isfinite(s["proposals"]).all()


@pytest.mark.parametrize("end_pad", [False, True])
def test_label_size_option(end_pad):
    cfg = DataConfig(crop_size=CROP, label_end_pad=end_pad)
    s = run(cfg)
    assert s["test_label"].shape[-1] == CROP // 16 + int(end_pad)
