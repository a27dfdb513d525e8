"""Baseline trackers on the default synthetic test set: the bar the learned tracker is compared against.

python benchmarks/baselines_synthetic.py [--trackers static csrt kcf] [--sequences N] [--frames F]
                                         [--cv-threads 1] [--results DIR]

Each tracker runs through :func:`pytracking.evaluation.runner.track_sequence` (the runner the DiMP tracker
uses) on ``synthetic_dataset()`` (20 x 150 frames, seed 7919; ``--sequences`` / ``--frames`` take a prefix)
and is scored with eval's code under the dataset's default protocol (``protocol_for_dataset("synthetic")``,
as ``python eval/run_eval.py --dataset synthetic`` does). Frames of a sequence are rendered once and shared
by all trackers, so rendering is not in any tracker's time.

Printed per tracker: AUC / OP50 / OP75 / precision / normalised precision (percent), FPS as eval computes it
from the per-frame wall times (mean of 1 / t), FPS from process CPU time (less sensitive to a loaded
machine), and AUC minus the static tracker's AUC, the in-process baseline. ``--results DIR`` also writes
the standard result files (``DIR/{tracker}/default/{seq}.txt`` + ``_time.txt``), so
``python eval/run_eval.py --dataset synthetic --results DIR --trackers csrt/default dimp/nce_plus`` can put
the baselines beside a learned tracker's results.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import cv2
import numpy as np

from eval.evaluation import evaluate_tracker, make_inputs
from eval.ground_truth import from_sequence
from eval.protocols import protocol_for_dataset
from eval.reporting import format_table, results_table
from eval.result_files import TrackerResults
from ltr.dataset.base import Sequence
from ltr.dataset.synthetic import synthetic_dataset
from pytracking.evaluation.results import result_folder, write_sequence_results
from pytracking.evaluation.runner import track_sequence
from pytracking.tracker.baselines import BASELINES, make_baseline


def in_memory(full: Sequence, n: int) -> Sequence:
    """The first ``n`` frames of ``full``, rendered once and served from a list as (H, W, 3) RGB copies;
    boxes (n, 4) xywh, visibility and per-frame attributes cut to ``n``."""
    frames = [full.frame(i) for i in range(n)]
    per_frame = len(full.boxes)
    return Sequence(
        name=full.name,
        boxes=full.boxes[:n],
        frame_loader=lambda t: frames[t].copy(),
        visible=full.visible[:n],
        dataset=full.dataset,
        attributes={
            k: v[:n] if isinstance(v, np.ndarray) and len(v) == per_frame else v
            for k, v in full.attributes.items()
        },
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trackers", nargs="+", default=["static", "csrt", "kcf"], choices=BASELINES.names)
    p.add_argument("--sequences", type=int, default=None, help="only the first N sequences")
    p.add_argument("--frames", type=int, default=None, help="only the first F frames of each sequence")
    p.add_argument("--cv-threads", type=int, default=1, help="cv2.setNumThreads (default 1)")
    p.add_argument("--results", type=Path, default=None, help="also write result files under this root")
    args = p.parse_args(argv)
    cv2.setNumThreads(args.cv_threads)
    trackers = list(dict.fromkeys(["static", *args.trackers]))  # static is the in-process baseline

    dataset = synthetic_dataset()
    names = dataset.sequence_names()[: args.sequences]
    preds: dict[str, dict[str, np.ndarray]] = {t: {} for t in trackers}
    times: dict[str, dict[str, np.ndarray]] = {t: {} for t in trackers}
    cpu = dict.fromkeys(trackers, 0.0)
    ground_truth = []
    start = time.perf_counter()
    for name in names:
        full = dataset.get_sequence(name)
        n = len(full) if args.frames is None else min(len(full), args.frames)
        seq = in_memory(full, n)
        ground_truth.append(from_sequence(seq))
        for tracker_name in trackers:
            c0 = time.process_time()
            boxes, secs = track_sequence(make_baseline(tracker_name), seq)
            cpu[tracker_name] += time.process_time() - c0
            preds[tracker_name][name] = boxes
            times[tracker_name][name] = secs
            if args.results is not None:
                write_sequence_results(
                    result_folder(args.results, tracker_name, "default"), name, boxes, secs
                )
        print(f"{name}: {n} frames done ({time.perf_counter() - start:.0f} s)", flush=True)

    protocol = protocol_for_dataset("synthetic")
    evaluations = []
    for tracker_name in trackers:
        key = f"{tracker_name}/default"
        evaluation = evaluate_tracker(key, [make_inputs(ground_truth, preds[tracker_name])], protocol)
        loaded = TrackerResults(key, [None], [preds[tracker_name]], [{}], times=[times[tracker_name]])
        evaluation.scores["fps"] = loaded.fps(names)
        evaluations.append(evaluation)
    table = results_table(evaluations, protocol)
    frames_total = sum(len(g.boxes) for g in ground_truth)
    table["CPU FPS"] = [frames_total / max(cpu[t], 1e-9) for t in trackers]
    static_auc = table.loc["static/default", "AUC"]
    table["AUC - static"] = table["AUC"] - static_auc
    print(
        f"\nsynthetic test set: {len(names)} sequences, {frames_total} frames, protocol {protocol.name}, "
        f"OpenCV {cv2.__version__} with {cv2.getNumThreads()} thread(s), {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(format_table(table, "markdown"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
