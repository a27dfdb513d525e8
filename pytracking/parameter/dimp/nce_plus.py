"""The paper's DiMP-NCE+: SuperDiMP runtime values, box refinement by the reference's fixed-step ascent.

Switch to the paper's Algorithm S1 with ``refine_mode="s1"`` (decay eta, e.g. ``refine_decay=0.5``) or turn
refinement off with ``refine=False`` (``dataclasses.replace(parameters(), ...)``).
"""

from __future__ import annotations

from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return DiMPParams(train_setting="nce_plus", refine=True, refine_mode="plain", refine_decay=1.0)
