"""The box head's score f(x, y) and its exact gradient w.r.t. the boxes in closed form, without autograd.

The tracker refines boxes by gradient ascent on :meth:`EnergyBoxHead.score_modulated` for one image, ten
steps over about ten boxes per frame. Through autograd every step costs about 150 small operations besides the
products (graph bookkeeping, dtype copies); :class:`BoxScorer` computes the same score and its gradient with
a fixed, short list of batched operations, no autograd and no host synchronisation. On a CPU in float32
the pooling, the per-box layers' biases and outputs and the box gradient run in C++ kernels
(:mod:`ltr.ops.box_pool_kernel`; each bin's cells only), which leaves the per-box Linear layers' products to
PyTorch: 839 -> 319 us per call with int8 layers at DiMP-50's window in a one-off A/B.

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

import functools
import math
import weakref
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn

from ltr.models.bbreg import EnergyBoxHead
from ltr.ops import box_pool_kernel
from ltr.ops.int8_matmul import Int8Matrix, int8_mm, int8_mm_available, quantize_columns

__all__ = [
    "BoxScorer",
    "BoxValueAndGrad",
    "FoldedBoxLayers",
    "Int8BoxLayers",
    "fold_box_layers",
    "int8_box_layers",
    "quantize_box_layers",
]

Pair = tuple[Tensor, Tensor]
BoxValueAndGrad = Callable[[Tensor], tuple[Tensor, Tensor]]  # (1, S, 4) xywh -> ((1, S), (1, S, 4))
BOX_BINS = (5, 3)  # PrRoIPool output size of the (layer2, layer3) box branches of EnergyBoxHead


class FoldedBoxLayers(NamedTuple):
    """The head's per-box layers with BatchNorm folded in, in the Linear weights' dtype and device.

    weights: ((O2, 25 C2), (O3, 9 C3)) Linear weights times the BatchNorm scale, with the input index in the
        order (bin column p, bin row q, channel c) in which :class:`BoxScorer` leaves the pooled bins (the head
        flattens them as (c, q, p)); weights_t: the same transposed, contiguous ((25 C2, O2), (9 C3, O3)):
        the forward product (S, I) @ weights_t and the backward one (S, O) @ weights both take a row-major
        right operand without a transpose, the layout the CPU BLAS was fastest with for S ~ 10 rows;
        biases: ((O2,), (O3,)) folded biases; predictor: (O2 + O3,) the predictor's weights; predictor_bias: (1,).
    """

    weights: Pair
    weights_t: Pair
    biases: Pair
    predictor: Tensor
    predictor_bias: Tensor


def _fold(linear: nn.Linear, bn: nn.BatchNorm1d, bins: int) -> tuple[Tensor, Tensor]:
    """Linear then eval-mode BatchNorm as one affine map: weight (O, I) in (p, q, c) input order, bias (O,).

    Folded in float64 (float32 on MPS), then cast to the Linear's dtype.
    """
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError(
            "BoxScorer: BatchNorm1d without running statistics normalises by batch; cannot fold it"
        )
    out, inputs = linear.weight.shape
    if inputs % (bins * bins):
        raise ValueError(
            f"BoxScorer: a Linear after {bins}x{bins} bins needs a multiple of {bins * bins} inputs"
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
    weight = (linear.weight.to(wide) * scale[:, None]).view(out, inputs // (bins * bins), bins, bins)
    return weight.permute(0, 3, 2, 1).reshape(out, inputs).to(dtype), bias.to(dtype)  # (c, q, p) -> (p, q, c)


def _fold_key(head: EnergyBoxHead) -> tuple:
    """Identity, storage, in-place version, dtype and device of every tensor the folded layers depend on."""
    tensors = [
        *head.box_fc2.parameters(),
        *head.box_fc2.buffers(),
        *head.box_fc3.parameters(),
        *head.box_fc3.buffers(),
        *head.predictor.parameters(),
    ]
    return tuple((id(t), t.data_ptr(), t._version, t.dtype, t.device) for t in tensors)


_FOLDED: weakref.WeakKeyDictionary[EnergyBoxHead, tuple[tuple, FoldedBoxLayers]] = weakref.WeakKeyDictionary()


def fold_box_layers(head: EnergyBoxHead) -> FoldedBoxLayers:
    """The head's per-box layers with BatchNorm folded (eval mode only), cached per head.

    The cache entry is rebuilt when any of those parameters or buffers is replaced, given new data or modified
    in place (an optimiser step, ``load_state_dict``, ``.to()``, ``param.data = ...``), detected by the tensors'
    identities, storage addresses and version counters.
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
        w2, b2 = _fold(head.box_fc2.linear, head.box_fc2.bn, BOX_BINS[0])
        w3, b3 = _fold(head.box_fc3.linear, head.box_fc3.bn, BOX_BINS[1])
        u = head.predictor.weight.detach().reshape(-1)
        if u.shape[0] != w2.shape[0] + w3.shape[0]:
            raise ValueError(
                f"BoxScorer: the predictor takes {u.shape[0]} inputs, the blocks give {w2.shape[0] + w3.shape[0]}"
            )
        bias = head.predictor.bias
        bias = bias.detach().reshape(1) if bias is not None else u.new_zeros(1)
        folded = FoldedBoxLayers((w2, w3), (w2.t().contiguous(), w3.t().contiguous()), (b2, b3), u, bias)
    _FOLDED[head] = (_fold_key(head), folded)  # after folding: reading tensors does not bump versions
    return folded


class Int8BoxLayers(NamedTuple):
    """The folded per-box Linear weights in int8 (:mod:`ltr.ops.int8_matmul`), for both products of a step.

    forward: per level the (I, O) matrix ``weights_t`` quantised per output (column O); backward: the (O, I)
    matrix ``weights`` quantised per input (column I). Each product's right operand is quantised along the
    columns it produces, so every output has its own scale.
    """

    forward: tuple[Int8Matrix, Int8Matrix]
    backward: tuple[Int8Matrix, Int8Matrix]


_INT8: weakref.WeakKeyDictionary[EnergyBoxHead, tuple[FoldedBoxLayers, Int8BoxLayers]] = (
    weakref.WeakKeyDictionary()
)


def quantize_box_layers(folded: FoldedBoxLayers, *, fused: bool | None = None) -> Int8BoxLayers:
    """``folded``'s per-box Linear weights in int8, both products of a step, uncached; ``fused`` as for
    :func:`ltr.ops.int8_matmul.quantize_columns` (None: the fused way where this CPU has it)."""
    return Int8BoxLayers(
        tuple(quantize_columns(w, fused=fused) for w in folded.weights_t),
        tuple(quantize_columns(w, fused=fused) for w in folded.weights),
    )


def int8_box_layers(head: EnergyBoxHead) -> Int8BoxLayers:
    """:func:`fold_box_layers` quantised to int8 (float32 CPU heads only), cached per head.

    The entry is rebuilt whenever :func:`fold_box_layers` gives a new fold (it does when the parameters
    change); the fold it was built from is kept in the entry, so its identity cannot be reused.
    """
    folded = fold_box_layers(head)
    cached = _INT8.get(head)
    if cached is not None and cached[0] is folded:
        return cached[1]
    if folded.weights[0].device.type != "cpu" or folded.weights[0].dtype != torch.float32:
        raise ValueError(
            f"BoxScorer: int8 needs a float32 box head on the CPU, got {folded.weights[0].dtype} on "
            f"{folded.weights[0].device}"
        )
    layers = quantize_box_layers(folded)
    _INT8[head] = (folded, layers)
    return layers


class _Geometry(NamedTuple):
    """Bin weights of S boxes for both levels, in the wide dtype; axis 0 of every tensor is (x, y).

    Rows ("bins") 0..B2-1 are level 2's bins, row B2 spans the two levels' edge lists and is unused (its weights
    never enter a product and its gradient is 0), rows B2+1.. are level 3's.
    """

    weights: Tensor  # (2, S, B2 + B3 + 1, G): wx / wy of every bin over the grid samples
    tents: Tensor | None  # (2, S, B2 + B3 + 2, G): k(edge - j) at every bin edge (None: not needed)
    inverse: Tensor  # (2, S, bins): 1 / bin length on the grid, 0 for empty boxes
    factor: Tensor | None  # (2, S, bins): the level's scale / box length on the grid, 0 for empty boxes


class _Edges(NamedTuple):
    """Both levels' bin edges in one list (E = B2 + 1 + B3 + 1 edges): per edge its level's pixel-to-grid
    ``scale`` (E,), its level's number of ``bins`` (E,) and ``step`` p / B (E,); the ``grid`` (G,) of cell
    coordinates 0 .. G - 1, G the largest map side. All in the scorer's wide dtype, on its device."""

    scale: Tensor
    bins: Tensor
    step: Tensor
    grid: Tensor


class BoxScorer:
    """f(x, y) of :meth:`EnergyBoxHead.score_modulated` for one image, with its exact box gradient.

    Built once per frame; calling it costs a fixed number of batched operations, none through autograd, and
    reads no value on the host off the CPU (on a CPU: see ``restrict_cells`` and ``int8``). It keeps no state
    between calls.

    Args:
        head: the box head, in eval mode (BatchNorm is folded into the Linear layers, cached per head).
        modulated: ((1, M2, H2, W2), (1, M3, H3, W3)) modulated test features (:meth:`EnergyBoxHead.modulate`),
            the coordinates' origin at their first cell (as for ``score_modulated``).
        strides: feature strides (layer2, layer3) in image pixels; ``head.strides`` by default.
        int8: run the per-box Linear layers' products (forward and backward) in int8
            (:func:`int8_box_layers`; float32 features on the CPU only): the layers' outputs then carry
            about 1% quantisation noise, the scores and box gradients a few percent of their norms (the
            score is a sum of terms much larger than itself); the pooling stays float32. Each int8 product
            checks its input for non-finite values with one host read (free on a CPU), except on the kernel
            path once the maps and layers were found finite (its inputs are finite then).
        restrict_cells: run the pooling products over the cells the boxes weigh on only (:meth:`_cells`),
            with one host read per call; None (default): on a CPU, where the read is free. The same numbers up
            to the products' rounding (sums without the zero terms).
        kernel: pool the boxes, add the per-box layers' biases, score and take the box gradient with the
            C++ kernels of :mod:`ltr.ops.box_pool_kernel` (float32 on a CPU; each bin's cells only, no small
            operations): the same numbers up to the products' rounding. None (default): where it applies and
            builds; a box with a non-finite coordinate takes the PyTorch path for that call.

    Call: ``scorer(boxes_xywh)`` with boxes (1, S, 4) xywh image pixels -> (scores (1, S) in the features'
    dtype, gradients d score / d boxes (1, S, 4) in the boxes' dtype). :meth:`score` gives the scores only.
    Boxes with non-positive width or height pool to zeros with zero gradient in that box's pooling (as
    PrRoIPool); the gradient of ReLU at exactly 0 is 0 (as autograd).
    """

    def __init__(
        self,
        head: EnergyBoxHead,
        modulated: Pair,
        strides: tuple[float, float] | None = None,
        *,
        int8: bool = False,
        restrict_cells: bool | None = None,
        kernel: bool | None = None,
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
        dtype, device = modulated[0].dtype, modulated[0].device
        if modulated[1].dtype != dtype or folded.weights[0].dtype != dtype:
            raise TypeError(
                f"BoxScorer: features ({modulated[0].dtype}, {modulated[1].dtype}) and the head's weights "
                f"({folded.weights[0].dtype}) must have one dtype"
            )
        for f, w, bins in zip(modulated, folded.weights, BOX_BINS, strict=True):
            if w.shape[1] != f.shape[1] * bins * bins:
                raise ValueError(
                    f"BoxScorer: features with {f.shape[1]} channels pooled to {bins}x{bins} bins need a Linear "
                    f"with {f.shape[1] * bins * bins} inputs, the head's has {w.shape[1]}"
                )
        self.int8: Int8BoxLayers | None = None
        if int8:
            if device.type != "cpu" or dtype != torch.float32 or not int8_mm_available():
                raise ValueError(
                    f"BoxScorer: int8 needs float32 features on a CPU with int8 matrix products, got {dtype} "
                    f"on {device}"
                )
            self.int8 = int8_box_layers(head)
        self.dtype, self.folded = dtype, folded
        self.shapes = [tuple(f.shape[1:]) for f in modulated]  # (C, H, W) per level
        # Each (C, H, W) map as (W, H * C), so that every pooling product is a plain or batched matrix product
        # with the channels last (with them in the middle, the batched products ran at a fraction of the BLAS
        # speed), and the cells of a range of columns and rows are a strided matrix (no copy)
        maps = [f[0].detach() for f in modulated]
        self._maps = maps
        self.restrict = device.type == "cpu" if restrict_cells is None else bool(restrict_cells)
        applies = device.type == "cpu" and dtype == torch.float32
        if kernel and not applies:
            raise ValueError(
                f"BoxScorer: the pooling kernel takes float32 CPU features, got {dtype} on {device}"
            )
        self.kernel = applies and box_pool_kernel.available() if kernel is None else bool(kernel)
        #: each map as (H, W, C) for the kernel; the pixel-to-grid scale of each level
        self.maps_hwc = [m.permute(1, 2, 0).contiguous() for m in maps] if self.kernel else []
        self.scales = [1.0 / float(s) for s in strides]
        self.wide = torch.float32 if device.type == "mps" else torch.float64
        self.device = device
        self.rows = [slice(0, BOX_BINS[0]), slice(BOX_BINS[0] + 1, BOX_BINS[0] + 1 + BOX_BINS[1])]

    @functools.cached_property
    def _edges(self) -> _Edges:
        """The PyTorch path's constants (:class:`_Edges`), made on its first use (the kernel path needs none).
        Built on the device: a torch.tensor(list, device=cuda) would copy from the host and wait for the
        stream."""
        wide, device = self.wide, self.device

        def per_edge(values: list[float]) -> Tensor:  # one value per level, repeated over its B + 1 edges
            return torch.cat(
                [
                    torch.full((b + 1,), v, dtype=wide, device=device)
                    for v, b in zip(values, BOX_BINS, strict=True)
                ]
            )

        scale = per_edge(self.scales)
        bins = per_edge([float(b) for b in BOX_BINS])
        step = torch.cat([torch.arange(b + 1, dtype=wide, device=device) / b for b in BOX_BINS])
        size = max(max(c[1], c[2]) for c in self.shapes)
        return _Edges(scale, bins, step, torch.arange(size, dtype=wide, device=device))

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

    def _geometry(self, xyxy: Tensor, tents: bool) -> _Geometry:
        """The weights of ``prroi_pool_image`` for boxes (S, 4) xyxy pixels, with the same float64 arithmetic."""
        corners = xyxy.to(self.wide).t()  # (4, S)
        start = corners[:2, :, None] * self._edges.scale  # (2, S, E): box start on each edge's level's grid
        length = (corners[2:, :, None] * self._edges.scale - start).clamp(min=0)
        edges = start + length * self._edges.step  # (2, S, E)
        u = (edges[..., None] - self._edges.grid).clamp(-1.0, 1.0)  # (2, S, E, G)
        cumulative = 0.5 + u - 0.5 * u * u.abs()  # K
        valid = length[..., :-1] > 0  # (2, S, bins); the row between the levels reads level 2's
        bin_length = length[..., :-1] / self._edges.bins[:-1]
        inverse = valid.to(self.wide) / torch.where(valid, bin_length, torch.ones_like(bin_length))
        weights = (cumulative[:, :, 1:] - cumulative[:, :, :-1]) * inverse[..., None]
        if not tents:
            return _Geometry(weights, None, inverse, None)
        safe = torch.where(valid, length[..., :-1], torch.ones_like(bin_length))
        factor = self._edges.scale[:-1] * valid.to(self.wide) / safe
        return _Geometry(weights, 1.0 - u.abs(), inverse, factor)  # k = K' = 1 - |clamp(t, -1, 1)|

    @functools.cached_property
    def maps_whc(self) -> list[Tensor]:
        """Each level's map as (W, H * C), contiguous: the PyTorch path's layout, made on its first call."""
        return [m.permute(2, 1, 0).reshape(m.shape[2], -1).contiguous() for m in self._maps]

    def _cells(self, xyxy: Tensor) -> list[tuple[slice, slice]]:
        """Per level, the (columns, rows) of the grid that some box's bins weigh on, as slices.

        A bin's weights over cell j are non-zero only for e_near - 1 < j < e_far + 1 (the tent's support), so
        a box reads cells floor(start) .. ceil(start + length). On a CPU those cells are read on the host (one
        read per call) and the products run over them only: the boxes of one refinement cover a fraction of
        the window. Elsewhere (no host reads) and for non-finite boxes: the whole maps.
        """
        full = [(slice(0, width), slice(0, height)) for _, height, width in self.shapes]
        if not self.restrict or xyxy.shape[0] == 0:
            return full
        corners = xyxy.to(self.wide)
        # (level, axis) start / end on each level's grid, over all boxes; length clamped at 0 as _geometry
        scale = torch.stack([self._edges.scale[0], self._edges.scale[-1]])[:, None]  # (2 levels, 1)
        low = corners[:, :2].amin(0) * scale  # (level, axis)
        high = torch.maximum(corners[:, 2:], corners[:, :2]).amax(0) * scale
        bounds = torch.stack([low.floor(), high.ceil()], dim=-1).tolist()  # (level, axis, 2)
        cells = []
        for (_, height, width), level in zip(self.shapes, bounds, strict=True):
            pair = []
            for (lo, hi), size in zip(level, (width, height), strict=True):
                if not (math.isfinite(lo) and math.isfinite(hi)):
                    pair.append(slice(0, size))
                    continue
                first = min(max(int(lo), 0), size - 1)
                pair.append(slice(first, min(max(int(hi), first), size - 1) + 1))
            cells.append((pair[0], pair[1]))
        return cells

    def _forward(self, xyxy: Tensor, tents: bool):
        """Geometry, cells (:meth:`_cells`), per level (column products (S * P, h, C), row weights (S, Q, h),
        the map's cells (w, h * C)) over those cells, hidden (S, O2 + O3)."""
        geo = self._geometry(xyxy, tents)
        weights = geo.weights.to(self.dtype)
        cells = self._cells(xyxy)
        s = xyxy.shape[0]
        saved, hidden = [], []
        for level, ((channels, _, _), (xs, ys), rows, maps_whc, weight_t, bias) in enumerate(
            zip(
                self.shapes,
                cells,
                self.rows,
                self.maps_whc,
                self.folded.weights_t,
                self.folded.biases,
                strict=True,
            )
        ):
            wx, wy = weights[0, :, rows, xs], weights[1, :, rows, ys]  # (S, P, w), (S, Q, h)
            bins, width, height = wx.shape[1], wx.shape[2], wy.shape[2]
            maps = maps_whc[xs, ys.start * channels : ys.stop * channels]  # (w, h * C), a strided view
            # cols[s, p, h, c] = sum_w wx[s, p, w] F[c, h, w]
            # pooled[s, p, q, c] = sum_h wy[s, q, h] cols[s, p, h, c]
            cols = torch.mm(wx.reshape(s * bins, width), maps).view(s * bins, height, channels)
            wy_each = wy[:, None].expand(s, bins, bins, height).reshape(s * bins, bins, height)  # per (s, p)
            pooled = torch.bmm(wy_each, cols).view(s, weight_t.shape[0])  # (S, P * Q * C)
            if self.int8 is None:
                hidden.append(torch.addmm(bias, pooled, weight_t))  # (S, O)
            else:
                hidden.append(int8_mm(pooled, self.int8.forward[level]).add_(bias))
            saved.append((cols, wy_each, maps))
        return geo, cells, saved, torch.cat(hidden, dim=1)

    def _kernel_pooled(self, xyxy: Tensor) -> list[Tensor] | None:
        """Per level the pooled bins (S, B * B * C) from the kernel; None without it or for a non-finite
        box."""
        if not self.kernel or xyxy.shape[0] == 0:
            return None
        pooled = []
        for maps, scale, bins in zip(self.maps_hwc, self.scales, BOX_BINS, strict=True):
            level = box_pool_kernel.pool_forward(maps, xyxy, scale, bins)
            if level is None:
                return None
            pooled.append(level)
        return pooled

    @functools.cached_property
    def _finite(self) -> bool:
        """Whether the maps and the folded layers are finite (read once, on the host): then every input of the
        kernel path's products is finite (the kernel rejects non-finite boxes), and the int8 products can skip
        their per-call check."""
        tensors = [*self.maps_hwc, *self.folded.biases, self.folded.predictor, self.folded.predictor_bias]
        return all(bool(torch.isfinite(t).all()) for t in tensors)

    def _product(self, x: Tensor, level: int, backward: bool) -> Tensor:
        """x (S, I) @ the level's folded Linear weights (forward, without the bias) or x (S, O) @ their
        transpose (backward), in int8 where the scorer takes int8 products."""
        if self.int8 is None:
            return torch.mm(x, (self.folded.weights if backward else self.folded.weights_t)[level])
        matrix = (self.int8.backward if backward else self.int8.forward)[level]
        if matrix.packed is not None and self._finite:  # int8_mm's fused way, without its finiteness check
            return torch.ops.quantized.linear_dynamic(x, matrix.packed)
        return int8_mm(x, matrix)

    def _kernel_scores(self, pooled: list[Tensor], grads: bool) -> tuple[Tensor, list[Tensor] | None]:
        """Scores (S,) from the kernel's pooled bins, and with ``grads`` d score / d h (S, O) per level."""
        raw = [self._product(x, level, backward=False) for level, x in enumerate(pooled)]
        out = [torch.empty_like(r) for r in raw] if grads else None
        scores = box_pool_kernel.head_output(
            (raw[0], raw[1]),
            (self.folded.biases[0], self.folded.biases[1]),
            self._predictor_parts,
            self._predictor_bias,
            None if out is None else (out[0], out[1]),
        )
        return scores, out

    @functools.cached_property
    def _predictor_parts(self) -> tuple[Tensor, Tensor]:
        """The predictor's weights per level, (O2,) and (O3,), contiguous."""
        o2 = self.folded.weights[0].shape[0]
        return self.folded.predictor[:o2].contiguous(), self.folded.predictor[o2:].contiguous()

    @functools.cached_property
    def _predictor_bias(self) -> float:
        return float(self.folded.predictor_bias.reshape(-1)[0])

    def _kernel_call(self, xyxy: Tensor, pooled: list[Tensor], dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """:meth:`__call__` with the kernel's pooling, per-box outputs and box gradient."""
        scores, grad_hidden = self._kernel_scores(pooled, grads=True)
        grad = torch.zeros(xyxy.shape[0], 4, dtype=torch.float64)
        for level, (maps, scale, bins, part) in enumerate(
            zip(self.maps_hwc, self.scales, BOX_BINS, grad_hidden, strict=True)
        ):
            grad_pooled = self._product(part, level, backward=True)
            box_pool_kernel.pool_backward(maps, xyxy, scale, bins, grad_pooled, grad)
        return scores[None], grad.to(dtype)[None]

    def _predict(self, hidden: Tensor) -> Tensor:
        """Scores (S,) from the pre-ReLU activations (S, O2 + O3)."""
        bias = self.folded.predictor_bias.expand(hidden.shape[0])
        return torch.addmv(bias, torch.relu(hidden), self.folded.predictor)

    def score(self, boxes_xywh: Tensor) -> Tensor:
        """Scores (1, S) of boxes (1, S, 4) xywh image pixels, forward only."""
        xyxy = self._xyxy(boxes_xywh)
        with torch.no_grad():
            pooled = self._kernel_pooled(xyxy)
            if pooled is not None:
                return self._kernel_scores(pooled, grads=False)[0][None]
            return self._predict(self._forward(xyxy, tents=False)[-1])[None]

    def __call__(self, boxes_xywh: Tensor) -> tuple[Tensor, Tensor]:
        """(scores (1, S), d scores / d boxes_xywh (1, S, 4)) for boxes (1, S, 4) xywh image pixels."""
        xyxy = self._xyxy(boxes_xywh)
        with torch.no_grad():
            pooled = self._kernel_pooled(xyxy)
            if pooled is not None:
                return self._kernel_call(xyxy, pooled, boxes_xywh.dtype)
            geo, cells, saved, hidden = self._forward(xyxy, tents=True)
            scores = self._predict(hidden)
            grad_hidden = self.folded.predictor * (hidden > 0).to(hidden.dtype)  # relu'(0) = 0, as autograd
            s = xyxy.shape[0]
            grad_w = torch.zeros(geo.weights.shape, dtype=self.dtype, device=hidden.device)  # d f / d weights
            first = 0
            for level, ((channels, _, _), (xs, ys), rows, weight, (cols, wy_each, maps)) in enumerate(
                zip(self.shapes, cells, self.rows, self.folded.weights, saved, strict=True)
            ):
                out = weight.shape[0]
                bins, height = wy_each.shape[1:]
                # d f / d pooled (S * P, Q, C), then onto the row weights through the column products and onto
                # the column weights through g[s, p, h, c] = sum_q wy[s, q, h] d f / d pooled[s, p, q, c]
                part = grad_hidden[:, first : first + out]
                if self.int8 is None:
                    grad = torch.mm(part, weight)
                else:
                    grad = int8_mm(part, self.int8.backward[level])
                first += out
                grad = grad.view(s * bins, bins, channels)
                per_bin = torch.bmm(grad, cols.transpose(1, 2))  # (S P, Q, h)
                grad_w[1, :, rows, ys] = per_bin.view(s, bins, bins, height).sum(1)
                through_rows = torch.bmm(wy_each.transpose(1, 2), grad)  # (S P, h, C)
                per_col = torch.mm(through_rows.view(s * bins, height * channels), maps.t())  # (S P, w)
                grad_w[0, :, rows, xs] = per_col.view(s, bins, maps.shape[0])
            grad = self._box_grad(grad_w.to(self.wide), geo)
            return scores[None], grad.to(boxes_xywh.dtype)[None]

    def _box_grad(self, grad_w: Tensor, geo: _Geometry) -> Tensor:
        """d f / d xywh (S, 4) from d f / d weights (2, S, bins, G): see the module docstring.

        d / d x is d / d (box start) (x moves both edges), d / d w is d / d (box length) (w moves the far one);
        each level's grid coordinates are its scale times the pixel coordinates.
        """
        scale, step = self._edges.scale[:-1], self._edges.step  # per bin: its level's scale; per edge: p / B
        scaled = grad_w * geo.inverse[..., None]
        upper = (scaled * geo.tents[:, :, 1:]).sum(-1)  # (2, S, bins): tents at each bin's far edge
        lower = (scaled * geo.tents[:, :, :-1]).sum(-1)  # and at its near edge
        d_start = ((upper - lower) * scale).sum(-1)  # (2, S)
        d_length = ((upper * step[1:] - lower * step[:-1]) * scale).sum(-1)
        d_length = d_length - ((grad_w * geo.weights).sum(-1) * geo.factor).sum(-1)  # the 1 / bin length
        return torch.cat([d_start, d_length]).t()
