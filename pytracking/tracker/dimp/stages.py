"""The tracker's one seam to its network: every network call of :class:`~.tracker.DiMPTracker` goes through a
:class:`NetworkStages` object, so a speed-up replaces the calls while the tracker's per-frame logic stays.

:class:`TorchStages` is the plain eager path (with ``params.compile``, the per-frame backbone, classifier
feature head and box score through :mod:`.compiled`); ``params.backend="onnxruntime"`` gives
:class:`pytracking.onnx.runtime.OrtStages`, the networks exported by :mod:`pytracking.export_onnx` run by
ONNX Runtime. Shapes: crops (N, 3, H, W) ImageNet-normalised; classification features (N, C, h, w); filters
(B, C, k, k), one per sequence; boxes xywh crop pixels; modulation ((B, M2), (B, M3)).

The per-frame calls (``backbone``, ``clf_features``, ``classify``, ``box_features``, ``box_score_grad``) take a
batch of B sequences' crops when the stages are ``batched`` (:mod:`.lockstep`); else B is 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from ltr.ebm.predict import value_and_grad
from ltr.models.tracking import BOX_LAYERS, DiMPNet
from pytracking.tracker.dimp.box_window import WindowRule, ascend_within, cut_cells, paste_cells
from pytracking.tracker.dimp.compiled import compiled_box_score, compiled_stage
from pytracking.tracker.dimp.frames import upload
from pytracking.tracker.dimp.graphed import graphed_ascent
from pytracking.tracker.dimp.params import DiMPParams, Geometry
from pytracking.tracker.dimp.refine import AscentOptions, ascend

Pair = tuple[Tensor, Tensor]

__all__ = ["NetworkStages", "TorchStages", "network_stages"]


class NetworkStages(Protocol):
    """What the tracker asks of its network (module docstring for the shapes).

    ``backbone`` / ``clf_features``: the per-frame crop (batch 1); ``init_backbone`` / ``init_clf_features``:
    the first frame's augmented crops (batch N).
    """

    backbone: Callable[[Tensor], dict[str, Tensor]]
    clf_features: Callable[[Tensor], Tensor]
    #: whether the per-frame calls take B > 1 sequences at once
    batched: bool

    def init_backbone(self, images: Tensor) -> dict[str, Tensor]:
        """(N, 3, H, W) crops -> {"layer2": ..., "layer3": ...}."""
        ...

    def init_clf_features(self, layer3: Tensor) -> Tensor:
        """(N, C3, h, w) -> (N, C, h, w)."""
        ...

    def classify(self, filters: Tensor, clf: Tensor) -> Tensor:
        """Raw scores (B, H', W') of B filters (B, C, k, k), each on its sequence's features (B, C, h, w)."""
        ...

    def box_features(self, feats: dict[str, Tensor], modulation: Pair) -> tuple[Tensor, ...]:
        """The box head's per-frame features of B crops' backbone features, each crop with its own
        sequence's modulation ((B, M2), (B, M3)), in the form :meth:`box_score_grad` and :meth:`ascend` take:
        the modulated test features, or what a backend makes of them (ONNX Runtime: their inputs, from which
        the ascent computes the features on the window of the maps its boxes read)."""
        ...

    def box_score_grad(self, modulated: tuple[Tensor, ...], boxes: Tensor) -> tuple[Tensor, Tensor]:
        """f (B, S) of (B, S, 4) xywh boxes on B crops' :meth:`box_features`, and df/dboxes (B, S, 4)."""
        ...

    def ascend(
        self, modulated: tuple[Tensor, ...], boxes: Tensor, options: AscentOptions
    ) -> tuple[Tensor, Tensor]:
        """The refinement's ascent (:func:`~.refine.ascend` of :meth:`box_score_grad`) of (B, S, 4) xywh candidates
        (on the host or the network's device) on B crops' :meth:`box_features`: refined boxes (B, S, 4) and
        scores (B, S), on the network's device."""
        ...

    def modulation(self, feats: dict[str, Tensor], box: Tensor) -> Pair:
        """Modulation vectors of a reference crop's features (batch 1) and its (1, 4) xywh box."""
        ...

    def initial_filter(self, clf: Tensor, boxes: Tensor, num_iter: int) -> Tensor:
        """Filter (1, C, k, k) from (S, C, h, w) features and (S, 4) boxes: initializer + ``num_iter`` steps."""
        ...

    def optimize(self, filters: Tensor, clf: Tensor, boxes: Tensor, weights: Tensor, num_iter: int) -> Tensor:
        """``num_iter`` filter optimizer steps from B filters (B, C, k, k), each on its sequence's samples:
        (S, B, C, h, w) features, (S, B, 4) boxes, (S, B) weights (a zero weight leaves a sample out)."""
        ...


#: pixels to which the box windows' sides are rounded up, for one image and for a batch: the sizes a batch's
#: windows come in are batched one by one, and every new size costs the convolutions a set-up
WINDOW_STEPS = (32, 64)


class TorchStages:
    """The network's own modules, eager (the per-frame backbone, feature head and box score compiled if
    asked; with ``cuda_graph`` on a CUDA device, the plain ascent replayed as one CUDA graph).

    The box head's test features are computed on the window of the maps that each image's refinement reads
    (:mod:`.box_window`): its starting boxes' extent with a margin, the test branches' halo included. An image
    whose boxes leave the window during the ascent is refined again on the whole maps, so the boxes are the
    whole maps' up to float rounding.
    """

    batched = True

    def __init__(self, net: DiMPNet, *, compile: bool = False, cuda_graph: bool = False) -> None:
        self.net = net
        on_cuda = next(net.parameters()).device.type == "cuda"
        self._graphed = graphed_ascent(net.box_head) if cuda_graph and on_cuda else None
        self.backbone: Callable[[Tensor], dict[str, Tensor]] = net.backbone
        self.clf_features: Callable[[Tensor], Tensor] = net.classifier.feature_head
        self._box_score: Callable[[Tensor, Tensor, Tensor], Tensor] | None = None
        if compile:
            self.backbone = compiled_stage(net.backbone, "backbone")
            self.clf_features = compiled_stage(net.classifier.feature_head, "classifier feature head")
            self._box_score = compiled_box_score(net.box_head)
        self.window_rule = WindowRule.of_head(net.box_head)

    def init_backbone(self, images: Tensor) -> dict[str, Tensor]:
        return self.net.backbone(images)

    def init_clf_features(self, layer3: Tensor) -> Tensor:
        return self.net.classifier.extract_features(layer3)

    def classify(self, filters: Tensor, clf: Tensor) -> Tensor:
        return self.net.classifier.classify(filters, clf[None])[0]

    def box_features(self, feats: dict[str, Tensor], modulation: Pair) -> tuple[Tensor, ...]:
        """The box test features' inputs (layer2, layer3, mod2, mod3), which :meth:`box_score_grad` and
        :meth:`ascend` take: they compute the features on the window of the maps that their boxes read."""
        return (feats[BOX_LAYERS[0]], feats[BOX_LAYERS[1]], *modulation)

    def modulated(self, inputs: tuple[Tensor, ...], boxes: Tensor) -> tuple[Pair, Tensor | None]:
        """The modulated test features of :meth:`box_features`' ``inputs`` at the maps' size ((B, M2, H2, W2),
        (B, M3, H3, W3)), computed on each image's window for its boxes (B, S, 4) xywh (best on the host: the
        windows' sizes are host numbers) and zero elsewhere, and
        the windows' limits (B, 4) (:meth:`.box_window.BoxWindow.limits`); None when every window is the
        whole maps."""
        layer2, layer3, mod2, mod3 = inputs
        head = self.net.box_head
        n = layer2.shape[0]
        sizes = [(layer2.shape[-2], layer2.shape[-1]), (layer3.shape[-2], layer3.shape[-1])]
        host = boxes.detach().to("cpu", torch.float64).numpy()  # from a device: a synchronisation
        step = WINDOW_STEPS[n > 1]
        windows = [self.window_rule.window(b, sizes, step) for b in host]
        if all(w.is_whole for w in windows):
            return self._whole_features(inputs), None
        limits = upload(np.array([w.limits() for w in windows]), layer2.device, boxes.dtype)
        out = [
            layer.new_zeros(n, m.shape[1], *size)
            for layer, m, size in zip((layer2, layer3), (mod2, mod3), sizes)
        ]
        groups: dict[tuple, list[int]] = {}  # images whose windows have one shape, batched together
        for i, window in enumerate(windows):
            groups.setdefault(window.shape, []).append(i)
        for shape, members in groups.items():
            rows = upload(members, layer2.device, torch.int64)
            starts = upload(np.stack([windows[i].starts() for i in members]), layer2.device)  # (n, 3, 2, 2)
            cut = [
                cut_cells(layer.index_select(0, rows), starts[:, 0, k], shape[k])
                for k, layer in enumerate((layer2, layer3))
            ]
            test = head.get_test_features(cut)
            trusted = [cut_cells(t, starts[:, 1, k], shape[2 + k]) for k, t in enumerate(test)]
            modulated = head.modulate((mod2.index_select(0, rows), mod3.index_select(0, rows)), trusted)
            for k, values in enumerate(modulated):
                paste_cells(out[k], rows, values, starts[:, 2, k])
        return (out[0], out[1]), limits

    def _whole_features(self, inputs: tuple[Tensor, ...]) -> Pair:
        layer2, layer3, mod2, mod3 = inputs
        head = self.net.box_head
        return head.modulate((mod2, mod3), head.get_test_features([layer2, layer3]))

    def box_score(self, modulated: Pair, boxes: Tensor) -> Tensor:
        """f (B, S) of (B, S, 4) xywh boxes on modulated test features (differentiable)."""
        if self._box_score is not None:
            return self._box_score(*modulated, boxes)
        return self.net.box_head.score_modulated(modulated, boxes)

    def box_score_grad(self, inputs: tuple[Tensor, ...], boxes: Tensor) -> tuple[Tensor, Tensor]:
        modulated, _ = self.modulated(inputs, boxes)
        return self._score_grad(modulated, upload(boxes, inputs[0].device))

    def _score_grad(self, modulated: Pair, boxes: Tensor) -> tuple[Tensor, Tensor]:
        return value_and_grad(lambda b: self.box_score(modulated, b), boxes)

    def ascend(
        self, inputs: tuple[Tensor, ...], boxes: Tensor, options: AscentOptions
    ) -> tuple[Tensor, Tensor]:
        modulated, limits = self.modulated(inputs, boxes)
        boxes = upload(boxes, inputs[0].device)
        refined, scores, held = self._ascend(modulated, boxes, limits, options)
        # one synchronisation: the images whose boxes left their windows are refined again on the whole maps
        if held is not None and not bool(held.all()):
            again = (~held).nonzero().flatten()
            whole = self._whole_features(tuple(t.index_select(0, again) for t in inputs))
            redone, rescored, _ = self._ascend(whole, boxes.index_select(0, again), None, options)
            refined, scores = refined.index_copy(0, again, redone), scores.index_copy(0, again, rescored)
        return refined, scores

    def _ascend(
        self, modulated: Pair, boxes: Tensor, limits: Tensor | None, options: AscentOptions
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Refined boxes, scores and whether each image's boxes stayed within its window's ``limits`` (B,)
        bool (None without limits: the whole maps)."""
        if self._graphed is not None and options.mode == "plain":
            if limits is None:  # made on the device: a copy from the host would wait for its queue
                unlimited = boxes.new_full((boxes.shape[0], 4), math.inf)
                unlimited[:, :2] = -math.inf
                return (*self._graphed(modulated, boxes, unlimited, options)[:2], None)
            return self._graphed(modulated, boxes, limits, options)
        if limits is None:
            return (*ascend(partial(self._score_grad, modulated), boxes, **options._asdict()), None)
        return ascend_within(partial(self._score_grad, modulated), boxes, limits, options)

    def modulation(self, feats: dict[str, Tensor], box: Tensor) -> Pair:
        return self.net.box_head.get_modulation([feats[n] for n in BOX_LAYERS], box)

    def initial_filter(self, clf: Tensor, boxes: Tensor, num_iter: int) -> Tensor:
        return self.net.classifier.get_filter(clf[:, None], boxes[:, None], num_iter=num_iter).filters

    def optimize(self, filters: Tensor, clf: Tensor, boxes: Tensor, weights: Tensor, num_iter: int) -> Tensor:
        optimizer = self.net.classifier.optimizer
        return optimizer(filters, clf, boxes, sample_weight=weights, num_iter=num_iter).filters


def network_stages(net: DiMPNet, geometry: Geometry, params: DiMPParams) -> NetworkStages:
    """The stages ``params.backend`` names for ``net`` (ONNX Runtime: the models in ``params.onnx_dir``,
    checked against ``net``, ``geometry`` and ``params``; ``pytracking.onnx.manifest.OnnxExportError`` if
    they do not fit)."""
    if params.backend == "onnxruntime":
        from pytracking.onnx.runtime import OrtStages

        return OrtStages.open(params.onnx_dir, net, geometry, params)
    return TorchStages(net, compile=params.compile, cuda_graph=params.cuda_graph)
