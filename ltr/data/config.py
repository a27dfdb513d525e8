"""DataConfig: every knob of the DiMP training data pipeline, defaults = the SuperDiMP train setting.

The crop geometry here (``crop_size``, ``search_area_factor``, ``crop_mode``, ``max_scale_change``) is the one
the tracker parameters should share. A tiny variant overrides ``crop_size`` (keep it a multiple of
``feature_stride``), ``samples_per_epoch`` and the datasets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ltr.data.labels import label_sigma_cells
from ltr.data.transforms import IMAGENET_MEAN, IMAGENET_STD


def _nce_plus_kwargs() -> dict[str, Any]:
    # Noise density of the SuperDiMP box head: equal-weight 2-component mixture in rel space,
    # std 0.05 and 0.5 on (cx, cy, log w, log h); 127 noise samples + 1 positive = 128 candidates.
    return {"sigmas": ((0.05, 0.05, 0.05, 0.05), (0.5, 0.5, 0.5, 0.5)), "num_samples": 127, "beta": 0.1}


@dataclass
class DataConfig:
    """Data pipeline settings (SuperDiMP / DiMP-NCE+ values).

    Geometry: crops are ``crop_size`` px, classifier features ``crop_size // feature_stride`` cells per side.
    Labels: Gaussian with sigma = feature_size * output_sigma_factor / search_area_factor cells, grid set by
    ``filter_size`` (see :mod:`ltr.data.labels`); ``label_end_pad`` adds the extra score row/column an even
    filter with padding filter_size // 2 produces (label side feature_size + 1 instead of feature_size).
    Box proposals: ``box_method`` (an :mod:`ltr.ebm` method name) built with ``box_method_kwargs``, in rel
    space around the test box. ``datasets`` are registry names, optionally ``name:split``.
    """

    # geometry
    crop_size: int = 352
    feature_stride: int = 16
    search_area_factor: float = 6.0
    crop_mode: Literal["replicate", "inside", "inside_major"] = "inside_major"
    max_scale_change: float = 1.5
    #: "reference": pytracking's whole-pixel crop regions (:mod:`ltr.data.reference_crop`); "continuous": the
    #: region centred on the box, shared with the tracker (:mod:`ltr.data.crop`)
    crop_geometry: Literal["reference", "continuous"] = "reference"
    # classifier labels
    filter_size: int = 4
    output_sigma_factor: float = 0.25
    label_end_pad: bool = False
    # jitter: centre moved uniformly within +-0.5*sqrt(w*h)*centre factor; size times exp(N(0,1)*scale factor)
    center_jitter_train: float = 3.0
    center_jitter_test: float = 5.5
    scale_jitter_train: float = 0.25
    scale_jitter_test: float = 0.5
    # frame sampler
    num_train_frames: int = 3
    num_test_frames: int = 3
    max_gap: int = 200
    gap_increase: int = 5
    min_sequence_length: int = 20
    # box-head proposals
    box_method: str = "nce_plus"
    box_method_kwargs: dict[str, Any] = field(default_factory=_nce_plus_kwargs)
    # augmentation: grayscale and the whole-frame flip (one decision per sample, before the crop; validation
    # too, as the reference's joint transform), then per frame a crop flip and brightness (training only)
    grayscale_prob: float = 0.05
    joint_flip_prob: float = 0.5
    flip_prob: float = 0.5
    #: one crop-flip decision for all frames of a sample instead of one per frame
    flip_joint: bool = False
    #: boxes flip as x' = W - 1 - x - w ("reference", pytracking's) or W - x - w ("continuous")
    flip_convention: Literal["reference", "continuous"] = "reference"
    brightness_jitter: float = 0.2
    normalize_mean: tuple[float, ...] = IMAGENET_MEAN
    normalize_std: tuple[float, ...] = IMAGENET_STD
    # datasets and loading
    datasets: tuple[str, ...] = ("lasot:train", "got10k:vottrain", "trackingnet:train", "coco:train")
    #: sampling weight per dataset; empty = equal weights (the reference's [1, 1, 1, 1])
    dataset_weights: tuple[float, ...] = ()
    val_datasets: tuple[str, ...] = ("got10k:votval",)
    samples_per_epoch: int = 40000
    val_samples_per_epoch: int = 10000
    batch_size: int = 20
    num_workers: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        if self.crop_size % self.feature_stride != 0:
            raise ValueError(
                f"crop_size ({self.crop_size}) must be a multiple of feature_stride ({self.feature_stride})"
            )
        if self.num_train_frames < 1 or self.num_test_frames < 1:
            raise ValueError("num_train_frames and num_test_frames must be >= 1")

    @property
    def feature_size(self) -> int:
        """Classifier feature cells per side: crop_size / feature_stride."""
        return self.crop_size // self.feature_stride

    @property
    def label_size(self) -> int:
        """Label side: feature_size, plus one for an even filter when ``label_end_pad``."""
        return self.feature_size + (1 if self.label_end_pad and self.filter_size % 2 == 0 else 0)

    @property
    def label_sigma_cells(self) -> float:
        """Label std in feature cells: feature_size * output_sigma_factor / search_area_factor."""
        return label_sigma_cells(self.feature_size, self.output_sigma_factor, self.search_area_factor)

    @property
    def min_visible_frames(self) -> int:
        """A video needs MORE than this many visible frames: 2 * (train + test frames) (12 for 3 + 3)."""
        return 2 * (self.num_train_frames + self.num_test_frames)
