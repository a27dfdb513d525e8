"""Optional per-stage wall-clock timing of the tracker (off by default: no device synchronisation then)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import torch


class StageTimer:
    """Accumulates seconds per named stage; synchronises the device around each stage when enabled."""

    def __init__(self, device: torch.device | str = "cpu", *, enabled: bool = True) -> None:
        self.device = torch.device(device)
        self.enabled = enabled
        self.totals: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.totals[name] += time.perf_counter() - start
            self.counts[name] += 1

    def reset(self) -> None:
        self.totals.clear()
        self.counts.clear()


#: a timer that does nothing (the tracker's default)
NULL_TIMER = StageTimer(enabled=False)
