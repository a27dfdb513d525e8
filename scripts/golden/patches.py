"""The tracker's patches and first-frame augmentation, from pytracking's own functions.

Runs pytracking's ``sample_patch`` and ``sample_patch_multiscale`` (``pytracking/features/preprocessing.py``),
its DiMP tracker's ``generate_init_samples`` (``pytracking/tracker/dimp/dimp.py``, with the backbone replaced by
the identity so that it returns the augmented patches) and the tracker's ``F.dropout2d`` call on a seeded
image on the CPU, and writes inputs and outputs to one ``.npz`` that ``tests/tracker/test_patches.py`` and
``tests/tracker/test_init_augment.py`` compare with :mod:`pytracking.tracker.dimp.patches` and
:mod:`pytracking.tracker.dimp.init_augment`.

File layout (all arrays, no pickles):

- ``image``: (1, 3, 60, 80) uint8, the image every case reads (as float32).
- ``patch__*``: one row per ``sample_patch`` case: ``pos`` (K, 2) yx, ``sample_sz`` (K, 2) hw, ``output_sz``
  (K, 2) hw (-1: None), ``mode`` (K,) index into ``MODES``, ``max_scale_change`` (K,) (NaN: None),
  ``coord`` (K, 4) the returned [y1, x1, y2, x2], ``shape`` (K, 4) the patch shapes, ``values`` all patches
  flattened one after another.
- ``multiscale__<i>__*``: ``pos``, ``scales``, ``image_sz``, ``mode``, ``max_scale_change``, ``patches``,
  ``coords``.
- ``init__<name>__*``: the ``config`` (JSON string: tracker parameters and inputs), ``patches`` (N, 3, h, w),
  ``shift`` (N, 2) every transform's (dy, dx), ``kind`` (N,) the transform class names,
  ``init_sample_pos`` (2,), ``init_sample_scale`` (), ``features`` (1, C, H, W) and ``dropout``
  (num, C, H, W): ``F.dropout2d`` of the features drawn from the global RNG right after the patches.
"""

from __future__ import annotations

import argparse
import json
import random
import types
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from scripts.golden.reference import import_reference

OUT = "patches.npz"
MODES = ("replicate", "inside", "inside_major")

#: generate_init_samples cases: tracker parameters (pytracking's names) and inputs.
INIT_CASES: dict[str, dict[str, Any]] = {
    # super_dimp / dimp50 augmentation at a small input size; inside_major does not change the samples
    "super_dimp": dict(
        seed=3,
        pos=[29.6, 41.3],
        target_scale=1.7,
        img_sample_sz=[16, 16],
        border_mode="inside_major",
        patch_max_scale_change=1.5,
        augmentation_expansion_factor=2,
        random_shift_factor=1 / 3,
        augmentation={
            "fliplr": True,
            "rotate": [10, -10, 45, -45],
            "blur": [(3, 1), (1, 3), (2, 2)],
            "relativeshift": [(0.6, 0.6), (-0.6, 0.6), (0.6, -0.6), (-0.6, -0.6)],
            "dropout": (2, 0.2),
        },
    ),
    # border mode inside near the top-right corner (shrunk patch, global shift), the vot19 expansion factor,
    # absolute shifts and scales
    "inside_border": dict(
        seed=11,
        pos=[7.3, 71.6],
        target_scale=4.2,
        img_sample_sz=[16, 16],
        border_mode="inside",
        patch_max_scale_change=1.5,
        augmentation_expansion_factor=1.4,
        random_shift_factor=1 / 3,
        augmentation={
            "fliplr": True,
            "shift": [(3, -2), (-5, 4)],
            "relativeshift": [(0.6, -0.6)],
            "blur": [(0.5, 1.5)],
            "scale": [0.8, 1.25],
            "rotate": [30, -7],
            "dropout": (3, 0.5),
        },
    ),
    # no expansion, no random shift, a non-square input (rotation centre read as (x, y))
    "plain_nonsquare": dict(
        seed=5,
        pos=[52.5, 12.5],
        target_scale=1.3,
        img_sample_sz=[16, 24],
        border_mode="replicate",
        patch_max_scale_change=None,
        augmentation_expansion_factor=None,
        random_shift_factor=0,
        augmentation={"fliplr": False, "blur": [(1.5, 0.5)], "rotate": [30], "dropout": (2, 0.2)},
    ),
}


def make_image() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, size=(1, 3, 60, 80), dtype=np.uint8)


def patch_cases() -> list[tuple[list[float], list[float], list[int] | None, str, float | None]]:
    """(pos, sample_sz, output_sz, mode, max_scale_change): hand-picked cases, then seeded random ones."""
    cases: list[tuple[list[float], list[float], list[int] | None, str, float | None]] = []
    positions = [
        [30.3, 40.7],  # inside, fractional
        [2.6, 40.0],  # near the top
        [57.9, 40.2],  # near the bottom
        [30.0, 1.2],  # near the left
        [29.5, 78.8],  # near the right
        [-5.5, -3.7],  # outside, top-left (truncation towards zero)
        [70.0, 90.0],  # outside, bottom-right
    ]
    sizes = [[20.0, 20.0], [50.0, 70.0], [101.7, 88.3]]
    for i, pos in enumerate(positions):
        for j, size in enumerate(sizes):
            mode = MODES[(i + j) % 3]
            out = [24, 24] if (i + j) % 2 == 0 else [16, 20]
            cases.append((pos, size, out, mode, 1.5 if mode != "replicate" else None))
    cases += [
        ([30.0, 40.0], [24.0, 24.0], [24, 24], "replicate", None),  # cut == output: no resize
        ([30.4, 39.6], [41.0, 47.5], [32, 32], "replicate", None),
        ([-2.5, 81.5], [77.0, 64.0], [32, 32], "inside_major", 1.5),
        ([30.0, 40.0], [23.0, 24.0], [24, 24], "replicate", None),  # odd cut
        ([12.0, 60.0], [130.0, 170.0], [24, 32], "inside_major", 1.5),  # larger than the image
        ([12.0, 60.0], [130.0, 170.0], [24, 32], "inside", 1.5),
        ([12.0, 60.0], [130.0, 170.0], [24, 32], "inside", None),  # shrink unbounded
        ([45.0, 10.0], [9.0, 14.0], None, "replicate", None),  # no output size
    ]
    rng = random.Random(1)
    outputs = [[6, 6], [6, 8], [7, 5], [8, 8]]
    for _ in range(120):
        pos = [rng.uniform(-40.0, 100.0), rng.uniform(-40.0, 120.0)]
        size = [rng.uniform(2.0, 250.0), rng.uniform(2.0, 250.0)]
        if rng.random() < 0.3:
            pos = [float(round(v * 2) / 2) for v in pos]
        if rng.random() < 0.3:
            size = [float(round(v)) for v in size]
        mode = rng.choice(MODES)
        msc = rng.choice([None, 1.5, 3.0])
        cases.append((pos, size, rng.choice(outputs), mode, msc))
    return cases


def run_patches(ref: types.SimpleNamespace, im: torch.Tensor, out: dict[str, np.ndarray]) -> None:
    sample_patch = ref.preprocessing.sample_patch
    rows: dict[str, list[Any]] = {k: [] for k in ("pos", "sample_sz", "output_sz", "mode", "msc", "coord")}
    shapes, values = [], []
    for pos, size, osz, mode, msc in patch_cases():
        patch, coord = sample_patch(
            im,
            torch.tensor(pos),
            torch.tensor(size),
            None if osz is None else torch.tensor(osz, dtype=torch.float32),
            mode=mode,
            max_scale_change=msc,
        )
        rows["pos"].append(pos)
        rows["sample_sz"].append(size)
        rows["output_sz"].append([-1, -1] if osz is None else osz)
        rows["mode"].append(MODES.index(mode))
        rows["msc"].append(np.nan if msc is None else msc)
        rows["coord"].append(coord.float().reshape(4).numpy())
        shapes.append(list(patch.shape))
        values.append(patch.reshape(-1).numpy())
    out["patch__pos"] = np.asarray(rows["pos"], np.float32)
    out["patch__sample_sz"] = np.asarray(rows["sample_sz"], np.float32)
    out["patch__output_sz"] = np.asarray(rows["output_sz"], np.int64)
    out["patch__mode"] = np.asarray(rows["mode"], np.int64)
    out["patch__max_scale_change"] = np.asarray(rows["msc"], np.float64)
    out["patch__coord"] = np.stack(rows["coord"]).astype(np.float32)
    out["patch__shape"] = np.asarray(shapes, np.int64)
    out["patch__values"] = np.concatenate(values).astype(np.float32)


def run_multiscale(ref: types.SimpleNamespace, im: torch.Tensor, out: dict[str, np.ndarray]) -> None:
    multiscale = ref.preprocessing.sample_patch_multiscale
    cases = [
        # the tracker's call: target_scale * scale_factors, a float32 tensor
        ([31.7, 44.2], torch.tensor([2.3456789]) * torch.tensor([0.97, 1.0, 1.03]), "inside_major", 1.5),
        # python floats
        ([3.2, 75.9], [1.2345678901, 2.9, 6.1], "replicate", None),
        ([50.5, 20.5], [3.3, 4.7], "inside", 1.5),
    ]
    image_sz = torch.tensor([16.0, 16.0])
    for i, (pos, scales, mode, msc) in enumerate(cases):
        patches, coords = multiscale(im, torch.tensor(pos), scales, image_sz, mode=mode, max_scale_change=msc)
        key = f"multiscale__{i}__"
        out[key + "pos"] = np.asarray(pos, np.float32)
        scales_arr = scales.numpy() if torch.is_tensor(scales) else np.asarray(scales, np.float64)
        out[key + "scales"] = scales_arr
        out[key + "image_sz"] = image_sz.numpy()
        out[key + "mode"] = np.asarray(MODES.index(mode))
        out[key + "max_scale_change"] = np.asarray(np.nan if msc is None else msc)
        out[key + "patches"] = patches.numpy()
        out[key + "coords"] = coords.float().numpy()


def run_init(ref: types.SimpleNamespace, im: torch.Tensor, out: dict[str, np.ndarray]) -> None:
    for name, case in INIT_CASES.items():
        params = ref.params.TrackerParams()
        for key in ("border_mode", "patch_max_scale_change", "augmentation_expansion_factor"):
            setattr(params, key, case[key])
        params.random_shift_factor = case["random_shift_factor"]
        params.augmentation = case["augmentation"]
        params.use_augmentation = True
        tracker = ref.dimp.DiMP(params)
        tracker.net = types.SimpleNamespace(extract_backbone=lambda x: x)
        tracker.pos = torch.tensor(case["pos"])
        tracker.img_sample_sz = torch.tensor([float(v) for v in case["img_sample_sz"]])
        tracker.target_scale = torch.tensor(case["target_scale"])
        features = torch.from_numpy(
            np.random.default_rng(case["seed"]).standard_normal((1, 8, 3, 3)).astype(np.float32)
        )

        torch.manual_seed(case["seed"])
        patches = tracker.generate_init_samples(im)
        num, prob = case["augmentation"]["dropout"]
        dropped = F.dropout2d(features[0:1].expand(num, -1, -1, -1), p=prob, training=True)

        key = f"init__{name}__"
        out[key + "config"] = np.asarray(json.dumps(case))
        out[key + "patches"] = patches.numpy()
        out[key + "shift"] = np.asarray([list(t.shift) for t in tracker.transforms], np.int64)
        out[key + "kind"] = np.asarray([type(t).__name__ for t in tracker.transforms])
        out[key + "init_sample_pos"] = tracker.init_sample_pos.numpy()
        out[key + "init_sample_scale"] = np.asarray(tracker.init_sample_scale, np.float32)
        out[key + "features"] = features.numpy()
        out[key + "dropout"] = dropped.numpy()


def run(args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The golden file's arrays (see the module docstring)."""
    ref = import_reference(
        args.pytracking,
        preprocessing="pytracking.features.preprocessing",
        dimp="pytracking.tracker.dimp.dimp",
        params="pytracking.utils.params",
    )
    image = make_image()
    im = torch.from_numpy(image).float()
    out: dict[str, np.ndarray] = {"image": image}
    run_patches(ref, im, out)
    run_multiscale(ref, im, out)
    run_init(ref, im, out)
    return out
