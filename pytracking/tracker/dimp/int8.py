"""The tracker's per-frame head convolutions and per-box products in int8 on a CPU (``params.int8_heads``).

Which products: the classifier's feature head (3x3, 1024 -> 512 for the paper's network), the box head's
test branches (two 3x3 per level, in the refinement window), i.e. every convolution of a frame outside the
backbone, and the box head's per-box Linear layers in every step of the refinement's ascent (6400 -> 256 and
2304 -> 256, forward and backward; :class:`ltr.models.box_score_grad.BoxScorer` with ``int8=True``). The
backbone, the box head's reference branch (once per sequence), the pooling and the classifier's filter stay
float32. :mod:`ltr.ops.int8_conv` and :mod:`ltr.ops.int8_matmul` do the arithmetic: weights per output
channel (column), each input per tensor (per tensor, or per row where the CPU lacks the fused int8 product),
float32 out.

It pays for the paper's widths only: tens of channels (``nce_plus_tiny``) run slower in int8.
``python benchmarks/tracker_fps.py --param nce_plus --int8`` times the tracker with and without it.
"""

from __future__ import annotations

from torch import Tensor, nn

from ltr.models.target_classifier.features import ClassifierFeatureHead
from ltr.models.tracking import DiMPNet
from ltr.ops.int8_conv import Int8Conv2d
from ltr.ops.int8_matmul import int8_mm_available

__all__ = ["Int8Heads"]


class Int8Heads:
    """Int8 versions of a frozen network's head convolutions, built once per tracker.

    :meth:`classifier_features`: (N, C_in, H, W) backbone features -> (N, C, H, W) classification features,
    as ``net.classifier.feature_head`` computes them. :meth:`conv2d`: a
    :data:`ltr.models.bbreg.Conv2dFn` for the box head's test branches; one int8 convolution per
    (convolution, padding), made on first use. :attr:`box_layers`: whether the ascent's per-box Linear
    products run in int8 too (this torch build has int8 matrix products). The network's weights must not
    change afterwards.
    """

    def __init__(self, net: DiMPNet) -> None:
        head = net.classifier.feature_head
        if not isinstance(head, ClassifierFeatureHead):
            raise TypeError(
                f"int8_heads: expected the classifier's feature head to be a ClassifierFeatureHead, got "
                f"{type(head).__name__}"
            )
        self._classifier = Int8Conv2d(head.conv)
        self._norm = head.norm
        self._convs: dict[tuple[nn.Conv2d, tuple[int, int]], Int8Conv2d] = {}  # modules hash by identity
        self.box_layers = int8_mm_available()

    def classifier_features(self, x: Tensor) -> Tensor:
        return self._norm(self._classifier(x))

    def conv2d(self, conv: nn.Conv2d, x: Tensor, padding: tuple[int, int]) -> Tensor:
        key = (conv, padding)
        int8 = self._convs.get(key)
        if int8 is None:
            int8 = self._convs[key] = Int8Conv2d(conv, padding=padding)
        return int8(x)
