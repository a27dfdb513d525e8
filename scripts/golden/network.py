"""pytracking's ``dimpnet50`` outputs for seeded weights, and the checkpoints its trainer writes.

pytracking's ``dimpnet50`` with the constructor arguments of its ``dimp50`` and ``super_dimp`` train settings
(the same network; they differ in initial values and frozen layers only), every parameter and BatchNorm buffer
set by :func:`tests.golden.seeded.seeded_state_dict`, in eval mode, on crops of
:func:`tests.golden.seeded.seeded_crops`. It records pytracking's outputs (a fixed subset of the backbone and
classification features, the initial filter, the filters and losses after the optimizer's steps with and
without sample weights, the score maps of every iterate, the box head's modulation vectors and test features,
box scores and their gradients w.r.t. the boxes), the state dict's names and shapes, and what pytracking's own
trainer writes: it saves both checkpoints with pytracking's ``BaseTrainer.save_checkpoint`` (its
``NetConstructor``, ``Settings``, ``AverageMeter`` / ``StatValue`` objects), lists the pickle's globals and
converts each file with ``python -m ltr.admin.import_pytracking`` in a fresh process, checking that every
converted tensor is the seeded one. ``tests/models/test_pytracking_golden_network.py`` reads the file.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import pickletools
import subprocess
import sys
import tempfile
import types
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ltr.admin.import_pytracking import DIMPNET_KEY_MAP
from scripts.golden.reference import REPO, import_reference
from tests.golden.pytracking_format import DIMP50_KWDS, SUPER_DIMP_KWDS
from tests.golden.seeded import seeded_crops, seeded_state_dict

OUT = "pytracking_network.npz"

#: pytracking's train settings' ``dimpnet50`` arguments; ``backbone_pretrained`` is False here (no ImageNet
#: download; every weight is replaced anyway).
CONSTRUCTOR_KWDS: dict[str, dict[str, Any]] = {
    "dimp50": {**DIMP50_KWDS, "backbone_pretrained": False},
    "super_dimp": {**SUPER_DIMP_KWDS, "backbone_pretrained": False},
}
#: (actor class, train-setting attributes) of the two settings, as their trainers would save them.
_TRAINER = {
    "dimp50": ("DiMPActor", dict(batch_size=10, search_area_factor=5.0, feature_sz=18, output_sz=288)),
    "super_dimp": ("KLDiMPActor", dict(batch_size=20, search_area_factor=6.0, feature_sz=22, output_sz=352)),
}

#: Inputs of the network golden: three 128-pixel crops of one seeded 256-pixel image (two train, one test).
NETWORK_INPUTS: dict[str, Any] = {
    "seed": 0,
    "image_size": 256,
    "crop_size": 128,
    "corners": [[40, 50], [60, 64], [56, 44]],
    "train_boxes": [[40.0, 36.0, 48.0, 56.0], [30.0, 40.0, 52.0, 44.0]],
    "num_iter": 3,
    "sample_weight": [0.3, 0.7],
    "proposals": [
        [40.0, 36.0, 48.0, 56.0],
        [30.0, 40.0, 52.0, 44.0],
        [20.0, 20.0, 80.0, 80.0],
        [50.5, 49.25, 20.0, 30.5],
        [0.0, 0.0, 128.0, 128.0],
        [-10.0, 60.0, 40.0, 40.0],
        [100.0, 100.0, 40.0, 40.0],
        [36.3, 40.7, 50.1, 49.9],
    ],
}
#: Channel strides of the recorded feature and filter subsets (every k-th channel, full maps); the score maps
#: check the filters' other channels.
SUBSETS = {"layer2": 64, "layer3": 64, "clf": 16, "filter": 4, "test_feat2": 16, "test_feat3": 16}


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy().copy()


def network_outputs(net: torch.nn.Module, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """pytracking ``DiMPnet`` outputs on ``inputs`` (:data:`NETWORK_INPUTS`); the net is in eval mode."""
    crops = seeded_crops(inputs["seed"], inputs["image_size"], inputs["crop_size"], inputs["corners"])
    train_boxes = torch.tensor(inputs["train_boxes"]).reshape(-1, 1, 4)
    num_train = train_boxes.shape[0]
    out: dict[str, np.ndarray] = {}
    with torch.no_grad():
        feats = net.extract_backbone_features(crops)
        for layer in ("layer2", "layer3"):
            out[f"{layer}_sub"] = _np(feats[layer][:, :: SUBSETS[layer]])
            out[f"{layer}_mean"] = _np(feats[layer].mean(dim=(2, 3)))
        clf = net.classifier.extract_classification_feat(feats["layer3"], 1)  # (N, 1, C, H, W)
        out["clf_sub"] = _np(clf[:, 0, :: SUBSETS["clf"]])
        out["clf_mean"] = _np(clf[:, 0].mean(dim=(2, 3)))
        train, test = clf[:num_train], clf[num_train:]
        w0 = net.classifier.filter_initializer(train, train_boxes)
        out["init_filter"] = _np(w0[:, :: SUBSETS["filter"]])
        optimizer = net.classifier.filter_optimizer
        for prefix, weight in (("", None), ("weighted_", torch.tensor(inputs["sample_weight"]))):
            w, iterates, losses = optimizer(
                w0,
                feat=train,
                bb=train_boxes,
                sample_weight=weight,
                num_iter=inputs["num_iter"],
                compute_losses=True,
            )
            out[f"{prefix}filter"] = _np(w[:, :: SUBSETS["filter"]])
            out[f"{prefix}losses"] = _np(torch.stack([loss.reshape(()) for loss in losses]))
            out[f"{prefix}scores"] = _np(torch.stack([net.classifier.classify(f, test) for f in iterates]))
        box = net.bb_regressor
        mod2, mod3 = box.get_modulation([feats["layer2"][:1], feats["layer3"][:1]], train_boxes[0])
        out["modulation2"], out["modulation3"] = _np(mod2.flatten(1)), _np(mod3.flatten(1))
        test_feat = box.get_iou_feat([feats["layer2"][num_train:], feats["layer3"][num_train:]])
        out["test_feat2_sub"] = _np(test_feat[0][:, :: SUBSETS["test_feat2"]])
        out["test_feat3_sub"] = _np(test_feat[1][:, :: SUBSETS["test_feat3"]])
    proposals = torch.tensor(inputs["proposals"])[None].requires_grad_(True)
    modulation = [mod2.reshape(1, -1), mod3.reshape(1, -1)]
    scores = box.predict_iou(modulation, list(test_feat), proposals)
    scores.sum().backward()  # eval mode: each box's score depends on its own coordinates only
    out["box_scores"] = _np(scores)
    out["box_grads"] = _np(proposals.grad)
    return out


def _pickle_globals(path: Path) -> list[str]:
    """The ``module.name`` of every GLOBAL in a torch zip checkpoint's pickle (read, never executed)."""
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
        data = archive.read(name)
    found = set()
    for opcode, arg, _ in pickletools.genops(io.BytesIO(data)):
        if opcode.name == "GLOBAL":
            module, _, attr = str(arg).partition(" ")
            found.add(f"{module}.{attr}")
        elif opcode.name == "STACK_GLOBAL":
            raise RuntimeError(f"{path}: STACK_GLOBAL (pickle protocol >= 4); expected torch's protocol 2")
    return sorted(found)


def save_with_pytracking_trainer(
    pt: types.SimpleNamespace, net: torch.nn.Module, preset: str, workspace: Path
) -> Path:
    """Write ``net`` as pytracking's trainer does at the end of epoch 50 of train setting ``preset``."""
    actor_name, attrs = _TRAINER[preset]
    actor = getattr(pt.actors, actor_name)(net=net, objective={})
    optimizer = torch.optim.Adam(
        [
            {"params": net.classifier.filter_initializer.parameters(), "lr": 5e-5},
            {"params": net.classifier.filter_optimizer.parameters(), "lr": 5e-4},
            {"params": net.classifier.feature_extractor.parameters(), "lr": 5e-5},
            {"params": net.bb_regressor.parameters(), "lr": 1e-3},
            {"params": net.feature_extractor.layer3.parameters(), "lr": 2e-5},
        ],
        lr=2e-4,
    )
    settings = pt.settings.Settings.__new__(pt.settings.Settings)  # its __init__ reads the user's local.py
    settings.env = pt.local.EnvironmentSettings()
    settings.env.workspace_dir = str(workspace)
    settings.use_gpu = False
    settings.module_name, settings.script_name = "dimp", preset
    settings.project_path = f"ltr/dimp/{preset}"
    settings.description = f"pytracking train setting dimp/{preset} (golden-file run)"
    settings.normalize_mean, settings.normalize_std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    settings.center_jitter_factor = {"train": 3, "test": 4.5 if preset == "dimp50" else 5.5}
    settings.__dict__.update(attrs)
    trainer = pt.base_trainer.BaseTrainer(actor, [], optimizer, settings)
    trainer.epoch = 50
    meter = pt.stats.AverageMeter()
    meter.update(0.5, 10)
    lr = pt.stats.StatValue()
    lr.update(2e-4)
    trainer.stats = OrderedDict(train=OrderedDict({"Loss/total": meter, "LearningRate/group0": lr}), val=None)
    trainer.save_checkpoint()
    return workspace / "checkpoints" / settings.project_path / "DiMPnet_ep0050.pth.tar"


def _our_key(theirs: str) -> str | None:
    for prefix, ours in DIMPNET_KEY_MAP:
        if theirs.startswith(prefix):
            return ours + theirs[len(prefix) :]
    return None


def convert_and_check(src: Path, dst: Path, preset: str, state: dict[str, torch.Tensor]) -> None:
    """Convert ``src`` with this repository's converter in a fresh process; every tensor must be ``state``'s."""
    cmd = [sys.executable, "-m", "ltr.admin.import_pytracking", str(src), str(dst), "--preset", preset]
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"converting pytracking's own {preset} file failed:\n{result.stderr}")
    converted = torch.load(dst, map_location="cpu", weights_only=True)["net"]
    mapped = {_our_key(k): v for k, v in state.items() if _our_key(k) is not None}
    bad = [k for k, v in mapped.items() if not torch.equal(converted.get(k, torch.empty(0)), v)]
    if bad or len(converted) != len(mapped):
        raise RuntimeError(f"{preset}: converted tensors differ from pytracking's: {bad[:5]}")


def run(args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The golden file's arrays (see the module docstring)."""
    pt = import_reference(
        args.pytracking,
        dimpnet="ltr.models.tracking.dimpnet",
        actors="ltr.actors.tracking",
        base_trainer="ltr.trainers.base_trainer",
        settings="ltr.admin.settings",
        stats="ltr.admin.stats",
        local="ltr.admin.local",
    )
    inputs = NETWORK_INPUTS
    nets, constructors = {}, {}
    for preset, kwds in CONSTRUCTOR_KWDS.items():
        nets[preset] = pt.dimpnet.dimpnet50(**kwds)
        c = nets[preset].constructor
        constructors[preset] = {
            "fun_name": c.fun_name,
            "fun_module": c.fun_module,
            "args": list(c.args),
            "kwds": c.kwds,
        }
    keys_and_shapes = [(k, list(v.shape)) for k, v in nets["dimp50"].state_dict().items()]
    if keys_and_shapes != [(k, list(v.shape)) for k, v in nets["super_dimp"].state_dict().items()]:
        raise RuntimeError("dimp50 and super_dimp constructors built different networks")
    state = seeded_state_dict(inputs["seed"], keys_and_shapes)
    for net in nets.values():
        net.load_state_dict(state)
        net.eval()
    out = network_outputs(nets["dimp50"], inputs)
    again = network_outputs(nets["super_dimp"], inputs)
    if any(not np.array_equal(out[k], again[k]) for k in out):
        raise RuntimeError("dimp50 and super_dimp networks gave different outputs for the same weights")
    globals_by_preset = {}
    with tempfile.TemporaryDirectory() as tmp:
        for preset, net in nets.items():
            src = save_with_pytracking_trainer(pt, net, preset, Path(tmp) / preset)
            globals_by_preset[preset] = _pickle_globals(src)
            convert_and_check(src, Path(tmp) / f"{preset}_converted.pth.tar", preset, state)
            src.unlink()
            print(f"{preset}: pytracking's own checkpoint converts; globals {globals_by_preset[preset]}")
    meta = {
        "inputs": inputs,
        "subsets": SUBSETS,
        "state_keys": keys_and_shapes,
        "constructors": constructors,
        "pickle_globals": globals_by_preset,
    }
    arrays = {k: v.astype(np.float32) for k, v in out.items()}
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    # a fingerprint of the seeded weights (float64 sums) so that a changed generator fails loudly in the test
    arrays["state_sums"] = np.array([float(t.double().sum()) for t in state.values()], dtype=np.float64)
    for key, value in out.items():
        print(f"  {key:18s} {str(value.shape):22s} max |x| {np.abs(value).max():.4g}")
    if not all(math.isfinite(float(np.abs(v).max())) for v in out.values()):
        raise RuntimeError("non-finite golden values")
    return arrays
