"""How large the refinement window must be: tracking quality and clipped boxes per ``refine_window`` margin.

    python benchmarks/refine_window.py --net CHECKPOINT [--param nce_plus_tiny] [--margins none,1.0,0.75,0.6]
                                       [--dataset synthetic] [--root DIR] [--threads 1]

Tracks every sequence of the dataset once per margin (``none``: the box head's features on the whole maps)
with the same checkpoint and prints, per margin: the success AUC (mean over sequences of the fraction of
frames with IoU above 21 thresholds 0, 0.05, .., 1, first frame excluded), the mean IoU, how many refined
candidate boxes ended on the window's edge (clipped there: the ascent wanted to go further), and in how many
frames such a box was among those averaged into the output. A margin is large enough when that last count is
(nearly) zero; the AUC differences between margins that clip nothing are the tracker's sensitivity to
rounding (the whole maps and the window round differently), not an effect of the window.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
import torch

import pytracking.tracker.dimp.tracker as tracker_module
from eval.box_metrics import iou_xywh
from pytracking.evaluation.runner import DatasetSpec, track_sequence
from pytracking.parameter.dimp import NAMES, get_parameters
from pytracking.tracker.dimp import DiMPTracker, load_network

THRESHOLDS = np.linspace(0.0, 1.0, 21)


class ClipCounter:
    """Wraps the tracker's ``refine_box`` and counts candidates that end on the window's bounds."""

    def __init__(self) -> None:
        self.original = tracker_module.refine_box
        self.reset()

    def reset(self) -> None:
        self.boxes = self.clipped = self.frames = self.frames_clipped = 0

    def __call__(self, *args, **kwargs):
        result = self.original(*args, **kwargs)
        bounds = kwargs.get("bounds_xyxy")
        if bounds is not None:
            b = result.boxes  # (S, 4) xywh crop pixels
            tol = 1e-3
            on_edge = (
                (b[:, 0] <= bounds[0] + tol)
                | (b[:, 1] <= bounds[1] + tol)
                | (b[:, 0] + b[:, 2] >= bounds[2] - tol)
                | (b[:, 1] + b[:, 3] >= bounds[3] - tol)
            )
            self.boxes += on_edge.numel()
            self.clipped += int(on_edge.sum())
            self.frames += 1
            self.frames_clipped += int((on_edge & result.used).any())
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", required=True, help="checkpoint path")
    ap.add_argument("--param", default="nce_plus_tiny", choices=NAMES)
    ap.add_argument("--margins", default="none,1.0,0.75,0.6")
    ap.add_argument("--dataset", default="synthetic")
    ap.add_argument("--root", default=None)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    margins = [None if m.strip() == "none" else float(m) for m in args.margins.split(",")]
    loaded = load_network(args.net, torch.device("cpu"))
    dataset = DatasetSpec(args.dataset, args.root).open()
    names = dataset.sequence_names()
    counter = ClipCounter()
    tracker_module.refine_box = counter
    print(f"{args.net}: {args.param} on {args.dataset} ({len(names)} sequences)")
    for margin in margins:
        params = dataclasses.replace(get_parameters(args.param), refine_window=margin)
        counter.reset()
        aucs, ious = [], []
        start = time.perf_counter()
        for name in names:
            sequence = dataset.get_sequence(name)
            boxes, _ = track_sequence(DiMPTracker(loaded.net, loaded.geometry, params), sequence)
            iou = np.nan_to_num(iou_xywh(boxes[1:], np.asarray(sequence.boxes, dtype=np.float64)[1:]))
            aucs.append(np.mean([(iou > t).mean() for t in THRESHOLDS]))
            ious.append(iou)
        print(
            f"  margin {str(margin):>5}: AUC {100 * np.mean(aucs):6.2f}  mean IoU {np.concatenate(ious).mean():.4f}"
            f"  boxes on the window's edge {counter.clipped}/{counter.boxes}, frames averaging one "
            f"{counter.frames_clipped}/{counter.frames}  ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
