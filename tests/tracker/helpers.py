"""Tiny random-weight DiMP networks, checkpoints and trackers for the tracker tests."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from ltr.admin.checkpoint import FORMAT, VERSION, save_checkpoint
from ltr.admin.config import to_dict
from ltr.models.tracking import build_dimpnet
from ltr.train_settings.dimp import SETTINGS
from pytracking.tracker.dimp import DiMPParams, DiMPTracker, random_network

CROP = 64  # 4 x 4 classifier features


def tiny_config(crop_size: int = CROP):
    cfg = SETTINGS["nce_plus_tiny"]()
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, crop_size=crop_size))


def write_tiny_checkpoint(path: Path, crop_size: int = CROP, seed: int = 0) -> Path:
    """A real checkpoint file (ltr.admin.checkpoint format) of a random-weight tiny network."""
    cfg = tiny_config(crop_size)
    torch.manual_seed(seed)
    net = build_dimpnet(cfg.net)
    save_checkpoint(
        path,
        {
            "format": FORMAT,
            "version": VERSION,
            "setting": "dimp/nce_plus_tiny",
            "epoch": 1,
            "config": to_dict(cfg),
            "net": net.state_dict(),
        },
    )
    return path


def tiny_tracker(**params) -> DiMPTracker:
    """A tracker on a random tiny network with ``CROP``-pixel crops; ``params`` override DiMPParams fields."""
    loaded = random_network("nce_plus_tiny", crop_size=CROP)
    return DiMPTracker(loaded.net, loaded.geometry, DiMPParams(train_setting="nce_plus_tiny", **params))


def random_frame(rng: np.random.Generator, height: int, width: int, channels: int | None = 3) -> np.ndarray:
    shape = (height, width) if channels is None else (height, width, channels)
    return rng.integers(0, 256, shape, dtype=np.uint8)


def whole_map_products(monkeypatch) -> None:
    """Make the tracker's box scorers pool with PyTorch products over the whole maps, as the graphed path
    does: on a CPU the eager path otherwise pools with the C++ kernel or restricts the products to the cells
    the boxes read (sums that differ from the whole maps' by rounding)."""
    from pytracking.tracker.dimp import tracker as tracker_module

    original = tracker_module.BoxScorer
    monkeypatch.setattr(
        tracker_module,
        "BoxScorer",
        lambda *a, **k: original(*a, **{**k, "restrict_cells": False, "kernel": False}),
    )
