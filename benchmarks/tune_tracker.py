"""Tracker parameter variants over several checkpoints, scored on the synthetic *val* split (not the test set).

python benchmarks/tune_tracker.py --net CKPT [CKPT ...] --variant NAME:KEY=VALUE[,KEY=VALUE...] [--variant ...]
                                  [--param nce_plus_tiny] [--split val|test] [--jobs 2]

Each ``--variant`` is a name and ``DiMPParams`` overrides applied to the parameter set ``--param`` (the same
``key=value`` syntax as training settings; ``NAME:`` alone is the parameter set as it is). Every (checkpoint,
variant) pair tracks all sequences of the split in memory with one torch thread, ``--jobs`` pairs at a time
in worker processes, and is scored by the evaluation of ``eval/run_eval.py`` (the synthetic protocol).
Printed: the AUC of each pair, then per variant the mean over checkpoints, its difference to the first
variant and on how many checkpoints it is higher than the first. Choosing tracker parameters on the val
split keeps the test set for reporting.

Example (how ``nce_plus_tiny``'s ``score_window`` was chosen)::

    python benchmarks/tune_tracker.py --net W/seed*/checkpoints/dimp/nce_plus_tiny/ep0030.pth.tar \\
        --variant none:score_window=0 --variant w0.5:score_window=0.5 --variant w1:score_window=1
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any


def parse_variant(text: str) -> tuple[str, list[str]]:
    """``NAME:KEY=VALUE,...`` -> (name, ["KEY=VALUE", ...])."""
    name, sep, rest = text.partition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"variant {text!r} is not NAME:KEY=VALUE[,KEY=VALUE...]")
    overrides = [item for item in rest.split(",") if item]
    for item in overrides:
        if "=" not in item:
            raise argparse.ArgumentTypeError(f"variant {text!r}: {item!r} is not KEY=VALUE")
    return name, overrides


def run_grid(
    score: Callable[[Any], Any],
    nets: Sequence[Path],
    columns: Sequence[str],
    jobs: Sequence[Any],
    workers: int,
) -> dict[Path, dict[str, Any]]:
    """``score`` of every job, ``workers`` at a time in worker processes (a progress bar on a terminal only);
    ``jobs`` lists (checkpoint, column) pairs checkpoint by checkpoint. Returns {checkpoint: {column: result}}."""
    from tqdm import tqdm

    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = iter(
            tqdm(pool.map(score, jobs), total=len(jobs), desc="tracking", unit="run", disable=None)
        )
        return {net: {c: next(results) for c in columns} for net in nets}


def print_grid(table: dict[Path, dict[str, Any]], columns: Sequence[str], cell: Callable[[Any], str]) -> None:
    """One markdown row per checkpoint of :func:`run_grid`'s table, each result written by ``cell``."""
    print("| checkpoint | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for net, row in table.items():
        print(f"| {net} | " + " | ".join(cell(row[c]) for c in columns) + " |")


def score(job: tuple[str, Any, str]) -> float:
    """AUC of one checkpoint with one resolved ``DiMPParams`` variant on every sequence of the split (one
    thread)."""
    net_path, params, split = job
    import torch

    torch.set_num_threads(1)
    from eval.evaluation import evaluate_tracker, make_inputs
    from eval.ground_truth import from_sequence
    from eval.protocols import protocol_for_dataset
    from ltr.dataset.synthetic import synthetic_dataset
    from pytracking.evaluation.runner import track_sequence
    from pytracking.tracker.dimp import DiMPTracker, load_network

    loaded = load_network(net_path, "cpu")
    dataset = synthetic_dataset(split=split)
    sequences = [dataset.get_sequence(n) for n in dataset.sequence_names()]
    predictions = {}
    for seq in sequences:
        tracker = DiMPTracker(loaded.net, loaded.geometry, params)
        predictions[seq.name], _ = track_sequence(tracker, seq)
    inputs = make_inputs([from_sequence(s) for s in sequences], predictions)
    return float(evaluate_tracker("dimp", [inputs], protocol_for_dataset("synthetic")).scores["auc"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", nargs="+", required=True, type=Path, help="checkpoints (.pth.tar)")
    ap.add_argument("--variant", action="append", type=parse_variant, required=True)
    ap.add_argument("--param", default="nce_plus_tiny", help="dimp parameter set the variants start from")
    ap.add_argument("--split", default="val", choices=("val", "test"))
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args(argv)
    for path in args.net:
        if not path.is_file():
            ap.error(f"--net: no checkpoint file {path}")
    names = [name for name, _ in args.variant]
    if len(set(names)) != len(names):
        ap.error(f"--variant names must differ, got {names}")
    # resolve (and so check) every variant once, before any tracking starts; the workers get the result
    from ltr.admin.config import ConfigError, apply_overrides
    from pytracking.parameter.dimp import get_parameters

    variants = []
    for name, overrides in args.variant:
        try:
            variants.append(apply_overrides(get_parameters(args.param), overrides))
        except (ConfigError, ValueError) as err:
            ap.error(f"--variant {name}: {err}")

    jobs = [(str(net), params, args.split) for net in args.net for params in variants]
    print(
        f"{len(args.net)} checkpoints x {len(names)} variants of dimp/{args.param} on the synthetic {args.split} "
        f"split, {args.jobs} at a time",
        flush=True,
    )
    table = run_grid(score, args.net, names, jobs, args.jobs)
    print_grid(table, names, lambda auc: f"{auc:.2f}")
    first = names[0]
    print(f"mean AUC over checkpoints (difference to {first}; checkpoints where it is higher):")
    for n in names:
        mean = statistics.mean(row[n] for row in table.values())
        diff = mean - statistics.mean(row[first] for row in table.values())
        wins = sum(row[n] > row[first] for row in table.values())
        print(f"  {n:<16} {mean:6.2f}  {diff:+6.2f}  {wins} of {len(table)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
