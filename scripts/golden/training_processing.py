"""pytracking's training processing (SuperDiMP's ``KLDiMPProcessing``), with every random draw recorded.

Runs pytracking's ``ltr.data.processing.KLDiMPProcessing`` built with the arguments of its
``ltr/train_settings/dimp/super_dimp.py`` (search area factor 6, 352-pixel crops, centre jitter 3 / 5.5, scale
jitter 0.25 / 0.5, ``inside_major`` crops with max scale change 1.5, sequence mode, 128 proposals from the
(0.05, 0.5) mixture with ground-truth sigma 0.05, label and label-density functions of 22 cells, sigma factor
1/4 / 6, kernel 4) and its transforms (joint: grayscale 0.05 and a horizontal flip 0.5 of the whole frames;
per frame: brightness jitter 0.2, a horizontal flip 0.5 of the crop, ImageNet normalisation) on samples of
3 train + 3 test frames cut from a photograph (:mod:`tests.golden.training_frames`).

The random draws are recorded, not replaced: the transforms' ``roll`` results (grayscale, joint flip, then per
frame brightness and flip), the ``torch.randn(2)`` / ``torch.rand(2)`` of every box jitter (read by drawing them
from a copy of the generator state just before pytracking draws them) and, for the proposals, the seed the
global torch generator is set to before the first test frame's proposals (each frame draws its component ids
``torch.randint(2, (128,))`` then ``torch.randn(128, 4)``; the first 8 ids are recorded as a check). The intermediate values of
every stage are recorded: the boxes after the joint transform, the jittered boxes, the crop regions (whole
pixels), the boxes in crop pixels before and after the per-frame transform, and for the pixels (too many to
store) the row and column sums of every uint8 crop, a strided subsample of it and of the final normalised
image, and the final image's per-channel sums. ``tests/data/test_processing_golden.py`` feeds the same draws
to this toolkit's processing and compares every stage.

File layout (sample ``i`` of ``NUM_SAMPLES``, 6 frames each, train frames first):

- ``windows`` (N, 6, 4) int64: each frame's window ``(x0, y0, w, h)`` of the photograph; ``boxes`` (N, 6, 4)
  float32 xywh in frame pixels (the sampler's annotations).
- draws: ``gray`` (N,) bool, ``joint_flip`` (N,) bool, ``flip`` (N, 6) bool, ``brightness`` (N, 6) float64,
  ``jitter_randn`` / ``jitter_rand`` (N, 6, 2) float32, ``proposal_seed`` (N,) int64, ``proposal_k`` (N, 3, 8)
  int64 (each test frame's first 8 component ids).
- stages: ``joint_boxes``, ``jittered``, ``crop_regions`` (x, y, w, h whole pixels), ``crop_boxes`` (before the
  per-frame transform), ``final_boxes``: (N, 6, 4) float32; ``crop_row_sums`` / ``crop_col_sums`` (N, 6, 352)
  int64 (uint8 crop summed over the other axis and the channels); ``crop_sub`` (N, 6, S, S, 3) uint8 and
  ``image_sub`` (N, 6, 3, S, S) float32 at rows/columns ``SUBSAMPLE``; ``image_sums`` (N, 6, 3) float64.
- outputs: ``label`` (L, 6, 23, 23) and ``label_density`` (L, 6, 23, 23) of the samples ``label_samples``
  (L,), ``proposals`` (N, 3, 128, 4), ``proposal_density`` (N, 3, 128), ``gt_density`` (N, 3, 128): float32.
- ``config``: JSON string with the processing arguments.
"""

from __future__ import annotations

import argparse
import json
import random
import types
from typing import Any

import numpy as np
import torch

from scripts.golden.reference import import_reference
from tests.golden.training_frames import window_frames

OUT = "training_processing.npz"

#: strided subsample of the 352-pixel images: rows/columns 8, 40, ..., 328
SUBSAMPLE = slice(8, None, 32)

#: SuperDiMP's processing arguments (``super_dimp.py``)
FEATURE_SZ = 22
OUTPUT_SIGMA = (1 / 4) / 6.0
ARGS: dict[str, Any] = {
    "search_area_factor": 6.0,
    "output_sz": FEATURE_SZ * 16,
    "center_jitter_factor": {"train": 3, "test": 5.5},
    "scale_jitter_factor": {"train": 0.25, "test": 0.5},
    "crop_type": "inside_major",
    "max_scale_change": 1.5,
    "mode": "sequence",
    "proposal_params": {
        "boxes_per_frame": 128,
        "gt_sigma": (0.05, 0.05),
        "proposal_sigma": [(0.05, 0.05), (0.5, 0.5)],
    },
    "label_function_params": {"feature_sz": FEATURE_SZ, "sigma_factor": OUTPUT_SIGMA, "kernel_sz": 4},
    "label_density_params": {"feature_sz": FEATURE_SZ, "sigma_factor": OUTPUT_SIGMA, "kernel_sz": 4},
}

#: Samples: (seed, six (window (x0, y0, w, h), box xywh in the window)). Targets inside, at the right and
#: bottom borders (the crops shift inside and touch the far border), larger than the frame allows (shrunk
#: by the most 1.5 allows, then padded), small, in tall and wide frames.
SAMPLES: list[tuple[int, list[tuple[tuple[int, int, int, int], tuple[float, float, float, float]]]]] = [
    (
        1,
        [
            ((96, 60, 320, 240), (105.3, 60.8, 62.4, 71.9)),
            ((100, 64, 320, 240), (98.6, 57.2, 64.0, 70.5)),
            ((90, 70, 320, 240), (111.1, 50.4, 60.7, 73.3)),
            ((104, 58, 320, 240), (101.9, 63.6, 63.2, 69.8)),
            ((110, 66, 320, 240), (92.4, 55.0, 61.5, 72.6)),
            ((98, 62, 320, 240), (103.7, 59.9, 62.9, 71.1)),
        ],
    ),
    (
        2,
        [
            ((0, 0, 512, 600), (270.2, 100.5, 190.7, 260.4)),
            ((0, 40, 512, 560), (300.9, 380.1, 150.2, 170.6)),
            ((20, 0, 480, 600), (10.5, 20.2, 420.3, 540.8)),
            ((0, 0, 512, 600), (400.6, 480.3, 105.1, 112.9)),
            ((100, 200, 300, 400), (3.2, 250.7, 80.4, 140.3)),
            ((0, 0, 512, 600), (200.0, 180.0, 300.5, 390.25)),
        ],
    ),
    (
        3,
        [
            ((150, 80, 200, 300), (60.4, 90.7, 30.3, 45.9)),
            ((140, 90, 200, 300), (150.8, 240.1, 45.7, 55.4)),
            ((160, 70, 200, 300), (2.5, 3.5, 22.0, 31.0)),
            ((40, 150, 360, 180), (300.1, 110.6, 55.6, 60.2)),
            ((40, 150, 360, 180), (5.9, 80.3, 40.0, 42.5)),
            ((50, 140, 360, 180), (160.5, 70.5, 9.5, 12.5)),
        ],
    ),
    (
        7,
        [
            ((120, 40, 256, 256), (90.5, 80.5, 70.0, 90.0)),
            ((124, 44, 256, 256), (88.0, 77.3, 71.2, 88.8)),
            ((118, 38, 256, 256), (93.1, 82.9, 69.5, 90.5)),
            ((126, 42, 256, 256), (85.7, 79.4, 72.0, 89.1)),
            ((116, 46, 256, 256), (95.6, 74.2, 70.8, 91.7)),
            ((122, 40, 256, 256), (89.9, 81.0, 70.3, 89.6)),
        ],
    ),
]
NUM_TRAIN = 3
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
#: the samples whose label maps are stored (the others' would double the file; their boxes are compared)
LABEL_SAMPLES = (0, 2)


def _grayscale_seed(start: int) -> int:
    """The first seed from ``start`` whose first ``random.random()`` turns grayscale on (p = 0.05)."""
    seed = start
    while random.Random(seed).random() >= 0.05:
        seed += 1
    return seed


class _Records:
    """What the wrappers below see during one processing call."""

    def __init__(self) -> None:
        self.rolls: list[tuple[str, Any]] = []
        self.jitter: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.regions: list[np.ndarray] = []
        self.crops: list[np.ndarray] = []
        self.crop_boxes: list[np.ndarray] = []
        self.proposal_draws: list[np.ndarray] = []


def _wrap_roll(transform: Any, name: str, records: list[_Records]) -> None:
    roll = transform.roll

    def recorded_roll() -> Any:
        value = roll()
        records[-1].rolls.append((name, value))
        return value

    transform.roll = recorded_roll


def _instrument(
    ref: types.SimpleNamespace, proc: Any, joint: Any, train: Any, seeds: list[int]
) -> list[_Records]:
    """Wrap pytracking's functions to record draws and intermediate values (they still do all the work)."""
    records: list[_Records] = []
    gray, joint_flip = joint.transforms
    _wrap_roll(gray, "gray", records)
    _wrap_roll(joint_flip, "joint_flip", records)
    _wrap_roll(train.transforms[0], "brightness", records)
    _wrap_roll(train.transforms[1], "flip", records)

    jitter = proc._get_jittered_box

    def recorded_jitter(box: torch.Tensor, mode: str) -> torch.Tensor:
        state = torch.get_rng_state()
        randn, rand = torch.randn(2), torch.rand(2)
        torch.set_rng_state(state)
        out = jitter(box, mode)
        records[-1].jitter.append((box.numpy().copy(), randn.numpy(), rand.numpy(), out.numpy().copy()))
        return out

    proc._get_jittered_box = recorded_jitter

    proposals = proc._generate_proposals

    def recorded_proposals(box: torch.Tensor) -> Any:
        if not records[-1].proposal_draws:
            torch.manual_seed(seeds[len(records) - 1])
        state = torch.get_rng_state()
        k = torch.randint(2, (128,), dtype=torch.int64)
        torch.set_rng_state(state)
        records[-1].proposal_draws.append(k.numpy())
        return proposals(box)

    proc._generate_proposals = recorded_proposals

    prutils = ref.processing_utils
    sample_target_adaptive = prutils.sample_target_adaptive

    def recorded_crop(im: np.ndarray, target_bb: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        crop, region = sample_target_adaptive(im, target_bb, *args, **kwargs)
        records[-1].crops.append(np.array(crop))
        records[-1].regions.append(region.numpy().copy())
        return crop, region

    prutils.sample_target_adaptive = recorded_crop

    target_image_crop = prutils.target_image_crop

    def recorded_target_image_crop(*args: Any, **kwargs: Any) -> Any:
        crops, boxes = target_image_crop(*args, **kwargs)
        records[-1].crop_boxes.extend(b.numpy().copy() for b in boxes)
        return crops, boxes

    prutils.target_image_crop = recorded_target_image_crop
    return records


#: pytracking's modules the processing needs (``import_reference`` names)
REFERENCE_MODULES = {
    "processing": "ltr.data.processing",
    "processing_utils": "ltr.data.processing_utils",
    "transforms": "ltr.data.transforms",
    "tensordict": "pytracking.libs.tensordict",
}


def process_samples(ref: types.SimpleNamespace) -> list[tuple[int, _Records, Any]]:
    """Run pytracking's processing on every sample of :data:`SAMPLES`: (seed, records, output TensorDict)."""
    tfm = ref.transforms
    joint = tfm.Transform(tfm.ToGrayscale(probability=0.05), tfm.RandomHorizontalFlip(probability=0.5))
    train = tfm.Transform(
        tfm.ToTensorAndJitter(0.2),
        tfm.RandomHorizontalFlip(probability=0.5),
        tfm.Normalize(mean=list(MEAN), std=list(STD)),
    )
    proc = ref.processing.KLDiMPProcessing(**ARGS, transform=train, joint_transform=joint)
    seeds = [_grayscale_seed(seed) if i == 2 else seed for i, (seed, _) in enumerate(SAMPLES)]
    records = _instrument(ref, proc, joint, train, [1000 + s for s in seeds])
    results = []
    for seed, (_, frames) in zip(seeds, SAMPLES, strict=True):
        records.append(_Records())
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        windows = [w for w, _ in frames]
        images = window_frames(windows)
        boxes = [torch.tensor(b, dtype=torch.float32) for _, b in frames]
        data = ref.tensordict.TensorDict(
            {
                "train_images": images[:NUM_TRAIN],
                "train_anno": boxes[:NUM_TRAIN],
                "test_images": images[NUM_TRAIN:],
                "test_anno": boxes[NUM_TRAIN:],
                "dataset": "golden",
                "test_class": None,
            }
        )
        results.append((seed, records[-1], proc(data)))
    return results


def run(args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The golden file's arrays (see the module docstring)."""
    ref = import_reference(args.pytracking, **REFERENCE_MODULES)
    out: dict[str, list[Any]] = {}

    def put(key: str, value: Any) -> None:
        out.setdefault(key, []).append(np.asarray(value))

    for (seed, rec, result), (_, frames) in zip(process_samples(ref), SAMPLES, strict=True):
        windows = [w for w, _ in frames]
        boxes = [torch.tensor(b, dtype=torch.float32) for _, b in frames]
        rolls: dict[str, list[Any]] = {}
        for name, value in rec.rolls:
            rolls.setdefault(name, []).append(value)
        assert len(rolls["gray"]) == 1 and len(rolls["joint_flip"]) == 1 and len(rolls["flip"]) == 6
        put("windows", np.asarray(windows, np.int64))
        put("boxes", torch.stack(boxes).numpy())
        put("gray", bool(rolls["gray"][0]))
        put("joint_flip", bool(rolls["joint_flip"][0]))
        put("flip", np.asarray(rolls["flip"], bool))
        put("brightness", np.asarray(rolls["brightness"], np.float64))
        put("joint_boxes", np.stack([j[0] for j in rec.jitter]))
        put("jitter_randn", np.stack([j[1] for j in rec.jitter]))
        put("jitter_rand", np.stack([j[2] for j in rec.jitter]))
        put("jittered", np.stack([j[3] for j in rec.jitter]))
        put("crop_regions", np.stack(rec.regions))
        put("crop_boxes", np.stack(rec.crop_boxes))
        crops = np.stack(rec.crops)  # (6, 352, 352, 3) uint8
        put("crop_row_sums", crops.astype(np.int64).sum(axis=(2, 3)))
        put("crop_col_sums", crops.astype(np.int64).sum(axis=(1, 3)))
        put("crop_sub", crops[:, SUBSAMPLE, SUBSAMPLE])
        final = torch.cat([result["train_images"], result["test_images"]]).numpy()  # (6, 3, 352, 352)
        put("image_sub", final[:, :, SUBSAMPLE, SUBSAMPLE])
        put("image_sums", final.astype(np.float64).sum(axis=(2, 3)))
        put("final_boxes", torch.cat([result["train_anno"], result["test_anno"]]).numpy())
        put("label", torch.cat([result["train_label"], result["test_label"]]).numpy())
        put("label_density", torch.cat([result["train_label_density"], result["test_label_density"]]).numpy())
        put("proposals", result["test_proposals"].numpy())
        put("proposal_density", result["proposal_density"].numpy())
        put("gt_density", result["gt_density"].numpy())
        put("proposal_seed", 1000 + seed)
        put("proposal_k", np.stack(rec.proposal_draws)[:, :8])

    arrays = {key: np.stack(values) for key, values in out.items()}
    for key in ("label", "label_density"):
        arrays[key] = arrays[key][list(LABEL_SAMPLES)]
    arrays["label_samples"] = np.asarray(LABEL_SAMPLES, np.int64)
    config = {k: v for k, v in ARGS.items()}
    config.update(num_train=NUM_TRAIN, subsample=[SUBSAMPLE.start, SUBSAMPLE.step], grayscale_prob=0.05)
    config.update(joint_flip_prob=0.5, flip_prob=0.5, brightness_jitter=0.2, mean=list(MEAN), std=list(STD))
    arrays["config"] = np.asarray(json.dumps(config, sort_keys=True))
    return arrays
