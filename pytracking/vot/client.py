"""Drive a TraX tracker process from Python, as the VOT toolkit does (for the benchmark and the tests).

:class:`TraxSession` starts ``command`` with pipes on its stdin/stdout (the toolkit's default transport),
performs the handshake and sends ``initialize`` / ``frame`` requests with image paths on the ``color``
channel; each answer is the reported rectangle (xywh) and its properties. Timings are wall seconds.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class TraxSession:
    """One tracker process and its TraX connection; use as a context manager (the process is ended)."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None = None, timeout: int = 30):
        from trax.client import Client

        start = time.perf_counter()
        self.log: list[str] = []
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **(env or {})},
            bufsize=0,
        )
        self.client = Client(
            stream=(self.process.stdin.fileno(), self.process.stdout.fileno()),
            timeout=timeout,
            log=self.log.append,
        )
        self.startup_seconds = time.perf_counter() - start

    def _images(self, path: str | Path) -> dict[str, Any]:
        from trax import FileImage, ImageChannel

        return {ImageChannel.COLOR: FileImage.create(str(path))}

    @staticmethod
    def _answer(status: list) -> tuple[list[float], dict[str, str]]:
        from pytracking.vot.server import region_values

        region, properties = status[0]
        return region_values(region), properties

    def initialize(self, image: str | Path, region: Sequence[float]) -> tuple[list[float], dict[str, str]]:
        """Start on ``image`` with ``region``: 4 numbers (rectangle xywh) or 2K numbers (polygon)."""
        from trax.region import Polygon, Rectangle

        values = [float(v) for v in region]
        trax_region = (
            Rectangle.create(*values)
            if len(values) == 4
            else Polygon.create(list(zip(values[0::2], values[1::2], strict=True)))
        )
        status, _ = self.client.initialize(self._images(image), [(trax_region, {})], {})
        return self._answer(status)

    def frame(self, image: str | Path) -> tuple[list[float], dict[str, str]]:
        status, _ = self.client.frame(self._images(image), {}, [])
        return self._answer(status)

    def close(self) -> int:
        """Send ``quit`` (if the tracker is still there) and wait for the process; returns its exit status."""
        try:
            self.client.quit()
        except Exception:  # the tracker already ended the session
            pass
        try:
            return self.process.wait(timeout=30)
        finally:
            for stream in (self.process.stdin, self.process.stdout):
                stream.close()

    def __enter__(self) -> TraxSession:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.close()
