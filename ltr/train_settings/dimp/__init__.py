"""DiMP train settings: the paper's DiMP-NCE+ and its box-loss variants, plus a CPU-sized one.

``python ltr/run_training.py dimp <setting>``; settings are in one small module each, deriving from
:mod:`ltr.train_settings.dimp.base`.
"""

from __future__ import annotations

from collections.abc import Callable

from ltr.train_settings.dimp import kld_is, ml_is, nce, nce_plus, nce_plus_tiny
from ltr.train_settings.dimp.base import DiMPTrainConfig
from ltr.train_settings.dimp.train import train

#: setting name -> config factory.
SETTINGS: dict[str, Callable[[], DiMPTrainConfig]] = {
    "nce_plus": nce_plus.config,
    "kld_is": kld_is.config,
    "nce": nce.config,
    "ml_is": ml_is.config,
    "nce_plus_tiny": nce_plus_tiny.config,
}

__all__ = ["SETTINGS", "DiMPTrainConfig", "train"]
