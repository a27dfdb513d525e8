"""DiMP processing: frames + boxes of one sample -> jittered crops, crop boxes, labels, box-head proposals.

BATCH CONTRACT (what the loader yields; the network and the actors are built against it). With
``S_tr = num_train_frames``, ``S_te = num_test_frames``, batch size ``B``, crop side ``H = W = crop_size``,
``L = label_size`` (= feature_size = crop_size / feature_stride by default; feature_size + 1 with
``DataConfig.label_end_pad`` and DiMP's even filter, covering the whole padded score map as the reference
does) and ``S`` box candidates:

======================  ==========================  ==================================================
key                     shape, dtype                meaning
======================  ==========================  ==================================================
``train_images``        (S_tr, B, 3, H, W) float32  normalised crops (ImageNet mean/std)
``test_images``         (S_te, B, 3, H, W) float32  normalised crops
``train_boxes``         (S_tr, B, 4) float32        target box, xywh in crop pixels
``test_boxes``          (S_te, B, 4) float32        target box, xywh in crop pixels
``train_label``         (S_tr, B, L, L) float32     Gaussian classifier label (:mod:`ltr.data.labels`)
``test_label``          (S_te, B, L, L) float32     Gaussian classifier label
``proposals``           (S_te, B, S, 4) float32     box candidates, xywh in crop pixels
``proposals_rel``       (S_te, B, S, 4) float32     the same in rel space w.r.t. ``test_boxes``
``proposal_log_q``      (S_te, B, S) float32        log q of each candidate (the method's Candidates.log_q)
``proposal_log_p``      (S_te, B, S) float32        label-noise log density, ONLY for ``kld_is``
======================  ==========================  ==================================================

The candidates are exactly the configured :mod:`ltr.ebm` method's ``sample()`` outputs for labels
``zeros(1, 4)``, one call per test frame, in rel space (rel = ((cx - cx0)/w0, (cy - cy0)/h0, log(w/w0), log(h/h0)) w.r.t. the test
box, :mod:`ltr.ops.boxes`): for ``ml_is``, ``nce`` and ``nce_plus`` column 0 is the label/positive, for
``kld_is`` all columns are proposals; pass ``Candidates(proposals_rel[i], proposal_log_q[i], ...)`` (batch
flattened to the method's N) with the scores to ``method.loss_from_scores``. Methods without ``sample()``
(``ml_mcmc``, ``sm``, ``dsm``) need the score function itself: the proposal keys are then absent.

Train frame 0 is the sampler's base frame (the latest train frame), the usual box-head reference frame.
Per sample (before collation) every tensor lacks the B axis.

Steps per sample, in the order of the reference's ``KLDiMPProcessing`` (SuperDiMP): grayscale and a flip of
the whole frames (one decision each) -> box jitter (train/test factors) -> one crop per frame (pytracking's
whole-pixel geometry, :mod:`ltr.data.reference_crop`, or the tracker's centred one, :mod:`ltr.data.crop`:
``DataConfig.crop_geometry``) -> boxes mapped to crop pixels -> per frame a crop flip and brightness
(training) -> labels and proposals from the final boxes -> normalisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ltr.data.config import DataConfig
from ltr.data.crop import sample_target_crops
from ltr.data.labels import gaussian_label
from ltr.data.reference_crop import sample_reference_crops
from ltr.data.transforms import (
    AugmentationDraw,
    brightness_normalize_lut,
    draw_augmentation,
    flip_width,
    grayscale_frame,
    hflip,
)
from ltr.ebm import build_method
from ltr.ops.boxes import flip_xywh_horizontal, rel_to_xywh, xywh_to_cxcywh

__all__ = [
    "BATCH_KEYS",
    "DiMPProcessing",
    "FrameSet",
    "SampleDraws",
    "apply_jitter",
    "draw_proposals",
    "jitter_boxes",
]

#: keys every batch has (``proposal_log_p`` is added for kld_is; the proposal keys need a sampling method).
BATCH_KEYS: tuple[str, ...] = (
    "train_images",
    "test_images",
    "train_boxes",
    "test_boxes",
    "train_label",
    "test_label",
    "proposals",
    "proposals_rel",
    "proposal_log_q",
)


@dataclass
class FrameSet:
    """The raw frames of one sample: images (H, W, 3) uint8 RGB and boxes (S, 4) xywh in image pixels."""

    train_images: list[np.ndarray]
    train_boxes: np.ndarray
    test_images: list[np.ndarray]
    test_boxes: np.ndarray


def jitter_boxes(
    boxes_xywh: np.ndarray, center_factor: np.ndarray, scale_factor: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Jittered copies of xywh boxes (N, 4), used to place the crops: :func:`apply_jitter` with N(0, 1)
    draws (N, 2) and then U[0, 1) draws (N, 2) from ``rng``."""
    n = np.asarray(boxes_xywh).reshape(-1, 4).shape[0]
    normal = rng.standard_normal((n, 2))
    uniform = rng.random((n, 2))
    return apply_jitter(boxes_xywh, center_factor, scale_factor, normal, uniform)


def apply_jitter(
    boxes_xywh: np.ndarray,
    center_factor: np.ndarray,
    scale_factor: np.ndarray,
    normal: np.ndarray,
    uniform: np.ndarray,
) -> np.ndarray:
    """Jitter xywh boxes (N, 4) with given draws: ``normal`` (N, 2) N(0, 1), ``uniform`` (N, 2) U[0, 1).

    Size: (w, h) * exp(normal * scale_factor), independently for w and h. Centre: moved by
    sqrt(w' * h') * center_factor * (uniform - 0.5) in x and y (w', h' the jittered size), i.e. uniformly
    within +-0.5 * sqrt(w' * h') * center_factor. Factors are (N,) or scalars.
    """
    boxes = np.asarray(boxes_xywh, dtype=np.float64).reshape(-1, 4)
    n = len(boxes)
    sf = np.broadcast_to(np.asarray(scale_factor, dtype=np.float64), (n,))[:, None]
    cf = np.broadcast_to(np.asarray(center_factor, dtype=np.float64), (n,))
    wh = boxes[:, 2:] * np.exp(np.asarray(normal, dtype=np.float64).reshape(n, 2) * sf)
    max_offset = np.sqrt(wh[:, 0] * wh[:, 1]) * cf
    offset = max_offset[:, None] * (np.asarray(uniform, dtype=np.float64).reshape(n, 2) - 0.5)
    center = boxes[:, :2] + 0.5 * boxes[:, 2:] + offset
    return np.concatenate([center - 0.5 * wh, wh], axis=1)


@dataclass(frozen=True)
class SampleDraws:
    """Every random draw of one sample but the proposals': the jitter's ``normal`` / ``uniform`` (N, 2) for
    the N = train + test frames (train first) and the augmentation."""

    jitter_normal: np.ndarray
    jitter_uniform: np.ndarray
    augmentation: AugmentationDraw


def draw_proposals(
    method, boxes_xywh: Tensor, *, generator: torch.Generator | None = None
) -> dict[str, Tensor]:
    """Box-head candidates around each box with ``method.sample`` in rel space, one call per box (the
    reference draws each frame's proposals in turn, so the same generator state gives the same draws).

    Args:
        method: an :mod:`ltr.ebm` sampling method (has ``sample(labels) -> Candidates``).
        boxes_xywh: (N, 4) float target boxes in crop pixels.

    Returns:
        ``proposals`` (N, S, 4) xywh crop pixels, ``proposals_rel`` (N, S, 4), ``proposal_log_q`` (N, S) and,
        when the method gives one, ``proposal_log_p`` (N, S).
    """
    labels = torch.zeros(1, 4, dtype=boxes_xywh.dtype, device=boxes_xywh.device)
    cands = [method.sample(labels, generator=generator) for _ in range(boxes_xywh.shape[0])]
    y = torch.cat([c.y for c in cands])
    out = {
        "proposals": rel_to_xywh(y, boxes_xywh[:, None, :]),
        "proposals_rel": y,
        "proposal_log_q": torch.cat([c.log_q for c in cands]),
    }
    if cands and cands[0].log_p is not None:
        out["proposal_log_p"] = torch.cat([c.log_p for c in cands])
    return out


class DiMPProcessing:
    """Turns a :class:`FrameSet` into one sample of the batch contract (module docstring).

    ``augment=False`` (validation) keeps the jitter and the joint grayscale / whole-frame flip (the
    reference's validation processing applies its joint transform too) but no per-frame crop flip or
    brightness. ``draw`` makes every random decision of a sample but the proposals, ``apply`` is the
    deterministic rest; calling the object does both.
    """

    def __init__(self, config: DataConfig, *, augment: bool = True) -> None:
        self.config = config
        self.augment = augment
        self.method = build_method(config.box_method, **dict(config.box_method_kwargs))
        self.has_proposals = hasattr(self.method, "sample")

    def __call__(
        self, frames: FrameSet, rng: np.random.Generator, generator: torch.Generator | None = None
    ) -> dict[str, Tensor]:
        draws = self.draw(rng, len(frames.train_images), len(frames.test_images))
        return self.apply(frames, draws, generator)

    def draw(self, rng: np.random.Generator, num_train: int, num_test: int) -> SampleDraws:
        """The sample's jitter draws (first) and augmentation."""
        cfg = self.config
        n = num_train + num_test
        normal = rng.standard_normal((n, 2))
        uniform = rng.random((n, 2))
        aug = draw_augmentation(
            rng,
            n,
            grayscale_prob=cfg.grayscale_prob,
            joint_flip_prob=cfg.joint_flip_prob,
            flip_prob=cfg.flip_prob if self.augment else 0.0,
            brightness_jitter=cfg.brightness_jitter if self.augment else 0.0,
            flip_joint=cfg.flip_joint,
        )
        return SampleDraws(normal, uniform, aug)

    def apply(
        self, frames: FrameSet, draws: SampleDraws, generator: torch.Generator | None = None
    ) -> dict[str, Tensor]:
        """The sample for given draws; ``generator`` draws the proposals (one test frame after another)."""
        cfg = self.config
        n_tr, n_te = len(frames.train_images), len(frames.test_images)
        images = list(frames.train_images) + list(frames.test_images)
        boxes = np.concatenate(
            [
                np.asarray(frames.train_boxes, np.float64).reshape(-1, 4),
                np.asarray(frames.test_boxes, np.float64).reshape(-1, 4),
            ]
        )
        if len(boxes) != n_tr + n_te:
            raise ValueError(f"got {n_tr + n_te} images but {len(boxes)} boxes")
        aug = draws.augmentation
        if aug.grayscale:
            images = [grayscale_frame(im) for im in images]
        if aug.joint_flip:
            widths = np.array([flip_width(im.shape[1], cfg.flip_convention) for im in images])
            images = [np.fliplr(im) for im in images]  # views: the reference crop cuts contiguous copies
            if cfg.crop_geometry != "reference":
                images = [np.ascontiguousarray(im) for im in images]
            boxes = flip_xywh_horizontal(boxes, widths)
        center_f = np.array([cfg.center_jitter_train] * n_tr + [cfg.center_jitter_test] * n_te)
        scale_f = np.array([cfg.scale_jitter_train] * n_tr + [cfg.scale_jitter_test] * n_te)
        jittered = apply_jitter(boxes, center_f, scale_f, draws.jitter_normal, draws.jitter_uniform)
        crop = sample_reference_crops if cfg.crop_geometry == "reference" else sample_target_crops
        crops, transform = crop(
            images, jittered, cfg.search_area_factor, cfg.crop_size, cfg.crop_mode, cfg.max_scale_change
        )
        img = torch.from_numpy(np.ascontiguousarray(crops.transpose(0, 3, 1, 2)))  # (S, 3, H, W) uint8
        box = torch.from_numpy(transform.image_to_crop(boxes)).float()  # (S, 4) xywh crop px

        flips = torch.tensor(aug.frame_flips(n_tr + n_te))
        if flips.any():
            img[flips], box[flips] = hflip(img[flips], box[flips], cfg.flip_convention)

        labels = gaussian_label(
            xywh_to_cxcywh(box)[:, :2],
            crop_size=cfg.crop_size,
            feature_size=cfg.feature_size,
            sigma_cells=cfg.label_sigma_cells,
            filter_size=cfg.filter_size,
            label_size=cfg.label_size,
        )
        normed = torch.from_numpy(
            brightness_normalize_lut(
                img.numpy(), aug.frame_brightness(n_tr + n_te), cfg.normalize_mean, cfg.normalize_std
            )
        )
        sample = {
            "train_images": normed[:n_tr],
            "test_images": normed[n_tr:],
            "train_boxes": box[:n_tr],
            "test_boxes": box[n_tr:],
            "train_label": labels[:n_tr],
            "test_label": labels[n_tr:],
        }
        if self.has_proposals:
            sample.update(draw_proposals(self.method, box[n_tr:], generator=generator))
        return sample
