"""Run a tracker over a dataset and write standard result files.

``python pytracking/run_tracker.py dimp nce_plus --dataset otb|lasot|lasot_test|uav|nfs|trackingnet|
got10k_test|got10k_val|vot|synthetic|folder [--root DIR] [--sequence NAME ...] [--runid K] [--threads N]
[--batch B] [--device auto|cpu|cuda] [--net PATH] [--results DIR] [--visdom] [--debug] [--compile] [--cuda-graph]``

Results: ``{results}/{tracker}/{param}[_{runid:03d}]/{seq}.txt`` (+ ``{seq}_time.txt``), default results root
``$LTR_WORKSPACE/results``; finished sequences are skipped on a rerun.

Everything that does not depend on one sequence is checked once, before any work: the device, the
checkpoint (file, format, config, weights fitting the network it builds), the parameter set against the
checkpoint's kind of network (a warning), the dataset root and the sequence names. Each problem is one
``error:`` line naming the argument or file, exit status 2. A sequence whose data is unusable (unreadable
annotation or frame, no valid first box, frames of changing size) is one ``error:`` line naming the file as
it happens, and the run goes on; an unexpected exception (a bug) is printed with its traceback at the end.
Exit status 1 when any sequence failed (the others' results are kept). ``--debug`` stops at the first failing
sequence with its traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

from ltr.admin.checkpoint import CheckpointError
from ltr.admin.cpu_memory import reuse_freed_memory
from ltr.admin.extras import MissingExtra
from ltr.admin.paths import workspace_dir
from ltr.dataset.base import DatasetError
from ltr.dataset.registry import BENCHMARKS
from pytracking.evaluation.results import result_folder
from pytracking.evaluation.runner import DatasetSpec, Failure, run_dataset
from pytracking.evaluation.tracker_spec import (
    TRACKERS,
    TrackerSpec,
    VisdomSpec,
    prepare_spec,
    tracker_params,
)
from pytracking.tracker.dimp.network import NoCheckpointError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python pytracking/run_tracker.py", description=__doc__.split("\n")[0])
    p.add_argument("tracker", choices=TRACKERS.names)
    p.add_argument(
        "param", help="parameter set: " + "; ".join(f"{t}: {', '.join(q)}" for t, q in TRACKERS.items())
    )
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="dimp: changes of parameter-set fields, e.g. refine=false or refine_mode=s1 refine_decay=0.5 "
        "(dotted for nested fields; unknown keys are an error); needs --name",
    )
    p.add_argument("--name", default=None, help="results folder name instead of the parameter set's")
    p.add_argument("--dataset", required=True, choices=BENCHMARKS.names)
    p.add_argument("--root", default=None, help="dataset root (default: the dataset's environment variable)")
    p.add_argument("--sequence", nargs="+", default=None, metavar="NAME", help="only these sequences")
    p.add_argument("--runid", type=int, default=None, help="run number K: results in {param}_{K:03d}")
    p.add_argument("--threads", type=int, default=1, help="sequences tracked in parallel processes")
    p.add_argument(
        "--batch",
        type=int,
        default=1,
        metavar="B",
        help="dimp: track B sequences in lockstep in one process, their network calls batched (same boxes up "
        "to float rounding; for GPUs)",
    )
    p.add_argument("--device", default="auto", help="auto (GPU if available), cpu, cuda or cuda:K")
    p.add_argument(
        "--net", default=None, help="checkpoint path (default: latest of the param's train setting)"
    )
    p.add_argument("--results", default=None, help="results root (default: $LTR_WORKSPACE/results)")
    p.add_argument("--visdom", action="store_true", help="show frames, boxes and score maps on visdom")
    p.add_argument("--visdom-port", type=int, default=8097)
    p.add_argument("--visdom-server", default="http://127.0.0.1")
    p.add_argument(
        "--debug",
        action="store_true",
        help="stop at the first failing sequence with its traceback (also for data errors)",
    )
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.add_argument(
        "--compile",
        action="store_true",
        help="dimp: torch.compile the per-frame backbone, classifier features and box score (faster frames after a "
        "one-off compilation per process)",
    )
    p.add_argument(
        "--cuda-graph",
        action="store_true",
        help="dimp on a GPU: replay the box refinement's steps as one captured CUDA graph (one launch per frame)",
    )
    return p


def _print_failure(failure: Failure) -> None:
    """One line per data error while the run goes on (tqdm.write keeps the progress bar intact)."""
    if failure.is_data_error:
        tqdm.write(f"error: {failure.name}: {failure.message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_intermixed_args(argv)  # overrides before or after the --options
    visdom = (
        VisdomSpec(args.visdom_server, args.visdom_port, f"{args.tracker}_{args.param}")
        if args.visdom
        else None
    )
    dataset = DatasetSpec(args.dataset, args.root)
    try:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        if args.batch < 1:
            raise ValueError(f"--batch must be >= 1, got {args.batch}")
        if args.batch > 1 and args.tracker != "dimp":
            raise ValueError(f"--batch is for dimp; {args.tracker!r} tracks one sequence at a time")
        if args.batch > 1 and (args.threads > 1 or args.visdom):
            raise ValueError("--batch B tracks in one process: use it without --threads and --visdom")
        swallowed = [s for s in args.sequence or () if "=" in s]
        if swallowed:
            raise ValueError(
                f"--sequence took {swallowed}: put key=value overrides right after the parameter set "
                f"(`{args.tracker} {args.param} {' '.join(swallowed)} --sequence ...`)"
            )
        if args.overrides and args.name is None:
            raise ValueError(
                "key=value overrides need --name NAME for the results folder (e.g. --name "
                f"{args.param}_variant), so that their results do not mix with {args.param!r}'s"
            )
        spec = TrackerSpec(
            args.tracker,
            args.param,
            args.net,
            args.device,
            visdom,
            args.debug,
            args.compile,
            tuple(args.overrides),
            args.name,
            cuda_graph=args.cuda_graph,
        )
        names = dataset.open().sequence_names()  # the root exists and has the layout (workers reopen it)
        unknown = [s for s in args.sequence or () if s not in names]
        if unknown:
            raise ValueError(f"--sequence: dataset {args.dataset!r} has no sequence(s) {unknown}")
        if args.batch > 1 and tracker_params(spec).backend != "torch":
            raise ValueError("--batch: the onnxruntime backend tracks one sequence at a time")
        spec, warnings = prepare_spec(spec, keep_loaded=args.threads == 1)
        results = Path(args.results) if args.results else workspace_dir() / "results"
        result_folder(results, spec.name, spec.results_name, args.runid).mkdir(parents=True, exist_ok=True)
    except (NoCheckpointError, CheckpointError, DatasetError, ValueError, MissingExtra) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the results folder cannot be made (a file in the way, no permission)
        print(
            f"error: cannot create the results folder {err.filename}: {err.strerror or err}", file=sys.stderr
        )
        return 2
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if visdom is not None:
        from pytracking.visdom_view import VisdomView

        try:  # fail before any work when the server (or the visdom package) is not there
            VisdomView(visdom.server, visdom.port, visdom.env)
        except (ConnectionError, MissingExtra) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    reuse_freed_memory()  # a batch of crops on the CPU: see ltr.admin.cpu_memory
    report = run_dataset(  # raises only with --debug (the first failing sequence's exception)
        spec,
        dataset,
        results_root=results,
        runid=args.runid,
        sequences=args.sequence,
        threads=args.threads,
        batch=args.batch,
        progress=args.progress,
        on_failure=_print_failure,
    )
    print(
        f"{report.folder}: {len(report.done)} tracked, {len(report.skipped)} already finished, "
        f"{len(report.failed)} failed"
    )
    for failure in report.failed:
        if not failure.is_data_error:
            print(f"\n--- sequence {failure.name} failed:\n{failure.traceback}", file=sys.stderr)
    if report.failed:
        data = [f.name for f in report.failed if f.is_data_error]
        bugs = [f.name for f in report.failed if not f.is_data_error]
        parts = [f"data errors: {', '.join(data)}"] if data else []
        parts += [f"unexpected errors (tracebacks above): {', '.join(bugs)}"] if bugs else []
        hint = " (--debug shows the traceback of the first)" if data else ""
        print(f"{len(report.failed)} sequence(s) failed; {'; '.join(parts)}{hint}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
