"""DiMP-ML-IS: maximum likelihood with importance sampling as the box loss."""

from __future__ import annotations

from ltr.train_settings.dimp.base import DiMPTrainConfig, base_config


def config() -> DiMPTrainConfig:
    return base_config("ml_is")
