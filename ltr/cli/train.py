"""Train a setting: ``python ltr/run_training.py <module> <setting> [key=value ...] [--resume] ...``."""

from __future__ import annotations

import argparse
import sys

from ltr.admin.checkpoint import CheckpointError
from ltr.admin.config import ConfigError, apply_overrides
from ltr.admin.distributed import DistributedError
from ltr.admin.paths import workspace_dir
from ltr.admin.stats import VisdomUnavailable
from ltr.dataset.base import DatasetError
from ltr.train_settings import MODULES, load_module


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run_training.py",
        description="Train a setting; key=value pairs override fields of its config.",
    )
    p.add_argument("module", choices=sorted(MODULES), help="train module")
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
    module = load_module(args.module)
    if args.setting not in module.SETTINGS:
        sys.exit(
            f"error: unknown setting {args.setting!r} for {args.module}; "
            f"choose one of {sorted(module.SETTINGS)}"
        )
    try:
        config = apply_overrides(module.SETTINGS[args.setting](), args.overrides)
        module.train(
            config,
            setting=f"{args.module}/{args.setting}",
            workspace=workspace_dir(args.workspace),
            resume=args.resume,
            device=args.device,
            visdom=args.visdom,
        )
    except (ConfigError, DatasetError, CheckpointError, DistributedError, VisdomUnavailable) as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
