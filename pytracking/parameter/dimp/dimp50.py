"""pytracking's DiMP-50 (``dimp50.pth``, converted with ``python -m ltr.admin.import_pytracking``): refinement
in the default box space with step 1 for 5 iterations. Every value is pytracking's
``pytracking/parameter/dimp/dimp50.py``; the crop geometry (288-pixel crops, search area 5, replicate borders)
comes from the converted checkpoint."""

from __future__ import annotations

from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return DiMPParams(train_setting=None, refine_space="default", refine_iters=5, refine_step=1.0)
