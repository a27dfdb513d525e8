"""DiMP-KLD-IS, the paper's baseline: SuperDiMP training with the KLD-IS box loss (label std 0.05)."""

from __future__ import annotations

from ltr.train_settings.dimp.base import DiMPTrainConfig, base_config


def config() -> DiMPTrainConfig:
    return base_config("kld_is")
