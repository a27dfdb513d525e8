"""The tracker's network calls as fixed-shape modules, ready for ONNX export (:mod:`pytracking.export_onnx`).

Each part wraps the modules of one :class:`~ltr.models.tracking.DiMPNet` (shared weights, nothing copied) and
computes what :class:`~pytracking.tracker.dimp.tracker.DiMPTracker` asks of the network at one call site.
Tensor inputs and outputs only, so that ``torch.onnx.export`` records them as graph inputs and outputs.
Boxes are xywh crop pixels; ``k`` is the filter size, (h, w) the classification feature map, (H', W') the
score map (:meth:`DiMPNet.score_map_size`).

The two parts that pool boxes once per call (:class:`Modulation`, :class:`InitialFilter`) use
:func:`ltr.ops.prroi_pool.prroi_pool_dense` instead of the tracker's :func:`~ltr.ops.prroi_pool.prroi_pool`:
the same values without the window that ``prroi_pool`` cuts around the boxes (a shape that depends on the box
values, which a traced graph would freeze). The box score, which the refinement calls ten times per frame on
one frame's features, pools from summed-area tables made once per frame (:class:`BoxTables`,
:func:`ltr.ops.prroi_integral.prroi_pool_integral`): the same values, at a cost per box that does not grow with
the feature maps.

:func:`box_score_and_grad` gives the refinement's f and df/dbox as ONE traced graph: ``make_fx`` records the
forward operations and the backward operations that autograd runs for them (``torch.export`` cannot record a
``torch.autograd.grad`` call inside a module), and that graph is what is exported.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.fx.experimental.proxy_tensor import make_fx

from ltr.models.bbreg import TEST_POOL_SIZES
from ltr.models.tracking import BOX_LAYERS, CLF_LAYER, DiMPNet
from ltr.ops.boxes import xywh_to_xyxy
from ltr.ops.prroi_integral import SummedAreaTable, prroi_pool_integral, summed_area_table
from ltr.ops.prroi_pool import prroi_pool_dense

__all__ = [
    "BackboneFeatures",
    "BoxScore",
    "BoxTables",
    "BoxTestFeatures",
    "ClassifierFeatures",
    "ClassifierScores",
    "FilterSteps",
    "InitialFilter",
    "Modulation",
    "box_score_and_grad",
]


def _xyxy(boxes_xywh: Tensor) -> Tensor:
    return torch.cat([boxes_xywh[..., :2], boxes_xywh[..., :2] + boxes_xywh[..., 2:]], dim=-1)


class BackboneFeatures(nn.Module):
    """images (N, 3, H, W) ImageNet-normalised crops -> (layer2 (N, C2, H/8, W/8), layer3 (N, C3, h, w))."""

    def __init__(self, net: DiMPNet) -> None:
        super().__init__()
        self.backbone = net.backbone

    def forward(self, images: Tensor) -> tuple[Tensor, Tensor]:
        feats = self.backbone(images)
        return feats[BOX_LAYERS[0]], feats[CLF_LAYER]


class ClassifierFeatures(nn.Module):
    """layer3 (N, C3, h, w) -> classification features (N, C, h, w)."""

    def __init__(self, net: DiMPNet) -> None:
        super().__init__()
        self.feature_head = net.classifier.feature_head

    def forward(self, layer3: Tensor) -> Tensor:
        return self.feature_head(layer3)


class ClassifierScores(nn.Module):
    """(filter (1, C, k, k), features (1, C, h, w)) -> raw scores (1, 1, H', W') (before any softmax)."""

    def __init__(self, net: DiMPNet) -> None:
        super().__init__()
        self.classifier = net.classifier

    def forward(self, filters: Tensor, features: Tensor) -> Tensor:
        return self.classifier.classify(filters, features[:, None])


class BoxTestFeatures(nn.Module):
    """(layer2 (1, C2, H2, W2), layer3 (1, C3, h, w), modulation (1, M2), (1, M3)) -> the box head's modulated
    test features ((1, M2, H2, W2), (1, M3, h, w)): ``get_test_features`` then ``modulate``."""

    def __init__(self, net: DiMPNet) -> None:
        super().__init__()
        self.box_head = net.box_head

    def forward(self, layer2: Tensor, layer3: Tensor, mod2: Tensor, mod3: Tensor) -> tuple[Tensor, Tensor]:
        test = self.box_head.get_test_features([layer2, layer3])
        return self.box_head.modulate((mod2, mod3), test)  # type: ignore[return-value]


class BoxTables(nn.Module):
    """(modulated (1, M2, H2, W2), (1, M3, h, w)) -> their summed-area tables and means (table2
    (1, H2 + 1, W2 + 1, M2), mean2 (1, M2), table3, mean3): :func:`~ltr.ops.prroi_integral.summed_area_table`,
    once per frame, for :class:`BoxScore`."""

    def forward(self, mod2: Tensor, mod3: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return (*summed_area_table(mod2), *summed_area_table(mod3))


class BoxScore(nn.Module):
    """(table2, mean2, table3, mean3 of :class:`BoxTables`, boxes (1, S, 4) xywh) -> f (1, S): the box head's
    ``score_modulated``, pooling with :func:`~ltr.ops.prroi_integral.prroi_pool_integral`."""

    def __init__(self, net: DiMPNet) -> None:
        super().__init__()
        self.box_head = net.box_head

    def forward(self, table2: Tensor, mean2: Tensor, table3: Tensor, mean3: Tensor, boxes: Tensor) -> Tensor:
        head = self.box_head
        xyxy = xywh_to_xyxy(boxes.to(table2.dtype))
        pooled = [
            prroi_pool_integral(SummedAreaTable(table, mean), xyxy, size, 1.0 / stride).flatten(0, 1)
            for table, mean, size, stride in zip(
                (table2, table3), (mean2, mean3), TEST_POOL_SIZES, head.strides, strict=True
            )
        ]
        return head.score_pooled(*pooled).reshape(boxes.shape[:2])


def box_score_and_grad(net: DiMPNet, tables: Sequence[Tensor], boxes: Tensor) -> nn.Module:
    """A traced module ``(table2, mean2, table3, mean3, boxes (1, S, 4) xywh) -> (f (1, S), df/dboxes
    (1, S, 4))`` (:class:`BoxScore` and its gradient).

    Traced with ``make_fx`` at the shapes of the example inputs (``tables``: :class:`BoxTables`' outputs;
    every box's f depends on its own box only in eval mode, so the gradient of the sum is each box's
    gradient). The network's weights must not require grad (:func:`~pytracking.tracker.dimp.network.load_network`
    freezes them).
    """
    score = BoxScore(net).eval()

    def value_and_grad(t2: Tensor, m2: Tensor, t3: Tensor, m3: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        with torch.enable_grad():
            y = y.detach().requires_grad_(True)
            f = score(t2, m2, t3, m3, y)
            (g,) = torch.autograd.grad(f.sum(), y)
        return f.detach(), g

    return make_fx(value_and_grad)(*tables, boxes)


class Modulation(nn.Module):
    """(layer2 (1, C2, H2, W2), layer3 (1, C3, h, w), box (1, 4) xywh) -> modulation ((1, M2), (1, M3)): the
    box head's ``get_modulation`` with the dense pooling."""

    def __init__(self, net: DiMPNet) -> None:
        super().__init__()
        self.box_head = net.box_head

    def forward(self, layer2: Tensor, layer3: Tensor, box: Tensor) -> tuple[Tensor, Tensor]:
        head = self.box_head
        xyxy = _xyxy(box.to(layer2.dtype))[:, None]  # (1, 1, 4)
        p2 = prroi_pool_dense(head.ref_conv2(layer2), xyxy, 3, 1.0 / head.strides[0])[:, 0]
        p2 = head.ref_fc2(p2)
        p3 = prroi_pool_dense(head.ref_conv3(layer3), xyxy, 1, 1.0 / head.strides[1])[:, 0]
        cat = torch.cat([p2, p3], dim=1)
        return head.mod2(cat).flatten(1), head.mod3(cat).flatten(1)


class InitialFilter(nn.Module):
    """(features (S, C, h, w), boxes (S, 4) xywh) -> the filter initializer's filter (1, C, k, k) (with the
    dense pooling); the optimizer's steps are :class:`FilterSteps`."""

    def __init__(self, net: DiMPNet) -> None:
        super().__init__()
        self.initializer = net.classifier.initializer

    def forward(self, features: Tensor, boxes: Tensor) -> Tensor:
        init = self.initializer
        x = init.conv(features)
        xyxy = _xyxy(boxes.to(x.dtype))[:, None]
        pooled = prroi_pool_dense(x, xyxy, init.filter_size, 1.0 / init.feature_stride)  # (S, 1, C, k, k)
        return pooled[:, 0].mean(dim=0, keepdim=True)


class FilterSteps(nn.Module):
    """(filter (1, C, k, k), features (S, C, h, w), boxes (S, 4) xywh, weights (S,)) -> filter (1, C, k, k):
    ``num_iter`` filter optimizer steps on the sample memory (S may vary: a dynamic axis of the export)."""

    def __init__(self, net: DiMPNet, num_iter: int) -> None:
        super().__init__()
        self.optimizer = net.classifier.optimizer
        self.num_iter = num_iter

    def forward(self, filters: Tensor, features: Tensor, boxes: Tensor, weights: Tensor) -> Tensor:
        result = self.optimizer(
            filters, features[:, None], boxes[:, None], sample_weight=weights[:, None], num_iter=self.num_iter
        )
        return result.filters
