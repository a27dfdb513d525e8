"""Command-line entry points (thin wrappers over the library)."""

from __future__ import annotations

import sys
from typing import NoReturn


def fail(message: str) -> NoReturn:
    """End a command on a user error: one ``error: ...`` line on stderr and exit status 2 (as argparse)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)
