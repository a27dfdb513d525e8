"""The 1D-regression actor: one ``Toy1DNet`` scored by an :mod:`ltr.ebm` method on a batch of (x, y)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ltr.ebm import LossResult
from ltr.models.toy1d import Toy1DNet


class Regression1DActor:
    """``actor((x, y)) -> (loss, stats)`` for x (B, 1), y (B, 1): the method's loss of f(x, y) at the labels.

    The x branch runs once per example and scores every candidate the method asks for (the label and its
    samples, (B, S, 1)). The method draws its samples from ``generator``; pass the same generator to the
    trainer's ``generators`` so that a resumed run continues the stream exactly.
    """

    def __init__(self, net: Toy1DNet, method: Callable[..., LossResult], generator: torch.Generator) -> None:
        self.net = net
        self.method = method
        self.generator = generator

    def __call__(self, batch: Sequence[Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        x, y = batch
        hx = self.net.x_features(x)
        result = self.method(
            lambda candidates: self.net.score_from_features(hx, candidates), y, generator=self.generator
        )
        return result.loss, result.stats
