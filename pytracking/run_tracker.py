"""Run a tracker over a dataset and write standard result files.

``python pytracking/run_tracker.py dimp nce_plus --dataset otb|lasot|uav|nfs|trackingnet|got10k_test|
got10k_val|vot|synthetic|folder [--root DIR] [--sequence NAME ...] [--runid K] [--threads N]
[--device auto|cpu|cuda] [--net PATH] [--results DIR] [--visdom] [--debug] [--compile] [--int8]``

Results: ``{results}/{tracker}/{param}[_{runid:03d}]/{seq}.txt`` (+ ``{seq}_time.txt``), default results root
``$LTR_WORKSPACE/results``; finished sequences are skipped on a rerun. Exit status 1 when any sequence failed
(each is printed with its traceback; the others' results are kept), 2 for bad arguments or a missing network.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ltr.admin.checkpoint import CheckpointError
from ltr.admin.paths import workspace_dir
from ltr.dataset.base import DatasetError
from pytracking.evaluation.runner import DATASET_NAMES, DatasetSpec, run_dataset
from pytracking.evaluation.tracker_spec import TRACKER_PARAMS, TRACKERS, TrackerSpec, VisdomSpec, network_path
from pytracking.tracker.dimp.network import NoCheckpointError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python pytracking/run_tracker.py", description=__doc__.split("\n")[0])
    p.add_argument("tracker", choices=TRACKERS)
    p.add_argument(
        "param", help="parameter set: " + "; ".join(f"{t}: {', '.join(q)}" for t, q in TRACKER_PARAMS.items())
    )
    p.add_argument("--dataset", required=True, choices=sorted(DATASET_NAMES))
    p.add_argument("--root", default=None, help="dataset root (default: the dataset's environment variable)")
    p.add_argument("--sequence", nargs="+", default=None, metavar="NAME", help="only these sequences")
    p.add_argument("--runid", type=int, default=None, help="run number K: results in {param}_{K:03d}")
    p.add_argument("--threads", type=int, default=1, help="sequences tracked in parallel processes")
    p.add_argument("--device", default="auto", help="auto (GPU if available), cpu, cuda or cuda:K")
    p.add_argument(
        "--net", default=None, help="checkpoint path (default: latest of the param's train setting)"
    )
    p.add_argument("--results", default=None, help="results root (default: $LTR_WORKSPACE/results)")
    p.add_argument("--visdom", action="store_true", help="show frames, boxes and score maps on visdom")
    p.add_argument("--visdom-port", type=int, default=8097)
    p.add_argument("--visdom-server", default="http://127.0.0.1")
    p.add_argument(
        "--debug", action="store_true", help="stop at the first failing sequence with its traceback"
    )
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.add_argument(
        "--compile",
        action="store_true",
        help="dimp: torch.compile the per-frame backbone and classifier features (faster frames after a "
        "one-off compilation per process)",
    )
    p.add_argument(
        "--int8",
        action="store_true",
        help="dimp: the heads' per-frame convolutions and the refinement's per-box products in int8 on a CPU "
        "(params.int8_heads; faster at the paper's widths, about 1%% quantisation noise in their outputs)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    visdom = (
        VisdomSpec(args.visdom_server, args.visdom_port, f"{args.tracker}_{args.param}")
        if args.visdom
        else None
    )
    try:
        spec = TrackerSpec(
            args.tracker, args.param, args.net, args.device, visdom, args.debug, args.compile, args.int8
        )
        if spec.needs_network:
            net = network_path(spec)
            if not Path(net).is_file():
                raise CheckpointError(f"{net}: no such checkpoint file (--net)")
            spec = dataclasses.replace(spec, net=net)
    except (NoCheckpointError, CheckpointError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if visdom is not None:
        from pytracking.visdom_view import VisdomView

        try:  # fail before any work when the server is not there
            VisdomView(visdom.server, visdom.port, visdom.env)
        except ConnectionError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    results = Path(args.results) if args.results else workspace_dir() / "results"
    try:
        report = run_dataset(
            spec,
            DatasetSpec(args.dataset, args.root),
            results_root=results,
            runid=args.runid,
            sequences=args.sequence,
            threads=args.threads,
            progress=args.progress,
        )
    except (DatasetError, KeyError, ValueError) as err:  # dataset missing/misconfigured, unknown sequence
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"{report.folder}: {len(report.done)} tracked, {len(report.skipped)} already finished, "
        f"{len(report.failed)} failed"
    )
    for name, tb in report.failed:
        print(f"\n--- sequence {name} failed:\n{tb}", file=sys.stderr)
    if report.failed:
        print(f"failed sequences: {', '.join(n for n, _ in report.failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
