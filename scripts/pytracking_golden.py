"""Golden numbers from pytracking itself, for the tests that pin this toolkit to it.

    python scripts/pytracking_golden.py network --pytracking PATH   # tests/golden/pytracking_network.npz
    python scripts/pytracking_golden.py prdimp --pytracking PATH    # tests/golden/prdimp_classifier.npz
    python scripts/pytracking_golden.py patches --pytracking PATH   # tests/golden/patches.npz
    python scripts/pytracking_golden.py tracker --pytracking PATH --preset super_dimp|dimp50 [--frames 8]
                                                                    # tests/golden/tracker_<preset>.npz
    python scripts/pytracking_golden.py vot_regions --pytracking PATH  # tests/golden/vot_regions.npz
    python scripts/pytracking_golden.py training_processing --pytracking PATH  # tests/golden/training_processing.npz
    python scripts/pytracking_golden.py training_losses --pytracking PATH      # tests/golden/training_losses.npz
    python scripts/pytracking_golden.py training_steps --pytracking PATH       # tests/golden/training_steps.npz
    python scripts/pytracking_golden.py super_dimp_setting --pytracking PATH   # tests/golden/super_dimp_setting.npz

``PATH`` is a checkout of https://github.com/visionml/pytracking (read and run here, never copied into this
repository). Every subcommand takes ``--out FILE`` (default: its file under ``tests/golden/``) and
``--threads N`` (torch CPU threads, default 1: the committed files were made so, and float32 sums depend on
the thread count). Each subcommand is a module of ``scripts/golden/`` whose docstring says what it records
and which test reads it; all import pytracking on the CPU through :func:`scripts.golden.reference.import_reference`
and the file is written atomically.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# this repository's code, imported before pytracking's `ltr` replaces ours in sys.modules
from ltr.admin.io import atomic_write  # noqa: E402
from scripts.golden import (  # noqa: E402
    network,
    patches,
    prdimp,
    super_dimp_setting,
    tracker,
    training_losses,
    training_processing,
    training_steps,
    vot_regions,
)

COMMANDS = {
    "network": network,
    "prdimp": prdimp,
    "patches": patches,
    "tracker": tracker,
    "vot_regions": vot_regions,
    "training_processing": training_processing,
    "training_losses": training_losses,
    "training_steps": training_steps,
    "super_dimp_setting": super_dimp_setting,
}


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> int:
    """Write ``arrays`` to ``path`` as a compressed ``.npz``, atomically; returns the file's size in bytes."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic_write(path, lambda f: f.write(buffer.getvalue()))
    return len(buffer.getvalue())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--pytracking", type=Path, required=True, help="path to a pytracking checkout")
    common.add_argument("--out", type=Path, help="the .npz to write (default: the file under tests/golden/)")
    common.add_argument("--threads", type=int, default=1, help="torch CPU threads (sums depend on it)")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        sub = commands.add_parser(
            name,
            parents=[common],
            help=module.__doc__.split("\n")[0],
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if hasattr(module, "add_arguments"):
            module.add_arguments(sub)
    args = parser.parse_args(argv)
    module = COMMANDS[args.command]
    torch.set_num_threads(max(1, args.threads))
    arrays = module.run(args)
    out = args.out or REPO / "tests" / "golden" / module.OUT.format(**vars(args))
    size = save_npz(out, arrays)
    print(f"wrote {out} ({size / 1024:.0f} KiB, {len(arrays)} arrays)")


if __name__ == "__main__":
    main()
