"""DiMP parameter sets: one module per name with ``parameters() -> DiMPParams``.

``dimp50``, ``super_dimp``, ``prdimp50``: pytracking's trained models, value for value (their networks come
from pytracking's files through ``python -m ltr.admin.import_pytracking``; pass ``--net``).
``nce_plus`` (the paper's DiMP-NCE+), ``kld_is``, ``nce``, ``ml_is`` (same runtime, networks trained with
those box losses) and ``nce_plus_tiny`` (the CPU-sized network); with ``--net`` any of them runs any
checkpoint. Ablations are ``key=value`` overrides of a set (``run_tracker.py``): ``refine=false`` (no box
refinement), ``refine_mode=s1 refine_decay=0.5`` (the paper's Algorithm S1 instead of the fixed-step ascent). The crop
geometry is not here: it comes from the network's saved train config.
"""

from __future__ import annotations

import importlib

from pytracking.tracker.dimp.params import DiMPParams

NAMES = (
    "dimp50",
    "super_dimp",
    "prdimp50",
    "nce_plus",
    "kld_is",
    "nce",
    "ml_is",
    "nce_plus_tiny",
)


def get_parameters(name: str) -> DiMPParams:
    """The :class:`DiMPParams` of parameter set ``name``."""
    if name not in NAMES:
        raise KeyError(f"unknown dimp parameter set {name!r}; choose one of {list(NAMES)}")
    return importlib.import_module(f"pytracking.parameter.dimp.{name}").parameters()
