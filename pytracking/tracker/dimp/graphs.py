"""CUDA graphs for the tracker's fixed-shape per-frame work (``params.cuda_graph``).

On a GPU the box refinement is launch-bound: at DiMP-50's geometry it is about 1500 small kernels per frame
(10 boxes, 5 steps, closed-form gradients) that keep an H100 busy for about 3 ms in all, while the host
spends about 25 ms launching them (``benchmarks/tracker_fps.py --device cuda``). A CUDA graph records the
launches once and replays them with one call.

A graph replays fixed memory: :class:`GraphedFunction` copies each call's inputs into the buffers it was
recorded on and returns the outputs it recorded into, overwritten by the next call. What it records must not
read values on the host (the tracker's refinement reads none) nor draw random numbers (the tracker draws the
candidate boxes' jitters before the call and passes them in).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

__all__ = ["GraphedFunction"]


class GraphedFunction:
    """``fn(*inputs) -> tuple of tensors`` recorded once, for fixed input shapes, and replayed per call.

    Args:
        fn: a function of tensors only, returning a tuple of tensors; it must not read device values on the
            host, draw random numbers or keep state between calls.
        example_inputs: tensors with the shapes, dtypes and devices of every later call's inputs; their values
            are used for the warm-up runs and the recording.
        capture: True records a CUDA graph (the inputs must be CUDA tensors). False runs ``fn`` on the static
            buffers at every call and copies its results into the static outputs: the same data flow without a
            graph, on any device (what the CPU tests exercise).
        warmup: eager runs on a side stream before recording (they set up cuBLAS/cuDNN workspaces and any
            caches ``fn`` fills on its first call, so the recording holds only the per-call work).

    Calling returns the static output tensors: clone what must outlive the next call. If recording fails, a
    warning names the error and every call runs ``fn`` eagerly (``captured`` is then False).
    """

    def __init__(
        self,
        fn: Callable[..., tuple[Tensor, ...]],
        example_inputs: Sequence[Tensor],
        *,
        capture: bool = True,
        warmup: int = 2,
    ) -> None:
        self.fn = fn
        self.static_inputs = tuple(x.detach().clone() for x in example_inputs)
        self._specs = [(tuple(x.shape), x.dtype, x.device) for x in self.static_inputs]
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_outputs: tuple[Tensor, ...] | None = None
        self.captured = False
        if capture:
            self._record(warmup)

    def _record(self, warmup: int) -> None:
        devices = {x.device for x in self.static_inputs}
        if len(devices) != 1 or next(iter(devices)).type != "cuda":
            raise ValueError(f"GraphedFunction: a CUDA graph needs inputs on one CUDA device, got {devices}")
        self.device = device = next(iter(devices))
        try:
            # on the inputs' device, whichever is current (cuda:K); other threads' CUDA work may go on
            # while this thread records (thread_local: only this thread's unsafe calls are errors)
            with torch.cuda.device(device):
                side = torch.cuda.Stream(device)
                side.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(side):
                    for _ in range(warmup):
                        self.fn(*self.static_inputs)
                torch.cuda.current_stream(device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                    outputs = self.fn(*self.static_inputs)
        except Exception as error:  # an op that cannot be recorded: eager is always correct
            warnings.warn(
                f"recording a CUDA graph of {getattr(self.fn, '__name__', 'the function')} failed "
                f"({type(error).__name__}: {error}); running it eagerly",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        self.graph, self.static_outputs, self.captured = graph, self._as_tuple(outputs), True

    @staticmethod
    def _as_tuple(outputs: Sequence[Tensor]) -> tuple[Tensor, ...]:
        out = tuple(outputs)
        if not all(isinstance(t, Tensor) for t in out):
            raise TypeError("GraphedFunction: fn must return a tuple of tensors")
        return out

    def __call__(self, *inputs: Tensor) -> tuple[Tensor, ...]:
        if len(inputs) != len(self._specs):
            raise ValueError(f"GraphedFunction: expected {len(self._specs)} inputs, got {len(inputs)}")
        for i, (x, (shape, dtype, device)) in enumerate(zip(inputs, self._specs, strict=True)):
            if tuple(x.shape) != shape or x.dtype != dtype or x.device != device:
                raise ValueError(
                    f"GraphedFunction: input {i} is {tuple(x.shape)} {x.dtype} on {x.device}; it was "
                    f"recorded as {shape} {dtype} on {device}"
                )
        for static, x in zip(self.static_inputs, inputs, strict=True):
            static.copy_(x)
        if self.graph is not None:
            with torch.cuda.device(self.device):
                self.graph.replay()
            assert self.static_outputs is not None
            return self.static_outputs
        outputs = self._as_tuple(self.fn(*self.static_inputs))
        if self.static_outputs is None:
            self.static_outputs = tuple(t.clone() for t in outputs)
        else:
            for static, t in zip(self.static_outputs, outputs, strict=True):
                static.copy_(t)
        return self.static_outputs
