"""Energy box head: an IoU-Net-style network that outputs one scalar f(x, y) per candidate box.

Layout (ATOM/DiMP's IoU head; every conv is conv + BatchNorm + ReLU, widths configurable):

reference branch (a frame with a known box):
    layer2 -> conv3x3 -> ref_channels[0] -> PrRoIPool 3x3 at 1/8 -> conv3x3 (no pad) -> mod_channels[0] (1x1)
    layer3 -> conv3x3 -> ref_channels[1] -> PrRoIPool 1x1 at 1/16
    concat -> two 1x1 convs -> modulation vectors (mod_channels[0],), (mod_channels[1],)
test branch (the frame with candidate boxes):
    layer2 -> conv3x3 -> conv3x3 -> mod_channels[0];  layer3 likewise -> mod_channels[1]
    multiplied channel-wise by the modulation vectors
    per box: PrRoIPool 5x5 at 1/8 and 3x3 at 1/16 -> linear + BN + ReLU -> linear_channels[0] / [1]
    concat -> linear -> f (one scalar)

The tracker caches :meth:`EnergyBoxHead.get_modulation` (once per sequence) and
:meth:`EnergyBoxHead.get_test_features` (once per frame) and scores many boxes in one :meth:`score` call,
differentiable w.r.t. the box coordinates (PrRoIPool is exact in the box coordinates).

BatchNorm in the linear blocks normalises over all boxes of a batch in train mode (as in the reference), so in
training the score of one box depends weakly on the other boxes of the batch; in eval mode boxes are
independent.

Initial values (as the reference's): convolution and linear weights He-normal over the fan-in, biases 0,
BatchNorm gains uniform in [0, 1) and BatchNorm biases 0 (the reference keeps PyTorch 1.1's BatchNorm init).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ltr.ops.boxes import xywh_to_xyxy
from ltr.ops.prroi_pool import prroi_pool, prroi_pool_dense

Pair = tuple[Tensor, Tensor]

#: bins per side of the test branch's PrRoIPool on (layer2, layer3)
TEST_POOL_SIZES = (5, 3)


def _conv_bn_relu(cin: int, cout: int, *, kernel_size: int = 3, padding: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel_size=kernel_size, padding=padding, bias=True),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class _LinearBlock(nn.Module):
    """Flatten (N, C, k, k) -> linear -> BatchNorm1d -> ReLU -> (N, out)."""

    def __init__(self, cin: int, cout: int, size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(cin * size * size, cout, bias=True)
        self.bn = nn.BatchNorm1d(cout)

    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(self.bn(self.linear(x.flatten(1))))


def _rois(boxes_xywh: Tensor) -> Tensor:
    """(N, S, 4) xywh -> (N*S, 5) rois ``(n, x1, y1, x2, y2)``."""
    n, s = boxes_xywh.shape[:2]
    index = torch.arange(n, device=boxes_xywh.device, dtype=boxes_xywh.dtype).repeat_interleave(s)
    return torch.cat([index[:, None], xywh_to_xyxy(boxes_xywh.reshape(n * s, 4))], dim=1)


def _check_pair(feats: Sequence[Tensor], name: str) -> Pair:
    if len(feats) != 2 or any(f.dim() != 4 for f in feats):
        raise ValueError(f"{name} must be two (N, C, H, W) tensors (layer2, layer3)")
    if feats[0].shape[0] != feats[1].shape[0]:
        raise ValueError(f"{name}: layer2 and layer3 have different batch sizes")
    return feats[0], feats[1]


class EnergyBoxHead(nn.Module):
    """f(x, y) for boxes y given a reference frame (see the module docstring).

    Args:
        in_channels: backbone channels of (layer2, layer3); (512, 1024) for ResNet-50.
        ref_channels: reference-branch conv widths (128, 256).
        mod_channels: modulation / test-feature widths (256, 256).
        linear_channels: per-box linear widths (256, 256).
        strides: feature strides of (layer2, layer3) in image pixels.
    """

    def __init__(
        self,
        *,
        in_channels: tuple[int, int] = (512, 1024),
        ref_channels: tuple[int, int] = (128, 256),
        mod_channels: tuple[int, int] = (256, 256),
        linear_channels: tuple[int, int] = (256, 256),
        strides: tuple[int, int] = (8, 16),
    ) -> None:
        super().__init__()
        self.strides = strides
        # reference branch
        self.ref_conv2 = _conv_bn_relu(in_channels[0], ref_channels[0])
        self.ref_fc2 = _conv_bn_relu(ref_channels[0], mod_channels[0], kernel_size=3, padding=0)
        self.ref_conv3 = _conv_bn_relu(in_channels[1], ref_channels[1])
        ref_cat = mod_channels[0] + ref_channels[1]
        self.mod2 = _conv_bn_relu(ref_cat, mod_channels[0], kernel_size=1, padding=0)
        self.mod3 = _conv_bn_relu(ref_cat, mod_channels[1], kernel_size=1, padding=0)
        # test branch
        self.test_conv2 = nn.Sequential(
            _conv_bn_relu(in_channels[0], mod_channels[0]), _conv_bn_relu(mod_channels[0], mod_channels[0])
        )
        self.test_conv3 = nn.Sequential(
            _conv_bn_relu(in_channels[1], mod_channels[1]), _conv_bn_relu(mod_channels[1], mod_channels[1])
        )
        self.box_fc2 = _LinearBlock(mod_channels[0], linear_channels[0], TEST_POOL_SIZES[0])
        self.box_fc3 = _LinearBlock(mod_channels[1], linear_channels[1], TEST_POOL_SIZES[1])
        self.predictor = nn.Linear(linear_channels[0] + linear_channels[1], 1, bias=True)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                # the reference's IoU head keeps PyTorch <= 1.1's BatchNorm init: gain U(0, 1), bias 0
                nn.init.uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def get_modulation(self, ref_feats: Sequence[Tensor], ref_boxes_xywh: Tensor) -> Pair:
        """Modulation vectors from a reference frame.

        Args:
            ref_feats: (layer2 (N, C2, H2, W2), layer3 (N, C3, H3, W3)) backbone features.
            ref_boxes_xywh: (N, 4) target box per reference image, xywh image pixels.

        Returns:
            ((N, mod_channels[0]), (N, mod_channels[1])).
        """
        f2, f3 = _check_pair(ref_feats, "ref_feats")
        if tuple(ref_boxes_xywh.shape) != (f2.shape[0], 4):
            raise ValueError(f"ref_boxes_xywh must be ({f2.shape[0]}, 4), got {tuple(ref_boxes_xywh.shape)}")
        if self.training and f2.shape[0] < 2:
            raise ValueError(
                "EnergyBoxHead.get_modulation: in train mode BatchNorm on 1x1 reference features needs at "
                "least 2 reference images (training batch size >= 2); use eval mode for a single image"
            )
        rois = _rois(ref_boxes_xywh.to(f2.dtype)[:, None])
        p2 = prroi_pool(self.ref_conv2(f2), rois, 3, 1.0 / self.strides[0])
        p2 = self.ref_fc2(p2)  # (N, M2, 1, 1)
        p3 = prroi_pool(self.ref_conv3(f3), rois, 1, 1.0 / self.strides[1])  # (N, R3, 1, 1)
        cat = torch.cat([p2, p3], dim=1)
        return self.mod2(cat).flatten(1), self.mod3(cat).flatten(1)

    def get_test_features(self, test_feats: Sequence[Tensor]) -> Pair:
        """(layer2, layer3) backbone features (N, C, H, W) -> (N, mod_channels[i], H, W) test features."""
        f2, f3 = _check_pair(test_feats, "test_feats")
        return self.test_conv2(f2), self.test_conv3(f3)

    @staticmethod
    def modulate(modulation: Pair, test_feats: Pair) -> Pair:
        """Test features ((N, M2, H2, W2), (N, M3, H3, W3)) times the modulation vectors ((N, M2), (N, M3)),
        channel-wise: the per-frame part of :meth:`score`, for callers that score the same frame many times."""
        return tuple(t * m[:, :, None, None] for t, m in zip(test_feats, modulation, strict=True))  # type: ignore[return-value]

    def score(self, modulation: Pair, test_feats: Pair, boxes_xywh: Tensor) -> Tensor:
        """f for S boxes per image.

        Args:
            modulation: from :meth:`get_modulation`, ((N, M2), (N, M3)).
            test_feats: from :meth:`get_test_features`, ((N, M2, H2, W2), (N, M3, H3, W3)).
            boxes_xywh: (N, S, 4) candidate boxes, xywh image pixels (may require grad).

        Returns:
            (N, S) scores.
        """
        t2, t3 = test_feats
        m2, m3 = modulation
        n = t2.shape[0]
        if boxes_xywh.dim() != 3 or boxes_xywh.shape[0] != n or boxes_xywh.shape[-1] != 4:
            raise ValueError(f"boxes_xywh must be ({n}, S, 4) xywh, got {tuple(boxes_xywh.shape)}")
        if m2.shape[0] != n or m3.shape[0] != n or t3.shape[0] != n:
            raise ValueError("modulation and test features must have the same batch size N")
        return self.score_modulated(self.modulate(modulation, test_feats), boxes_xywh)

    def score_modulated(self, modulated: Pair, boxes_xywh: Tensor, *, dense: bool = False) -> Tensor:
        """f for S boxes per image on features from :meth:`modulate`.

        Args:
            modulated: ((N, M2, H2, W2), (N, M3, H3, W3)) modulated test features.
            boxes_xywh: (N, S, 4) candidate boxes, xywh image pixels relative to the maps' origin (may require
                grad).
            dense: pool with :func:`~ltr.ops.prroi_pool.prroi_pool_dense` (the same values over the whole
                maps, as a fixed graph with no host synchronisation, for tracing and ``torch.compile``) instead
                of :func:`~ltr.ops.prroi_pool.prroi_pool`, which contracts only the part of the maps the boxes
                touch.

        Returns:
            (N, S) scores.
        """
        t2, t3 = modulated
        n = t2.shape[0]
        if boxes_xywh.dim() != 3 or boxes_xywh.shape[0] != n or boxes_xywh.shape[-1] != 4:
            raise ValueError(f"boxes_xywh must be ({n}, S, 4) xywh, got {tuple(boxes_xywh.shape)}")
        s = boxes_xywh.shape[1]
        (size2, size3), (stride2, stride3) = TEST_POOL_SIZES, self.strides
        if dense:
            xyxy = xywh_to_xyxy(boxes_xywh.to(t2.dtype))
            p2 = prroi_pool_dense(t2, xyxy, size2, 1.0 / stride2).flatten(0, 1)
            p3 = prroi_pool_dense(t3, xyxy, size3, 1.0 / stride3).flatten(0, 1)
        else:
            rois = _rois(boxes_xywh.to(t2.dtype))
            p2 = prroi_pool(t2, rois, size2, 1.0 / stride2)
            p3 = prroi_pool(t3, rois, size3, 1.0 / stride3)
        return self.score_pooled(p2, p3).reshape(n, s)

    def score_pooled(self, pooled2: Tensor, pooled3: Tensor) -> Tensor:
        """f (M,) of M boxes from their pooled modulated test features, (M, M2, 5, 5) and (M, M3, 3, 3)
        (:data:`TEST_POOL_SIZES`): the per-box layers after the pooling."""
        hidden = torch.cat([self.box_fc2(pooled2), self.box_fc3(pooled3)], dim=1)
        return self.predictor(hidden).reshape(-1)

    def forward(
        self,
        ref_feats: Sequence[Tensor],
        ref_boxes_xywh: Tensor,
        test_feats: Sequence[Tensor],
        boxes_xywh: Tensor,
    ) -> Tensor:
        """Scores (N, S) of (N, S, 4) xywh boxes in test images; reference images have (N, 4) xywh boxes."""
        modulation = self.get_modulation(ref_feats, ref_boxes_xywh)
        return self.score(modulation, self.get_test_features(test_feats), boxes_xywh)
