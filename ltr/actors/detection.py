"""The detection study's actors: the energy head on a frozen detector, and the tiny detector itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor, nn

from ltr.detection.detector import FrozenDetector
from ltr.detection.energy import BoxScorer
from ltr.ebm import LossResult
from ltr.models.detection import DetectionEnergyHead


class EnergyHeadActor:
    """``actor((images, boxes, index)) -> (loss, stats)``: the EBM method's loss of the head at the GT boxes.

    Batch: ``images`` a list of B (3, H, W) float images (original pixels), ``boxes`` (N, 4) xywh ground truth
    in original pixels, ``index`` (N,) long, the image of each box. The frozen detector gives the features
    and each image's resize scale; the boxes, scaled to network-input pixels, are the reference boxes, and
    the method scores candidates in the rel space around them (label 0). Samples are drawn from
    ``generator`` (pass it to the trainer's ``generators`` for an exact resume).
    """

    def __init__(
        self,
        head: DetectionEnergyHead,
        detector: FrozenDetector,
        method: Callable[..., LossResult],
        generator: torch.Generator,
    ) -> None:
        self.net = head
        self.detector = detector
        self.method = method
        self.generator = generator

    def __call__(self, batch: Sequence[object]) -> tuple[Tensor, dict[str, Tensor]]:
        images, boxes, index = batch
        features, scale = self.detector.features(images)
        reference = boxes * scale[index].repeat(1, 2)
        scorer = BoxScorer(self.net, features, self.detector.levels, reference, index)
        result = self.method(scorer, reference.new_zeros(len(reference), 4), generator=self.generator)
        return result.loss, result.stats


class DetectorActor:
    """``actor((images, targets)) -> (loss, stats)`` for a torchvision detector in train mode.

    Batch: ``images`` a list of (3, H, W) float images, ``targets`` one dict per image with ``boxes`` (K, 4)
    xyxy pixels and ``labels`` (K,) long. The loss is the sum of the detector's losses; each is a stat.
    """

    def __init__(self, net: nn.Module) -> None:
        self.net = net

    def __call__(
        self, batch: tuple[list[Tensor], list[Mapping[str, Tensor]]]
    ) -> tuple[Tensor, dict[str, Tensor]]:
        images, targets = batch
        losses: dict[str, Tensor] = self.net(images, targets)
        return sum(losses.values()), {k: v.detach() for k, v in losses.items()}
