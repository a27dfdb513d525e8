"""The part of a crop's box-head feature maps that the refinement reads, so that a backend computes the box head's
test features there only (the boxes are the target and its candidates, in a crop several times the target's
size).

A box whose edges are ``a <= b`` on a layer's grid (pixels times ``1 / stride``) reads, when pooled from the
maps' summed-area tables (:mod:`ltr.ops.prroi_integral`, the ONNX Runtime backend), the table entries
``floor(a)`` to ``floor(b) + 2`` and nothing else; pooled directly (:mod:`ltr.ops.prroi_pool`, the PyTorch
stages), the cells ``j`` with ``a - 1 < j < b + 1``, which lie within the same entries. The test features at a
cell depend on the backbone features within ``halo`` cells of it (the test branches' 3 x 3 convolutions,
:func:`conv_halo`). So a box's score and gradient are the same from a window as from the whole map, up to
float rounding, when

- the test features are computed on the window grown by the halo and cut back to the window afterwards, and
- on each layer and axis, the box's reads lie inside the window: ``floor(a) >= first cell`` unless the window
  starts at the map's start, ``floor(b) + 2 <= end cell`` unless it ends at the map's end
  (:meth:`BoxWindow.limits` in pixels, :meth:`BoxWindow.holds`; a NaN box holds in the whole map only).

The window's features (or tables) are then placed at their place in maps (tables) of the whole size with
zeros elsewhere, which the boxes do not read, so the box score keeps its shapes.

:meth:`WindowRule.window` chooses the window around the refinement's starting boxes, ``margin`` pixels wider for
the steps' moves, in whole cells of the coarsest layer so that every layer's window starts at the same pixel,
optionally rounded to a few sizes so that many images' windows batch (:func:`cut_cells`, :func:`paste_cells`).
A backend checks every step's boxes (:meth:`BoxWindow.holds` on the host, :func:`ascend_within` on the device)
and takes the whole maps for an image whose boxes leave its window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from pytracking.tracker.dimp.refine import AscentOptions, ascend

__all__ = [
    "BoxWindow",
    "WindowRule",
    "ascend_within",
    "boxes_within",
    "conv_halo",
    "cut_cells",
    "paste_cells",
]

Cells = tuple[int, int, int, int]  # (row start, column start, row end, column end), ends exclusive


def conv_halo(module: nn.Module) -> int:
    """Cells beyond an output cell that ``module``'s chain of stride-1 convolutions reads, on each side
    (a 3 x 3 convolution reads 1). ValueError for a strided convolution, whose cells do not map one to one."""
    halo = 0
    for conv in module.modules():
        if isinstance(conv, nn.Conv2d):
            if conv.stride != (1, 1):
                raise ValueError(f"conv_halo: a convolution of stride {conv.stride}, not 1")
            dilation, kernel = conv.dilation, conv.kernel_size
            halo += max(d * (k - 1) // 2 for d, k in zip(dilation, kernel, strict=True))
    return halo


@dataclass(frozen=True)
class BoxWindow:
    """A window of every box layer's map: per layer, its ``cells`` (the window's table is made of these) and the
    ``inputs`` the test branches read for them (``cells`` grown by the halo, shifted to stay within the map,
    so that windows of one size read inputs of one size); ``sizes`` the maps' (rows, columns) and ``strides``
    their pixels per cell."""

    cells: tuple[Cells, ...]
    inputs: tuple[Cells, ...]
    sizes: tuple[tuple[int, int], ...]
    strides: tuple[int, ...]

    @classmethod
    def whole(cls, sizes: Sequence[tuple[int, int]], strides: Sequence[int]) -> BoxWindow:
        """The whole maps of ``sizes`` ((rows, columns) per layer)."""
        cells = tuple((0, 0, h, w) for h, w in sizes)
        return cls(cells, cells, tuple(tuple(s) for s in sizes), tuple(strides))  # type: ignore[arg-type]

    @property
    def is_whole(self) -> bool:
        return all(c == (0, 0, h, w) for c, (h, w) in zip(self.cells, self.sizes, strict=True))

    @property
    def shape(self) -> tuple[tuple[int, int], ...]:
        """(rows, columns) of each layer's inputs, then of each layer's cells: windows of one shape batch."""
        return tuple((r1 - r0, c1 - c0) for r0, c0, r1, c1 in self.inputs + self.cells)

    def starts(self) -> np.ndarray:
        """(3, layers, 2) int64 (row, column) starts, per layer: of the inputs in the map, of the cells within
        the inputs, and of the cells in the map."""
        inputs = np.array([c[:2] for c in self.inputs], dtype=np.int64)
        cells = np.array([c[:2] for c in self.cells], dtype=np.int64)
        return np.stack([inputs, cells - inputs, cells])

    def limits(self) -> tuple[float, float, float, float]:
        """(x_lo, y_lo, x_hi, y_hi) crop pixels: a box is held when its start (x, y) >= (x_lo, y_lo) and its end
        (x + max(w, 0), y + max(h, 0)) < (x_hi, y_hi); -inf / inf on a side where the window reaches the map's
        edge. The module docstring's reads in pixels: ``floor(a / s) >= c0`` is ``a >= c0 s`` and
        ``floor(b / s) + 2 <= c1`` is ``b < (c1 - 1) s``, the strictest layer deciding."""
        lo, hi = [-math.inf, -math.inf], [math.inf, math.inf]
        for (r0, c0, r1, c1), (h, w), stride in zip(self.cells, self.sizes, self.strides, strict=True):
            for axis, (first, end, n) in enumerate(((c0, c1, w), (r0, r1, h))):
                if first > 0:
                    lo[axis] = max(lo[axis], first * stride)
                if end < n:
                    hi[axis] = min(hi[axis], (end - 1) * stride)
        return (lo[0], lo[1], hi[0], hi[1])

    def holds(self, boxes: np.ndarray) -> bool:
        """Whether every box of ``boxes`` (..., 4) xywh crop pixels reads only this window's tables
        (:func:`boxes_within` of :meth:`limits`); False for a NaN box unless the window is the whole map."""
        if self.is_whole:
            return True
        image = torch.from_numpy(np.asarray(boxes, dtype=np.float64).reshape(1, -1, 4))
        return bool(boxes_within(image, torch.tensor([self.limits()], dtype=torch.float64))[0])


@dataclass(frozen=True)
class WindowRule:
    """How to cut a :class:`BoxWindow` for a backend's box layers: ``strides`` (pixels per cell) and ``halos``
    (:func:`conv_halo` of each layer's test branch) per layer, ``margin``, the pixels the boxes may move
    beyond the starting boxes before the backend falls back to the whole map, and ``most``: a window whose
    inputs take more than this share of the first layer's map saves too little convolution to pay for its
    bookkeeping (the cuts, and the check of every step's boxes), so the whole maps are taken instead."""

    strides: tuple[int, ...]
    halos: tuple[int, ...]
    margin: float = 8.0
    most: float = 0.75

    @classmethod
    def of_head(cls, head: nn.Module) -> WindowRule:
        """The rule for box head ``head``: its layers' ``strides`` and the halos of its test branches
        (``test_conv2``, ``test_conv3``)."""
        return cls(
            strides=tuple(head.strides), halos=(conv_halo(head.test_conv2), conv_halo(head.test_conv3))
        )

    def __post_init__(self) -> None:
        coarsest = max(self.strides)
        if any(coarsest % s for s in self.strides) or len(self.strides) != len(self.halos):
            raise ValueError(f"WindowRule: strides {self.strides} must divide the largest, one halo each")

    def window(
        self, boxes: np.ndarray, sizes: Sequence[tuple[int, int]], step: int | None = None
    ) -> BoxWindow:
        """The window for starting boxes ``boxes`` (..., 4) xywh crop pixels on maps of ``sizes`` ((rows,
        columns) per layer): their extent grown by ``margin``, in whole cells of the coarsest layer, plus the
        two cells on the far side that a box's reads take (module docstring). The whole maps for NaN boxes.

        ``step`` (pixels, a multiple of the coarsest stride): the window's width and height rounded up to
        multiples of it, the window moved back inside the maps where that takes it past their end, so that
        windows of many sequences come in a few sizes (batched convolutions need one size)."""
        boxes = boxes.reshape(-1, 4).astype(np.float64)
        if not np.isfinite(boxes).all():
            return BoxWindow.whole(sizes, self.strides)
        start = boxes[:, :2].min(axis=0) - self.margin
        end = (boxes[:, :2] + np.maximum(boxes[:, 2:], 0.0)).max(axis=0) + self.margin
        unit = max(self.strides)
        first = [max(0, math.floor(v / unit)) * unit for v in start]  # x, y
        last = [(math.floor(v / unit) + 2) * unit for v in end]
        extents = {(w * s, h * s) for (h, w), s in zip(sizes, self.strides, strict=True)}
        if step is not None and len(extents) == 1:
            if step % unit:
                raise ValueError(f"WindowRule.window: step {step} is not a multiple of {unit} pixels")
            for axis, extent in enumerate(next(iter(extents))):
                length = -(-(last[axis] - first[axis]) // step) * step
                if extent % unit == 0 and length < extent:
                    first[axis] = min(first[axis], extent - length)
                    last[axis] = first[axis] + length
        cells, inputs = [], []
        for (h, w), stride, halo in zip(sizes, self.strides, self.halos, strict=True):
            c0, r0 = min(first[0] // stride, w), min(first[1] // stride, h)
            c1, r1 = max(min(last[0] // stride, w), c0), max(min(last[1] // stride, h), r0)
            if c1 == c0 or r1 == r0:  # boxes off the map: the whole map, which holds them as it always did
                return BoxWindow.whole(sizes, self.strides)
            cells.append((r0, c0, r1, c1))
            rows, cols = min(r1 - r0 + 2 * halo, h), min(c1 - c0 + 2 * halo, w)
            i0, j0 = min(max(0, r0 - halo), h - rows), min(max(0, c0 - halo), w - cols)
            inputs.append((i0, j0, i0 + rows, j0 + cols))
        (h, w), (r0, c0, r1, c1) = sizes[0], inputs[0]
        if (r1 - r0) * (c1 - c0) > self.most * h * w:
            return BoxWindow.whole(sizes, self.strides)
        return BoxWindow(tuple(cells), tuple(inputs), tuple(tuple(s) for s in sizes), self.strides)  # type: ignore[arg-type]


def _flat_cells(starts: Tensor, size: tuple[int, int], width: int) -> Tensor:
    """(n, h w) flat indices into maps of ``width`` columns of the (h, w) cells from each (row, column) start
    of ``starts`` (n, 2)."""
    rows = starts[:, :1] + torch.arange(size[0], device=starts.device)
    cols = starts[:, 1:] + torch.arange(size[1], device=starts.device)
    return (rows[:, :, None] * width + cols[:, None, :]).flatten(1)


def cut_cells(maps: Tensor, starts: Tensor, size: tuple[int, int]) -> Tensor:
    """(n, C, h, w): from each map of ``maps`` (n, C, H, W) the (h, w) cells from its (row, column) start in
    ``starts`` (n, 2) int64 (one gather for all)."""
    n, channels, _, width = maps.shape
    index = _flat_cells(starts, size, width)[:, None, :].expand(n, channels, -1)
    return maps.flatten(2).gather(2, index).view(n, channels, *size)


def paste_cells(maps: Tensor, rows: Tensor, values: Tensor, starts: Tensor) -> None:
    """Write ``values`` (n, C, h, w) into maps ``rows`` (n,) int64 of ``maps`` (B, C, H, W) in place, each at
    its (row, column) start in ``starts`` (n, 2) int64."""
    n, channels, h, w = values.shape
    index = _flat_cells(starts, (h, w), maps.shape[-1])[:, None, :].expand(n, channels, -1)
    flat = maps.view(*maps.shape[:2], -1)
    flat[rows[:, None, None], torch.arange(channels, device=maps.device)[None, :, None], index] = (
        values.flatten(2)
    )


def boxes_within(boxes: Tensor, limits: Tensor) -> Tensor:
    """(B,) bool: whether every box of each image's (B, S, 4) xywh crop pixels reads only its window, given the
    windows' ``limits`` (B, 4) (:meth:`BoxWindow.limits`): start >= (x_lo, y_lo) and start + max(size, 0) <
    (x_hi, y_hi), the pooling's edges (an empty box reads at its start). False for an image with a NaN box."""
    start = boxes[..., :2]
    end = start + boxes[..., 2:].clamp(min=0)
    inside = (start >= limits[:, None, :2]) & (end < limits[:, None, 2:])  # NaN fails both
    return inside.flatten(1).all(dim=1)


def ascend_within(
    score_grad: Callable[[Tensor], tuple[Tensor, Tensor]],
    boxes: Tensor,
    limits: Tensor,
    options: AscentOptions,
) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`~.refine.ascend` of (B, S, 4) xywh ``boxes`` by ``options``, and (B,) bool: whether each image's boxes
    stayed within its window's ``limits`` (B, 4) (:meth:`BoxWindow.limits`; a NaN box is outside) at every
    step, checked on the boxes' device (no host synchronisation, so the ascent can be captured as a graph)."""
    held = torch.ones(boxes.shape[0], dtype=torch.bool, device=boxes.device)

    def checked(moved: Tensor) -> tuple[Tensor, Tensor]:
        held.logical_and_(boxes_within(moved, limits))
        return score_grad(moved)

    refined, scores = ascend(checked, boxes, **options._asdict())
    return refined, scores, held
