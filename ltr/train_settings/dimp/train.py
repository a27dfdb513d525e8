"""Run a DiMP train setting: check inputs, build network / actor / loaders from the config, train.

``python ltr/run_training.py dimp <setting> [key=value ...] [--resume] [--device ...] [--visdom]``, or with
``torchrun --nproc_per_node=N ltr/run_training.py dimp <setting> ...`` for DistributedDataParallel (each rank
draws its own samples; ``data.samples_per_epoch`` and ``data.batch_size`` stay per-run and per-rank
respectively, as with the reference's loaders).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ltr.admin.checkpoint import latest_checkpoint, run_dir
from ltr.admin.config import ConfigError, to_dict
from ltr.admin.paths import DATASET_VARS, lookup
from ltr.dataset.base import DatasetError
from ltr.dataset.registry import datasets_from_specs, parse_dataset_spec
from ltr.train_settings.dimp.base import DiMPTrainConfig
from ltr.train_settings.dimp.initial import (
    PartlyFrozenActor,
    apply_initial_weights,
    check_train_parts,
    frozen_parts,
    load_initial_weights,
)

#: Datasets that ship with the code (no environment variable needed).
EMBEDDED = ("synthetic",)
TINY_HINT = "`python ltr/run_training.py dimp nce_plus_tiny` trains on the embedded synthetic videos instead"


def preflight(config: DiMPTrainConfig, setting: str) -> None:
    """Fail at once, before anything is built, when datasets or pretrained weights are missing or
    ``train_parts`` names no part.

    The error names every missing environment variable (and weights file) together, and points to the
    setting that runs on the embedded data.
    """
    check_train_parts(config.train_parts)
    specs = list(config.data.datasets) + list(config.data.val_datasets)
    missing: list[str] = []
    for spec in specs:
        try:
            name, _ = parse_dataset_spec(spec)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if name in EMBEDDED:
            continue
        var = DATASET_VARS.get(name)
        if var is None:
            raise ConfigError(
                f"data.datasets: unknown dataset {name!r} in {spec!r}; known: {sorted(DATASET_VARS)}"
            )
        root = lookup(var)
        if root is None:
            missing.append(f"{var} (for {spec})")
        elif not Path(root).is_dir():
            missing.append(f"{var}={root} is not a directory (for {spec})")
    problems = []
    if missing:
        problems.append("dataset roots are not configured: " + "; ".join(dict.fromkeys(missing)))
    if config.net.pretrained and config.init_from is None:  # init_from gives every weight
        from ltr.models.backbone import pretrained_weights_path

        weights = pretrained_weights_path(config.net.backbone)
        if not weights.is_file():
            problems.append(
                f"the ImageNet weights of {config.net.backbone} are not at {weights} (copy them there)"
            )
    if problems:
        raise DatasetError(
            f"{setting} cannot start: " + " AND ".join(problems) + ". Set the environment variables (or add "
            f"them to the paths file, see ltr/admin/paths.py); {TINY_HINT}."
        )


def samples_in_batch(batch: dict[str, Any]) -> int:
    """B of a batch in the data pipeline's (S, B, ...) layout."""
    return int(batch["test_images"].shape[1])


def train(
    config: DiMPTrainConfig,
    *,
    setting: str,
    workspace: Path,
    resume: bool = False,
    device: str = "auto",
    visdom: bool = False,
) -> list[dict[str, Any]]:
    """Train ``config`` as ``setting`` (``"dimp/<name>"``) into ``<workspace>/checkpoints/dimp/<name>``.

    With ``config.init_from`` the network starts from that checkpoint's weights (unless ``resume`` finds a
    checkpoint of this run, which then gives every weight); the parts not in ``config.train_parts`` are
    frozen. Returns the stats history (one record per epoch and phase).
    """
    preflight(config, setting)
    initial = None
    if config.init_from is not None and not (resume and latest_checkpoint(run_dir(workspace, setting))):
        initial = load_initial_weights(config.init_from, config.net)
    from ltr.data.loader import TrainingLoader
    from ltr.data.sampler import TrackingSampler
    from ltr.ebm import build_method
    from ltr.models.tracking import build_dimpnet, lr_groups
    from ltr.trainers import build_trainer, finish, prepare, resolve_device
    from ltr.trainers.freeze import freeze_parts

    info = prepare(device, config.trainer.seed)
    finished = False
    try:
        dev = resolve_device(device, info)
        pretrained = config.net.pretrained and config.init_from is None
        try:
            net = build_dimpnet(dataclasses.replace(config.net, pretrained=pretrained))
        except ValueError as err:  # a network value out of range or unknown: one line, not a traceback
            raise ConfigError(f"net: {err}") from err
        if initial is not None:
            apply_initial_weights(net, initial, config.init_from)
        frozen = frozen_parts(config)
        freeze_parts(net, frozen)
        data = config.data
        actor = PartlyFrozenActor(
            net,
            build_method(data.box_method, **dict(data.box_method_kwargs)),
            config.box_weight,
            frozen=frozen,
        )
        train_sets = datasets_from_specs(data.datasets, config.dataset_options)
        train_loader = TrainingLoader(
            TrackingSampler.from_config(
                data, train_sets, training=True, rank=info.rank, world_size=info.world_size
            ),
            batch_size=data.batch_size,
            num_workers=data.num_workers,
            device=dev,
        )
        val_loader = None
        if data.val_datasets and data.val_samples_per_epoch > 0:
            val_sets = datasets_from_specs(data.val_datasets, config.dataset_options)
            val_sampler = TrackingSampler.from_config(
                data, val_sets, training=False, rank=info.rank, world_size=info.world_size
            )
            val_loader = TrainingLoader(
                val_sampler, batch_size=data.batch_size, num_workers=data.num_workers, device=dev
            )
        trainer = build_trainer(
            actor=actor,
            net=net,
            lr_groups=[g for g in lr_groups(**to_dict(config.lr)) if g[0] not in frozen],
            train_loader=train_loader,
            val_loader=val_loader,
            cfg=config.trainer,
            setting=setting,
            workspace=workspace,
            config=to_dict(config),
            device=dev,
            visdom=visdom,
            batch_size_fn=samples_in_batch,
        )
        history = trainer.train(resume=resume)
        finished = True
        return history
    finally:
        finish(synchronize=finished)
