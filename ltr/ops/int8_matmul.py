"""Int8 matrix products for inference on a CPU: float32 in and out, int8 x int8 -> int32 inside.

``x @ w`` with a fixed matrix ``w`` (K, N) and a float32 ``x`` (R, K) that changes at every call, e.g. the box
head's per-box Linear layers in the refinement's ascent (ten boxes, 6400 -> 256). ``w`` is quantised once,
symmetrically per column (scale = max |w[:, n]| / 127); ``x`` at every call, symmetrically per row. The
product runs as ``torch._int_mm`` (exact int32 accumulation) and is scaled back to float32.

Why: with so few rows the float product is bound by reading ``w`` (6.5 MB in float32, more than a core's L2
cache here); in int8 it is a quarter of that, and AVX512-VNNI multiplies int8 directly. In the ascent the
products themselves ran 1.9x faster, but quantising ``x`` at every call (a few small operations) takes most of
that back: the whole ascent gained 1.05-1.18x (``python benchmarks/box_ascent.py --int8``). The cost is
quantisation noise, about 1% of the output's norm for Gaussian operands (``tests/ops/test_int8_matmul.py``),
mostly from the weights.

A row of ``x`` with a non-finite value cannot be quantised: then the whole product falls back to float32,
so NaN and infinity propagate as in ``x @ w`` (one host read of the rows' ranges per call: CPU only).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
from torch import Tensor

from ltr.ops.int8_conv import quantize_symmetric

__all__ = ["Int8Matrix", "int8_mm", "int8_mm_available", "quantize_columns", "quantize_rows"]


class Int8Matrix(NamedTuple):
    """A float32 (K, N) matrix quantised per column: ``values`` int8 (K, N) contiguous, ``scale`` (N,) float32
    (``w ~ values * scale``), ``original`` the float32 (K, N) matrix (the fallback for non-finite inputs)."""

    values: Tensor
    scale: Tensor
    original: Tensor

    def dequantized(self) -> Tensor:
        """(K, N) float32: the matrix the int8 product multiplies by."""
        return self.values.float() * self.scale


@functools.cache
def int8_mm_available() -> bool:
    """Whether this torch build multiplies int8 matrices on the CPU (tried once on a tiny problem)."""
    if not hasattr(torch, "_int_mm"):
        return False
    try:
        a = torch.ones(2, 8, dtype=torch.int8)
        ok = bool((torch._int_mm(a, a.t().contiguous()) == 8).all())
    except (RuntimeError, NotImplementedError):
        return False
    return ok


def _check_float_cpu(name: str, t: Tensor, dims: int = 2) -> None:
    if not isinstance(t, Tensor) or t.device.type != "cpu" or t.dtype != torch.float32 or t.dim() != dims:
        got = f"{t.dtype} {tuple(t.shape)} on {t.device}" if isinstance(t, Tensor) else type(t).__name__
        raise ValueError(f"int8 matmul: {name} must be a float32 {dims}-D CPU tensor, got {got}")


def quantize_columns(w: Tensor) -> Int8Matrix:
    """w (K, N) float32 CPU -> :class:`Int8Matrix`, per-column symmetric scales (an all-zero column: scale 1).

    Raises ``ValueError`` for a non-finite ``w`` (a fixed matrix is quantised once; it must be finite).
    """
    _check_float_cpu("w", w)
    if not bool(torch.isfinite(w).all()):
        raise ValueError("int8 matmul: the fixed matrix has non-finite values; it cannot be quantised")
    w = w.detach().contiguous()
    values, scale = quantize_symmetric(w, 0)  # per column
    return Int8Matrix(values, scale.reshape(-1), w)


def quantize_rows(x: Tensor) -> tuple[Tensor, Tensor] | None:
    """x (R, K) float32 -> (int8 (R, K), scale (R, 1) float32) with ``x ~ q * scale``, per-row symmetric;
    None if x has a non-finite value. An all-zero row gets a tiny scale and zeros."""
    # abs().amax(): linalg.vector_norm(ord=inf) gave the same 13x slower here (a one-off timing, 10 x 6400)
    amax = x.abs().amax(dim=1, keepdim=True)
    # one host read; the maxima are >= 0, so no cancellation (a sum past float32's range also falls back)
    if not math.isfinite(float(amax.sum())):
        return None
    scale = amax.clamp_min_(1e-30).div_(127.0)
    return torch.round(x / scale).to(torch.int8), scale  # |x / scale| <= 127: no clamp needed


def int8_mm(x: Tensor, w: Int8Matrix) -> Tensor:
    """``x @ w`` in int8: x (R, K) float32 CPU, w an :class:`Int8Matrix` (K, N) -> (R, N) float32.

    Equals ``q_x * s_x @ w.dequantized()`` up to float32 rounding (the int32 sums are exact); non-finite x:
    the float32 ``x @ w.original``.
    """
    _check_float_cpu("x", x)
    if x.shape[1] != w.values.shape[0]:
        raise ValueError(f"int8 matmul: x {tuple(x.shape)} cannot multiply a {tuple(w.values.shape)} matrix")
    if x.shape[0] == 0:
        return x.new_zeros(0, w.values.shape[1])
    quantized = quantize_rows(x)
    if quantized is None:
        return x @ w.original
    q, scale = quantized
    return torch._int_mm(q, w.values).to(torch.float32).mul_(scale).mul_(w.scale)
