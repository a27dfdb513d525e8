"""Run a many-run study: ``python ltr/run_study.py STUDY [options] [key=value ...]``.

STUDY (a name of :data:`STUDIES`) is ``regression_1d`` (below) or ``detection`` (ltr/detection/study.py);
``run_study.py STUDY -h`` lists its options.

regression_1d trains ``--runs`` models per (method, dataset) at once (:mod:`ltr.regression_1d.ensemble`),
evaluates D_KL as in the paper and writes results.json, table.md and figures into ``--out``
(default ``<workspace>/study_1d``). ``--sweep-m 1,4,16,...`` instead runs Figure 2 (D_KL versus M).
``--fast`` is a small demo (3 runs, 10 epochs, the four best methods) that takes a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from ltr.admin.config import ConfigError
from ltr.admin.paths import workspace_dir
from ltr.admin.registry import Registry, UnknownName
from ltr.cli import fail

DEFAULT_METHODS = ("ml_is", "ml_mcmc_1", "ml_mcmc_16", "kld_is", "nce", "sm", "dsm", "nce_plus")
FAST_METHODS = ("ml_is", "kld_is", "nce", "nce_plus")
SWEEP_METHODS = ("ml_is", "kld_is", "nce", "nce_plus")
FAST = {"runs": 3, "epochs": 10, "jobs": 2}


def _int_list(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from err


def _str_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def build_parser() -> argparse.ArgumentParser:
    """The options of the regression_1d study (the command line after its name)."""
    p = argparse.ArgumentParser(
        prog="run_study.py regression_1d", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("overrides", nargs="*", help="config overrides applied to every method, key=value")
    p.add_argument(
        "--methods",
        type=_str_list,
        default=None,
        help="comma-separated settings (default: all but ml_mcmc_256)",
    )
    p.add_argument(
        "--datasets", type=_int_list, default=[1, 2], help="comma-separated datasets (default 1,2)"
    )
    p.add_argument("--runs", type=int, default=None, help="models per method and dataset (default 20)")
    p.add_argument("--epochs", type=int, default=None, help="epochs per model (default 75)")
    p.add_argument("--seed", type=int, default=0, help="base seed of every run's streams (default 0)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default <workspace>/study_1d)")
    p.add_argument("--workspace", default=None, help="workspace root (default $LTR_WORKSPACE or ./workspace)")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="(method, dataset) cells trained in parallel processes (default 1)",
    )
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument(
        "--models-per-chunk",
        type=int,
        default=None,
        help="members per forward pass (default all; fewer need less memory but draw other samples)",
    )
    p.add_argument(
        "--fast", action="store_true", help="demo size: 3 runs, 10 epochs, ML-IS/KLD-IS/NCE/NCE+, 2 jobs"
    )
    p.add_argument(
        "--sweep-m", type=_int_list, default=None, help="run Figure 2 (D_KL vs M) for these M instead"
    )
    p.add_argument(
        "--group-size",
        type=int,
        default=None,
        help="train the runs in ensembles of this many (default: all at once)",
    )
    p.add_argument("--no-progress", action="store_true", help="no tqdm bars")
    return p


def run_regression_1d(argv: list[str]) -> None:
    """The regression_1d study; ``argv``: its options (see :func:`build_parser`)."""
    args = build_parser().parse_args(argv)
    from ltr.regression_1d.study import StudySpec, run_study, run_sweep
    from ltr.train_settings.regression_1d import SETTINGS

    fast = FAST if args.fast else {}
    default_methods = SWEEP_METHODS if args.sweep_m else (FAST_METHODS if args.fast else DEFAULT_METHODS)
    methods = args.methods or list(default_methods)
    try:
        for method in methods:
            SETTINGS[method]  # an unknown one: the registry's error, listing the settings
    except UnknownName as err:
        fail(str(err))
    bad = [d for d in args.datasets if d not in (1, 2)]
    if bad:
        fail(f"--datasets must be 1 and/or 2, got {bad}")
    spec = StudySpec(
        settings=methods,
        datasets=args.datasets,
        runs=args.runs or fast.get("runs", 20),
        epochs=args.epochs or fast.get("epochs", 75),
        seed=args.seed,
        overrides=tuple(args.overrides),
        jobs=args.jobs or fast.get("jobs", 1),
        device=args.device,
        models_per_chunk=args.models_per_chunk,
        progress=not args.no_progress,
        group_size=args.group_size,
    )
    if spec.runs < 1 or spec.epochs < 1:
        fail("--runs and --epochs must be >= 1")
    out = args.out or workspace_dir(args.workspace) / "study_1d"
    try:
        if args.sweep_m:
            sweep = run_sweep(spec, out, args.sweep_m)
            print(f"D_KL versus M (mean of 5 best, averaged over datasets) -> {out / 'sweep_m'}")
            for setting, values in sweep.items():
                print(f"  {setting:9s} " + "  ".join(f"M={m}: {v:.3f}" for m, v in values.items()))
            return
        _, table = run_study(spec, out)
    except ConfigError as err:
        fail(str(err))
    print(table)
    print(f"results: {out / 'results.json'}  table: {out / 'table.md'}  figures: {out / 'figures'}")


#: study name (the command's first argument) -> its runner, called with the rest of the command line.
STUDIES: Registry[Callable[[list[str]], object]] = Registry(
    "study", {"regression_1d": run_regression_1d, "detection": "ltr.detection.study:main"}
)


def main(argv: list[str] | None = None) -> None:
    """``run_study.py STUDY ...``: the study's runner on the rest of the command line. Returns None, so the
    ``ltr-study`` console script exits with status 0 whatever the runner returns."""
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(
        prog="run_study.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("study", choices=STUDIES.names)
    p.add_argument(
        "options", nargs=argparse.REMAINDER, help="the study's options and overrides (run_study.py STUDY -h)"
    )
    args = p.parse_args(argv)
    STUDIES[args.study](args.options)


if __name__ == "__main__":
    main()
