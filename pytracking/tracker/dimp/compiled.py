"""``torch.compile`` for the tracker's fixed-shape per-frame stages (``params.compile``): the backbone, the
classifier's feature head and the box head's score of the refinement's candidates.

Every tracked frame runs the first two on one crop of the same size, so each compiles once per network and
process (Inductor, with the weights frozen as constants, which lets it prepack the convolution weights and
fuse the element-wise work). The box score is compiled with its gradient (the refinement differentiates
it), on the dense pooling (``score_modulated(..., dense=True)``: the same values as a fixed graph), which
fuses the many small operations that an eager step of the ascent runs one by one. The first frame pays the
compilation (seconds; less once Inductor's disk cache holds it). Initialisation's batch of augmented crops
stays eager. Compiled stages are kept on the module object and shared by every tracker built on it; the
weights are baked in, so they must not change afterwards (the tracker's networks are frozen).

Compilation can fail where the toolchain is missing (no C++ compiler for CPU code, no Triton for CUDA):
the stage then warns once and runs eagerly, so ``compile=True`` never stops a run.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["CompiledStage", "compiled_box_score", "compiled_stage"]


class CompiledStage:
    """A module's forward compiled for fixed input shapes, falling back to eager if compilation fails.

    Call with the module's inputs; returns what the module returns. ``compiled``: False once it fell back.
    """

    def __init__(self, module: nn.Module, name: str, *, differentiable: bool = False) -> None:
        self.module = module
        self.name = name
        self.compiled = True
        if differentiable:  # its backward is compiled too; shapes may vary (candidates of 1..B sequences)
            self._fn: Callable = torch.compile(module, dynamic=None)
        else:  # freezing: the frozen weights become constants, so Inductor can prepack the convolution weights
            self._fn = torch.compile(module, dynamic=False, options={"freezing": True})

    def __call__(self, *args: Tensor) -> Any:
        if self.compiled:
            try:
                return self._fn(*args)
            except Exception as error:  # toolchain missing or unsupported op: eager is always correct
                self.compiled = False
                warnings.warn(
                    f"torch.compile of the tracker's {self.name} failed ({type(error).__name__}: {error}); "
                    "running it eagerly",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return self.module(*args)


_ATTRIBUTE = "_tracker_compiled_stage"
_SCORE_ATTRIBUTE = "_tracker_compiled_box_score"


class _DenseBoxScore(nn.Module):
    """``(t2, t3, boxes (N, S, 4) xywh) -> f (N, S)``: the box head's dense ``score_modulated``."""

    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        self.head = head

    def forward(self, t2: Tensor, t3: Tensor, boxes: Tensor) -> Tensor:
        return self.head.score_modulated((t2, t3), boxes, dense=True)


def compiled_stage(module: nn.Module, name: str) -> CompiledStage:
    """The :class:`CompiledStage` of ``module`` (one per module object and process).

    Kept as a plain attribute of the module (not a submodule: no state dict entry), so it lives and dies with
    the module.
    """
    stage = module.__dict__.get(_ATTRIBUTE)
    if stage is None:
        stage = CompiledStage(module, name)
        module.__dict__[_ATTRIBUTE] = stage
    return stage


def compiled_box_score(head: nn.Module) -> CompiledStage:
    """The compiled dense score ``(t2, t3, boxes) -> f`` of box head ``head`` (one per head and process, kept
    on it as :func:`compiled_stage` keeps its stages)."""
    stage = head.__dict__.get(_SCORE_ATTRIBUTE)
    if stage is None:
        stage = CompiledStage(_DenseBoxScore(head), "box score", differentiable=True)
        head.__dict__[_SCORE_ATTRIBUTE] = stage
    return stage
