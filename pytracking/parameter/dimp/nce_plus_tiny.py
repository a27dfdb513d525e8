"""DiMP-NCE+ with the CPU-sized network of train setting dimp/nce_plus_tiny (128-pixel crops come from its
config); the runtime values are the paper's."""

from __future__ import annotations

from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return DiMPParams(train_setting="nce_plus_tiny")
