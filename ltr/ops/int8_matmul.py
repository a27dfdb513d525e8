"""Int8 matrix products for inference on a CPU: float32 in and out, int8 x int8 -> int32 inside.

``x @ w`` with a fixed matrix ``w`` (K, N) and a float32 ``x`` (R, K) that changes at every call, e.g. the box
head's per-box Linear layers in the refinement's ascent (ten boxes, 6400 -> 256). ``w`` is quantised once,
symmetrically per column (scale = max |w[:, n]| / 127); ``x`` at every call. Two ways, the same weights:

- fused (where this CPU has AVX512-VNNI and torch's x86/fbgemm quantised engine):
  ``quantized::linear_dynamic`` quantises ``x`` per tensor, asymmetrically to uint8 over
  [min(x, 0), max(x, 0)], multiplies with exact int32 sums and scales back, all in one call;
- plain (elsewhere): ``x`` quantised symmetrically per row by a few tensor operations, then ``torch._int_mm``
  (exact int32 sums) and the scaling back.

Why: with so few rows the float product is bound by reading ``w`` (6.5 MB in float32, more than a core's L2
cache here); in int8 it is a quarter of that, and VNNI multiplies int8 directly. The plain way's quantisation
of ``x`` costs about as much as its product; fused, the four products of one ascent step (10 rows; 6400 <->
256 and 2304 <-> 256) took 141 us instead of 324 us (a one-off timing, 2 threads), and the whole ascent ran
1.01-1.12x faster than the plain way (``python benchmarks/box_ascent.py --int8 --cells 21 19 10 11``, three
runs, 1 and 2 threads; the pooling and the rest of each step are the same both ways). The cost is quantisation
noise, about 1% of the output's norm for Gaussian operands (``tests/ops/test_int8_matmul.py``), mostly from
the weights. VNNI is required for the fused way because without it fbgemm sums pairs of products in 16 bits,
which can saturate at full 8-bit range.

A row of ``x`` with a non-finite value cannot be quantised: then the whole product falls back to float32,
so NaN and infinity propagate as in ``x @ w`` (one host read per call: CPU only).
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import NamedTuple

import torch
from torch import Tensor

from ltr.ops.int8_conv import quantize_symmetric

__all__ = [
    "Int8Matrix",
    "fused_mm_available",
    "int8_mm",
    "int8_mm_available",
    "quantize_columns",
    "quantize_rows",
]


class Int8Matrix(NamedTuple):
    """A float32 (K, N) matrix quantised per column: ``values`` int8 (K, N) contiguous, ``scale`` (N,) float32
    (``w ~ values * scale``), ``original`` the float32 (K, N) matrix (the fallback for non-finite inputs),
    ``packed`` the same int8 weights packed for ``quantized::linear_dynamic`` (the fused way), or None (the
    plain way)."""

    values: Tensor
    scale: Tensor
    original: Tensor
    packed: object | None = None

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


def _pack(values: Tensor, scale: Tensor) -> object:
    """int8 (K, N) values and (N,) scales -> ``quantized::linear_prepack`` weights (N, K), current engine."""
    zero_points = torch.zeros(values.shape[1], dtype=torch.long)
    with warnings.catch_warnings():
        # quantised tensors are deprecated; this one exists only to be packed (a newer torch without them
        # fails the probe in fused_mm_available, and the plain way is used)
        warnings.simplefilter("ignore", UserWarning)
        weight = torch._make_per_channel_quantized_tensor(
            values.t().contiguous(), scale.double(), zero_points, 0
        )
    return torch.ops.quantized.linear_prepack(weight, None)


def fused_mm_available() -> bool:
    """Whether :func:`int8_mm` can take the fused way here: an AVX512-VNNI CPU, the x86 or fbgemm quantised
    engine selected now (``torch.backends.quantized.engine``, which packing follows), and
    ``quantized::linear_dynamic`` giving the product of the quantised operands on a probe (once per
    engine)."""
    engine = torch.backends.quantized.engine
    return engine in ("x86", "fbgemm") and _fused_probe(engine)


@functools.cache
def _fused_probe(engine: str) -> bool:
    vnni = getattr(torch.cpu, "_is_vnni_supported", None)
    if vnni is None or not vnni():
        return False
    try:
        x = torch.tensor([[-1.0, 0.5, 2.0, 1.0]])
        w = torch.tensor([[1.0, 0.5], [-1.0, 0.25], [0.5, -1.0], [2.0, 1.0]])
        values, scale = quantize_symmetric(w, 0)
        y = torch.ops.quantized.linear_dynamic(x, _pack(values, scale.reshape(-1)))
    except (RuntimeError, NotImplementedError, AttributeError):
        return False
    return bool(torch.allclose(y, x @ w, rtol=0.02, atol=0.05))


def _check_float_cpu(name: str, t: Tensor, dims: int = 2) -> None:
    if not isinstance(t, Tensor) or t.device.type != "cpu" or t.dtype != torch.float32 or t.dim() != dims:
        got = f"{t.dtype} {tuple(t.shape)} on {t.device}" if isinstance(t, Tensor) else type(t).__name__
        raise ValueError(f"int8 matmul: {name} must be a float32 {dims}-D CPU tensor, got {got}")


def quantize_columns(w: Tensor, *, fused: bool | None = None) -> Int8Matrix:
    """w (K, N) float32 CPU -> :class:`Int8Matrix`, per-column symmetric scales (an all-zero column: scale 1).

    ``fused``: pack the weights for the fused way (None: where :func:`fused_mm_available`; True: required;
    False: the plain way). Raises ``ValueError`` for a non-finite ``w`` (a fixed matrix is quantised once; it
    must be finite) and for ``fused=True`` where the fused way is not available.
    """
    _check_float_cpu("w", w)
    if not bool(torch.isfinite(w).all()):
        raise ValueError("int8 matmul: the fixed matrix has non-finite values; it cannot be quantised")
    if fused and not fused_mm_available():
        raise ValueError("int8 matmul: the fused way needs an AVX512-VNNI CPU and the x86/fbgemm engine")
    w = w.detach().contiguous()
    values, scale = quantize_symmetric(w, 0)  # per column
    scale = scale.reshape(-1)
    packed = _pack(values, scale) if (fused or fused is None and fused_mm_available()) else None
    return Int8Matrix(values, scale, w, packed)


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

    Equals the product of the quantised operands up to float32 rounding (the int32 sums are exact): fused
    (``w.packed``), ``s_x (q_x - z_x) @ w.dequantized()`` with x quantised per tensor to uint8 (``s_x`` =
    (max(x, 0) - min(x, 0)) / 255, ``z_x`` = round(-min(x, 0) / s_x)); plain, ``q_x * s_x @ w.dequantized()``
    with :func:`quantize_rows`. Non-finite x: the float32 ``x @ w.original``.
    """
    _check_float_cpu("x", x)
    if x.shape[1] != w.values.shape[0]:
        raise ValueError(f"int8 matmul: x {tuple(x.shape)} cannot multiply a {tuple(w.values.shape)} matrix")
    if x.shape[0] == 0:
        return x.new_zeros(0, w.values.shape[1])
    if w.packed is not None:
        if not math.isfinite(float(x.sum())):  # one host read; a sum past float32's range also falls back
            return x @ w.original
        return torch.ops.quantized.linear_dynamic(x.contiguous(), w.packed)
    quantized = quantize_rows(x)
    if quantized is None:
        return x @ w.original
    q, scale = quantized
    return torch._int_mm(q, w.values).to(torch.float32).mul_(scale).mul_(w.scale)
