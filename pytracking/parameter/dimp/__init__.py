"""DiMP parameter sets: one module per name with ``parameters() -> DiMPParams``.

``dimp50``, ``super_dimp``, ``prdimp50``: pytracking's trained models, value for value (their networks come
from pytracking's files through ``python -m ltr.admin.import_pytracking``; pass ``--net``).
``nce_plus`` (the paper's DiMP-NCE+), ``kld_is``, ``nce``, ``ml_is`` (same runtime, networks trained with
those box losses), ``nce_plus_tiny`` (the CPU-sized network) and ``nce_plus_tiny_long`` (the same network,
trained longer); with ``--net`` any of them runs any checkpoint. Ablations are ``key=value`` overrides of a
set (``run_tracker.py``): ``refine=false`` (no box refinement), ``refine_mode=s1 refine_decay=0.5`` (the
paper's Algorithm S1 instead of the fixed-step ascent). The crop geometry is not here: it comes from the
network's saved train config.
"""

from __future__ import annotations

from collections.abc import Callable

from ltr.admin.registry import Registry
from pytracking.tracker.dimp.params import DiMPParams

#: parameter-set name -> its module's ``parameters`` function (imported on lookup).
PARAMETERS: Registry[Callable[[], DiMPParams]] = Registry(
    "dimp parameter set",
    {
        "dimp50": "pytracking.parameter.dimp.dimp50:parameters",
        "super_dimp": "pytracking.parameter.dimp.super_dimp:parameters",
        "prdimp50": "pytracking.parameter.dimp.prdimp50:parameters",
        "nce_plus": "pytracking.parameter.dimp.nce_plus:parameters",
        "kld_is": "pytracking.parameter.dimp.kld_is:parameters",
        "nce": "pytracking.parameter.dimp.nce:parameters",
        "ml_is": "pytracking.parameter.dimp.ml_is:parameters",
        "nce_plus_tiny": "pytracking.parameter.dimp.nce_plus_tiny:parameters",
        "nce_plus_tiny_long": "pytracking.parameter.dimp.nce_plus_tiny_long:parameters",
    },
)


def get_parameters(name: str) -> DiMPParams:
    """The :class:`DiMPParams` of parameter set ``name`` (:class:`~ltr.admin.registry.UnknownName` if none)."""
    return PARAMETERS[name]()
