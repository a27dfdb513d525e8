"""nce_plus_tiny refined with the paper's Algorithm S1 (accept a step only if f increases, else multiply the
step length by eta = 0.5) instead of the reference trackers' fixed-step ascent."""

from __future__ import annotations

import dataclasses

from pytracking.parameter.dimp import nce_plus_tiny
from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return dataclasses.replace(nce_plus_tiny.parameters(), refine_mode="s1", refine_decay=0.5)
