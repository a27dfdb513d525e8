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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ltr.ops.boxes import xywh_to_xyxy
from ltr.ops.prroi_pool import prroi_pool, prroi_pool_image

Pair = tuple[Tensor, Tensor]
#: (a convolution of the test branch, its input (N, C, H, W), zero padding (ph, pw)) -> its output: how a
#: caller evaluates the test branch's convolutions instead (e.g. ``ltr.ops.int8_conv``); the block's other
#: layers run as they are
Conv2dFn = Callable[[nn.Conv2d, Tensor, tuple[int, int]], Tensor]


def _float_conv2d(conv: nn.Conv2d, x: Tensor, padding: tuple[int, int]) -> Tensor:
    return F.conv2d(x, conv.weight, conv.bias, conv.stride, padding, conv.dilation, conv.groups)


class WindowFeatures(NamedTuple):
    """Test features of a window of the maps (see :meth:`EnergyBoxHead.get_test_features_window`).

    feats: ((N, M2, h2, w2), (N, M3, h3, w3)); origin: (2,) float64 (ox, oy) image pixels of the window's
    first cell; valid_xyxy: (4,) float64 (x1, y1, x2, y2) image pixels, the region where boxes score exactly
    (infinite at map borders). Both tensors are on the features' device.
    """

    feats: Pair
    origin: Tensor
    valid_xyxy: Tensor


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


def _halo(block: nn.Module) -> int:
    """Cells of context a stack of stride-1 'same' convolutions reads beyond each output cell."""
    halo = 0
    for m in block.modules():
        if isinstance(m, nn.Conv2d):
            k, pad = m.kernel_size, m.padding
            if m.stride != (1, 1) or m.dilation != (1, 1) or pad != (k[0] // 2, k[1] // 2) or k[0] != k[1]:
                raise ValueError(f"windowed test features need stride-1 'same' square convolutions, got {m}")
            halo += k[0] // 2
    return halo


def _gather_cells(feat: Tensor, rows: Tensor, cols: Tensor) -> Tensor:
    """``feat[:, :, rows][:, :, :, cols]`` for (N, C, H, W) features and (R,), (K,) device indices -> (N, C, R, K),
    channels_last when ``feat`` is (one gather of whole channel vectors: the convolutions' fast layout)."""
    n, c, height, width = feat.shape
    if not feat.is_contiguous(memory_format=torch.channels_last):
        return feat.index_select(2, rows).index_select(3, cols)
    flat = (rows[:, None] * width + cols[None, :]).reshape(-1)
    cells = feat.permute(0, 2, 3, 1).reshape(n, height * width, c).index_select(1, flat)
    return cells.reshape(n, rows.numel(), cols.numel(), c).permute(0, 3, 1, 2)


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
        self.box_fc2 = _LinearBlock(mod_channels[0], linear_channels[0], 5)
        self.box_fc3 = _LinearBlock(mod_channels[1], linear_channels[1], 3)
        self.predictor = nn.Linear(linear_channels[0] + linear_channels[1], 1, bias=True)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in")
                if m.bias is not None:
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

    def get_test_features(self, test_feats: Sequence[Tensor], *, conv2d: Conv2dFn | None = None) -> Pair:
        """(layer2, layer3) backbone features (N, C, H, W) -> (N, mod_channels[i], H, W) test features.

        ``conv2d``: evaluates the branches' convolutions instead of the modules (:data:`Conv2dFn`)."""
        f2, f3 = _check_pair(test_feats, "test_feats")
        if conv2d is None:
            return self.test_conv2(f2), self.test_conv3(f3)
        out = []
        for x, branch in ((f2, self.test_conv2), (f3, self.test_conv3)):
            for layer in (m for block in branch.children() for m in block.children()):
                if isinstance(layer, nn.Conv2d):
                    if isinstance(layer.padding, str):
                        raise ValueError("get_test_features(conv2d=...) needs numeric conv paddings")
                    x = conv2d(layer, x, (int(layer.padding[0]), int(layer.padding[1])))
                else:
                    x = layer(x)
            out.append(x)
        return out[0], out[1]

    def get_test_features_window(
        self,
        test_feats: Sequence[Tensor],
        window_xyxy: Tensor,
        extent_wh: tuple[float, float],
        *,
        conv2d: Conv2dFn | None = None,
        host_reads: bool = False,
    ) -> WindowFeatures:
        """Test features computed only where boxes inside ``window_xyxy`` can read them, without host reads.

        Args:
            test_feats: (layer2, layer3) backbone features (N, C, H, W).
            window_xyxy: (4,) tensor (x1, y1, x2, y2) image pixels, on the features' device: the region the
                boxes will stay in. Only its corner decides where the window lies, and it is never read on the
                host, so a tracker can place the window at a position it computed on the device.
            extent_wh: host numbers, upper bounds of the window's width ``x2 - x1`` and height ``y2 - y1``:
                they fix the window's size in cells (shapes must be host numbers).
            conv2d: evaluates the branches' (unpadded) convolutions instead of ``F.conv2d``
                (:data:`Conv2dFn`).
            host_reads: read the window's corner on the host (one read; free on a CPU) and place the window
                there with host numbers: a window inside the maps is then a view of them, with no gathering
                and no masking. The same features and bounds as without.

        Returns:
            :class:`WindowFeatures`: ((N, M2, h2, w2), (N, M3, h3, w3)) test features of a window of the
            maps, the window's origin (2,) ``(ox, oy)`` in image pixels, and ``valid_xyxy`` (4,): a box ``b``
            (xywh) inside ``valid_xyxy`` (which contains ``window_xyxy``; infinite on sides where the window
            reaches the map's border) scores on these features, shifted to ``b - (ox, oy, 0, 0)``, exactly
            as on the full maps of :meth:`get_test_features`. Both are tensors on the features' device.

        The origin is a multiple of every stride, so one pixel shift serves both levels. Each level's window
        covers the cells a box inside ``window_xyxy`` weighs on (PrRoIPool: cells floor(x1/s) .. ceil(x2/s));
        its size is the bound that ``extent_wh`` gives, at most the map's. The window and a halo of the
        convolutions' receptive field are gathered with device indices; cells outside the map are zeroed
        before and after every conv block, which is the zero padding the full map's convolutions see and the
        zero beyond the map that PrRoIPool integrates, and the halo is trimmed.
        """
        f2, f3 = _check_pair(test_feats, "test_feats")
        ew, eh = (float(v) for v in extent_wh)
        if not (math.isfinite(ew) and math.isfinite(eh) and ew >= 0 and eh >= 0):
            raise ValueError(f"extent_wh must be two finite numbers >= 0, got {extent_wh}")
        if not isinstance(window_xyxy, Tensor) or window_xyxy.shape != (4,):
            raise ValueError(f"window_xyxy must be a (4,) tensor (x1, y1, x2, y2), got {window_xyxy!r}")
        device = f2.device
        window = window_xyxy.to(dtype=torch.float64).nan_to_num(0.0)
        align = math.lcm(*self.strides)
        # the origin must be a cell of every level's map: at most the last sample's pixel on each
        last_x = min((f.shape[-1] - 1) * s for f, s in zip((f2, f3), self.strides, strict=True))
        last_y = min((f.shape[-2] - 1) * s for f, s in zip((f2, f3), self.strides, strict=True))
        origin_host: list[float] = []
        if host_reads:  # the same float64 arithmetic as the device path below, on the host
            wx, wy = window[:2].tolist()
            corner_host = (min(max(wx, 0.0), float(last_x)), min(max(wy, 0.0), float(last_y)))
            origin_host = [math.floor(c / align) * align for c in corner_host]
            origin = torch.tensor(origin_host, dtype=torch.float64, device=device)
        else:
            corner = torch.stack([window[0].clamp(0.0, last_x), window[1].clamp(0.0, last_y)])
            origin = torch.floor(corner / align) * align  # (2,) ox, oy
        out = []
        far: list[Tensor | None] = [None, None]  # right, bottom
        far_host = [math.inf, math.inf]
        for feat, conv, stride in zip(
            (f2, f3), (self.test_conv2, self.test_conv3), self.strides, strict=True
        ):
            height, width = feat.shape[-2:]
            halo = _halo(conv)
            # cells c0 = ox / s .. ceil(x2 / s) with x2 < ox + align + extent: at most this many
            cells = [min(math.ceil((e + align) / stride) + 1, n) for e, n in ((ew, width), (eh, height))]
            # the window's first cell (c0, r0): host numbers or a (2,) device tensor
            start = (
                [round(o / stride) for o in origin_host] if host_reads else (origin / stride).round().long()
            )
            x, mask = None, None
            for k, (first, n, size) in enumerate(zip(start, cells, (width, height), strict=True)):
                # a box edge at x reads cells up to ceil(x / stride): exact while that cell was computed
                end = first + n  # exclusive
                if host_reads:
                    far_host[k] = min(far_host[k], (end - 1) * stride if end < size else math.inf)
                else:
                    edge = torch.where(end < size, ((end - 1) * stride).double(), math.inf)
                    far[k] = edge if far[k] is None else torch.minimum(far[k], edge)
            if host_reads:
                left, top = (s - halo for s in start)
                cols, rows = (n + 2 * halo for n in cells)
                if top >= 0 and left >= 0 and top + rows <= height and left + cols <= width:
                    x = feat[:, :, top : top + rows, left : left + cols]  # no cell outside the map: no mask
            if x is None:  # gathered, the cells beyond the map masked to zero
                index, inside = [], []
                for first, n, size in zip(start, cells, (width, height), strict=True):
                    i = first - halo + torch.arange(n + 2 * halo, device=device)
                    index.append(i.clamp(0, size - 1))
                    inside.append((i >= 0) & (i < size))
                mask = (inside[1][:, None] & inside[0][None, :]).to(feat.dtype)  # (rows, cols)
                x = _gather_cells(feat, index[1], index[0]) * mask
            for block in conv.children():
                convs = sum(isinstance(m, nn.Conv2d) for m in block.modules())
                if convs != 1 or not any(isinstance(m, nn.Conv2d) for m in block.children()):
                    raise ValueError(
                        "windowed test features need one convolution per block of the test branch, a direct "
                        "child of the block"
                    )
                # unpadded ('valid'): each conv computes only the cells the next one reads, the halo shrinks
                # by its radius (the masked zeros are the full map's padding)
                for m in block.children():
                    if isinstance(m, nn.Conv2d):
                        trim = m.kernel_size[0] // 2
                        x = (conv2d or _float_conv2d)(m, x, (0, 0))
                        if mask is not None:
                            mask = mask[trim : mask.shape[0] - trim, trim : mask.shape[1] - trim]
                    else:
                        x = m(x)
                if mask is not None:
                    x = x * mask
            out.append(x)
        if host_reads:
            near_host = [o if o > 0 else -math.inf for o in origin_host]
            valid = torch.tensor(near_host + far_host, dtype=torch.float64, device=device)
        else:
            near = torch.where(origin > 0, origin, -math.inf)
            valid = torch.cat([near, torch.stack(far)])
        return WindowFeatures((out[0], out[1]), origin, valid)

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

    def score_modulated(self, modulated: Pair, boxes_xywh: Tensor) -> Tensor:
        """f for S boxes per image on features from :meth:`modulate`.

        Args:
            modulated: ((N, M2, H2, W2), (N, M3, H3, W3)) modulated test features.
            boxes_xywh: (N, S, 4) candidate boxes, xywh image pixels relative to the maps' origin (may require
                grad).

        Returns:
            (N, S) scores.
        """
        t2, t3 = modulated
        n = t2.shape[0]
        if boxes_xywh.dim() != 3 or boxes_xywh.shape[0] != n or boxes_xywh.shape[-1] != 4:
            raise ValueError(f"boxes_xywh must be ({n}, S, 4) xywh, got {tuple(boxes_xywh.shape)}")
        s = boxes_xywh.shape[1]
        if n == 1:  # one image (the tracker): no host synchronisation
            xyxy = xywh_to_xyxy(boxes_xywh[0].to(t2.dtype))
            p2 = prroi_pool_image(t2, xyxy, 5, 1.0 / self.strides[0])
            p3 = prroi_pool_image(t3, xyxy, 3, 1.0 / self.strides[1])
        else:
            rois = _rois(boxes_xywh.to(t2.dtype))
            p2 = prroi_pool(t2, rois, 5, 1.0 / self.strides[0])
            p3 = prroi_pool(t3, rois, 3, 1.0 / self.strides[1])
        hidden = torch.cat([self.box_fc2(p2), self.box_fc3(p3)], dim=1)
        return self.predictor(hidden).reshape(n, s)

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
