"""Training data: sampler -> processing (crops, jitter, labels, proposals) -> transforms -> loader.

The batch contract is documented in :mod:`ltr.data.processing`; the crop shared with the tracker is
:func:`ltr.data.crop.sample_target_crop`.
"""

from ltr.data.config import DataConfig
from ltr.data.crop import CropTransform, crop_region, sample_target_crop, sample_target_crops
from ltr.data.loader import EpochSampler, TrainingLoader, build_loader, collate_frames
from ltr.data.processing import BATCH_KEYS, DiMPProcessing, FrameSet
from ltr.data.sampler import FrameSelection, TrackingSampler

__all__ = [
    "BATCH_KEYS",
    "CropTransform",
    "DataConfig",
    "DiMPProcessing",
    "EpochSampler",
    "FrameSelection",
    "FrameSet",
    "TrackingSampler",
    "TrainingLoader",
    "build_loader",
    "collate_frames",
    "crop_region",
    "sample_target_crop",
    "sample_target_crops",
]
