"""DiMP-NCE+ at CPU size: the paper's recipe on a small network, small crops and the embedded synthetic data.

Runs with no dataset and no pretrained weights (``python ltr/run_training.py dimp nce_plus_tiny``): a
quarter-width ResNet-18 trained from scratch (nothing frozen), 128-pixel crops (8 x 8 features), the
synthetic ``train`` / ``val`` splits, NCE+ with the paper's M = 128 candidates and beta 0.1. Learning rates
are higher than the paper's, which fine-tunes an ImageNet backbone; everything else follows the base. In one
4-epoch CPU comparison (seed 0) these LRs lowered the box loss steadily (val 13.4 after 4 epochs) where a
flat 1e-3 for every group gave a classifier-initializer spike and val 14.4 after 6 epochs.

Gradients are clipped to a global norm of 40 (``trainer.grad_clip``). Unclipped, the norm is heavy-tailed
(``trainer.grad_clip=none``, seed 0, per epoch in ``stats.csv``: median 7.3-19.3, 90th percentile 28-77,
maximum 68-410), and the spikes made the tracker's quality a lottery over training seeds. Five seeds of the
demo recipe (``benchmarks/quality_seeds.py --seeds 0 1 2 3 4 --videos 200 --epochs 10 --lr-step 7``), scored
on the synthetic *val* split with ``benchmarks/tune_tracker.py``: mean AUC 21.83 unclipped (17.22-27.99),
29.65 clipped (27.98-32.19).
"""

from __future__ import annotations

import dataclasses

from ltr.models.tracking import tiny_net_config
from ltr.train_settings.dimp.base import DiMPTrainConfig, LRConfig, base_config
from ltr.trainers import TrainerConfig

CROP = 128  # 8 x 8 classifier features at stride 16


def config() -> DiMPTrainConfig:
    base = base_config("nce_plus")
    data = dataclasses.replace(
        base.data,
        crop_size=CROP,
        datasets=("synthetic:train",),
        dataset_weights=(),
        val_datasets=("synthetic:val",),
        samples_per_epoch=320,
        val_samples_per_epoch=64,
        batch_size=8,
        num_workers=1,
    )
    return dataclasses.replace(
        base,
        net=tiny_net_config(feature_size=CROP // 16, search_area_factor=data.search_area_factor),
        data=data,
        trainer=TrainerConfig(epochs=10, lr_step=7, lr_gamma=0.2, val_every=2, grad_clip=40.0),
        lr=LRConfig(initializer=2e-4, optimizer=1e-3, feature_head=5e-4, box_head=3e-3, backbone=5e-4),
        dataset_options={},
    )
