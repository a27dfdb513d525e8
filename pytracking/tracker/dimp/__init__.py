"""DiMP tracker with energy-based box refinement: :class:`DiMPTracker`, :func:`build_tracker`."""

from __future__ import annotations

from pytracking.tracker.dimp.network import LoadedNet, default_checkpoint, load_network, random_network
from pytracking.tracker.dimp.params import DiMPParams, Geometry
from pytracking.tracker.dimp.tracker import DiMPTracker

__all__ = [
    "DiMPParams",
    "DiMPTracker",
    "Geometry",
    "LoadedNet",
    "default_checkpoint",
    "load_network",
    "random_network",
]
