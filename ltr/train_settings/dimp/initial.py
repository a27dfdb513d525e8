"""Starting a DiMP training run from a checkpoint's weights and training only some parts of the network.

``init_from=PATH train_parts=box_head`` makes ``dimp nce_plus`` retrain SuperDiMP's box head with NCE+ from
SuperDiMP's weights (converted by ``ltr.admin.import_pytracking``): the cheapest path to DiMP-NCE+. The
initial checkpoint is loaded with ``weights_only=True`` and must describe the same network as the setting;
:data:`NOT_COMPARED` lists the ``net`` keys that may differ because they say how a network is initialised or
trained, not what it computes once its weights are loaded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from ltr.actors import DiMPActor
from ltr.admin.checkpoint import CheckpointError, load_checkpoint
from ltr.admin.config import ConfigError, from_dict, to_dict
from ltr.models.tracking import NetConfig
from ltr.train_settings.dimp.base import PARTS, DiMPTrainConfig
from ltr.trainers.freeze import eval_batchnorm
from ltr.trainers.optim import prefix_matches

#: ``net`` keys an initial checkpoint may differ in: ImageNet initialisation, the backbone's frozen layers and
#: the initial values of learned parameters of the filter optimizer (its weights replace them).
NOT_COMPARED = (
    "pretrained",
    "frozen_layers",
    "optim_init_step",
    "optim_init_reg",
    "label_init_sigma",
    "mask_init_factor",
)


def check_train_parts(parts: Sequence[str]) -> tuple[str, ...]:
    """The :data:`PARTS` that ``parts`` names (an entry names a part or a module holding parts, like
    ``classifier``), in :data:`PARTS` order. Raises ConfigError for an empty list or an unknown entry."""
    if not parts:
        raise ConfigError(f"train_parts is empty; name at least one of {list(PARTS)}")
    unknown = [p for p in parts if not any(prefix_matches(part, p) for part in PARTS)]
    if unknown:
        raise ConfigError(
            f"train_parts: unknown part(s) {unknown}; choose from {list(PARTS)} or 'classifier'"
        )
    return tuple(part for part in PARTS if any(prefix_matches(part, p) for p in parts))


def frozen_parts(config: DiMPTrainConfig) -> tuple[str, ...]:
    """The :data:`PARTS` that ``config.train_parts`` leaves out (frozen during training)."""
    trained = check_train_parts(config.train_parts)
    return tuple(part for part in PARTS if part not in trained)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=0.0)
    return a == b


def net_config_differences(ours: NetConfig, theirs: NetConfig) -> list[str]:
    """``"net.<key> (checkpoint <theirs>, setting <ours>)"`` for every compared key where the two differ
    (floats to a relative 1e-6, since a converted file may compute a value in another order)."""
    a, b = to_dict(ours), to_dict(theirs)
    return [
        f"net.{key} (checkpoint {b[key]!r}, setting {a[key]!r})"
        for key in a
        if key not in NOT_COMPARED and not _same(a[key], b[key])
    ]


def load_initial_weights(path: str | Path, net: NetConfig) -> dict[str, Tensor]:
    """The state dict of checkpoint ``path`` after checking that its network config equals ``net``.

    Raises :class:`CheckpointError` (one line naming the file) for an unreadable or unsafe file (see
    :func:`ltr.admin.checkpoint.load_checkpoint`), a config without a ``net`` section, or a network config
    that differs from ``net`` in a compared key (every such key is named, with both values).
    """
    checkpoint = load_checkpoint(path, map_location="cpu")
    section = checkpoint["config"].get("net")
    if not isinstance(section, dict):
        raise CheckpointError(f"{path}: its config has no 'net' section, so its network cannot be checked")
    try:
        theirs = from_dict(NetConfig, section)
    except (ConfigError, TypeError) as err:
        raise CheckpointError(f"{path}: its network config does not fit this code: {err}") from err
    differences = net_config_differences(net, theirs)
    if differences:
        raise CheckpointError(
            f"{path}: its network differs from the setting's in {'; '.join(differences)}; init_from needs the "
            "same network (override the setting's net.* keys to match)"
        )
    return checkpoint["net"]


def apply_initial_weights(net: nn.Module, state: dict[str, Tensor], path: str | Path) -> None:
    """Load ``state`` (from checkpoint ``path``) into ``net``, every tensor; CheckpointError naming the first
    missing, unexpected and mis-shaped key otherwise."""
    ours = net.state_dict()
    problems = []
    missing = [k for k in ours if k not in state]
    unexpected = [k for k in state if k not in ours]
    shaped = [k for k in ours if k in state and state[k].shape != ours[k].shape]
    if missing:
        problems.append(f"{len(missing)} missing tensor(s), first {missing[0]!r}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected tensor(s), first {unexpected[0]!r}")
    if shaped:
        k = shaped[0]
        problems.append(
            f"{len(shaped)} mis-shaped tensor(s), first {k!r} "
            f"(checkpoint {tuple(state[k].shape)}, network {tuple(ours[k].shape)})"
        )
    if problems:
        raise CheckpointError(f"{path}: its weights do not fit the setting's network: {'; '.join(problems)}")
    net.load_state_dict(state)


class PartlyFrozenActor(DiMPActor):
    """:class:`DiMPActor` whose ``frozen`` parts (module prefixes of the network) keep their BatchNorm layers
    in eval mode when the trainer puts the network in train mode (see :mod:`ltr.trainers.freeze`)."""

    def __init__(self, *args: Any, frozen: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frozen = tuple(frozen)

    def train(self, mode: bool = True) -> PartlyFrozenActor:
        super().train(mode)
        eval_batchnorm(self.module, self.frozen)
        return self


__all__ = [
    "NOT_COMPARED",
    "PartlyFrozenActor",
    "apply_initial_weights",
    "check_train_parts",
    "frozen_parts",
    "load_initial_weights",
    "net_config_differences",
]
