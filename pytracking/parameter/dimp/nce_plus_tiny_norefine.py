"""nce_plus_tiny without box refinement (box = classifier position + previous size): the tiny network's
ablation that shows what the energy-based refinement adds."""

from __future__ import annotations

import dataclasses

from pytracking.parameter.dimp import nce_plus_tiny
from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return dataclasses.replace(nce_plus_tiny.parameters(), refine=False)
