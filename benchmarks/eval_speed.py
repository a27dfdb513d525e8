"""Evaluation speed on a LaSOT-sized synthetic result set, against a per-frame Python loop.

python benchmarks/eval_speed.py [--sequences 280] [--frames 2500] [--trackers 10] [--loop-sequences 10]
                                [--protocol lasot_matlab] [--files]

Generates ground truth (random walks, ~5% absent frames, a few invalid boxes) and noisy predictions in
memory (``--files`` also writes them as result files in a temporary folder and times the loading), evaluates
every tracker with the vectorised code and prints the time. The baseline is a straightforward per-frame
Python loop computing the same IoU and 21-point success curve; it runs on ``--loop-sequences`` sequences of
one tracker in the same process and its time is extrapolated linearly to the whole set.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from eval.box_metrics import iou_xywh
from eval.curves import success_counts
from eval.evaluation import GroundTruth, evaluate_tracker, make_inputs
from eval.frame_errors import IOU_FAIL
from eval.protocols import THRESHOLD_SETS, get_protocol
from eval.result_files import load_tracker_results


class Timer:
    """Accumulates CPU time (``time.process_time``) and wall time over ``with`` blocks."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.wall = 0.0

    def __enter__(self) -> Timer:
        self._c, self._w = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu += time.process_time() - self._c
        self.wall += time.perf_counter() - self._w

    def __str__(self) -> str:
        return f"{self.cpu:.2f} s ({self.wall:.2f} s wall)"


def make_ground_truth(rng: np.random.Generator, n_seq: int, n_frames: int) -> list[GroundTruth]:
    out = []
    for i in range(n_seq):
        steps = rng.normal(0, 3, (n_frames, 2)).cumsum(axis=0) + 300
        size = np.exp(rng.normal(0, 0.02, (n_frames, 2)).cumsum(axis=0)) * rng.uniform(30, 120, 2)
        boxes = np.column_stack([steps, size])
        boxes[rng.random(n_frames) < 0.001, 2] = 0.0  # a few invalid GT rows
        visible = rng.random(n_frames) > 0.05
        visible[0] = True
        boxes[0, 2:] = np.maximum(boxes[0, 2:], 1.0)
        out.append(GroundTruth(f"seq-{i}", boxes, visible=visible))
    return out


def make_predictions(rng: np.random.Generator, gt: list[GroundTruth], noise: float) -> dict[str, np.ndarray]:
    preds = {}
    for g in gt:
        p = (
            g.boxes
            + rng.normal(0, noise, g.boxes.shape) * np.r_[1, 1, 0.3, 0.3] * g.boxes[:, [2, 3, 2, 3]] / 50
        )
        p[rng.random(len(p)) < 0.002, 2] = 0.0  # zero-size rows -> previous row
        preds[g.name] = p
    return preds


def loop_iou_success(
    pred: np.ndarray, gt: np.ndarray, valid: list[bool], thresholds: list[float]
) -> list[int]:
    """Baseline: per-frame Python IoU and success counting (IoU > t), invalid frames fail."""
    counts = [0] * len(thresholds)
    for i in range(len(gt)):
        if i == 0:
            px, py, pw, ph = gt[0]
        else:
            px, py, pw, ph = pred[i]
        gx, gy, gw, gh = gt[i]
        if valid[i]:
            iw = max(0.0, min(px + pw, gx + gw) - max(px, gx))
            ih = max(0.0, min(py + ph, gy + gh) - max(py, gy))
            inter = iw * ih
            union = pw * ph + gw * gh - inter
            iou = min(inter / union, 1.0) if union > 0 else IOU_FAIL
        else:
            iou = IOU_FAIL
        for j, t in enumerate(thresholds):
            if iou > t:
                counts[j] += 1
    return counts


def vectorised_iou_success(
    preds: dict[str, np.ndarray], gt: list[GroundTruth], thr: np.ndarray
) -> np.ndarray:
    """The same computation as :func:`loop_iou_success` for all sequences at once -> (S, T) counts."""
    pred = np.concatenate([preds[g.name] for g in gt])
    boxes = np.concatenate([g.boxes for g in gt])
    lengths = np.array([len(g.boxes) for g in gt])
    first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    pred[first] = boxes[first]
    iou = iou_xywh(pred, boxes)
    iou[~((boxes[:, 2:] > 0).all(1))] = IOU_FAIL
    iou[np.isnan(iou)] = IOU_FAIL
    ids = np.repeat(np.arange(len(gt)), lengths)
    return success_counts(iou, ids, np.ones(len(iou), bool), len(gt), thr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=280)
    ap.add_argument("--frames", type=int, default=2500)
    ap.add_argument("--trackers", type=int, default=10)
    ap.add_argument("--loop-sequences", type=int, default=10)
    ap.add_argument("--protocol", default="lasot_matlab")
    ap.add_argument("--repeats", type=int, default=3, help="timing repeats of the like-for-like comparison")
    ap.add_argument("--files", action="store_true", help="also write result files and time loading them")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    protocol = get_protocol(args.protocol)
    gt = make_ground_truth(rng, args.sequences, args.frames)
    total_frames = args.sequences * args.frames * args.trackers
    print(
        f"{args.trackers} trackers x {args.sequences} sequences x {args.frames} frames = {total_frames:,} "
        f"frames, protocol {protocol.name}; times are CPU seconds of this process (wall in brackets)"
    )

    eval_time = Timer()
    load_time = Timer()
    aucs = []
    first_preds = None
    with tempfile.TemporaryDirectory() as tmp:
        for t in range(args.trackers):
            preds = make_predictions(rng, gt, noise=2.0 + t)
            first_preds = first_preds or preds
            sources = None
            if args.files:
                folder = Path(tmp) / "bench" / f"p{t}"
                folder.mkdir(parents=True)
                for name, p in preds.items():
                    np.savetxt(folder / f"{name}.txt", p, fmt="%.2f", delimiter="\t")
                with load_time:
                    res = load_tracker_results(tmp, f"bench/p{t}", [g.name for g in gt])
                preds, sources = res.runs[0], res.paths[0]
            with eval_time:
                ev = evaluate_tracker(f"bench/p{t}", [make_inputs(gt, preds, sources)], protocol)
            aucs.append(ev.scores["auc"])
    print(f"vectorised evaluation (all metrics, {protocol.name}): {eval_time}")
    if args.files:
        print(f"loading {args.trackers * args.sequences} result files: {load_time}")
    print("AUC per tracker: " + ", ".join(f"{a:.1f}" for a in aucs))

    # Like-for-like: the same IoU + 21-point success counts, vectorised vs. per-frame loop.
    thr = THRESHOLD_SETS["pytracking"].overlap
    sub = gt[: args.loop_sequences]
    lists = [
        (first_preds[g.name].tolist(), g.boxes.tolist(), (g.boxes[:, 2:] > 0).all(1).tolist()) for g in sub
    ]
    loop_runs = []
    for _ in range(args.repeats):
        timer = Timer()
        with timer:
            loop_counts = [loop_iou_success(p, b, v, thr.tolist()) for p, b, v in lists]
        loop_runs.append(timer)
    loop_time = min(loop_runs, key=lambda t: t.cpu)
    loop_frames = sum(len(g.boxes) for g in sub)
    loop_full = loop_time.cpu * total_frames / loop_frames

    vec_runs = []
    for _ in range(args.repeats):
        timer = Timer()
        with timer:
            vec_counts = vectorised_iou_success(first_preds, gt, thr)
        vec_runs.append(timer)
    vec_one = min(vec_runs, key=lambda t: t.cpu)
    vec_full = vec_one.cpu * args.trackers
    agree = np.array_equal(vec_counts[: len(sub)], np.array(loop_counts))
    print(
        f"per-frame Python loop, IoU + success (best of {args.repeats}): {loop_time} for "
        f"{loop_frames:,} frames -> {loop_full:.1f} s extrapolated to {total_frames:,} frames "
        f"(counts agree with vectorised: {agree})"
    )
    print(
        f"vectorised IoU + success (best of {args.repeats}): {vec_one} per tracker -> {vec_full:.2f} s for "
        f"{args.trackers} trackers; ratio loop / vectorised x{loop_full / vec_full:.0f}"
    )
    print(
        "ratio extrapolated loop (IoU + success only) / full vectorised evaluation (all metrics): "
        f"x{loop_full / eval_time.cpu:.0f}"
    )
    if not agree:
        raise SystemExit("the vectorised success counts differ from the per-frame loop's")


if __name__ == "__main__":
    main()
