"""The part of a crop's box-head feature maps that the refinement reads, so that a backend computes the box head's
test features there only (a tracker's boxes cover about a tenth of its crop).

The refinement pools its boxes from the maps' summed-area tables (:mod:`ltr.ops.prroi_integral`): a box whose
edges are ``a <= b`` on a layer's grid (pixels times ``1 / stride``) reads the table entries ``floor(a)`` to
``floor(b) + 2`` and nothing else. The test features at a cell depend on the backbone features within ``halo``
cells of it (the test branches' 3 x 3 convolutions, :func:`conv_halo`). So a box's score and gradient are the
same from a window's table as from the whole map's, up to float rounding, when

- the test features are computed on the window grown by the halo and cut back to the window afterwards, and
- on each layer and axis, the box's reads lie inside the window's table: ``floor(a) >= first cell`` unless the
  window starts at the map's start, ``floor(b) + 2 <= end cell`` unless it ends at the map's end
  (:meth:`BoxWindow.holds`; a NaN box holds in the whole map only).

:meth:`WindowRule.window` chooses the window around the refinement's starting boxes, ``margin`` pixels wider for
the steps' moves, in whole cells of the coarsest layer so that every layer's window starts at the same pixel.
A backend checks every step's boxes and takes the whole map when they leave the window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from torch import nn

__all__ = ["BoxWindow", "WindowRule", "conv_halo"]

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
    ``inputs`` the test branches read for them (``cells`` grown by the halo, within the map); ``sizes`` the
    maps' (rows, columns) and ``strides`` their pixels per cell."""

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

    def holds(self, boxes: np.ndarray) -> bool:
        """Whether every box of ``boxes`` (..., 4) xywh crop pixels reads only this window's tables (see the
        module docstring); False for a NaN box unless the window is the whole map."""
        if self.is_whole:
            return True
        boxes = boxes.reshape(-1, 4).astype(np.float64)
        start = boxes[:, :2]
        end = start + np.maximum(boxes[:, 2:], 0.0)  # the pooling's edges: an empty box reads at its start
        for (r0, c0, r1, c1), (h, w), stride in zip(self.cells, self.sizes, self.strides, strict=True):
            first, last = np.array([c0, r0]), np.array([c1, r1])
            low = np.floor(start / stride) >= first
            high = np.floor(end / stride) + 2 <= last
            ok = (low | (first == 0)) & (high | (last == np.array([w, h])))
            # a NaN box fails both comparisons, and a window edge at the map's edge does not save it there
            if not (ok.all() and np.isfinite(boxes).all()):
                return False
        return True


@dataclass(frozen=True)
class WindowRule:
    """How to cut a :class:`BoxWindow` for a backend's box layers: ``strides`` (pixels per cell) and ``halos``
    (:func:`conv_halo` of each layer's test branch) per layer, and ``margin``, the pixels the boxes may move
    beyond the starting boxes before the backend falls back to the whole map."""

    strides: tuple[int, ...]
    halos: tuple[int, ...]
    margin: float = 8.0

    def __post_init__(self) -> None:
        coarsest = max(self.strides)
        if any(coarsest % s for s in self.strides) or len(self.strides) != len(self.halos):
            raise ValueError(f"WindowRule: strides {self.strides} must divide the largest, one halo each")

    def window(self, boxes: np.ndarray, sizes: Sequence[tuple[int, int]]) -> BoxWindow:
        """The window for starting boxes ``boxes`` (..., 4) xywh crop pixels on maps of ``sizes`` ((rows,
        columns) per layer): their extent grown by ``margin``, in whole cells of the coarsest layer, plus the
        two cells on the far side that a box's reads take (module docstring). The whole maps for NaN boxes."""
        boxes = boxes.reshape(-1, 4).astype(np.float64)
        if not np.isfinite(boxes).all():
            return BoxWindow.whole(sizes, self.strides)
        start = boxes[:, :2].min(axis=0) - self.margin
        end = (boxes[:, :2] + np.maximum(boxes[:, 2:], 0.0)).max(axis=0) + self.margin
        unit = max(self.strides)
        x0, y0 = (max(0, math.floor(v / unit)) * unit for v in start)
        x1, y1 = ((math.floor(v / unit) + 2) * unit for v in end)
        cells, inputs = [], []
        for (h, w), stride, halo in zip(sizes, self.strides, self.halos, strict=True):
            c0, r0 = min(x0 // stride, w), min(y0 // stride, h)
            c1, r1 = max(min(x1 // stride, w), c0), max(min(y1 // stride, h), r0)
            if c1 == c0 or r1 == r0:  # boxes off the map: the whole map, which holds them as it always did
                return BoxWindow.whole(sizes, self.strides)
            cells.append((r0, c0, r1, c1))
            inputs.append((max(0, r0 - halo), max(0, c0 - halo), min(h, r1 + halo), min(w, c1 + halo)))
        return BoxWindow(tuple(cells), tuple(inputs), tuple(tuple(s) for s in sizes), self.strides)  # type: ignore[arg-type]
