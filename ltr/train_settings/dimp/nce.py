"""DiMP-NCE: the paper's NCE ablation (the positive is the ground truth itself, no label noise)."""

from __future__ import annotations

from ltr.train_settings.dimp.base import DiMPTrainConfig, base_config


def config() -> DiMPTrainConfig:
    return base_config("nce")
