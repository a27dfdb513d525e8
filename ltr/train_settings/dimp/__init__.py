"""DiMP train settings: the paper's DiMP-NCE+ and its box-loss variants, plus a CPU-sized one
(``nce_plus_tiny``, the demo's) and its longer recipe (``nce_plus_tiny_long``).

``python ltr/run_training.py dimp <setting>``; settings are in one small module each, deriving from
:mod:`ltr.train_settings.dimp.base`.
"""

from __future__ import annotations

from collections.abc import Callable

from ltr.admin.registry import Registry
from ltr.train_settings.dimp.base import DiMPTrainConfig
from ltr.train_settings.dimp.train import train

#: setting name -> config factory (its module is imported on lookup).
SETTINGS: Registry[Callable[[], DiMPTrainConfig]] = Registry(
    "dimp train setting",
    {
        "nce_plus": "ltr.train_settings.dimp.nce_plus:config",
        "kld_is": "ltr.train_settings.dimp.kld_is:config",
        "nce": "ltr.train_settings.dimp.nce:config",
        "ml_is": "ltr.train_settings.dimp.ml_is:config",
        "nce_plus_tiny": "ltr.train_settings.dimp.nce_plus_tiny:config",
        "nce_plus_tiny_long": "ltr.train_settings.dimp.nce_plus_tiny_long:config",
    },
)

__all__ = ["SETTINGS", "DiMPTrainConfig", "train"]
