"""The box head's score f(x, y) and its exact gradient w.r.t. the boxes in closed form, without autograd.

The tracker refines boxes by gradient ascent on :meth:`EnergyBoxHead.score_modulated` for one image, ten
steps over about ten boxes per frame. Through autograd every step costs about 150 small operations besides the
products (graph bookkeeping, dtype copies); :class:`BoxScorer` computes the same score and its gradient with
a fixed, short list of batched operations, no autograd and no host synchronisation.

The derivation. PrRoIPool (:mod:`ltr.ops.prroi_pool`) pools a bin as ``sum_ij F[c, i, j] wy[q, i] wx[p, j]``
with ``wx[p, j] = (K(e[p+1] - j) - K(e[p] - j)) / b``: ``K`` the antiderivative of the tent
``k(t) = max(0, 1 - |t|)``, ``e[p] = s + L p / B`` the bin edges of a box starting at ``s`` with length ``L``
(feature-grid units) and ``b = L / B`` the bin length (``wx = 0`` for ``L <= 0``). Since ``K' = k``,

    d wx[p, j] / ds = (k(e[p+1] - j) - k(e[p] - j)) / b
    d wx[p, j] / dL = ((p + 1) k(e[p+1] - j) - p k(e[p] - j)) / (B b) - wx[p, j] / L

and a box ``(x, y, w, h)`` in image pixels has ``s = x / stride``, ``L = w / stride`` (likewise in y). The
linear blocks (Linear -> BatchNorm1d in eval mode -> ReLU) are one affine map each once BatchNorm is folded
into the Linear; the score's gradient w.r.t. the pooled bins is then ``(u * [h > 0]) @ W`` (``u`` the
predictor's weights, ``h`` the pre-ReLU activations), which is contracted back onto the row and column weights
(the reverse of the pooling products) and through the formulas above onto the box.

Numerics follow :meth:`EnergyBoxHead.score_modulated` and :func:`ltr.ops.prroi_pool.prroi_pool_image`: boxes
are converted to xyxy in the features' dtype, the weights are computed in float64 (float32 on MPS) and cast to
the features' dtype for the products. The products are ordered differently and BatchNorm is folded, so the
scores agree with ``score_modulated`` to rounding (float32: about 1e-6 relative), not bit for bit.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn

from ltr.models.bbreg import EnergyBoxHead
from ltr.ops.boxes import rel_to_xywh

__all__ = ["BoxScorer", "BoxValueAndGrad", "FoldedBoxLayers", "fold_box_layers", "rel_xywh_vjp"]

Pair = tuple[Tensor, Tensor]
BoxValueAndGrad = Callable[[Tensor], tuple[Tensor, Tensor]]  # (1, S, 4) xywh -> ((1, S), (1, S, 4))
BOX_BINS = (5, 3)  # PrRoIPool output size of the (layer2, layer3) box branches of EnergyBoxHead


class FoldedBoxLayers(NamedTuple):
    """The head's per-box layers with BatchNorm folded in, in the Linear weights' dtype and device.

    weights: ((O2, C2 * 25), (O3, C3 * 9)) Linear weights times the BatchNorm scale, input index ordered
        (channel, bin row, bin column) as the head flattens the pooled bins; biases: ((O2,), (O3,)) folded
        biases; predictor: ((O2,), (O3,)) the predictor's weights split by branch; predictor_bias: (1,).
    """

    weights: Pair
    biases: Pair
    predictor: Pair
    predictor_bias: Tensor


def _fold(linear: nn.Linear, bn: nn.BatchNorm1d) -> tuple[Tensor, Tensor]:
    """Linear then eval-mode BatchNorm as one affine map (weight (O, I), bias (O,)), folded in float64."""
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError(
            "BoxScorer: BatchNorm1d without running statistics normalises by batch; cannot fold it"
        )
    dtype = linear.weight.dtype
    wide = torch.float32 if linear.weight.device.type == "mps" else torch.float64
    scale = (bn.running_var.to(wide) + bn.eps).rsqrt()
    if bn.weight is not None:
        scale = scale * bn.weight.to(wide)
    bias = -bn.running_mean.to(wide) * scale
    if linear.bias is not None:
        bias = bias + linear.bias.to(wide) * scale
    if bn.bias is not None:
        bias = bias + bn.bias.to(wide)
    return (linear.weight.to(wide) * scale[:, None]).to(dtype), bias.to(dtype)


def _fold_key(head: EnergyBoxHead) -> tuple:
    """Identity, in-place version, dtype and device of every tensor the folded layers depend on."""
    tensors = [
        *head.box_fc2.parameters(),
        *head.box_fc2.buffers(),
        *head.box_fc3.parameters(),
        *head.box_fc3.buffers(),
        *head.predictor.parameters(),
    ]
    return tuple((id(t), t._version, t.dtype, t.device) for t in tensors)


_FOLDED: weakref.WeakKeyDictionary[EnergyBoxHead, tuple[tuple, FoldedBoxLayers]] = weakref.WeakKeyDictionary()


def fold_box_layers(head: EnergyBoxHead) -> FoldedBoxLayers:
    """The head's per-box layers with BatchNorm folded (eval mode only), cached per head.

    The cache entry is rebuilt when any of those parameters or buffers is replaced or modified in place
    (an optimiser step, ``load_state_dict``, ``.to()``), detected by the tensors' identities and version
    counters.
    """
    if head.training:
        raise RuntimeError(
            "BoxScorer: the box head is in training mode (BatchNorm normalises by batch); call head.eval()"
        )
    key = _fold_key(head)
    cached = _FOLDED.get(head)
    if cached is not None and cached[0] == key:
        return cached[1]
    with torch.no_grad():
        w2, b2 = _fold(head.box_fc2.linear, head.box_fc2.bn)
        w3, b3 = _fold(head.box_fc3.linear, head.box_fc3.bn)
        u = head.predictor.weight.detach().reshape(-1)
        bias = head.predictor.bias
        bias = bias.detach().reshape(1) if bias is not None else u.new_zeros(1)
        folded = FoldedBoxLayers((w2, w3), (b2, b3), (u[: w2.shape[0]], u[w2.shape[0] :]), bias)
    _FOLDED[head] = (_fold_key(head), folded)  # after folding: reading tensors does not bump versions
    return folded


class _Level:
    """One pyramid level: the modulated map, its pooling geometry and its folded per-box layer.

    ``weight`` is permuted once to the (bin column, channel, bin row) input order in which the pooling
    products below leave the bins, so no per-call transpose of the pooled tensor is needed.
    """

    def __init__(self, features: Tensor, stride: float, bins: int, weight: Tensor, bias: Tensor, u: Tensor):
        _, channels, height, width = features.shape
        self.channels, self.height, self.width, self.bins = channels, height, width, bins
        self.maps = features[0].detach().contiguous().view(channels * height, width)  # (C * H, W)
        self.scale = 1.0 / stride
        wide = torch.float32 if features.device.type == "mps" else torch.float64
        self.wide = wide
        size = max(height, width)  # both axes in one tensor, on the larger grid (as prroi_pool)
        self.grid = torch.arange(size, device=features.device, dtype=wide)  # (G,)
        self.steps = torch.arange(bins + 1, device=features.device, dtype=wide) / bins  # (B + 1,)
        out = weight.shape[0]
        if weight.shape[1] != channels * bins * bins:
            raise ValueError(
                f"BoxScorer: a level with {channels} channels and {bins}x{bins} bins needs a Linear with "
                f"{channels * bins * bins} inputs, got {weight.shape[1]}"
            )
        self.weight = (
            weight.view(out, channels, bins, bins).permute(0, 3, 1, 2).reshape(out, bins * channels * bins)
        )  # (O, P * C * Q): input index (bin column p, channel c, bin row q)
        self.bias, self.u = bias, u

    def geometry(self, xyxy: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """Bin weights of S boxes (S, 4) xyxy image pixels, both axes stacked (axis 0: x, axis 1: y).

        Returns weights (2, S, B, G) in the wide dtype, tents (2, S, B + 1, G) ``k`` at every bin edge,
        inverse bin lengths (2, S) (0 for empty boxes), lengths (2, S) on the grid and their validity (2, S).
        """
        boxes = xyxy.to(self.wide) * self.scale
        starts = boxes[:, :2].t()  # (2, S)
        lengths = (boxes[:, 2:] - boxes[:, :2]).t().clamp(min=0)
        edges = starts[..., None] + lengths[..., None] * self.steps  # (2, S, B + 1)
        u = (edges[..., None] - self.grid).clamp(-1.0, 1.0)  # (2, S, B + 1, G)
        cumulative = 0.5 + u - 0.5 * u * u.abs()  # K
        tents = 1.0 - u.abs()  # k = K'
        valid = lengths > 0
        bin_length = lengths / self.bins
        inverse = valid.to(self.wide) / torch.where(valid, bin_length, torch.ones_like(bin_length))
        weights = (cumulative[:, :, 1:] - cumulative[:, :, :-1]) * inverse[..., None, None]
        return weights, tents, inverse, lengths, valid

    def pool(self, weights: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Pooled bins (S, P * C * Q) from the weights (2, S, B, G); also the column contraction and wy."""
        s, b = weights.shape[1], self.bins
        dtype = self.maps.dtype
        wx = weights[0, :, :, : self.width].to(dtype)  # (S, P, W)
        wy = weights[1, :, :, : self.height].to(dtype)  # (S, Q, H)
        cols = torch.mm(wx.reshape(s * b, self.width), self.maps.t())  # (S * P, C * H)
        cols = cols.view(s, b * self.channels, self.height)
        pooled = torch.bmm(cols, wy.transpose(1, 2))  # (S, P * C, Q)
        return pooled.view(s, -1), cols, wy

    def hidden(self, pooled: Tensor) -> Tensor:
        """Pre-ReLU activations (S, O) of the folded linear block."""
        return torch.addmm(self.bias, pooled, self.weight.t())

    def box_grad(self, grad_hidden: Tensor, cols: Tensor, wy: Tensor, geo: tuple) -> Tensor:
        """d score / d (x1, y1, L_x, L_y) on the grid (S, 4) from d score / d hidden (S, O)."""
        weights, tents, inverse, lengths, valid = geo
        s, b = grad_hidden.shape[0], self.bins
        grad = torch.mm(grad_hidden, self.weight).view(s, b * self.channels, b)  # d / d pooled (S, P * C, Q)
        grad_wy = torch.bmm(grad.transpose(1, 2), cols)  # (S, Q, H)
        rows = torch.bmm(grad, wy)  # (S, P * C, H): d / d cols
        grad_wx = torch.mm(rows.view(s * b, self.channels * self.height), self.maps).view(s, b, self.width)
        size = self.grid.shape[0]
        grad_w = torch.stack(
            [
                nn.functional.pad(grad_wx, (0, size - self.width)),
                nn.functional.pad(grad_wy, (0, size - self.height)),
            ]
        ).to(self.wide)  # (2, S, B, G)
        scaled = grad_w * inverse[..., None, None]
        upper = (scaled * tents[:, :, 1:]).sum(-1)  # (2, S, B): tents at each bin's far edge
        lower = (scaled * tents[:, :, :-1]).sum(-1)  # near edge
        d_start = (upper - lower).sum(-1)  # (2, S)
        safe = torch.where(valid, lengths, torch.ones_like(lengths))
        d_length = (upper * self.steps[1:] - lower * self.steps[:-1]).sum(-1) - (grad_w * weights).sum(
            (-2, -1)
        ) * valid.to(self.wide) / safe
        return torch.cat([d_start, d_length]).t() * self.scale  # (S, 4): per image pixel


class BoxScorer:
    """f(x, y) of :meth:`EnergyBoxHead.score_modulated` for one image, with its exact box gradient.

    Built once per frame; calling it costs a fixed number of batched operations, none through autograd and
    none reading values on the host, on any device.

    Args:
        head: the box head, in eval mode (BatchNorm is folded into the Linear layers, cached per head).
        modulated: ((1, M2, H2, W2), (1, M3, H3, W3)) modulated test features (:meth:`EnergyBoxHead.modulate`),
            the coordinates' origin at their first cell (as for ``score_modulated``).
        strides: feature strides (layer2, layer3) in image pixels; ``head.strides`` by default.

    Call: ``scorer(boxes_xywh)`` with boxes (1, S, 4) xywh image pixels -> (scores (1, S) in the features'
    dtype, gradients d score / d boxes (1, S, 4) in the boxes' dtype). Boxes with non-positive width or height
    pool to zeros with zero gradient in that box's pooling (as PrRoIPool).
    """

    def __init__(
        self, head: EnergyBoxHead, modulated: Pair, strides: tuple[float, float] | None = None
    ) -> None:
        folded = fold_box_layers(head)
        if len(modulated) != 2 or any(not isinstance(f, Tensor) or f.dim() != 4 for f in modulated):
            raise ValueError("BoxScorer: modulated must be two (1, C, H, W) tensors (layer2, layer3)")
        if any(f.shape[0] != 1 for f in modulated):
            raise ValueError(
                f"BoxScorer: scores boxes of one image, got batch sizes {[f.shape[0] for f in modulated]}"
            )
        strides = tuple(head.strides) if strides is None else tuple(strides)
        if len(strides) != 2 or not all(float(s) > 0 for s in strides):
            raise ValueError(f"BoxScorer: strides must be two positive numbers, got {strides}")
        dtype = modulated[0].dtype
        if modulated[1].dtype != dtype or folded.weights[0].dtype != dtype:
            raise TypeError(
                f"BoxScorer: features ({modulated[0].dtype}, {modulated[1].dtype}) and the head's weights "
                f"({folded.weights[0].dtype}) must have one dtype"
            )
        self.levels = tuple(
            _Level(f, float(s), b, w, bias, u)
            for f, s, b, w, bias, u in zip(
                modulated, strides, BOX_BINS, folded.weights, folded.biases, folded.predictor, strict=True
            )
        )
        self.predictor_bias = folded.predictor_bias
        self.dtype = dtype

    def _xyxy(self, boxes_xywh: Tensor) -> Tensor:
        if (
            not isinstance(boxes_xywh, Tensor)
            or boxes_xywh.dim() != 3
            or tuple(boxes_xywh.shape[::2]) != (1, 4)
        ):
            raise ValueError(
                "BoxScorer: boxes_xywh must be a (1, S, 4) xywh tensor, got "
                f"{tuple(boxes_xywh.shape) if isinstance(boxes_xywh, Tensor) else type(boxes_xywh).__name__}"
            )
        boxes = boxes_xywh[0].detach().to(self.dtype)
        return torch.cat([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], dim=1)  # (S, 4) as score_modulated

    def score(self, boxes_xywh: Tensor) -> Tensor:
        """Scores (1, S) of boxes (1, S, 4) xywh image pixels, forward only."""
        xyxy = self._xyxy(boxes_xywh)
        with torch.no_grad():
            total = self.predictor_bias
            for level in self.levels:
                pooled, _, _ = level.pool(level.geometry(xyxy)[0])
                total = total + torch.relu(level.hidden(pooled)) @ level.u
            return total[None]

    def __call__(self, boxes_xywh: Tensor) -> tuple[Tensor, Tensor]:
        """(scores (1, S), d scores / d boxes_xywh (1, S, 4)) for boxes (1, S, 4) xywh image pixels."""
        xyxy = self._xyxy(boxes_xywh)
        with torch.no_grad():
            total = self.predictor_bias
            grad = None
            for level in self.levels:
                geo = level.geometry(xyxy)
                pooled, cols, wy = level.pool(geo[0])
                hidden = level.hidden(pooled)
                total = total + torch.relu(hidden) @ level.u
                grad_hidden = level.u * (hidden > 0).to(hidden.dtype)  # relu'(h) = [h > 0], as autograd
                part = level.box_grad(grad_hidden, cols, wy, geo)
                grad = part if grad is None else grad + part
            # d / d (x1, y1, Lx, Ly) is d / d xywh: x moves both edges (the start), w the far one (the length)
            return total[None], grad.to(boxes_xywh.dtype)[None]


def rel_xywh_vjp(
    rel: Tensor, reference: Tensor, grad_boxes: Tensor, bounds_xyxy: Tensor | None = None
) -> Tensor:
    """Chain d f / d boxes back to d f / d rel for ``boxes = clip(rel_to_xywh(rel, reference), bounds)``.

    Args:
        rel: (..., 4) rel coordinates (``ltr.ops.boxes``) of the boxes w.r.t. ``reference``.
        reference: (..., 4) xywh reference boxes, broadcastable against ``rel``.
        grad_boxes: (..., 4) d f / d boxes, boxes xywh (after clipping).
        bounds_xyxy: None, or (4,) (x1, y1, x2, y2) that both corners of the boxes were clipped into
            (``pytracking.tracker.dimp.refine.clip_xywh``: min(max(corner, lo), hi)).

    Returns:
        (..., 4) d f / d rel, the same numbers autograd gives through ``rel_to_xywh`` and ``clip_xywh``
        (up to rounding), including its conventions at ties: a corner exactly on a bound gets half the
        gradient (torch.maximum / torch.minimum split it evenly).
    """
    boxes = rel_to_xywh(rel, reference)  # the same numbers the caller clipped, for the tie conventions
    size = boxes[..., 2:]  # (..., 2) w, h before clipping
    g_start = grad_boxes[..., :2] - grad_boxes[..., 2:]  # d f / d (x1, y1) of the clipped box
    g_end = grad_boxes[..., 2:]  # d f / d (x2, y2)
    if bounds_xyxy is not None:
        start = boxes[..., :2]
        lo, hi = bounds_xyxy[:2], bounds_xyxy[2:]  # compared in the promoted dtype, as clip_xywh does
        g_start = g_start * _clip_derivative(start, lo, hi)
        g_end = g_end * _clip_derivative(start + size, lo, hi)
    # x1 = cx0 + r0 w0 - w / 2, x2 = cx0 + r0 w0 + w / 2, w = w0 exp(r2)
    g_shift = (g_start + g_end) * reference[..., 2:]
    g_log = 0.5 * (g_end - g_start) * size
    return torch.cat([g_shift, g_log], dim=-1).to(rel.dtype)


def _clip_derivative(value: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """d min(max(value, lo), hi) / d value with autograd's tie convention (half at equality)."""
    one, half, zero = 1.0, 0.5, 0.0
    inner = torch.where(value > lo, one, torch.where(value == lo, half, zero))
    clipped = torch.maximum(value, lo)
    outer = torch.where(clipped < hi, one, torch.where(clipped == hi, half, zero))
    return (inner * outer).to(value.dtype)
