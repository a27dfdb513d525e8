"""What limits a DiMP tracker on a dataset: its AUC as it tracks, with the true position given back after every
frame, and with the true size given back after every frame.

python benchmarks/oracle_tracking.py --net CKPT [CKPT ...] [--dataset real_footage] [--param nce_plus_tiny]
                                     [--jobs 2]

Modes, per checkpoint, every sequence of the dataset:

- ``none``: the tracker as it is (equal to ``run_tracker.py``'s boxes);
- ``position``: after each frame the tracker's target centre is set to the ground truth's, its size kept; the
  AUC then measures the size estimate (the box head and the size update) with localisation taken out;
- ``size``: after each frame the target size (and scale) is set to the ground truth's, its centre kept; the
  AUC then measures localisation (the classifier and the centre of the refined box) with size taken out.

The state is set between frames, so each frame still runs the tracker's own localisation, refinement and
classifier update; frames whose ground truth is unknown are left as tracked. Printed: the AUC of each
(checkpoint, mode), the means over checkpoints, and per sequence the means over checkpoints of each mode, so
that lost targets (low in ``size`` too) and wrong sizes (low in ``position`` too) can be told apart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.tune_tracker import print_grid, run_grid  # noqa: E402

MODES = ("none", "position", "size")


class OracleTracker:
    """A :class:`~pytracking.tracker.dimp.DiMPTracker` whose position or size is set to ``boxes`` (N, 4) xywh
    (the sequence's ground truth) after every frame it tracks; ``mode`` is one of :data:`MODES`."""

    def __init__(self, tracker: Any, boxes: np.ndarray, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.tracker, self.boxes, self.mode = tracker, np.asarray(boxes, dtype=np.float64), mode
        self.frame = 0

    @property
    def debug_info(self) -> dict[str, Any]:
        return self.tracker.debug_info

    def initialize(self, frame: np.ndarray, box: Any) -> None:
        self.frame = 0
        self.tracker.initialize(frame, box)

    def track(self, frame: np.ndarray) -> np.ndarray:
        import torch

        self.frame += 1
        box = self.tracker.track(frame)
        truth = self.boxes[self.frame] if self.frame < len(self.boxes) else None
        if self.mode == "none" or truth is None or not np.isfinite(truth).all() or (truth[2:] <= 0).any():
            return box
        t = self.tracker
        g = torch.as_tensor(truth, dtype=t.pos.dtype)
        if self.mode == "position":
            t.pos = torch.stack([g[1] + (g[3] - 1) / 2, g[0] + (g[2] - 1) / 2])  # (y, x), as the tracker
        else:
            t.target_sz = torch.stack([g[3], g[2]])
            t.target_scale = torch.sqrt(t.target_sz.prod() / t.base_target_sz.prod())
        return t.target_box()


def score(job: tuple[str, str, str, str]) -> dict[str, float]:
    """Per-sequence AUC (and ``"_all"``, the dataset's) of one checkpoint in one mode (one thread)."""
    net_path, param, dataset_name, mode = job
    import torch

    torch.set_num_threads(1)
    from eval.evaluation import evaluate_tracker, make_inputs
    from eval.ground_truth import from_sequence
    from eval.protocols import protocol_for_dataset
    from ltr.dataset.registry import BENCHMARKS
    from pytracking.evaluation.runner import track_sequence
    from pytracking.parameter.dimp import get_parameters
    from pytracking.tracker.dimp import DiMPTracker, load_network

    loaded = load_network(net_path, "cpu")
    params = get_parameters(param)
    dataset = BENCHMARKS[dataset_name].open()
    sequences = [dataset.get_sequence(n) for n in dataset.sequence_names()]
    predictions = {}
    for seq in sequences:
        tracker = OracleTracker(DiMPTracker(loaded.net, loaded.geometry, params), seq.boxes, mode)
        predictions[seq.name], _ = track_sequence(tracker, seq)
    inputs = make_inputs([from_sequence(s) for s in sequences], predictions)
    result = evaluate_tracker("dimp", [inputs], protocol_for_dataset(dataset_name))
    per_sequence = {name: float(v["auc"]) for name, v in result.sequences.items()}
    return {**per_sequence, "_all": float(result.scores["auc"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", nargs="+", required=True, type=Path, help="checkpoints (.pth.tar)")
    ap.add_argument(
        "--dataset", default="real_footage", help="a run_tracker.py --dataset name with ground truth"
    )
    ap.add_argument("--param", default="nce_plus_tiny", help="dimp parameter set")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args(argv)
    for path in args.net:
        if not path.is_file():
            ap.error(f"--net: no checkpoint file {path}")
    from ltr.dataset.registry import BENCHMARKS

    if args.dataset not in BENCHMARKS or not BENCHMARKS[args.dataset].ground_truth:
        ap.error(f"--dataset {args.dataset}: not a dataset with public ground truth")
    jobs = [(str(net), args.param, args.dataset, mode) for net in args.net for mode in MODES]
    print(
        f"{len(args.net)} checkpoints x {len(MODES)} modes of dimp/{args.param} on {args.dataset}", flush=True
    )
    table = run_grid(score, args.net, MODES, jobs, args.jobs)
    print_grid(table, MODES, lambda run: f"{run['_all']:.2f}")
    means = {m: statistics.mean(row[m]["_all"] for row in table.values()) for m in MODES}
    print("| mean | " + " | ".join(f"{means[m]:.2f}" for m in MODES) + " |")
    print("\nper sequence, mean over checkpoints:")
    print("| sequence | " + " | ".join(MODES) + " |")
    print("|---|" + "---:|" * len(MODES))
    names = [n for n in next(iter(table.values()))[MODES[0]] if n != "_all"]
    for name in names:
        cells = [statistics.mean(row[m][name] for row in table.values()) for m in MODES]
        print(f"| {name} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
