"""DiMP with a box head trained with the kld_is loss (train setting dimp/kld_is); SuperDiMP runtime values."""

from __future__ import annotations

from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return DiMPParams(train_setting="kld_is")
