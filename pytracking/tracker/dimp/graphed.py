"""The refinement's whole ascent as one captured CUDA graph (``DiMPParams.cuda_graph``, CUDA devices only).

An eager ascent is ten forward and backward passes through the box head: hundreds of small kernels, each
launched by the host, which at a batch of many sequences keeps the GPU waiting (``run_tracker.py --batch``).
Here :func:`~.refine.ascend` of the box head's dense score (``score_modulated(..., dense=True)``: the same
values as the tracker's pooling, as a fixed graph with no host synchronisation) is captured once per input
shape with :class:`torch.cuda.CUDAGraph` (autograd's backward included) and replayed: one launch per frame.
The boxes are those of the eager ascent up to float rounding (the dense and the windowed pooling sum in
different orders).

A graph holds fixed shapes, so the batch is padded up to a power of two (the last sequence repeated; its
copies are computed and dropped), which keeps the number of captured graphs small (at most 7 for 64
slots) as the number of refined sequences changes from frame to frame. Every sequence's candidates depend on
its own features only, so padding changes no sequence's boxes beyond float rounding. Only ``mode="plain"``
(the reference's fixed-step ascent) is graphed: Algorithm S1 (``"s1"``) runs eagerly. The graphs are kept
on the box head (:func:`graphed_ascent`), so every tracker of a network shares them: sequences that start
later in a run (``--batch`` refills its slots) find them captured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from pytracking.tracker.dimp.box_window import ascend_within
from pytracking.tracker.dimp.frames import pad_rows
from pytracking.tracker.dimp.refine import AscentOptions, score_and_grad

__all__ = ["GraphedAscent", "graphed_ascent", "padded_size"]

Pair = tuple[Tensor, Tensor]

#: eager runs before a capture, on a side stream, as torch's CUDA-graph notes advise (cuBLAS and cuDNN
#: set up their workspaces and autograd its threads outside the graph)
WARMUP_RUNS = 2


def padded_size(n: int) -> int:
    """The batch a graph is captured for when ``n`` sequences are refined: the next power of two."""
    if n < 1:
        raise ValueError(f"padded_size needs n >= 1, got {n}")
    return 1 << (n - 1).bit_length()


@dataclass
class _Captured:
    """One captured ascent: its static inputs (copied into before each replay) and outputs."""

    graph: torch.cuda.CUDAGraph
    t2: Tensor
    t3: Tensor
    boxes: Tensor
    limits: Tensor
    out_boxes: Tensor
    out_scores: Tensor
    out_held: Tensor


class GraphedAscent:
    """``(modulated (t2, t3), boxes (B, S, 4) xywh, limits (B, 4), options) -> (boxes (B, S, 4), scores (B, S),
    held (B,))``: what :func:`~.refine.ascend` returns for box head ``head``'s dense score, from a replayed CUDA
    graph, and whether each image's boxes stayed within its window's ``limits`` at every step
    (:func:`~.box_window.ascend_within`).

    Graphs are captured on first use of each (padded batch, candidates, feature shapes, dtype, device,
    options) and kept for the object's life; the returned tensors are copies, valid after the next call.
    """

    def __init__(self, head: nn.Module) -> None:
        self.head = head
        self._graphs: dict[tuple, _Captured] = {}

    def _score(self, modulated: Pair) -> Callable[[Tensor], Tensor]:
        return lambda boxes: self.head.score_modulated(modulated, boxes, dense=True)

    def __call__(
        self, modulated: Pair, boxes: Tensor, limits: Tensor, options: AscentOptions
    ) -> tuple[Tensor, Tensor, Tensor]:
        if options.mode != "plain":
            raise ValueError(f"only the plain ascent is graphed, got mode {options.mode!r}")
        t2, t3 = modulated
        n = boxes.shape[0]
        size = padded_size(n)
        key = (size, boxes.shape[1], tuple(t2.shape[1:]), tuple(t3.shape[1:]), t2.dtype, t2.device, options)
        captured = self._graphs.get(key)
        inputs = (
            pad_rows(t2, size),
            pad_rows(t3, size),
            pad_rows(boxes.to(t2.dtype), size),
            pad_rows(limits.to(t2.dtype), size),
        )
        if captured is None:
            captured = self._capture(inputs, options)
            self._graphs[key] = captured
        else:
            statics = (captured.t2, captured.t3, captured.boxes, captured.limits)
            for static, value in zip(statics, inputs, strict=True):
                static.copy_(value)
        with torch.cuda.device(t2.device):
            captured.graph.replay()
        return captured.out_boxes[:n].clone(), captured.out_scores[:n].clone(), captured.out_held[:n].clone()

    def _capture(self, inputs: tuple[Tensor, Tensor, Tensor, Tensor], options: AscentOptions) -> _Captured:
        t2, t3, boxes, limits = (t.clone() for t in inputs)

        def run() -> tuple[Tensor, Tensor, Tensor]:
            return ascend_within(score_and_grad(self._score((t2, t3))), boxes, limits, options)

        with torch.cuda.device(t2.device):  # the capture runs on the current device's streams
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(WARMUP_RUNS):
                    run()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            # other threads may use CUDA meanwhile (frame readers pinning memory): only this one is restricted
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                out_boxes, out_scores, out_held = run()
        return _Captured(graph, t2, t3, boxes, limits, out_boxes, out_scores, out_held)


_ATTRIBUTE = "_tracker_graphed_ascent"


def graphed_ascent(head: nn.Module) -> GraphedAscent:
    """The :class:`GraphedAscent` of box head ``head``: one per head object and process, kept as a plain
    attribute of the module (no state dict entry), as :mod:`.compiled` keeps its stages."""
    graphed = head.__dict__.get(_ATTRIBUTE)
    if graphed is None:
        graphed = GraphedAscent(head)
        head.__dict__[_ATTRIBUTE] = graphed
    return graphed
