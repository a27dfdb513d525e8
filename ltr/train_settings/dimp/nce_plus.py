"""DiMP-NCE+, the paper's tracker: SuperDiMP training with the NCE+ box loss (beta 0.1)."""

from __future__ import annotations

from ltr.train_settings.dimp.base import DiMPTrainConfig, base_config


def config() -> DiMPTrainConfig:
    return base_config("nce_plus")
