"""pytracking's SuperDiMP (``super_dimp.pth.tar``, converted with ``python -m ltr.admin.import_pytracking``):
the DiMP-50 classifier with PrDiMP's box head, refined in the relative box space. Every value is pytracking's
``pytracking/parameter/dimp/super_dimp.py``; the crop geometry (352-pixel crops, search area 6,
``inside_major`` borders, maximum scale change 1.5) comes from the converted checkpoint."""

from __future__ import annotations

from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return DiMPParams(train_setting=None)
