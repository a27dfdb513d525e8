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
