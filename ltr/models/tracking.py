"""DiMPNet: backbone + DiMP target classifier + energy box head, and its build-from-config.

Geometry: images are crops (ImageNet-normalised RGB), boxes are xywh in crop pixels. The classifier works on
layer3 (stride 16), the box head on layer2 (stride 8) and layer3. For a crop of H x W pixels the feature map
is ceil(H/16) x ceil(W/16) and the score map one cell larger for DiMP's even filter size 4 (see
:mod:`ltr.models.target_classifier.filter_ops` for which pixel a score cell stands for);
:meth:`DiMPNet.score_map_size` gives it. Labels of that size (``DataConfig(label_end_pad=True)``, as in the
reference) train the whole map; labels one cell smaller per side train all but its last row and column.

Training-time LR groups (:func:`lr_groups`) name the parts by module prefix: ``backbone``,
``classifier.feature_head``, ``classifier.initializer``, ``classifier.optimizer``, ``box_head``.

:func:`build_dimpnet` builds the network from a :class:`NetConfig` (plain data, saved with checkpoints and
rebuilt with ``ltr.admin.config.from_dict``); the modules themselves take typed keyword arguments only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

from torch import Tensor, nn

from ltr.data.labels import label_sigma_cells
from ltr.models.backbone import ResNetBackbone
from ltr.models.bbreg import EnergyBoxHead
from ltr.models.target_classifier import (
    ClassifierFeatureHead,
    FilterInitializer,
    LinearFilterClassifier,
    SteepestDescentGN,
    SteepestDescentNewtonKL,
    score_map_size,
)

CLF_LAYER = "layer3"
BOX_LAYERS = ("layer2", "layer3")


@dataclass
class NetConfig:
    """Everything needed to rebuild a :class:`DiMPNet`. Defaults: SuperDiMP-50 (the paper's DiMP-NCE+ base).

    ``label_init_sigma`` is in feature cells (:func:`ltr.data.labels.label_sigma_cells`): output sigma factor
    1/4, search area factor 6, feature size 22.

    ``filter_optimizer`` picks the classifier's filter optimizer: ``"steepest_descent_gn"`` (DiMP's,
    :class:`SteepestDescentGN`: the ``num_dist_bins`` ... ``label_init_sigma`` fields) or ``"newton_kl"``
    (PrDiMP's, :class:`SteepestDescentNewtonKL`: the ``kl_*`` fields, defaults PrDiMP-50's; its label sigma
    of 0.9 cells is output sigma factor 1/4 / search area factor 5 x feature size 18). Both use
    ``num_optim_iter`` and ``optim_init_step``, ``optim_init_reg``, ``optim_min_reg`` (PrDiMP-50: 1.0, 0.05,
    0.05). Configs saved without these fields load as DiMP's optimizer.

    ``fixed_clf_features`` (ours; off in the reference networks) appends fixed colour and gradient-orientation
    channels (:class:`ltr.models.fixed_features.GradientColourFeatures`) to layer3; the classifier's filter
    sees them next to its learned features, the box head with layer3. ``fixed_box_features`` (ours, off in
    the reference networks) appends the same kind of channels at stride 8 to layer2, the box head's finer
    input. ``backbone_norm="ibn"`` (ours; "batch" in the reference networks) builds the backbone as IBN-a
    (:class:`ltr.models.backbone.InstanceBatchNorm2d` in layer1-layer3).
    """

    backbone: str = "resnet50"
    backbone_width: int = 64
    backbone_norm: Literal["batch", "ibn"] = "batch"
    pretrained: bool = True
    frozen_layers: tuple[str, ...] = ("conv1", "layer1", "layer2")
    clf_feature_dim: int = 512
    filter_size: int = 4
    num_optim_iter: int = 5
    optim_init_step: float = 0.9
    optim_init_reg: float = 0.1
    optim_min_reg: float = 1e-3
    num_dist_bins: int = 100
    bin_displacement: float = 0.1
    mask_init_factor: float = 3.0
    label_init_sigma: float = 22 * 0.25 / 6.0  # = label_sigma_cells(22, 0.25, 6.0)
    filter_optimizer: Literal["steepest_descent_gn", "newton_kl"] = "steepest_descent_gn"
    kl_label_sigma: float = 0.9
    kl_alpha_eps: float = 0.05
    kl_normalize_label: bool = True
    kl_label_threshold: float = 0.0
    kl_label_shrink: float = 0.0
    kl_uniform_weight: float = 0.0
    kl_softmax_reg: float | None = None
    box_ref_channels: tuple[int, int] = (128, 256)
    box_mod_channels: tuple[int, int] = (256, 256)
    box_linear_channels: tuple[int, int] = (256, 256)
    fixed_clf_features: bool = False
    fixed_box_features: bool = False


def tiny_net_config(*, feature_size: int = 8, search_area_factor: float = 6.0) -> NetConfig:
    """A CPU-sized network: ResNet-18 at 1/4 width (stem 16; layer2 32, layer3 64 channels), no pretrained
    weights, 32-channel classifier and box head; ``feature_size`` = crop size / 16 (8 for 128-pixel crops)."""
    return NetConfig(
        backbone="resnet18",
        backbone_width=16,
        pretrained=False,
        frozen_layers=(),
        clf_feature_dim=32,
        label_init_sigma=label_sigma_cells(feature_size, 0.25, search_area_factor),
        box_ref_channels=(16, 32),
        box_mod_channels=(32, 32),
        box_linear_channels=(32, 32),
    )


class DiMPOutput(NamedTuple):
    """clf_scores: (num_iter + 1, S_te, B, H', W') test score maps per filter iterate (initial first);
    box_scores: (S_te, B, S) box-head scores of the test proposals."""

    clf_scores: Tensor
    box_scores: Tensor


class BoxContext(NamedTuple):
    """Cached box-head inputs for the S_te * B test images (index s * B + b).

    modulation: ((S_te*B, M2), (S_te*B, M3)); test_feats: ((S_te*B, M2, H2, W2), (S_te*B, M3, H3, W3)).
    """

    modulation: tuple[Tensor, Tensor]
    test_feats: tuple[Tensor, Tensor]


class DiMPTrainOutput(NamedTuple):
    """:class:`DiMPOutput` plus the box-head context; ``box_scores`` is None when no proposals were given."""

    clf_scores: Tensor
    box_scores: Tensor | None
    box_context: BoxContext


class DiMPNet(nn.Module):
    """Backbone + DiMP classifier + energy box head.

    ``forward(train_images (S_tr, B, 3, H, W), test_images (S_te, B, 3, H, W), train_boxes (S_tr, B, 4),
    test_proposals (S_te, B, S, 4)) -> DiMPOutput``; boxes xywh crop pixels. The box head's reference is the
    first train frame (as in the reference implementation).
    """

    def __init__(
        self, *, backbone: ResNetBackbone, classifier: LinearFilterClassifier, box_head: EnergyBoxHead
    ) -> None:
        super().__init__()
        missing = [n for n in (CLF_LAYER, *BOX_LAYERS) if n not in backbone.output_layers]
        if missing:
            raise ValueError(f"backbone must output {missing} (output_layers={backbone.output_layers})")
        self.backbone = backbone
        self.classifier = classifier
        self.box_head = box_head

    def score_map_size(self, image_size: tuple[int, int]) -> tuple[int, int]:
        """(H', W') of the classifier score map for (H, W) crops."""
        stride = self.backbone.strides[CLF_LAYER]
        feat = (math.ceil(image_size[0] / stride), math.ceil(image_size[1] / stride))
        return score_map_size(feat, self.classifier.filter_size)

    def extract_backbone_features(self, images: Tensor) -> dict[str, Tensor]:
        """(..., 3, H, W) images -> {layer: (N, C, h, w)} with the leading dims flattened to N."""
        return self.backbone(images.reshape(-1, *images.shape[-3:]))

    def box_context(
        self,
        train_feats: dict[str, Tensor],
        test_feats: dict[str, Tensor],
        train_boxes: Tensor,
        num_test: int,
    ) -> BoxContext:
        """Modulation from train frame 0 (repeated over the test frames) and test features.

        Args:
            train_feats / test_feats: backbone features of the (S_tr*B) / (S_te*B) images, frame-major.
            train_boxes: (S_tr, B, 4) xywh crop pixels.
            num_test: S_te.
        """
        b = train_boxes.shape[1]
        ref = [train_feats[n][:b] for n in BOX_LAYERS]
        mod = self.box_head.get_modulation(ref, train_boxes[0])
        mod = tuple(m.repeat(num_test, 1) for m in mod)
        test = self.box_head.get_test_features([test_feats[n] for n in BOX_LAYERS])
        return BoxContext(mod, test)

    def score_boxes(self, context: BoxContext, boxes_xywh: Tensor) -> Tensor:
        """Box-head scores (S_te, B, S) of (S_te, B, S, 4) xywh crop-pixel boxes (may require grad)."""
        s_te, b, s = boxes_xywh.shape[:3]
        scores = self.box_head.score(
            context.modulation, context.test_feats, boxes_xywh.reshape(s_te * b, s, 4)
        )
        return scores.reshape(s_te, b, s)

    def forward_parts(
        self, train_images: Tensor, test_images: Tensor, train_boxes: Tensor
    ) -> tuple[Tensor, BoxContext]:
        """Classifier score iterates (num_iter + 1, S_te, B, H', W') and the box-head context."""
        if train_images.dim() != 5 or test_images.dim() != 5 or train_images.shape[1] != test_images.shape[1]:
            raise ValueError(
                "train_images and test_images must be (S, B, 3, H, W) with the same B, got "
                f"{tuple(train_images.shape)} and {tuple(test_images.shape)}"
            )
        s_tr, b = train_images.shape[:2]
        s_te = test_images.shape[0]
        if tuple(train_boxes.shape) != (s_tr, b, 4):
            raise ValueError(f"train_boxes must be ({s_tr}, {b}, 4) xywh, got {tuple(train_boxes.shape)}")
        train_feats = self.extract_backbone_features(train_images)
        test_feats = self.extract_backbone_features(test_images)
        clf_train = train_feats[CLF_LAYER].reshape(s_tr, b, *train_feats[CLF_LAYER].shape[-3:])
        clf_test = test_feats[CLF_LAYER].reshape(s_te, b, *test_feats[CLF_LAYER].shape[-3:])
        clf = self.classifier(clf_train, clf_test, train_boxes)
        return clf.scores, self.box_context(train_feats, test_feats, train_boxes, s_te)

    def forward(
        self,
        train_images: Tensor,
        test_images: Tensor,
        train_boxes: Tensor,
        test_proposals: Tensor | None = None,
        *,
        return_context: bool = False,
    ) -> DiMPOutput | DiMPTrainOutput:
        """Classifier score iterates and box scores; see the class docstring.

        ``test_proposals`` may be None when ``return_context`` is set (the box scores are then None): the
        caller scores its own boxes with :meth:`score_boxes` on the returned context. Actors call the network
        through ``forward`` so that a DistributedDataParallel wrapper sees every step.
        """
        s_te, b = test_images.shape[:2]
        if test_proposals is None and not return_context:
            raise ValueError("DiMPNet.forward: test_proposals is required unless return_context=True")
        if test_proposals is not None and (
            test_proposals.dim() != 4 or tuple(test_proposals.shape[:2]) != (s_te, b)
        ):
            raise ValueError(
                f"test_proposals must be ({s_te}, {b}, S, 4) xywh, got {tuple(test_proposals.shape)}"
            )
        clf_scores, context = self.forward_parts(train_images, test_images, train_boxes)
        box_scores = None if test_proposals is None else self.score_boxes(context, test_proposals)
        if return_context:
            return DiMPTrainOutput(clf_scores, box_scores, context)
        return DiMPOutput(clf_scores, box_scores)


def lr_groups(
    *,
    initializer: float = 5e-5,
    optimizer: float = 5e-4,
    feature_head: float = 5e-5,
    box_head: float = 1e-3,
    backbone: float = 2e-5,
) -> list[tuple[str, float]]:
    """(module prefix, learning rate) of every trainable part of a :class:`DiMPNet`, for
    ``ltr.trainers.build_adam``; defaults are SuperDiMP's (the backbone group holds the unfrozen layers)."""
    return [
        ("classifier.initializer", initializer),
        ("classifier.optimizer", optimizer),
        ("classifier.feature_head", feature_head),
        ("box_head", box_head),
        ("backbone", backbone),
    ]


def build_filter_optimizer(
    config: NetConfig, feature_stride: int
) -> SteepestDescentGN | SteepestDescentNewtonKL:
    """The filter optimizer that ``config.filter_optimizer`` names, with its fields of ``config``."""
    common = {
        "num_iter": config.num_optim_iter,
        "feature_stride": feature_stride,
        "init_step_length": config.optim_init_step,
        "init_filter_reg": config.optim_init_reg,
        "min_filter_reg": config.optim_min_reg,
    }
    if config.filter_optimizer == "newton_kl":
        return SteepestDescentNewtonKL(
            **common,
            label_sigma=config.kl_label_sigma,
            alpha_eps=config.kl_alpha_eps,
            normalize_label=config.kl_normalize_label,
            label_threshold=config.kl_label_threshold,
            label_shrink=config.kl_label_shrink,
            uniform_weight=config.kl_uniform_weight,
            softmax_reg=config.kl_softmax_reg,
        )
    if config.filter_optimizer != "steepest_descent_gn":
        raise ValueError(
            f"NetConfig.filter_optimizer must be 'steepest_descent_gn' or 'newton_kl', got {config.filter_optimizer!r}"
        )
    return SteepestDescentGN(
        **common,
        num_bins=config.num_dist_bins,
        bin_displacement=config.bin_displacement,
        label_init_sigma=config.label_init_sigma,
        mask_init_factor=config.mask_init_factor,
    )


def fixed_feature_layers(config: NetConfig) -> tuple[str, ...]:
    """The backbone layers that get fixed colour and gradient channels under ``config``."""
    return (("layer2",) if config.fixed_box_features else ()) + (
        (CLF_LAYER,) if config.fixed_clf_features else ()
    )


def build_dimpnet(config: NetConfig) -> DiMPNet:
    """The :class:`DiMPNet` described by ``config`` (weights fresh, or ImageNet for the backbone)."""
    backbone = ResNetBackbone(
        arch=config.backbone,
        output_layers=BOX_LAYERS,
        pretrained=config.pretrained,
        frozen_layers=config.frozen_layers,
        base_width=config.backbone_width,
        fixed_features=fixed_feature_layers(config),
        norm=config.backbone_norm,
    )
    ch = backbone.channels
    stride = backbone.strides[CLF_LAYER]
    fixed = backbone.fixed_channels.get(CLF_LAYER, 0)
    feature_head = ClassifierFeatureHead(
        in_channels=ch[CLF_LAYER] - fixed,
        out_channels=config.clf_feature_dim,
        filter_size=config.filter_size,
        fixed_channels=fixed,
    )
    classifier = LinearFilterClassifier(
        feature_head=feature_head,
        initializer=FilterInitializer(
            channels=feature_head.out_channels, filter_size=config.filter_size, feature_stride=stride
        ),
        optimizer=build_filter_optimizer(config, stride),
        filter_size=config.filter_size,
    )
    box_head = EnergyBoxHead(
        in_channels=(ch[BOX_LAYERS[0]], ch[BOX_LAYERS[1]]),
        ref_channels=tuple(config.box_ref_channels),
        mod_channels=tuple(config.box_mod_channels),
        linear_channels=tuple(config.box_linear_channels),
        strides=(backbone.strides[BOX_LAYERS[0]], backbone.strides[BOX_LAYERS[1]]),
    )
    return DiMPNet(backbone=backbone, classifier=classifier, box_head=box_head)


__all__ = [
    "BOX_LAYERS",
    "CLF_LAYER",
    "BoxContext",
    "DiMPNet",
    "DiMPOutput",
    "DiMPTrainOutput",
    "NetConfig",
    "build_dimpnet",
    "build_filter_optimizer",
    "lr_groups",
    "tiny_net_config",
]
