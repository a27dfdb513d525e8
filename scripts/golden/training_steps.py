"""(being written) pytracking's training steps, for the parity tests of issue 29."""

from __future__ import annotations

import argparse

import numpy as np

OUT = "training_steps.npz"


def run(args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The golden file's arrays (see the module docstring)."""
    raise SystemExit("error: this subcommand is not written yet")
