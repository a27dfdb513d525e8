"""The frozen detector: torchvision Faster R-CNN (FPN), its image features and its raw detections.

Two configurations:

- ``resnet50_fpn``: torchvision's ``fasterrcnn_resnet50_fpn`` with ``FasterRCNN_ResNet50_FPN_Weights.COCO_V1``
  (the paper's detector), loaded from the local torch hub cache only; never downloaded.
- ``tiny``: a small CPU-sized FPN Faster R-CNN (own 4-stage conv backbone, two pyramid levels at strides
  8 and 16) trained briefly on the synthetic set (:mod:`ltr.detection.detector_train`).

:class:`FrozenDetector` exposes what the energy head needs: the FPN levels of a batch of images, the scale
from original to network-input pixels, and the detections *before* NMS (guided NMS is ours).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ltr.dataset.base import DatasetError


class WeightsMissingError(DatasetError):
    """Pretrained detector weights are not in the local cache; the message names the file and folder."""


@dataclass(frozen=True)
class LevelSpec:
    """FPN levels used for pooling: names, strides (pixels per feature cell), and the level mapping.

    A box of size s = sqrt(w h) (network-input pixels) is pooled from level index
    clamp(floor(canonical_level + log2(s / canonical_size)), 0, len(names) - 1) (the FPN paper's rule).
    """

    names: tuple[str, ...]
    strides: tuple[int, ...]
    canonical_size: float
    canonical_level: int

    def assign(self, boxes_xywh: Tensor) -> Tensor:
        """(N, 4) xywh boxes -> (N,) long level indices."""
        size = (boxes_xywh[:, 2].clamp(min=1e-6) * boxes_xywh[:, 3].clamp(min=1e-6)).sqrt()
        level = torch.floor(self.canonical_level + torch.log2(size / self.canonical_size))
        return level.clamp(0, len(self.names) - 1).long()


RESNET50_LEVELS = LevelSpec(("0", "1", "2", "3"), (4, 8, 16, 32), 224.0, 2)
TINY_LEVELS = LevelSpec(("0", "1"), (8, 16), 48.0, 1)


class TinyFPNBackbone(nn.Module):
    """Four stride-2 conv stages (strides 2..16) and a two-level FPN on strides 8 and 16.

    forward: (B, 3, H, W) -> OrderedDict {"0": (B, C, H/8, W/8), "1": (B, C, H/16, W/16)}, C = out_channels.
    """

    def __init__(self, *, out_channels: int = 64, width: int = 32) -> None:
        super().__init__()

        def stage(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
            )

        self.stem = nn.Sequential(stage(3, width // 2), stage(width // 2, width))
        self.c3 = stage(width, 2 * width)
        self.c4 = stage(2 * width, 4 * width)
        self.lat3 = nn.Conv2d(2 * width, out_channels, 1)
        self.lat4 = nn.Conv2d(4 * width, out_channels, 1)
        self.out3 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.out4 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.out_channels = out_channels

    def forward(self, x: Tensor) -> OrderedDict[str, Tensor]:
        c3 = self.c3(self.stem(x))
        c4 = self.c4(c3)
        p4 = self.lat4(c4)
        p3 = self.lat3(c3) + nn.functional.interpolate(p4, size=c3.shape[-2:], mode="nearest")
        return OrderedDict([("0", self.out3(p3)), ("1", self.out4(p4))])


def build_tiny_detector(num_classes: int, image_size: int) -> nn.Module:
    """A small FPN Faster R-CNN for ``num_classes`` object classes (+ background), input ``image_size``."""
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.ops import MultiScaleRoIAlign

    backbone = TinyFPNBackbone()
    anchors = AnchorGenerator(sizes=((16, 24, 32), (48, 64, 96)), aspect_ratios=((0.5, 1.0, 2.0),) * 2)
    pool = MultiScaleRoIAlign(featmap_names=["0", "1"], output_size=7, sampling_ratio=2)
    return FasterRCNN(
        backbone,
        num_classes=None,
        min_size=image_size,
        max_size=image_size,
        rpn_anchor_generator=anchors,
        box_roi_pool=pool,
        box_head=TwoMLPHead(backbone.out_channels * 49, 256),
        box_predictor=FastRCNNPredictor(256, num_classes + 1),
        rpn_pre_nms_top_n_train=600,
        rpn_post_nms_top_n_train=300,
        rpn_pre_nms_top_n_test=300,
        rpn_post_nms_top_n_test=150,
        box_batch_size_per_image=128,
    )


def pretrained_weights_path() -> Path:
    """Where torchvision's COCO_V1 Faster R-CNN ResNet50-FPN weights must lie in the local torch hub cache."""
    from torchvision.models.detection import FasterRCNN_ResNet50_FPN_Weights

    url = FasterRCNN_ResNet50_FPN_Weights.COCO_V1.url
    return Path(torch.hub.get_dir()) / "checkpoints" / url.rsplit("/", 1)[-1]


def check_pretrained_weights() -> Path:
    """The cached weights file, or :class:`WeightsMissingError` naming the file and where to put it."""
    path = pretrained_weights_path()
    if not path.is_file():
        from torchvision.models.detection import FasterRCNN_ResNet50_FPN_Weights

        raise WeightsMissingError(
            f"the COCO Faster R-CNN weights file {path.name} is not in the local torch hub cache: put it at "
            f"{path} (from {FasterRCNN_ResNet50_FPN_Weights.COCO_V1.url}; set TORCH_HOME to use another cache). "
            "Nothing is downloaded. For a run without it use a *_tiny setting (e.g. detection nce_plus_tiny)."
        )
    return path


def build_resnet50_detector(
    weights: str = "coco_v1", *, min_size: int = 800, max_size: int = 1333
) -> nn.Module:
    """torchvision's FPN Faster R-CNN ResNet50 (91 COCO labels = COCO category ids).

    Args:
        weights: ``"coco_v1"``: ``FasterRCNN_ResNet50_FPN_Weights.COCO_V1`` from the local cache (see
            :func:`check_pretrained_weights`; never downloaded). ``"random"``: the same architecture with
            random weights and no ImageNet backbone (``weights=None, weights_backbone=None``), an explicit
            opt-in that needs no file; only for exercising the code path.
        min_size, max_size: torchvision's resize of the image's shorter / longer side (defaults 800, 1333).
    """
    from torchvision.models.detection import FasterRCNN_ResNet50_FPN_Weights, fasterrcnn_resnet50_fpn

    if weights == "random":
        return fasterrcnn_resnet50_fpn(
            weights=None, weights_backbone=None, num_classes=91, min_size=min_size, max_size=max_size
        )
    if weights != "coco_v1":
        raise ValueError(f"detector weights must be 'coco_v1' or 'random', got {weights!r}")
    check_pretrained_weights()
    return fasterrcnn_resnet50_fpn(
        weights=FasterRCNN_ResNet50_FPN_Weights.COCO_V1, progress=False, min_size=min_size, max_size=max_size
    )


class FrozenDetector(nn.Module):
    """A torchvision Faster R-CNN in eval mode with no trainable parameters.

    Args:
        detector: a torchvision ``GeneralizedRCNN`` (FasterRCNN).
        levels: the FPN levels pooled by the energy head.
        label_to_category: detector label -> COCO category id (identity for the COCO weights).
        raw_detections: detections kept per image before NMS (the candidates for guided NMS).
    """

    def __init__(
        self,
        detector: nn.Module,
        levels: LevelSpec,
        label_to_category: dict[int, int] | None = None,
        *,
        raw_detections: int = 300,
        score_thresh: float = 0.05,
    ) -> None:
        super().__init__()
        self.detector = detector.eval()
        for p in self.detector.parameters():
            p.requires_grad_(False)
        self.levels = levels
        self.label_to_category = label_to_category
        roi = self.detector.roi_heads
        roi.nms_thresh = 1.01  # IoU never exceeds 1: the detector's own NMS is off, guided NMS follows
        roi.detections_per_img = raw_detections
        roi.score_thresh = score_thresh

    def train(self, mode: bool = True) -> FrozenDetector:  # the detector stays in eval mode (frozen BN)
        super().train(mode)
        self.detector.eval()
        return self

    @property
    def out_channels(self) -> int:
        return int(self.detector.backbone.out_channels)

    def category(self, labels: Tensor) -> list[int]:
        """Detector labels (K,) -> COCO category ids."""
        if self.label_to_category is None:
            return [int(v) for v in labels.tolist()]
        return [self.label_to_category[int(v)] for v in labels.tolist()]

    @torch.no_grad()
    def features(self, images: list[Tensor]) -> tuple[list[Tensor], Tensor]:
        """FPN features of a batch of images.

        Args:
            images: B tensors (3, H_b, W_b), RGB in [0, 1].

        Returns:
            (features, scale): one (B, C, h_l, w_l) tensor per pooled level (``self.levels``), and (B, 2)
            (sx, sy) network-input pixels per original pixel (boxes are multiplied by it).
        """
        image_list, _ = self.detector.transform(images)
        feats = self.detector.backbone(image_list.tensors)
        return [feats[name] for name in self.levels.names], self._scale(images, image_list)

    @torch.no_grad()
    def run(self, images: list[Tensor]) -> tuple[list[Tensor], Tensor, list[dict[str, Tensor]]]:
        """Features (as :meth:`features`) and the detections before NMS, from one backbone pass.

        Detections: per image {"boxes": (K, 4) xyxy original pixels, "scores": (K,), "labels": (K,)}.
        """
        det = self.detector
        original_sizes = [(int(img.shape[-2]), int(img.shape[-1])) for img in images]
        image_list, _ = det.transform(images)
        feats = det.backbone(image_list.tensors)
        proposals, _ = det.rpn(image_list, feats)
        detections, _ = det.roi_heads(feats, proposals, image_list.image_sizes)
        detections = det.transform.postprocess(detections, image_list.image_sizes, original_sizes)
        return [feats[name] for name in self.levels.names], self._scale(images, image_list), detections

    @staticmethod
    def _scale(images: list[Tensor], image_list) -> Tensor:
        return torch.tensor(
            [
                [new[1] / img.shape[-1], new[0] / img.shape[-2]]
                for img, new in zip(images, image_list.image_sizes, strict=True)
            ],
            dtype=torch.float32,
            device=image_list.tensors.device,
        )


def scale_boxes_xywh(boxes: Tensor, scale: Tensor) -> Tensor:
    """(N, 4) xywh boxes times per-box (N, 2) (sx, sy) scale -> (N, 4) xywh."""
    return boxes * scale.repeat(1, 2)
