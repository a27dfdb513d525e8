"""The longer CPU recipe of ``nce_plus_tiny``: the same network, crops and training targets, 45 epochs of
320 samples drawn from 3 200 synthetic training videos (the demo's 10 epochs draw from the train split's
200), and learning rates x0.2 after epoch 32. ``docs/results/2026-11-26-real-footage.md`` compares it with
the demo's recipe on the synthetic test set and on real footage, and gives its training time.
"""

from __future__ import annotations

import dataclasses

from ltr.train_settings.dimp.base import DiMPTrainConfig
from ltr.train_settings.dimp.nce_plus_tiny import config as tiny_config

TRAIN_VIDEOS = 3200


def config() -> DiMPTrainConfig:
    base = tiny_config()
    return dataclasses.replace(
        base,
        trainer=dataclasses.replace(base.trainer, epochs=45, lr_step=32),
        dataset_options={
            **base.dataset_options,
            "synthetic:train": {"num_sequences": TRAIN_VIDEOS},
        },
    )
