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

from ltr.admin.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint, run_dir
from ltr.admin.config import ConfigError, from_dict, to_dict
from ltr.admin.paths import workspace_dir
from ltr.models.fold_bn import fold_batchnorm
from ltr.models.tracking import DiMPNet, NetConfig, build_dimpnet
from pytracking.tracker.dimp.params import Geometry, geometry_from_train_config


@dataclass
class LoadedNet:
    """A network ready for tracking (eval mode, no weight gradients), its geometry and where it came from.

    ``setting`` is the train setting it was built by (``"dimp/nce_plus_tiny"``; empty when unknown) and
    ``net_config`` the config it was rebuilt from (None when unknown), so callers can check that a parameter
    set was tuned for this kind of network.
    """

    net: DiMPNet
    geometry: Geometry
    source: str
    setting: str = ""
    net_config: NetConfig | None = None


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
    """Rebuild the network of checkpoint ``path`` (``weights_only=True`` loading) on ``device``.

    Everything that can be wrong with the file is a :class:`~ltr.admin.checkpoint.CheckpointError` whose
    one-line message names the file and the key: not a checkpoint of this project (format, version), a
    config without a usable ``net`` or ``data`` section, or weights that do not fit the network its config
    builds (missing or unexpected tensors, other shapes).
    """
    ckpt = load_checkpoint(path, map_location="cpu")
    config: dict[str, Any] = ckpt["config"]
    net_cfg = _net_config(config, ckpt["setting"], path)
    try:
        net = build_dimpnet(net_cfg)
    except (ValueError, TypeError, IndexError, RuntimeError) as err:
        raise CheckpointError(f"{path}: config['net'] does not build a DiMP network ({err})") from err
    geometry = _geometry(config, path)
    check_weights_fit(net, ckpt["net"], path)
    net.load_state_dict(ckpt["net"])
    return LoadedNet(_prepare(net, torch.device(device)), geometry, str(path), ckpt["setting"], net_cfg)


def _net_config(config: dict[str, Any], setting: str, path: str | os.PathLike) -> NetConfig:
    """The checkpoint's network config (``pretrained`` off: the state dict holds every weight)."""
    if not isinstance(config.get("net"), dict):
        raise CheckpointError(
            f"{path}: the checkpoint's config has no 'net' section (setting {setting!r} is not a DiMP "
            "train setting?)"
        )
    try:
        return dataclasses.replace(from_dict(NetConfig, config["net"]), pretrained=False)
    except (ConfigError, TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: config['net'] does not describe a DiMP network ({err})") from err


def _geometry(config: dict[str, Any], path: str | os.PathLike) -> Geometry:
    try:
        return geometry_from_train_config(config)
    except KeyError as err:
        raise CheckpointError(f"{path}: {err.args[0]}") from err
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: config['data'] holds no usable crop geometry ({err})") from err


def check_weights_fit(
    net: torch.nn.Module, state: Mapping[str, torch.Tensor], path: str | os.PathLike
) -> None:
    """Raise :class:`CheckpointError` unless ``state`` has exactly ``net``'s tensors with its shapes.

    The message counts the missing, unexpected and reshaped tensors and names the first of each, so a
    checkpoint of another network (or one edited by hand) is one readable line, not PyTorch's list of every
    key.
    """
    expected = net.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    reshaped = [
        f"{k} {tuple(state[k].shape)} != {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    parts = [
        f"{len(found)} {what} (first: {found[0]})"
        for what, found in (
            ("missing tensor(s)", missing),
            ("unexpected tensor(s)", unexpected),
            ("tensor(s) of another shape, checkpoint != network", reshaped),
        )
        if found
    ]
    if parts:
        raise CheckpointError(
            f"{path}: the weights do not fit the network built from its config['net']: {'; '.join(parts)}"
        )


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

    config = SETTINGS[setting]()  # an unknown setting: UnknownName (a KeyError) listing the choices
    config = dataclasses.replace(
        config,
        net=dataclasses.replace(config.net, **{**(net_fields or {}), "pretrained": False}),
        data=dataclasses.replace(config.data, **data),
    )
    torch.manual_seed(seed)
    net = build_dimpnet(config.net)
    return LoadedNet(
        _prepare(net, torch.device(device), fold_bn),
        geometry_from_train_config(to_dict(config)),
        "random",
        f"dimp/{setting}",
        config.net,
    )
