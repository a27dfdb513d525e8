"""The generic trainer (:class:`Trainer`), its hooks and the helpers that build a run from a config."""

from ltr.trainers.hooks import (
    CheckpointHook,
    LRScheduleHook,
    ProgressHook,
    StatsFileHook,
    SummaryHook,
    ValidationHook,
    VisdomHook,
    standard_hooks,
)
from ltr.trainers.interrupt import TrainingInterrupted
from ltr.trainers.optim import build_adam, build_step_lr, group_lrs, resolve_param_groups
from ltr.trainers.rng import capture_rng_state, restore_rng_state, seed_everything
from ltr.trainers.setup import TrainerConfig, build_trainer, finish, prepare
from ltr.trainers.steps import StepLoader
from ltr.trainers.trainer import Hook, Trainer, move_to_device, resolve_device

__all__ = [
    "CheckpointHook",
    "Hook",
    "LRScheduleHook",
    "ProgressHook",
    "StatsFileHook",
    "StepLoader",
    "SummaryHook",
    "Trainer",
    "TrainerConfig",
    "TrainingInterrupted",
    "ValidationHook",
    "VisdomHook",
    "build_adam",
    "build_step_lr",
    "build_trainer",
    "capture_rng_state",
    "finish",
    "group_lrs",
    "move_to_device",
    "prepare",
    "resolve_device",
    "resolve_param_groups",
    "restore_rng_state",
    "seed_everything",
    "standard_hooks",
]
