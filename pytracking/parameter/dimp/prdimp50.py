"""pytracking's PrDiMP-50 (``prdimp50.pth.tar``, converted with ``python -m ltr.admin.import_pytracking``): the
Newton/softmax filter optimizer (from the network), scores passed through its regularised softmax, and the
not-found threshold 0.04 that suits those probabilities. Every value is pytracking's
``pytracking/parameter/dimp/prdimp50.py``; the crop geometry (352-pixel crops, search area 6, ``inside_major``
borders, maximum scale change 1.5) comes from the converted checkpoint."""

from __future__ import annotations

from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return DiMPParams(train_setting=None, score_preprocess="softmax", target_not_found_threshold=0.04)
