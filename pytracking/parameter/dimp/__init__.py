"""DiMP parameter sets: one module per name with ``parameters() -> DiMPParams``.

``dimp50``, ``super_dimp``, ``prdimp50``: pytracking's trained models, value for value (their networks come
from pytracking's files through ``python -m ltr.admin.import_pytracking``; pass ``--net``).
``nce_plus`` (the paper's DiMP-NCE+), ``kld_is``, ``nce``, ``ml_is`` (same runtime, networks trained with
those box losses), ``nce_plus_tiny`` (the CPU-sized network) and the ablations ``nce_plus_norefine`` (no box
refinement) and ``nce_plus_s1`` (Algorithm S1 instead of the fixed-step ascent), likewise
``nce_plus_tiny_norefine`` / ``nce_plus_tiny_s1``; with ``--net`` any of them runs any checkpoint. The crop
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
    "nce_plus_norefine",
    "nce_plus_s1",
    "nce_plus_tiny_norefine",
    "nce_plus_tiny_s1",
)


def get_parameters(name: str) -> DiMPParams:
    """The :class:`DiMPParams` of parameter set ``name``."""
    if name not in NAMES:
        raise KeyError(f"unknown dimp parameter set {name!r}; choose one of {list(NAMES)}")
    return importlib.import_module(f"pytracking.parameter.dimp.{name}").parameters()
