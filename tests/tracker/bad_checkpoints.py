"""Real checkpoint files with the mistakes users make, for the tests of the up-front checks.

Each builder writes one file under the given folder and returns ``(path, expected message fragment)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import torch

from ltr.admin.checkpoint import FORMAT, VERSION, save_checkpoint
from ltr.admin.config import to_dict
from ltr.models.tracking import build_dimpnet
from tests.tracker.helpers import tiny_config, write_tiny_checkpoint


def _save(path: Path, config: dict, net: dict) -> Path:
    ckpt = {"format": FORMAT, "version": VERSION, "setting": "dimp/nce_plus_tiny", "epoch": 1}
    return save_checkpoint(path, {**ckpt, "config": config, "net": net})


def _tiny_state() -> dict:
    torch.manual_seed(0)
    return build_dimpnet(tiny_config().net).state_dict()


def truncated(folder: Path) -> tuple[Path, str]:
    good = write_tiny_checkpoint(folder / "good.pth.tar")
    path = folder / "truncated.pth.tar"
    data = good.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path, "not a readable PyTorch checkpoint file"


def foreign(folder: Path) -> tuple[Path, str]:
    path = folder / "notes.pth.tar"
    path.write_text("these are my notes, not a network\n")
    return path, "PyTorch checkpoint file"


def no_net_section(folder: Path) -> tuple[Path, str]:
    config = to_dict(tiny_config())
    del config["net"]
    return _save(
        folder / "no_net.pth.tar", config, _tiny_state()
    ), "the checkpoint's config has no 'net' section"


def weights_do_not_fit(folder: Path) -> tuple[Path, str]:
    cfg = tiny_config()
    wider = dataclasses.replace(cfg, net=dataclasses.replace(cfg.net, clf_feature_dim=48))
    return (
        _save(folder / "mismatch.pth.tar", to_dict(wider), _tiny_state()),
        "the weights do not fit the network built from its config['net']",
    )


def unknown_net_key(folder: Path) -> tuple[Path, str]:
    config = to_dict(tiny_config())
    config["net"]["colour"] = "blue"
    return (
        _save(folder / "unknown_key.pth.tar", config, _tiny_state()),
        "config['net'] does not describe a DiMP network (unknown config key(s) for NetConfig: ['colour'])",
    )


def no_geometry(folder: Path) -> tuple[Path, str]:
    config = to_dict(tiny_config())
    del config["data"]["crop_size"]
    return (
        _save(folder / "no_geometry.pth.tar", config, _tiny_state()),
        "train config['data'] lacks the geometry key 'crop_size'",
    )


BAD_CHECKPOINTS: dict[str, Callable[[Path], tuple[Path, str]]] = {
    "truncated": truncated,
    "foreign": foreign,
    "no_net_section": no_net_section,
    "weights_do_not_fit": weights_do_not_fit,
    "unknown_net_key": unknown_net_key,
    "no_geometry": no_geometry,
}
