"""python eval/pack_results.py got10k|trackingnet --tracker T --param P [--results DIR] --out FILE.zip"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from eval.frame_errors import ResultError
from eval.packing import pack_got10k, pack_trackingnet
from ltr.admin.paths import workspace_dir


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python eval/pack_results.py", description="Pack server submissions.")
    p.add_argument("benchmark", choices=["got10k", "trackingnet"])
    p.add_argument("--tracker", required=True)
    p.add_argument("--param", required=True)
    p.add_argument("--results", default=None, help="results root (default: $LTR_WORKSPACE/results)")
    p.add_argument("--out", required=True, help="zip file to write")
    p.add_argument("--run", type=int, default=0, help="trackingnet: which run to pack (index, default 0)")
    p.add_argument("--decimals", type=int, default=None, help="decimals per value (got10k 3, trackingnet 2)")
    args = p.parse_args(argv)
    results = args.results or workspace_dir() / "results"
    try:
        if args.benchmark == "got10k":
            report = pack_got10k(results, args.tracker, args.param, args.out, decimals=args.decimals or 3)
        else:
            report = pack_trackingnet(
                results,
                args.tracker,
                args.param,
                args.out,
                run=args.run,
                decimals=2 if args.decimals is None else args.decimals,
            )
    except ResultError as err:
        p.exit(2, f"error: {err}\n")
    except OSError as err:  # the zip cannot be written there (no such folder, no permission, ...)
        p.exit(2, f"error: cannot write {err.filename or args.out}: {err.strerror or err}\n")
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(
        f"wrote {report.path}: {report.sequences} sequences, {report.runs} run(s), "
        f"{len(report.members)} files"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
