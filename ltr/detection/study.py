"""The detection comparison (Table 2) and the AP-versus-M sweep (Figure 3).

``python ltr/run_study.py detection [--methods ml_is,kld_is,nce,nce_plus] [--sweep-m 1,2,4,...,128]
[--tiny | --paper] [key=value ...]``

Methods are the base setting names of :mod:`ltr.train_settings.detection`. With ``--tiny`` (the default when
``COCO_DIR`` is not configured) the ``*_tiny`` settings run on the embedded synthetic set. Every run writes its
own folder ``<workspace>/checkpoints/detection_study/<method>[_m<M>]/``; the study writes results.json,
table.md and (for a sweep) ap_vs_m.png into ``--out`` (default ``<workspace>/study_detection``).
A run whose loss becomes non-finite is recorded as failed (as the paper's missing ML-IS/KLD-IS points).
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

from ltr.admin.config import ConfigError, apply_overrides
from ltr.admin.io import atomic_write, atomic_write_text
from ltr.admin.paths import lookup, workspace_dir
from ltr.admin.registry import UnknownName
from ltr.cli import fail
from ltr.dataset.base import DatasetError

TABLE_METHODS = ("ml_is", "ml_mcmc_1", "ml_mcmc_4", "ml_mcmc_8", "kld_is", "nce", "dsm", "nce_plus")
SWEEP_METHODS = ("ml_is", "kld_is", "nce", "nce_plus")


def _list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _ints(text: str) -> list[int]:
    try:
        values = [int(t) for t in _list(text)]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from err
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"M values must be >= 1, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run_study.py detection", description=__doc__.split("\n\n")[0])
    p.add_argument("overrides", nargs="*", help="config overrides for every run, key=value")
    p.add_argument("--methods", type=_list, default=None, help="comma-separated base settings")
    p.add_argument("--sweep-m", type=_ints, default=None, help="run AP vs M for these M (Figure 3)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--tiny", action="store_true", help="the *_tiny settings (synthetic data, CPU)")
    size.add_argument("--paper", action="store_true", help="the paper settings (COCO_DIR, ResNet50-FPN)")
    p.add_argument(
        "--out", type=Path, default=None, help="output folder (default <workspace>/study_detection)"
    )
    p.add_argument("--workspace", default=None, help="workspace root (default $LTR_WORKSPACE or ./workspace)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    return p


def _plot(path: Path, sweep: dict[str, dict[str, float | None]], ms: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for method, by_m in sweep.items():
        xs = [m for m in ms if by_m.get(str(m)) is not None]
        ax.plot(xs, [by_m[str(m)] for m in xs], marker="o", label=method)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ms, [str(m) for m in ms])
    ax.set_xlabel("Number of samples M")
    ax.set_ylabel("AP (%)")
    ax.grid(True, linestyle="--", alpha=0.5)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    atomic_write(path, lambda f: f.write(buf.getvalue()))


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    from ltr.detection.pipeline import TrainingDiverged
    from ltr.detection.run import run_setting
    from ltr.train_settings.detection import METHOD_FIELDS, SETTINGS

    tiny = args.tiny or (not args.paper and lookup("COCO_DIR") is None)
    methods = args.methods or list(SWEEP_METHODS if args.sweep_m else TABLE_METHODS)
    try:
        for method in methods:
            METHOD_FIELDS[method]  # an unknown one: the registry's error, listing the methods
    except UnknownName as err:
        fail(str(err))
    workspace = workspace_dir(args.workspace)
    out = args.out or workspace / "study_detection"
    ms: list[int | None] = list(args.sweep_m) if args.sweep_m else [None]
    runs: list[dict] = []
    for method in methods:
        for m in ms:
            try:
                cfg = apply_overrides(SETTINGS[f"{method}_tiny" if tiny else method](), args.overrides)
            except ConfigError as err:
                fail(str(err))
            name = method
            if m is not None:
                cfg.num_samples = m
                name = f"{method}_m{m}"
            entry: dict = {"method": method, "M": cfg.num_samples, "setting": name}
            try:
                payload = run_setting(
                    cfg, setting=f"detection_study/{name}", workspace=workspace, device=args.device
                )
                entry.update(
                    metrics=payload["metrics"], seconds_per_iteration=payload["seconds_per_iteration"]
                )
            except TrainingDiverged as err:
                print(f"{name}: failed ({err})")
                entry.update(metrics=None, failed=str(err))
            except (ConfigError, DatasetError) as err:
                fail(str(err))
            runs.append(entry)
    summary = {"tiny": tiny, "overrides": list(args.overrides), "runs": runs}
    lines = ["| method | M | detector AP | AP | AP50 | AP75 | s/iter |", "|---|---|---|---|---|---|---|"]
    for r in runs:
        if r["metrics"] is None:
            lines.append(f"| {r['method']} | {r['M']} | | failed | | | |")
            continue
        d, x = r["metrics"]["detector"], r["metrics"]["refined"]
        lines.append(
            f"| {r['method']} | {r['M']} | {d['AP']:.2f} | {x['AP']:.2f} | {x['AP50']:.2f} | {x['AP75']:.2f} "
            f"| {r['seconds_per_iteration']:.3f} |"
        )
    table = "\n".join(lines) + "\n"
    atomic_write_text(out / "table.md", table)
    if args.sweep_m:
        sweep = {
            method: {
                str(r["M"]): (r["metrics"]["refined"]["AP"] if r["metrics"] else None)
                for r in runs
                if r["method"] == method
            }
            for method in methods
        }
        summary["ap_vs_m"] = sweep
        _plot(out / "ap_vs_m.png", sweep, [m for m in ms if m is not None])
    atomic_write_text(out / "results.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    print(table)
    print(f"wrote {out / 'results.json'}")
    return summary


if __name__ == "__main__":
    main()
