"""DiMP-NCE+ without box refinement (box = classifier position + previous size): the ablation that shows what
the energy-based refinement adds. Uses the nce_plus network."""

from __future__ import annotations

import dataclasses

from pytracking.parameter.dimp import nce_plus
from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return dataclasses.replace(nce_plus.parameters(), refine=False)
