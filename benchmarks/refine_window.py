"""How large the refinement window must be: tracking quality and clipped boxes per ``refine_window`` margin.

    python benchmarks/refine_window.py --net CHECKPOINT [--param nce_plus_tiny] [--margins none,1.0,0.75,0.6]
                                       [--dataset synthetic] [--root DIR] [--threads 1]

Tracks every sequence of the dataset once per margin (``none``: the box head's features on the whole maps)
with the same checkpoint and prints, per margin: AUC and OP50 scored by eval's code under the dataset's
default protocol (the numbers ``python eval/run_eval.py`` gives for these boxes), how many refined
candidate boxes ended on the window's edge (clipped there: the ascent wanted to go further), and in how many
frames such a box was among those averaged into the output. A margin is large enough when that last count is
(nearly) zero; the AUC differences between margins that clip nothing are the tracker's sensitivity to
rounding (the whole maps and the window round differently), not an effect of the window.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

import pytracking.tracker.dimp.tracker as tracker_module
from eval.evaluation import evaluate_tracker, make_inputs
from eval.ground_truth import from_sequence
from eval.protocols import protocol_for_dataset
from pytracking.evaluation.runner import DatasetSpec, track_sequence
from pytracking.parameter.dimp import NAMES, get_parameters
from pytracking.tracker.dimp import DiMPTracker, load_network


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


def parse_margins(text: str) -> list[float | None]:
    """``--margins``: comma-separated numbers >= 0 or ``none`` (the whole maps)."""
    margins: list[float | None] = []
    for part in text.split(","):
        word = part.strip()
        try:
            margin = None if word == "none" else float(word)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{word!r} is neither a number nor 'none'") from None
        if margin is not None and not margin >= 0:
            raise argparse.ArgumentTypeError(f"{word!r}: a margin must be >= 0")
        margins.append(margin)
    return margins


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", required=True, help="checkpoint path")
    ap.add_argument("--param", default="nce_plus_tiny", choices=NAMES)
    ap.add_argument("--margins", type=parse_margins, default="none,1.0,0.75,0.6", help="comma-separated")
    ap.add_argument("--dataset", default="synthetic")
    ap.add_argument("--root", default=None)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_network(args.net, torch.device("cpu"))
    dataset = DatasetSpec(args.dataset, args.root).open()
    names = dataset.sequence_names()
    protocol = protocol_for_dataset(args.dataset)
    counter = ClipCounter()
    tracker_module.refine_box = counter
    print(f"{args.net}: {args.param} on {args.dataset} ({len(names)} sequences)")
    for margin in args.margins:
        params = dataclasses.replace(get_parameters(args.param), refine_window=margin)
        counter.reset()
        ground_truth, predictions = [], {}
        start = time.perf_counter()
        for name in names:
            sequence = dataset.get_sequence(name)
            boxes, _ = track_sequence(DiMPTracker(loaded.net, loaded.geometry, params), sequence)
            ground_truth.append(from_sequence(sequence))
            predictions[name] = boxes
        scores = evaluate_tracker(
            f"margin {margin}", [make_inputs(ground_truth, predictions)], protocol
        ).scores
        print(
            f"  margin {str(margin):>5}: AUC {scores['auc']:6.2f}  OP50 {scores['op50']:6.2f}"
            f"  boxes on the window's edge {counter.clipped}/{counter.boxes}, frames averaging one "
            f"{counter.frames_clipped}/{counter.frames}  ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
