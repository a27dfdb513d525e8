"""DiMP with a box head trained with the ml_is loss (train setting dimp/ml_is); SuperDiMP runtime values."""

from __future__ import annotations

from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return DiMPParams(train_setting="ml_is")
