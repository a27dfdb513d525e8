"""The detection study's config: method hyperparameters, data, detector, head training, refinement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ltr.detection.synthetic import SyntheticDetectionConfig

IS_SIGMAS = (0.0375, 0.075, 0.15)
NCE_SIGMAS = (0.075, 0.15, 0.3)


@dataclass
class DetectionConfig:
    """One energy-head training + evaluation run.

    Method fields (appendix C): ``num_samples`` is M = 128 *candidates* for every method: ML-IS/KLD-IS draw M
    proposals; NCE/NCE+ use M - 1 noise samples plus the positive (the reference's 127 + 1); ML-MCMC runs M
    chains; DSM draws M noisy copies.
    """

    method: Literal["ml_is", "kld_is", "ml_mcmc", "nce", "nce_plus", "dsm"] = "nce_plus"
    num_samples: int = 128
    sigmas: tuple[float, ...] = NCE_SIGMAS
    label_sigma: float = 0.0225
    beta: float = 0.1
    beta_mode: Literal["std", "variance"] = "std"
    mcmc_steps: int = 1
    mcmc_alpha: float = 1e-5
    dsm_sigma: float = 0.075
    # data and detector
    data: Literal["coco", "synthetic"] = "coco"
    detector: Literal["resnet50_fpn", "tiny"] = "resnet50_fpn"
    # resnet50_fpn only. detector_weights: "coco_v1" (the paper's detector, from the local torch hub cache,
    # required by default) or "random", an explicit opt-in that builds the same architecture with random
    # weights and no weights file, to exercise the COCO code path without the weights (its AP is meaningless).
    detector_weights: Literal["coco_v1", "random"] = "coco_v1"
    detector_min_size: int = 800  # torchvision's resize of the shorter/longer image side (its defaults)
    detector_max_size: int = 1333
    detector_score_thresh: float = 0.05  # raw detections below this class score are dropped before NMS
    train_split: str = "train"
    val_split: str = "val"
    test_split: str = "val"
    max_eval_images: int = 0  # 0: every image of the split
    synthetic: SyntheticDetectionConfig = field(default_factory=SyntheticDetectionConfig)
    detector_iters: int = 600  # tiny detector only: SGD iterations on the synthetic train split
    detector_lr: float = 0.02
    # tiny detector only: its training seed (-1: ``seed``, so head and detector change together), and
    # detector_clean_labels: train it on the exact annotations even with synthetic.annotation_noise > 0 (the
    # clean set's detector; the noise then reaches only the energy head's training labels)
    detector_seed: int = -1
    detector_clean_labels: bool = False
    # head
    pool_size: int = 7
    hidden: int = 1024
    # head training
    iterations: int = 60000
    batch_images: int = 2
    max_boxes_per_image: int = 16
    lr: float = 1e-4
    lr_step: int = 40000
    lr_gamma: float = 0.1
    log_every: int = 50
    # prediction (appendix C): guided NMS, T steps of Algorithm S1
    nms_iou: float = 0.5
    nms_rank_by: Literal["energy", "score"] = "energy"  # used as is when tune_steps is off
    nms_rank_modes: tuple[str, ...] = ("energy", "score")  # tried on val_split when tune_steps is on
    refine_steps: int = 10
    step_pos: float = 1e-4
    step_size: float = 4e-4
    step_decay: float = 0.5
    tune_steps: bool = True  # pick (step_pos, step_size) from step_grid on val_split by AP
    step_grid: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)  # multipliers of (step_pos, step_size)
    max_detections: int = 100
    eval_batch_images: int = 4
    seed: int = 0
    threads: int = 0  # torch intra-op threads; 0 = leave torch's default
