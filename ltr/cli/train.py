"""Train a setting: ``python ltr/run_training.py <module> <setting> [key=value ...] [--resume] ...``.

Ctrl-C prints one line instead of a traceback: the epoch safely on disk and the exact command that resumes
the run (exit status 130).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ltr.admin.checkpoint import CheckpointError
from ltr.admin.config import ConfigError, apply_overrides
from ltr.admin.distributed import DistributedError
from ltr.admin.paths import workspace_dir
from ltr.admin.registry import UnknownName
from ltr.admin.stats import VisdomUnavailable
from ltr.cli import fail
from ltr.dataset.base import DatasetError
from ltr.train_settings import MODULES
from ltr.trainers.interrupt import command_line, interrupted_message


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run_training.py",
        description="Train a setting; key=value pairs override fields of its config.",
    )
    p.add_argument("module", choices=MODULES.names, help="train module")
    p.add_argument("setting", help="setting name within the module (e.g. nce_plus)")
    p.add_argument("overrides", nargs="*", help="config overrides, key=value")
    p.add_argument("--workspace", default=None, help="output root (default: $LTR_WORKSPACE or ./workspace)")
    p.add_argument(
        "--resume", action="store_true", help="continue from the latest checkpoint of this setting"
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--visdom", action="store_true", help="plot training curves on a local visdom server")
    return p


def main(argv: list[str] | None = None) -> None:
    # intermixed: key=value overrides may come before or after the --options
    args = build_parser().parse_intermixed_args(argv)
    module = MODULES[args.module]
    try:
        make_config = module.SETTINGS[args.setting]
    except UnknownName as err:
        fail(str(err))
    workspace = workspace_dir(args.workspace)
    try:
        config = apply_overrides(make_config(), args.overrides)
        module.train(
            config,
            setting=f"{args.module}/{args.setting}",
            workspace=workspace,
            resume=args.resume,
            device=args.device,
            visdom=args.visdom,
        )
    except (ConfigError, DatasetError, CheckpointError, DistributedError, VisdomUnavailable) as err:
        fail(str(err))
    except KeyboardInterrupt as err:  # Ctrl-C: one line on what is kept and how to go on, no traceback
        if os.environ.get("RANK", "0") == "0":
            run = [args.module, args.setting, *args.overrides, "--workspace", str(workspace)]
            run += ["--device", args.device] + (["--visdom"] if args.visdom else [])
            prog = "ltr-train" if Path(sys.argv[0]).name == "ltr-train" else "python ltr/run_training.py"
            resume, restart = command_line(prog, [*run, "--resume"]), command_line(prog, run)
            print(interrupted_message(err, resume, restart), file=sys.stderr)
        sys.exit(130)  # the shell's status for a process ended by SIGINT


if __name__ == "__main__":
    main()
