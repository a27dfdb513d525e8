"""The tracker's network: rebuilt from a checkpoint's saved config (safe loading), or fresh from a setting.

A checkpoint (``ltr.admin.checkpoint``) holds the plain train config; the network is rebuilt with
:func:`ltr.models.tracking.build_dimpnet` from its ``net`` section (ImageNet weights are never fetched: the
state dict overwrites them) and its crop geometry comes from its ``data`` section.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ltr.admin.checkpoint import latest_checkpoint, load_checkpoint, run_dir
from ltr.admin.config import from_dict, to_dict
from ltr.admin.paths import workspace_dir
from ltr.models.fold_bn import fold_batchnorm
from ltr.models.tracking import DiMPNet, NetConfig, build_dimpnet
from pytracking.tracker.dimp.params import Geometry, geometry_from_train_config


@dataclass
class LoadedNet:
    """A network ready for tracking (eval mode, no weight gradients), its geometry and where it came from."""

    net: DiMPNet
    geometry: Geometry
    source: str


class NoCheckpointError(FileNotFoundError):
    """No trained checkpoint exists for a setting; the message says which training command makes one."""


def _prepare(net: DiMPNet, device: torch.device, fold_bn: bool = True) -> DiMPNet:
    """Inference form of a network: on ``device``, eval mode, frozen, BatchNorm folded into the convolutions
    (unless ``fold_bn`` is False)."""
    net = net.to(device).eval()
    if fold_bn:
        fold_batchnorm(net)
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def default_checkpoint(setting: str, workspace: str | os.PathLike | None = None) -> Path:
    """The latest checkpoint of train setting ``dimp/<setting>`` in the workspace.

    Raises :class:`NoCheckpointError` (naming the training command) when there is none.
    """
    folder = run_dir(workspace_dir(workspace), f"dimp/{setting}")
    path = latest_checkpoint(folder)
    if path is None:
        raise NoCheckpointError(
            f"no checkpoint of train setting dimp/{setting} in {folder}; train one with "
            f"`python ltr/run_training.py dimp {setting}` (or pass --net PATH to a checkpoint)"
        )
    return path


def load_network(path: str | os.PathLike, device: str | torch.device = "cpu") -> LoadedNet:
    """Rebuild the network of checkpoint ``path`` (``weights_only=True`` loading) on ``device``."""
    ckpt = load_checkpoint(path, map_location="cpu")
    config: dict[str, Any] = ckpt["config"]
    if "net" not in config:
        raise KeyError(f"{path}: the checkpoint's config has no 'net' section (not a DiMP train setting?)")
    net_cfg = dataclasses.replace(from_dict(NetConfig, config["net"]), pretrained=False)
    net = build_dimpnet(net_cfg)
    net.load_state_dict(ckpt["net"])
    return LoadedNet(_prepare(net, torch.device(device)), geometry_from_train_config(config), str(path))


def random_network(
    setting: str,
    device: str | torch.device = "cpu",
    seed: int = 0,
    *,
    fold_bn: bool = True,
    net_fields: Mapping[str, Any] | None = None,
    **data: Any,
) -> LoadedNet:
    """A network of train setting ``dimp/<setting>`` with random weights (``pretrained=False``), for
    benchmarks and tests; ``data`` overrides geometry fields of the setting's data config
    (e.g. ``crop_size=64``), ``net_fields`` fields of its network config
    (e.g. ``{"box_mod_channels": (128, 128)}``); ``fold_bn=False`` keeps the BatchNorm layers (benchmark
    baselines)."""
    from ltr.train_settings.dimp import SETTINGS

    if setting not in SETTINGS:
        raise KeyError(f"unknown DiMP train setting {setting!r}; choose one of {sorted(SETTINGS)}")
    config = SETTINGS[setting]()
    config = dataclasses.replace(
        config,
        net=dataclasses.replace(config.net, **{**(net_fields or {}), "pretrained": False}),
        data=dataclasses.replace(config.data, **data),
    )
    torch.manual_seed(seed)
    net = build_dimpnet(config.net)
    return LoadedNet(
        _prepare(net, torch.device(device), fold_bn), geometry_from_train_config(to_dict(config)), "random"
    )
