"""``python eval/run_eval.py --dataset NAME --trackers T/P [T/P ...]``: tables, plots and a JSON report.

Ground truth comes from the dataset and split that ``--dataset`` names in ``ltr.dataset.registry.BENCHMARKS``
(the names of ``pytracking/run_tracker.py``; ``--split`` picks another split); results from
``{results}/{tracker}/{param}[_{runid:03d}]/{seq}.txt`` (default ``$LTR_WORKSPACE/results``).
A bad dataset (missing root, an empty or malformed annotation file) or result file is one ``error:`` line
naming the file, exit status 2. Per tracker, a ``note:`` line says how many result files were shorter than
their sequence and what the protocol did with them (padded with failures, or the ground truth cut).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence as Seq
from pathlib import Path

from eval.evaluation import GroundTruth, TrackerEvaluation, evaluate_tracker, make_inputs
from eval.frame_errors import ResultError
from eval.protocols import PROTOCOLS, Protocol, get_protocol, protocol_for_dataset
from eval.reporting import (
    attribute_table,
    format_table,
    report_dict,
    results_table,
    sequence_table,
    write_json,
)
from eval.result_files import TrackerResults, load_tracker_results
from ltr.admin.io import atomic_write_text
from ltr.admin.paths import workspace_dir
from ltr.dataset.base import DatasetError
from ltr.dataset.registry import BENCHMARKS


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python eval/run_eval.py", description=__doc__.splitlines()[0])
    p.add_argument(
        "--dataset",
        required=True,
        choices=BENCHMARKS.names,
        help="benchmark name (ltr.dataset.registry.BENCHMARKS, as run_tracker.py's --dataset)",
    )
    p.add_argument("--trackers", required=True, nargs="+", metavar="TRACKER/PARAM", help="e.g. dimp/nce_plus")
    p.add_argument("--split", default=None, help="dataset split, e.g. UAV20L for --dataset uav")
    p.add_argument("--root", default=None, help="dataset root (default: the dataset's environment variable)")
    p.add_argument("--results", default=None, help="results root (default: $LTR_WORKSPACE/results)")
    p.add_argument(
        "--out", default=None, help="output folder for tables and plots (default: workspace/eval/DATASET)"
    )
    p.add_argument("--json", default=None, help="JSON report path (default: OUT/results.json)")
    p.add_argument(
        "--format", default="markdown", choices=["markdown", "csv", "latex"], help="printed table format"
    )
    p.add_argument(
        "--protocol", default=None, choices=sorted(PROTOCOLS), help="override the dataset's default"
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="skip sequences some tracker has no result for (and report them) instead of failing",
    )
    p.add_argument("--no-plots", dest="plots", action="store_false", help="do not write plots")
    p.add_argument(
        "--box-errors",
        action="store_true",
        help="also write box_errors.csv (per sequence) and box_errors_per_frame.csv: IoU, size, aspect and "
        "centre errors per frame and the frame each target was lost (eval/box_errors.py)",
    )
    return p


def write_box_errors(
    ground_truth: Seq[GroundTruth], loaded: Seq[TrackerResults], out_dir: Path, fmt: str
) -> str:
    """Write the per-sequence and per-frame box-error tables to ``out_dir``; returns the per-tracker means
    formatted as ``fmt`` for printing."""
    from eval.box_errors import box_error_tables, tracker_means

    per_frame, per_sequence = box_error_tables(ground_truth, loaded)
    atomic_write_text(out_dir / "box_errors.csv", per_sequence.to_csv(index=False, float_format="%.4f"))
    atomic_write_text(
        out_dir / "box_errors_per_frame.csv", per_frame.to_csv(index=False, float_format="%.4f")
    )
    return format_table(tracker_means(per_sequence), fmt, digits=3)


def common_sequences(
    ground_truth: Seq[GroundTruth], loaded: Seq[TrackerResults]
) -> tuple[list[GroundTruth], list[str]]:
    """Sequences every run of every tracker has -> (kept ground truth, skipped sequence names)."""
    have = [set(run) for res in loaded for run in res.runs]
    kept = [g for g in ground_truth if all(g.name in h for h in have)]
    skipped = [g.name for g in ground_truth if not all(g.name in h for h in have)]
    return kept, skipped


#: what each ``Protocol.shorter_prediction`` rule does to a result file shorter than its sequence
_SHORT_RULES = {
    "pad_zero": "padded with zero boxes (failures)",
    "pad_nan": "padded with NaN rows (failures)",
    "truncate_gt": "scored on their own rows only (the ground truth cut to them)",
}


def short_results(
    ground_truth: Seq[GroundTruth], res: TrackerResults
) -> tuple[list[tuple[str, int, int]], int]:
    """Result files of every run of ``res`` with fewer rows than their sequence has frames.

    Returns ``([(file, rows, frames), ...], number of result files looked at)``.
    """
    frames = {g.name: len(g.boxes) for g in ground_truth}
    short, total = [], 0
    for boxes, paths in zip(res.runs, res.paths, strict=True):
        for name, n in frames.items():
            if name in boxes:
                total += 1
                if len(boxes[name]) < n:
                    short.append((str(paths.get(name, name)), len(boxes[name]), n))
    return short, total


def short_results_note(
    key: str, ground_truth: Seq[GroundTruth], res: TrackerResults, protocol: Protocol
) -> str | None:
    """One line saying how many of a tracker's result files were shorter than their sequence and what the
    protocol did with them (None when there are none, or when the protocol refuses them anyway)."""
    short, total = short_results(ground_truth, res)
    if not short or protocol.shorter_prediction not in _SHORT_RULES:
        return None
    shown = ", ".join(f"{path} ({rows} of {n} rows)" for path, rows, n in short[:3])
    more = f" and {len(short) - 3} more" if len(short) > 3 else ""
    return (
        f"{key}: {len(short)} of {total} result files were shorter than their sequence and were "
        f"{_SHORT_RULES[protocol.shorter_prediction]} under protocol {protocol.name}: {shown}{more}"
    )


def evaluate(
    ground_truth: Seq[GroundTruth], loaded: Seq[TrackerResults], protocol: Protocol
) -> list[TrackerEvaluation]:
    """Evaluate every loaded tracker on the given ground truth (sequences all runs must have)."""
    flags = {g.name: g.flags for g in ground_truth if g.flags}
    out = []
    for res in loaded:
        runs = [make_inputs(ground_truth, boxes, paths) for boxes, paths in zip(res.runs, res.paths)]
        evaluation = evaluate_tracker(res.key, runs, protocol, flags or None)
        fps = res.fps([g.name for g in ground_truth])
        if fps is not None:
            evaluation.scores["fps"] = fps
        out.append(evaluation)
    return out


def write_outputs(
    evaluations: Seq[TrackerEvaluation],
    protocol: Protocol,
    out_dir: Path,
    json_path: Path,
    *,
    dataset: str,
    plots: bool = True,
    skipped: Seq[str] = (),
) -> list[Path]:
    """Write tables (md/csv/tex), per-sequence / per-attribute CSVs, plots and the JSON; returns paths."""
    written = []
    table = results_table(evaluations, protocol)
    for fmt, ext in (("markdown", "md"), ("csv", "csv"), ("latex", "tex")):
        written.append(atomic_write_text(out_dir / f"summary.{ext}", format_table(table, fmt) + "\n"))
    for metric in ("auc", "precision", "norm_precision"):
        seq_df = sequence_table(evaluations, metric)
        written.append(atomic_write_text(out_dir / f"per_sequence_{metric}.csv", format_table(seq_df, "csv")))
    if any(e.attributes for e in evaluations):
        for metric in ("auc", "precision", "norm_precision"):
            attr_df = attribute_table(evaluations, metric)
            written.append(
                atomic_write_text(out_dir / f"per_attribute_{metric}.csv", format_table(attr_df, "csv"))
            )
    if plots:
        from eval.plotting import plot_curves

        written.extend(plot_curves(evaluations, protocol, out_dir, title=dataset))
    meta = {"dataset": dataset, "skipped_sequences": list(skipped)}
    written.append(write_json(json_path, report_dict(evaluations, protocol, **meta)))
    return written


def main(argv: Seq[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        protocol = get_protocol(args.protocol) if args.protocol else protocol_for_dataset(args.dataset)
        from eval.ground_truth import load_ground_truth

        benchmark = BENCHMARKS[args.dataset]
        if not benchmark.ground_truth and not args.split:
            raise DatasetError(
                f"--dataset {args.dataset}: the ground truth of its sequences is not public (the benchmark's "
                "server scores them: eval/pack_results.py); pass --split for a split with ground truth"
            )
        ground_truth = load_ground_truth(
            benchmark.dataset,
            args.root,
            need_image_size=protocol.clip_to_image,
            split=args.split or benchmark.split,
        )
        results_dir = Path(args.results) if args.results else workspace_dir() / "results"
        names = [g.name for g in ground_truth]
        loaded = [
            load_tracker_results(results_dir, key, names, allow_missing=args.allow_missing)
            for key in args.trackers
        ]
        kept, skipped = common_sequences(ground_truth, loaded)
        if skipped:
            for res in loaded:
                for folder, missing in res.missing.items():
                    print(
                        f"warning: {folder}: no result for {len(missing)} sequence(s): {', '.join(missing)}",
                        file=sys.stderr,
                    )
            print(
                f"warning: evaluating on {len(kept)} of {len(ground_truth)} sequences "
                f"(skipped: {', '.join(skipped)})",
                file=sys.stderr,
            )
        if not kept:
            raise ResultError("no sequence has results from every tracker run; nothing to evaluate")
        evaluations = evaluate(kept, loaded, protocol)
        for res in loaded:
            note = short_results_note(res.key, kept, res, protocol)
            if note:
                print(f"note: {note}", file=sys.stderr)
        out_dir = Path(args.out) if args.out else workspace_dir() / "eval" / args.dataset
        json_path = Path(args.json) if args.json else out_dir / "results.json"
        write_outputs(
            evaluations, protocol, out_dir, json_path, dataset=args.dataset, plots=args.plots, skipped=skipped
        )
    except (ResultError, DatasetError, KeyError, ValueError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        parser.exit(2, f"error: {message}\n")
    except OSError as err:  # an output that cannot be written (no permission, a file where a folder goes)
        parser.exit(2, f"error: cannot write {err.filename}: {err.strerror or err}\n")
    print(f"{args.dataset}: {len(kept)} sequences, protocol {protocol.name}")
    print(format_table(results_table(evaluations, protocol), args.format))
    if args.box_errors:
        means = write_box_errors(kept, loaded, out_dir, args.format)
        print("\nbox errors (means over sequences; size, aspect and centre over frames with IoU > 0.3):")
        print(means)
    print(f"\nwrote tables, plots and {json_path} to {out_dir}")
    return 0
