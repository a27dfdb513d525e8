"""DiMP-NCE+ refined with the paper's Algorithm S1 (a step is kept only if f increases, else the step
length is multiplied by eta = 0.5) instead of the reference trackers' fixed-step ascent.
Uses the nce_plus network."""

from __future__ import annotations

import dataclasses

from pytracking.parameter.dimp import nce_plus
from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return dataclasses.replace(nce_plus.parameters(), refine_mode="s1", refine_decay=0.5)
