"""Training only some parts of a network: the other parts are frozen.

A part is named by its module prefix (as the LR groups of :mod:`ltr.trainers.optim` are). A frozen part gets
no gradient (``requires_grad=False``, so the optimiser never sees it) and its BatchNorm layers stay in eval
mode while the network trains, so that they neither normalise with batch statistics nor update their running
statistics: the part computes exactly what it computed before training and its weights and buffers stay
bit-identical. Putting BatchNorm back into eval mode is the caller's job after every ``net.train(True)``
(an actor's ``train`` method, which the trainer calls, is the place).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from ltr.trainers.optim import prefix_matches


def _check_prefixes(net: nn.Module, prefixes: Sequence[str]) -> None:
    modules = {name for name, _ in net.named_modules()}
    bad = [p for p in prefixes if p not in modules]
    if bad:
        raise ValueError(
            f"{bad} name no submodule of {type(net).__name__}; "
            f"top-level children: {[n for n, _ in net.named_children()]}"
        )


def freeze_parts(net: nn.Module, prefixes: Sequence[str]) -> list[str]:
    """Set ``requires_grad=False`` on every parameter under one of ``prefixes`` (submodule paths).

    Returns the names of the parameters frozen. Raises ValueError for a prefix that names no submodule.
    """
    _check_prefixes(net, prefixes)
    frozen = []
    for name, param in net.named_parameters():
        if any(prefix_matches(name, p) for p in prefixes):
            param.requires_grad_(False)
            frozen.append(name)
    return frozen


def eval_batchnorm(net: nn.Module, prefixes: Sequence[str]) -> None:
    """Put every BatchNorm layer under one of ``prefixes`` into eval mode (the rest keeps its mode)."""
    _check_prefixes(net, prefixes)
    for name, module in net.named_modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and any(
            prefix_matches(name, p) for p in prefixes
        ):
            module.eval()


__all__ = ["eval_batchnorm", "freeze_parts"]
