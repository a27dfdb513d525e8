"""pytracking's own DiMP tracker on two short clips, frame by frame (one file per ``--preset``).

pytracking builds its ``dimpnet50`` with the preset's arguments, filled with the seeded weights of
``tests/golden/seeded.py``, and tracks two clips of ``tests/golden/clips.py`` (synthetic and a camera path over
a photograph) with its DiMP tracker and the preset's own parameter file (``use_gpu=False``). Every random
draw is made identical for both trackers: pytracking's global generator is seeded with ``seed`` before
``initialize`` and with ``seed + 1_000_003 * frame_num`` before each ``track``, as this toolkit's tracker seeds
its own generator. Recorded per frame: the state before the frame (for single-step checks), the crop
coordinates, the score map localisation used, its state, the refinement's candidates and scores, the
output box and the sample-memory weights; at initialisation the augmented samples' boxes and the
modulation vectors; the final filter. ``tests/tracker/test_pytracking_golden.py`` reads the files; they were
made with one thread (``--threads 1``), as float32 sums depend on the thread count.
"""

from __future__ import annotations

import argparse
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scripts.golden.reference import import_reference
from tests.golden.clips import photo_clip, synthetic_clip
from tests.golden.pytracking_format import DIMP50_KWDS, PRDIMP50_KWDS, SUPER_DIMP_KWDS
from tests.golden.seeded import seeded_state_dict

OUT = "tracker_{preset}.npz"
SEED = 7
KWDS = {"dimp50": DIMP50_KWDS, "super_dimp": SUPER_DIMP_KWDS, "prdimp50": PRDIMP50_KWDS}
#: not-found thresholds that differ from the preset's parameter file, the same in both trackers
NOT_FOUND_THRESHOLD = {"prdimp50": 0.0}
#: the constructor of each preset's network in pytracking's ltr.models.tracking.dimpnet
FUNCTIONS = {"dimp50": "dimpnet50", "super_dimp": "dimpnet50", "prdimp50": "klcedimpnet50"}
#: pytracking's per-frame seeding, the same as DiMPTracker's
FRAME_SEED = 1_000_003


def _t(x: Any) -> np.ndarray:
    return torch.as_tensor(x).detach().cpu().double().numpy()


STATES = ("not_found", "uncertain", "hard_negative", "normal")


def _track_clip(tracker: Any, p: str, frames: list[np.ndarray], init_box: np.ndarray, num_boxes: int) -> dict:
    """Track one clip with pytracking's DiMP ``tracker``; the recorded arrays, keys prefixed by ``p``."""
    tracker.visdom = None
    record: dict[str, Any] = {}
    extract_backbone_features = tracker.extract_backbone_features
    localize_target = tracker.localize_target
    optimize_boxes = tracker.optimize_boxes

    def extract(im, pos, scales, sz):
        feat, coords, patches = extract_backbone_features(im, pos, scales, sz)
        record["coords"] = coords[0]
        return feat, coords, patches

    def localize(scores, sample_pos, sample_scales):
        result = localize_target(scores, sample_pos, sample_scales)
        record["scores"], record["flag"] = result[2][0], result[3]
        return result

    def optimize(iou_features, init_boxes):
        boxes, scores = optimize_boxes(iou_features, init_boxes)
        record["init_boxes"], record["boxes"], record["box_scores"] = init_boxes, boxes, scores
        return boxes, scores

    tracker.extract_backbone_features = extract
    tracker.localize_target = localize
    tracker.optimize_boxes = optimize
    torch.manual_seed(SEED)
    tracker.initialize(frames[0], {"init_bbox": list(map(float, init_box))})
    out = {
        p + "init_boxes": _t(tracker.target_boxes[: tracker.num_init_samples[0]]),
        p + "modulation2": _t(tracker.iou_modulation[0]),
        p + "modulation3": _t(tracker.iou_modulation[1]),
        p + "init_filter": _t(tracker.target_filter),
    }
    keys = ("pre_pos", "pre_sz", "pre_scale", "pre_pos_iounet", "pre_filter_sum", "coords", "scores", "state")
    keys += ("refine_init", "refine_boxes", "refine_scores", "box", "weights", "filter_sum")
    rows: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for index, frame in enumerate(frames[1:], start=2):
        record.clear()
        rows["pre_pos"].append(_t(tracker.pos))
        rows["pre_sz"].append(_t(tracker.target_sz))
        rows["pre_scale"].append(_t(tracker.target_scale).reshape(()))
        pos_iounet = getattr(tracker, "pos_iounet", None)
        rows["pre_pos_iounet"].append(_t(pos_iounet) if pos_iounet is not None else np.full(2, np.nan))
        rows["pre_filter_sum"].append(_t(tracker.target_filter.abs().sum()))
        torch.manual_seed(SEED + FRAME_SEED * index)
        box = tracker.track(frame)["target_bbox"]
        rows["state"].append(np.array(STATES.index(record["flag"])))
        rows["coords"].append(_t(record["coords"]))
        rows["scores"].append(_t(record["scores"]))
        refined = "boxes" in record
        for key, name, shape in (
            ("refine_init", "init_boxes", (num_boxes, 4)),
            ("refine_boxes", "boxes", (num_boxes, 4)),
            ("refine_scores", "box_scores", (num_boxes,)),
        ):
            rows[key].append(_t(record[name]).reshape(shape) if refined else np.full(shape, np.nan))
        rows["box"].append(np.asarray(box, dtype=np.float64))
        rows["weights"].append(_t(tracker.sample_weights[0]))
        rows["filter_sum"].append(_t(tracker.target_filter.abs().sum()))
    out.update({p + key: np.stack(values) for key, values in rows.items()})
    out[p + "final_filter"] = _t(tracker.target_filter).astype(np.float32)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", choices=sorted(KWDS), default="super_dimp")
    parser.add_argument("--frames", type=int, default=8)


def reference_dimp(checkout: str | Path, preset: str, seed: int) -> tuple[types.SimpleNamespace, Any]:
    """pytracking's modules (``dimp``, ...) and its ``preset`` DiMP parameters on the CPU, their ``net`` its
    ``dimpnet50`` with the preset's arguments and the weights of :func:`tests.golden.seeded.seeded_state_dict`
    for ``seed``, in eval mode (``params.net.net``); ``pt.dimp.DiMP(params)`` is pytracking's tracker.

    Imports the checkout (:func:`scripts.golden.reference.import_reference`): call it after everything of this
    repository has been imported.
    """
    pt = import_reference(
        checkout,
        dimpnet="ltr.models.tracking.dimpnet",
        net_wrappers="pytracking.features.net_wrappers",
        dimp="pytracking.tracker.dimp",
        parameters=f"pytracking.parameter.dimp.{preset}",
    )
    net = getattr(pt.dimpnet, FUNCTIONS[preset])(**{**KWDS[preset], "backbone_pretrained": False})
    net.load_state_dict(seeded_state_dict(seed, [(k, v.shape) for k, v in net.state_dict().items()]))
    net.eval()

    class Given(pt.net_wrappers.NetWithBackbone):
        def initialize(self) -> None:  # the network is already here
            pass

    params = pt.parameters.parameters()
    # PrDiMP's scores are probabilities: on seeded random weights every peak stays below its not-found
    # threshold (0.04) and nothing but the crop would be checked, so both trackers track with 0 instead
    params.target_not_found_threshold = NOT_FOUND_THRESHOLD.get(preset, params.target_not_found_threshold)
    params.use_gpu = False
    params.device = "cpu"
    params.net = Given(net_path=None, use_gpu=False)
    params.net.net = net
    return pt, params


def run(args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The golden file's arrays (see the module docstring); the clips are made before pytracking's ``ltr``
    replaces this repository's."""
    clips = {"synthetic": synthetic_clip(args.frames), "photo": photo_clip(args.frames)}
    pt, params = reference_dimp(args.pytracking, args.preset, SEED)
    shapes = [(k, tuple(v.shape)) for k, v in params.net.net.state_dict().items()]
    out: dict[str, np.ndarray] = {
        "keys": np.array([k for k, _ in shapes]),
        "shapes": np.array([list(s) + [0] * (4 - len(s)) for _, s in shapes]),
        "ndims": np.array([len(s) for _, s in shapes]),
        "seed": np.array(SEED),
        "frame_seed": np.array(FRAME_SEED),
        "target_not_found_threshold": np.array(params.target_not_found_threshold),
    }
    for clip, (frames, init_box) in clips.items():
        tracker = pt.dimp.DiMP(params)
        out.update(_track_clip(tracker, f"{clip}/", frames, init_box, params.num_init_random_boxes + 1))
        states = [STATES[int(k)] for k in out[f"{clip}/state"]]
        print(f"{args.preset} {clip}: states {states}", flush=True)
    return out
