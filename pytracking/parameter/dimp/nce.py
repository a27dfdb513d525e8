"""DiMP with a box head trained with the nce loss (train setting dimp/nce); SuperDiMP runtime values."""

from __future__ import annotations

from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return DiMPParams(train_setting="nce")
