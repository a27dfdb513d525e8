"""The DiMP target classifier: feature head, filter initializer, steepest-descent optimizer, correlation."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from ltr.models.target_classifier.features import ClassifierFeatureHead
from ltr.models.target_classifier.filter_ops import apply_filter
from ltr.models.target_classifier.initializer import FilterInitializer
from ltr.models.target_classifier.newton_kl import SteepestDescentNewtonKL
from ltr.models.target_classifier.optimizer import OptimizerResult, SteepestDescentGN


class ClassifierOutput(NamedTuple):
    """Classifier outputs.

    scores: (num_iter + 1, S_te, B, H', W') test score maps of the initial filter and of every optimizer
    iterate; filters: (B, C, k, k) final filter; optimizer: the optimizer's result (iterates, losses).
    """

    scores: Tensor
    filters: Tensor
    optimizer: OptimizerResult


def _flatten(x: Tensor) -> Tensor:
    return x.reshape(-1, *x.shape[-3:])


class LinearFilterClassifier(nn.Module):
    """Target classifier of DiMP.

    ``forward(train_feats (S_tr, B, C_in, H, W), test_feats (S_te, B, C_in, H, W), train_boxes (S_tr, B, 4))``
    with backbone features (layer3) and xywh image-pixel boxes returns a :class:`ClassifierOutput`.
    The tracker uses the parts: :meth:`extract_features`, :meth:`initial_filter`, :attr:`optimizer`,
    :meth:`classify`.
    """

    def __init__(
        self,
        *,
        feature_head: ClassifierFeatureHead,
        initializer: FilterInitializer,
        optimizer: SteepestDescentGN | SteepestDescentNewtonKL,
        filter_size: int = 4,
    ) -> None:
        super().__init__()
        self.feature_head = feature_head
        self.initializer = initializer
        self.optimizer = optimizer
        self.filter_size = filter_size

    def extract_features(self, backbone_feats: Tensor) -> Tensor:
        """(S, B, C_in, H, W) or (N, C_in, H, W) backbone features -> classification features (same dims)."""
        if backbone_feats.dim() == 4:
            return self.feature_head(backbone_feats)
        if backbone_feats.dim() != 5:
            raise ValueError(
                f"features must be (S, B, C, H, W) or (N, C, H, W), got {tuple(backbone_feats.shape)}"
            )
        out = self.feature_head(_flatten(backbone_feats))
        return out.reshape(*backbone_feats.shape[:2], *out.shape[-3:])

    def initial_filter(self, clf_feats: Tensor, boxes_xywh: Tensor) -> Tensor:
        """(S, B, C, H, W) classification features + (S, B, 4) xywh boxes -> (B, C, k, k) initial filters."""
        return self.initializer(clf_feats, boxes_xywh)

    def classify(self, filters: Tensor, clf_feats: Tensor) -> Tensor:
        """Score maps (S, B, H', W') of (B, C, k, k) filters on (S, B, C, H, W) classification features."""
        return apply_filter(clf_feats, filters)

    def get_filter(
        self,
        clf_feats: Tensor,
        boxes_xywh: Tensor,
        *,
        num_iter: int | None = None,
        compute_losses: bool = False,
    ) -> OptimizerResult:
        """Initial filter + optimizer steps on (S, B, C, H, W) train features with (S, B, 4) xywh boxes."""
        w0 = self.initial_filter(clf_feats, boxes_xywh)
        return self.optimizer(w0, clf_feats, boxes_xywh, num_iter=num_iter, compute_losses=compute_losses)

    def forward(
        self, train_feats: Tensor, test_feats: Tensor, train_boxes: Tensor, *, num_iter: int | None = None
    ) -> ClassifierOutput:
        if train_feats.dim() != 5 or test_feats.dim() != 5 or train_feats.shape[1] != test_feats.shape[1]:
            raise ValueError(
                f"train/test features must be (S, B, C, H, W) with the same B, got "
                f"{tuple(train_feats.shape)} and {tuple(test_feats.shape)}"
            )
        train_clf = self.extract_features(train_feats)
        test_clf = self.extract_features(test_feats)
        result = self.get_filter(train_clf, train_boxes, num_iter=num_iter)
        scores = torch.stack([self.classify(w, test_clf) for w in result.iterates])
        return ClassifierOutput(scores, result.filters, result)
