"""Tracking quality over training seeds: the tiny DiMP-NCE+ recipe against OpenCV CSRT on the synthetic test set.

python benchmarks/quality_seeds.py --workspace W [--seeds 0 1 2] [--videos 3200] [--epochs 45] [--lr-step 32]
                                   [--jobs 2] [--train-threads 1] [--device cpu|cuda|auto]
                                   [--train-option KEY=VALUE ...]

For every seed: trains ``dimp nce_plus_tiny`` on ``--videos`` synthetic training videos for ``--epochs``
epochs (learning rates x0.2 after ``--lr-step``; the defaults are the best recipe found: 22-30 minutes
of training per seed on one thread here) into ``W/seed{S}`` (skipped when its last checkpoint exists;
an interrupted run resumes from its latest checkpoint), then tracks the 20 synthetic test videos with its
last checkpoint, refinement on (``dimp/nce_plus_tiny_{S:03d}``) and off (``dimp/nce_plus_tiny_norefine_{S:03d}``).
OpenCV CSRT and the static tracker run on the same videos through the same runner, and everything is scored
together by ``eval/run_eval.py`` (tables and plots in ``W/eval``). Every step is the command line a user runs;
the commands are printed, and their output goes to ``W/logs``. Finished results are kept, so a rerun only
does what is missing.

Printed: each seed's AUC with and without refinement and its difference to CSRT's AUC, evaluated in the
same run, then the mean, standard deviation and minimum over seeds and how many seeds score above CSRT.
Up to ``--jobs`` trainings (and trackings) run at once, each with ``--train-threads`` torch threads.
``--train-option`` passes more config overrides to every training (e.g. ``data.search_area_factor=4.0
net.label_init_sigma=0.5``). A workspace holds one recipe: ``W/recipe.json`` records it, and a rerun with a
different one stops with an error instead of mixing checkpoints.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ltr.admin.io import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]


def run_logged(cmd: list[str], log: Path, threads: int) -> None:
    """Run ``cmd`` from the repository root with ``threads`` torch threads, stdout and stderr to ``log``.

    Raises ``RuntimeError`` naming the command and the log when it fails.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    sys.stdout.write(f"$ {shlex.join(cmd)} > {log}\n")  # one write: jobs print from several threads
    sys.stdout.flush()
    with log.open("a") as out:
        code = subprocess.call(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    if code != 0:
        raise RuntimeError(f"exit {code}: {shlex.join(cmd)} (see {log})")


def checkpoint(workspace: Path, seed: int, epoch: int) -> Path:
    return workspace / f"seed{seed}" / "checkpoints" / "dimp" / "nce_plus_tiny" / f"ep{epoch:04d}.pth.tar"


def train(args: argparse.Namespace, seed: int) -> Path:
    """Train one seed (or resume it); returns the path of its last checkpoint."""
    last = checkpoint(args.workspace, seed, args.epochs)
    if last.is_file():
        return last
    seed_dir = args.workspace / f"seed{seed}"
    options = json.dumps({"synthetic:train": {"num_sequences": args.videos}})
    cmd = [sys.executable, "ltr/run_training.py", "dimp", "nce_plus_tiny", f"dataset_options={options}"]
    cmd += [f"trainer.epochs={args.epochs}", f"trainer.lr_step={args.lr_step}", f"trainer.seed={seed}"]
    cmd += args.train_option
    cmd += ["--workspace", str(seed_dir), "--device", args.device]
    if (seed_dir / "checkpoints").is_dir():
        cmd.append("--resume")
    run_logged(cmd, args.workspace / "logs" / f"train_seed{seed}.log", args.train_threads)
    if not last.is_file():
        raise RuntimeError(f"training seed {seed} finished without {last}")
    return last


def track(args: argparse.Namespace, tracker: str, param: str, *, net: Path | None, runid: int | None) -> None:
    """Track the synthetic test set into ``W/results`` (the runner skips finished sequences)."""
    # the ablation is the parameter set with refinement off, under its own results name
    base, overrides = (
        ("nce_plus_tiny", ["refine=false", "--name", param]) if param.endswith("_norefine") else (param, [])
    )
    cmd = [sys.executable, "pytracking/run_tracker.py", tracker, base, *overrides, "--dataset", "synthetic"]
    cmd += ["--device", args.device, "--results", str(args.workspace / "results"), "--no-progress"]
    if net is not None:
        cmd += ["--net", str(net)]
    if runid is not None:
        cmd += ["--runid", str(runid)]
    suffix = "" if runid is None else f"_{runid:03d}"
    run_logged(cmd, args.workspace / "logs" / f"track_{tracker}_{param}{suffix}.log", args.train_threads)


def check_recipe(args: argparse.Namespace) -> None:
    """Record the training recipe in ``W/recipe.json``, or raise ``SystemExit`` if it holds another one."""
    recipe = {
        "videos": args.videos,
        "epochs": args.epochs,
        "lr_step": args.lr_step,
        "train_options": args.train_option,
    }
    path = args.workspace / "recipe.json"
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved != recipe:
            raise SystemExit(
                f"{path} holds the recipe {saved}, not this run's {recipe}: use another --workspace"
            )
        return
    args.workspace.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(recipe, indent=1) + "\n")


def seed_key(param: str, seed: int) -> str:
    return f"dimp/{param}_{seed:03d}"


def summary(report: dict, seeds: list[int]) -> str:
    """The per-seed table and the statistics over seeds, from run_eval's JSON report."""
    csrt = report["csrt/default"]["auc"]
    static = report["static/default"]["auc"]
    lines = [
        "| seed | AUC, refinement on | AUC, refinement off | refinement gain | AUC - CSRT |",
        "|---:|---:|---:|---:|---:|",
    ]
    on = [report[seed_key("nce_plus_tiny", s)]["auc"] for s in seeds]
    off = [report[seed_key("nce_plus_tiny_norefine", s)]["auc"] for s in seeds]
    for s, a, b in zip(seeds, on, off):
        lines.append(f"| {s} | {a:.2f} | {b:.2f} | {a - b:+.2f} | {a - csrt:+.2f} |")
    std = f"{statistics.stdev(on):.2f}" if len(on) > 1 else "n/a (one seed)"
    lines += [
        "",
        f"CSRT {csrt:.2f}, static {static:.2f} (same evaluation)",
        f"refinement on: mean {statistics.mean(on):.2f}, std {std}, min {min(on):.2f}, max {max(on):.2f}; "
        f"refinement off: mean {statistics.mean(off):.2f}",
        f"seeds above CSRT: {sum(a > csrt for a in on)} of {len(on)}; "
        f"refinement helps in {sum(a > b for a, b in zip(on, off))} of {len(on)}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workspace", type=Path, required=True, help="training runs, results, logs and eval")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--videos", type=int, default=3200, help="synthetic training videos (the demo: 200)")
    p.add_argument("--epochs", type=int, default=45, help="training epochs (the demo: 10)")
    p.add_argument("--lr-step", type=int, default=32, help="epochs before the learning rates drop x0.2")
    p.add_argument("--jobs", type=int, default=2, help="trainings / trackings at once")
    p.add_argument("--train-threads", type=int, default=1, help="torch threads per job")
    p.add_argument(
        "--train-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another training config override (repeatable)",
    )
    p.add_argument(
        "--device", default="cpu", choices=["auto", "cpu", "cuda"], help="for training and tracking"
    )
    args = p.parse_args(argv)
    if len(set(args.seeds)) != len(args.seeds):
        p.error(f"--seeds repeats a seed: {args.seeds}")
    if not 0 < args.lr_step <= args.epochs:
        p.error(f"--lr-step {args.lr_step} must be in 1..--epochs ({args.epochs})")
    bad = [o for o in args.train_option if "=" not in o]
    if bad:
        p.error(f"--train-option takes KEY=VALUE, got {bad}")
    args.workspace = args.workspace.resolve()
    check_recipe(args)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        nets = dict(zip(args.seeds, pool.map(lambda s: train(args, s), args.seeds)))
        jobs = [("csrt", "default", None, None), ("static", "default", None, None)]
        for s in args.seeds:
            jobs += [("dimp", "nce_plus_tiny", nets[s], s), ("dimp", "nce_plus_tiny_norefine", nets[s], s)]
        list(pool.map(lambda j: track(args, j[0], j[1], net=j[2], runid=j[3]), jobs))

    keys = ["static/default", "csrt/default"]
    keys += [seed_key(q, s) for s in args.seeds for q in ("nce_plus_tiny", "nce_plus_tiny_norefine")]
    report_path = args.workspace / "eval" / "results.json"
    cmd = [sys.executable, "eval/run_eval.py", "--dataset", "synthetic", "--trackers", *keys]
    cmd += ["--results", str(args.workspace / "results"), "--out", str(report_path.parent)]
    run_logged(cmd, args.workspace / "logs" / "eval.log", args.train_threads)
    report = json.loads(report_path.read_text())
    print(
        f"\n{len(args.seeds)} seeds x dimp nce_plus_tiny: {args.videos} videos, {args.epochs} epochs "
        f"(lr x0.2 after {args.lr_step}); synthetic test set, {report_path}"
    )
    print(summary(report, args.seeds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
