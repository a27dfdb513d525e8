"""Optimiser and LR schedule from a spec: Adam with per-module parameter groups, StepLR.

A group is given as ``(prefix_or_module, lr)``. A prefix names a submodule by its dotted path in the network
(``"bb_regressor"``, ``"feature_extractor.layer3"``; ``""`` is the whole network); a module is looked up by
identity. Each trainable parameter goes to the group with the *longest* matching prefix, so
``[("", 1e-4), ("head", 1e-3)]`` means "head at 1e-3, everything else at 1e-4". Frozen parameters
(``requires_grad=False``) are left out. A trainable parameter that matches no group is an error (it would
silently never train), unless ``default_lr`` is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

GroupSpec = tuple[str | nn.Module, float]


@dataclass(frozen=True)
class ParamGroup:
    """One resolved group: its ``name`` (the prefix), learning rate and parameter names."""

    name: str
    lr: float
    param_names: tuple[str, ...]


def _module_prefix(net: nn.Module, module: nn.Module) -> str:
    for name, sub in net.named_modules():
        if sub is module:
            return name
    raise ValueError(f"{type(module).__name__} given as an LR group is not a submodule of the network")


def prefix_matches(name: str, prefix: str) -> bool:
    """Whether parameter/module ``name`` lies under module path ``prefix`` (``""`` matches everything)."""
    return prefix == "" or name == prefix or name.startswith(prefix + ".")


def resolve_param_groups(
    net: nn.Module, groups: Sequence[GroupSpec], default_lr: float | None = None
) -> list[ParamGroup]:
    """Assign every trainable parameter of ``net`` to one group (longest matching prefix wins).

    Raises ValueError for a prefix that names no submodule/parameter, a prefix given twice, a group that ends
    up empty (except the catch-all ``""``, which is then dropped), or a trainable parameter in no group when
    ``default_lr`` is None.
    """
    specs: list[tuple[str, float]] = []
    for i, (target, lr) in enumerate(groups):
        prefix = target if isinstance(target, str) else _module_prefix(net, target)
        if not lr > 0:
            raise ValueError(f"LR group {i} ({prefix!r}): learning rate must be > 0, got {lr}")
        if prefix in (p for p, _ in specs):
            raise ValueError(f"LR group {i}: prefix {prefix!r} is given twice")
        specs.append((prefix, float(lr)))
    module_names = {name for name, _ in net.named_modules()}
    param_names = [name for name, _ in net.named_parameters()]
    for prefix, _ in specs:
        if prefix and prefix not in module_names and prefix not in param_names:
            raise ValueError(
                f"LR group prefix {prefix!r} names no submodule of {type(net).__name__}; "
                f"top-level children: {[n for n, _ in net.named_children()]}"
            )
    members: dict[str, list[str]] = {p: [] for p, _ in specs}
    unassigned: list[str] = []
    for name, param in net.named_parameters():
        if not param.requires_grad:
            continue
        best = max((p for p, _ in specs if prefix_matches(name, p)), key=len, default=None)
        if best is None:
            unassigned.append(name)
        else:
            members[best].append(name)
    resolved = [ParamGroup(p, lr, tuple(members[p])) for p, lr in specs]
    if unassigned:
        if default_lr is None:
            shown = ", ".join(unassigned[:8]) + (" ..." if len(unassigned) > 8 else "")
            raise ValueError(
                f"{len(unassigned)} trainable parameter(s) are in no LR group ({shown}); add a group for "
                "them, freeze them (requires_grad=False) or give default_lr"
            )
        resolved.append(ParamGroup("default", float(default_lr), tuple(unassigned)))
    resolved = [g for g in resolved if g.param_names or g.name != ""]  # an empty catch-all is fine
    empty = [g.name for g in resolved if not g.param_names]
    if empty:
        raise ValueError(
            f"LR group(s) {empty} hold no trainable parameter (all frozen or taken by longer prefixes)"
        )
    return resolved


def build_adam(
    net: nn.Module,
    groups: Sequence[GroupSpec],
    *,
    default_lr: float | None = None,
    betas: tuple[float, float] = (0.9, 0.999),
    weight_decay: float = 0.0,
) -> torch.optim.Adam:
    """Adam over ``net``'s trainable parameters with one param group per spec (see module docstring).

    Each param group carries its ``name`` (the prefix, or ``"default"``), which logging uses as ``lr/<name>``.
    """
    params = dict(net.named_parameters())
    param_groups = [
        {"params": [params[n] for n in g.param_names], "lr": g.lr, "name": g.name or "all"}
        for g in resolve_param_groups(net, groups, default_lr)
    ]
    return torch.optim.Adam(param_groups, betas=betas, weight_decay=weight_decay)


def build_step_lr(
    optimizer: torch.optim.Optimizer, step_size: int, gamma: float
) -> torch.optim.lr_scheduler.StepLR:
    """Multiply every group's LR by ``gamma`` every ``step_size`` epochs (one scheduler step per epoch)."""
    if step_size < 1:
        raise ValueError(f"lr step_size must be >= 1, got {step_size}")
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=step_size, gamma=gamma)


def group_lrs(optimizer: torch.optim.Optimizer) -> dict[str, float]:
    """``{"lr/<group name>": lr}`` for every param group (unnamed groups are ``group<i>``)."""
    return {f"lr/{g.get('name', f'group{i}')}": float(g["lr"]) for i, g in enumerate(optimizer.param_groups)}
