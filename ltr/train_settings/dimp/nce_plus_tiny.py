"""DiMP-NCE+ at CPU size: the paper's recipe on a small network, small crops and the embedded synthetic data.

Runs with no dataset and no pretrained weights (``python ltr/run_training.py dimp nce_plus_tiny``): a
quarter-width ResNet-18 trained from scratch (nothing frozen), 128-pixel crops (8 x 8 features), the
synthetic ``train`` / ``val`` splits, NCE+ with the paper's M = 128 candidates and beta 0.1. The search area
is 3 target sizes, not SuperDiMP's 6: in a 128-pixel crop the target then spans 2.7 feature cells instead of
1.3 (SuperDiMP's 352-pixel crops give it 3.7), and the centre jitters shrink in proportion, so the target
stays as far inside the crop as in SuperDiMP's samples. Training targets span up to 45% of the frame's
size (the generator's default: 24%), the sizes real footage has. The classifier's filter also sees fixed
colour and gradient-orientation channels (``NetConfig.fixed_clf_features``), and the box head the same
kind of channels at stride 8 (``NetConfig.fixed_box_features``): learned on synthetic videos only, the
network's own features carry over to real footage less well than such hand-made ones. For the same reason
the backbone is IBN-a (``NetConfig.backbone_norm="ibn"``: half the channels of every residual block's first
normalisation in layer1-layer3 normalised per image), which takes each image's contrast and colour statistics
out of the shallow features (``docs/results/2026-11-26-real-footage.md``). Learning rates
are higher than the paper's, which fine-tunes an ImageNet backbone, and gradients are clipped to a global
norm of 40 (``trainer.grad_clip``): unclipped, rare gradient spikes made the tracker's quality vary widely
over training seeds (``docs/results/2026-11-22-nce-plus-tiny-recipe.md``). Batches are of 4 samples, not
8: the 3 200 samples then make 800 optimiser steps instead of 400, which at this length tracks real footage
better (``docs/results/2026-11-26-real-footage.md``). Everything else follows the base.
"""

from __future__ import annotations

import dataclasses

from ltr.models.tracking import tiny_net_config
from ltr.train_settings.dimp.base import DiMPTrainConfig, LRConfig, base_config
from ltr.trainers import TrainerConfig

CROP = 128  # 8 x 8 classifier features at stride 16
SEARCH_AREA = 3.0  # crop side / target side (SuperDiMP: 6)
TARGET_SIZE = (0.09, 0.45)  # sqrt(w h) / sqrt(W H) of the synthetic targets (generator default 0.09-0.24)


def config() -> DiMPTrainConfig:
    base = base_config("nce_plus")
    data = dataclasses.replace(
        base.data,
        crop_size=CROP,
        search_area_factor=SEARCH_AREA,
        center_jitter_train=3.0 * SEARCH_AREA / 6.0,  # SuperDiMP's 3 and 5.5 at its search area of 6
        center_jitter_test=5.5 * SEARCH_AREA / 6.0,
        datasets=("synthetic:train",),
        dataset_weights=(),
        val_datasets=("synthetic:val",),
        samples_per_epoch=320,
        val_samples_per_epoch=64,
        batch_size=4,
        num_workers=1,
    )
    return dataclasses.replace(
        base,
        net=dataclasses.replace(
            tiny_net_config(feature_size=CROP // 16, search_area_factor=data.search_area_factor),
            fixed_clf_features=True,
            fixed_box_features=True,
            backbone_norm="ibn",
        ),
        data=data,
        trainer=TrainerConfig(epochs=10, lr_step=7, lr_gamma=0.2, val_every=2, grad_clip=40.0),
        lr=LRConfig(initializer=2e-4, optimizer=1e-3, feature_head=5e-4, box_head=3e-3, backbone=5e-4),
        dataset_options={"synthetic": {"target_size": list(TARGET_SIZE)}},
    )
