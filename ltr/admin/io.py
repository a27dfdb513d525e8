"""Atomic file writes: write to a temporary file in the target directory, fsync, then rename."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], None]) -> Path:
    """Create/replace ``path`` atomically with what ``write(fileobj)`` writes (binary mode)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Atomically write UTF-8 text."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))
