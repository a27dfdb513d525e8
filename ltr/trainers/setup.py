"""Wiring a training run from a config: process group + seeds, then optimiser, schedule, hooks and trainer.

A train-settings module does, in order::

    info = prepare(device, cfg.trainer.seed)          # torchrun process group (if any) + rank-offset seeds
    net, actor, train_loader, val_loader = ...        # built from the config (seeded, so identical per run)
    trainer = build_trainer(actor=actor, net=net, lr_groups=[("bb_regressor", 1e-3), ...], ...)
    trainer.train(resume=resume)
    finish()
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ltr.admin import distributed
from ltr.admin.checkpoint import run_dir
from ltr.trainers.hooks import Hook, standard_hooks
from ltr.trainers.optim import GroupSpec, build_adam, build_step_lr
from ltr.trainers.rng import seed_everything
from ltr.trainers.trainer import Actor, Trainer


@dataclass(frozen=True)
class TrainerConfig:
    """Settings of the generic trainer (a field of each setting's config; override as ``trainer.x=``)."""

    epochs: int = 50
    lr_step: int = 15  # StepLR: multiply every group's LR by lr_gamma every lr_step epochs
    lr_gamma: float = 0.2
    weight_decay: float = 0.0
    grad_clip: float | None = None  # max global gradient norm; None = no clipping
    amp: bool = False  # torch.autocast(float16) + GradScaler; CUDA only (ignored on CPU)
    seed: int = 0
    val_every: int = 5
    checkpoint_every: int = 1
    progress: bool = True  # tqdm bar on rank 0
    find_unused_parameters: bool = False  # DDP option for nets with branches unused in some steps


def prepare(device: str = "auto", seed: int = 0) -> distributed.DistInfo:
    """Join the ``torchrun`` process group when launched by it, then seed with ``seed + 1000 * rank``."""
    info = distributed.init_distributed(device)
    seed_everything(distributed.sample_seed(seed, 0, info.rank))
    return info


def finish(synchronize: bool = True) -> None:
    """Leave the process group (no-op in a single process); ``synchronize=False`` after an error skips the
    barrier that every rank otherwise meets first."""
    distributed.cleanup(synchronize)


def build_trainer(
    *,
    actor: Actor,
    net: nn.Module,
    lr_groups: Sequence[GroupSpec],
    train_loader: Iterable[Any],
    cfg: TrainerConfig,
    setting: str,
    workspace: str | Path | None,
    config: Mapping[str, Any],
    device: str | torch.device = "auto",
    val_loader: Iterable[Any] | None = None,
    visdom: bool = False,
    default_lr: float | None = None,
    extra_hooks: Sequence[Hook] = (),
    generators: Mapping[str, torch.Generator] | None = None,
    batch_size_fn: Any = None,
) -> Trainer:
    """Adam over ``lr_groups`` + StepLR + the standard hooks; the run folder is
    ``<workspace>/checkpoints/<setting>`` (no files at all when ``workspace`` is None)."""
    optimizer = build_adam(net, lr_groups, default_lr=default_lr, weight_decay=cfg.weight_decay)
    scheduler = build_step_lr(optimizer, cfg.lr_step, cfg.lr_gamma)
    hooks = standard_hooks(
        val_loader=val_loader,
        val_every=cfg.val_every,
        checkpoint_every=cfg.checkpoint_every,
        progress=cfg.progress,
        visdom=visdom,
        extra=extra_hooks,
    )
    return Trainer(
        actor=actor,
        net=net,
        optimizer=optimizer,
        scheduler=scheduler,
        train_loader=train_loader,
        epochs=cfg.epochs,
        hooks=hooks,
        device=device,
        grad_clip=cfg.grad_clip,
        amp=cfg.amp,
        setting=setting,
        config=config,
        run_dir=run_dir(workspace, setting) if workspace is not None else None,
        seed=cfg.seed,
        generators=generators,
        find_unused_parameters=cfg.find_unused_parameters,
        batch_size_fn=batch_size_fn,
    )
