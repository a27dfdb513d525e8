"""``make demo``: the main job on the embedded default data, end to end, through the public commands.

Pipelines:

- ``tracking`` (default): train ``dimp nce_plus_tiny`` on the synthetic training videos, track the synthetic
  OTB-layout test set with it (refinement on, and once more with refinement off), evaluate both runs and
  print the AUC table; plots land in ``<workspace>/demo/eval``.
- ``regression_1d``: the paper's 1D study in its fast variant.

Each stage is the command a user would type, run as a subprocess, so the demo exercises exactly what the
README documents. A stage that fails stops the demo with its exit code.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ltr.admin.registry import Registry

REPO = Path(__file__).resolve().parents[2]
#: the test set's 20 videos tracked in lockstep: the tiny network's many small operations are then shared by
#: all sequences (the same boxes up to float rounding, several times the frames per second on a CPU)
TRACK_BATCH = 20


def _run(title: str, args: list[str], env: dict[str, str]) -> None:
    cmd = [sys.executable, *args]
    print(f"\n=== {title}\n$ python {shlex.join(args)}", flush=True)
    start = time.perf_counter()
    code = subprocess.call(cmd, cwd=REPO, env=env)
    if code != 0:
        sys.exit(f"demo: stage '{title}' failed with exit code {code}")
    print(f"=== {title}: done in {time.perf_counter() - start:.0f} s", flush=True)


def tracking_pipeline(workspace: Path, env: dict[str, str], *, quick: bool) -> None:
    results = workspace / "results"
    train = ["ltr/run_training.py", "dimp", "nce_plus_tiny", "--workspace", str(workspace), "--device", "cpu"]
    if quick:
        train += ["trainer.epochs=1", "data.samples_per_epoch=16", "data.val_samples_per_epoch=0"]
    _run("train dimp nce_plus_tiny on the synthetic videos", train, env)
    track = [
        "pytracking/run_tracker.py",
        "dimp",
        "nce_plus_tiny",
        "--dataset",
        "synthetic",
        "--device",
        "cpu",
        "--batch",
        str(TRACK_BATCH),
    ]
    track += ["--results", str(results)]
    _run("track the synthetic test set (energy-based refinement on)", track, env)
    _run(
        "track again with refinement off (the ablation)",
        [*track, "refine=false", "--name", "nce_plus_tiny_norefine"],
        env,
    )
    _run(
        "evaluate",
        [
            "eval/run_eval.py",
            "--dataset",
            "synthetic",
            "--trackers",
            "dimp/nce_plus_tiny",
            "dimp/nce_plus_tiny_norefine",
            "--results",
            str(results),
            "--out",
            str(workspace / "demo" / "eval"),
        ],
        env,
    )
    print(f"\nplots and tables: {workspace / 'demo' / 'eval'}")


def regression_1d_pipeline(workspace: Path, env: dict[str, str], *, quick: bool) -> None:
    args = ["ltr/run_study.py", "regression_1d", "--fast", "--out", str(workspace / "study_1d")]
    if quick:
        args += ["--runs", "2", "--epochs", "2", "--datasets", "2"]
    _run("1D regression study (fast variant)", args, env)


#: pipeline name (``--pipeline``) -> its runner.
PIPELINES: Registry[Callable[..., None]] = Registry(
    "demo pipeline", {"tracking": tracking_pipeline, "regression_1d": regression_1d_pipeline}
)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="demo", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument(
        "--workspace", type=Path, default=Path("workspace"), help="output root (default ./workspace)"
    )
    p.add_argument("--pipeline", choices=PIPELINES.names, default="tracking")
    p.add_argument("--quick", action="store_true", help="smoke-test sizes (seconds, not a meaningful result)")
    args = p.parse_args(argv)
    workspace = args.workspace.resolve()
    env = dict(os.environ, LTR_WORKSPACE=str(workspace))
    PIPELINES[args.pipeline](workspace, env, quick=args.quick)


if __name__ == "__main__":
    main()
