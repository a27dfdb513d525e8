"""Int8 matrix products, both ways (fused, plain): exact integer arithmetic on quantised operands, close to
float32, clear errors."""

from __future__ import annotations

import pytest
import torch

from ltr.ops.int8_matmul import (
    fused_mm_available,
    int8_mm,
    int8_mm_available,
    quantize_columns,
    quantize_rows,
)

pytestmark = pytest.mark.skipif(not int8_mm_available(), reason="no int8 matrix product in this torch build")


def _problem(rows: int = 10, inner: int = 640, cols: int = 48, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, inner, generator=g) * torch.rand(rows, 1, generator=g) * 5  # rows of varied range
    w = torch.randn(inner, cols, generator=g) * torch.rand(1, cols, generator=g)  # columns of varied range
    return x, w


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


# the ways this machine has: plain always (where int8 products exist at all), fused where the CPU allows it
WAYS = [
    False,
    pytest.param(True, marks=pytest.mark.skipif(not fused_mm_available(), reason="no fused way here")),
]


def _quantised_input(x: torch.Tensor, fused: bool) -> torch.Tensor:
    """x as the product sees it (float64): fused, per tensor to uint8 over [min(x, 0), max(x, 0)]; plain,
    per row."""
    if not fused:
        qx, sx = quantize_rows(x)
        return qx.double() * sx.double()
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = (hi - lo) / 255.0
    zero = round(-lo / scale)
    return (torch.clamp(torch.round(x.double() / scale) + zero, 0, 255) - zero) * scale


@pytest.mark.parametrize("fused", WAYS)
def test_product_is_the_float_product_of_the_quantised_operands(fused: bool) -> None:
    x, w = _problem()
    q8 = quantize_columns(w, fused=fused)
    assert (q8.packed is not None) == fused
    expected = _quantised_input(x, fused) @ q8.dequantized().double()
    # float32 rounding of the scaling only: within 1e-6 of the output's scale
    torch.testing.assert_close(
        int8_mm(x, q8).double(), expected, rtol=0, atol=1e-6 * float(expected.abs().max())
    )


@pytest.mark.parametrize("fused", WAYS)
def test_product_is_close_to_float32_but_quantised(fused: bool) -> None:
    x, w = _problem(seed=1)
    error = _relative(int8_mm(x, quantize_columns(w, fused=fused)), x @ w)
    assert 1e-4 < error < 0.02  # about 1% for Gaussian operands: not the float path


def test_scales_are_per_column_and_per_row() -> None:
    x, w = _problem(seed=2)
    w[:, 3] = 0.0
    x[4] = 0.0
    q8 = quantize_columns(w)
    torch.testing.assert_close(q8.scale[:3], w.abs().amax(0)[:3] / 127)
    assert q8.scale[3] == 1.0 and (q8.values[:, 3] == 0).all()
    assert q8.values.dtype == torch.int8 and int(q8.values.abs().max()) == 127
    # every weight is within half a step of its column's scale
    assert ((q8.dequantized() - w).abs() <= q8.scale / 2 + 1e-7).all()
    qx, sx = quantize_rows(x)
    assert sx.shape == (10, 1) and 0 < sx[4, 0] < 1e-30 and (qx[4] == 0).all()
    torch.testing.assert_close(sx[:4, 0], x.abs().amax(1)[:4] / 127)
    assert ((qx.float() * sx - x).abs() <= sx / 2 + 1e-6).all()
    for fused in (False, True) if fused_mm_available() else (False,):
        y = int8_mm(x, quantize_columns(w, fused=fused))
        assert (y[4] == 0).all() and (y[:, 3] == 0).all()  # zeros stay exact, either way


@pytest.mark.parametrize("fused", WAYS)
def test_non_finite_rows_fall_back_to_float(fused: bool) -> None:
    x, w = _problem(seed=3)
    x[2, 5] = float("nan")
    x[7, 0] = float("inf")
    assert quantize_rows(x) is None
    y = int8_mm(x, quantize_columns(w, fused=fused))
    expected = x @ w
    assert torch.isnan(y[2]).all() and not torch.isfinite(y[7]).any()
    torch.testing.assert_close(y[[0, 1, 3]], expected[[0, 1, 3]])  # the float product, not quantised


@pytest.mark.parametrize("fused", WAYS)
def test_views_and_empty_inputs(fused: bool) -> None:
    x, w = _problem(rows=6, seed=4)
    q8 = quantize_columns(w, fused=fused)
    wide = torch.cat([x, x], dim=1)[:, : x.shape[1]]  # a strided view
    torch.testing.assert_close(int8_mm(wide, q8), int8_mm(x, q8))
    assert int8_mm(x[:0], q8).shape == (0, w.shape[1])


def test_bad_inputs_are_clear_errors() -> None:
    x, w = _problem(seed=5)
    q8 = quantize_columns(w)
    with pytest.raises(ValueError, match="float32 2-D CPU"):
        int8_mm(x.double(), q8)
    with pytest.raises(ValueError, match="float32 2-D CPU"):
        int8_mm(x[None], q8)
    with pytest.raises(ValueError, match="cannot multiply"):
        int8_mm(x[:, :-1], q8)
    w[0, 0] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        quantize_columns(w)


def test_the_fused_way_follows_the_quantised_engine() -> None:
    """Packing uses the engine selected now: with another engine the plain way is taken, and asking for the
    fused way is a clear error."""
    x, w = _problem(seed=6)
    engines = torch.backends.quantized.supported_engines
    if "qnnpack" not in engines:
        pytest.skip("no second quantised engine in this build")
    before = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = "qnnpack"
        assert not fused_mm_available()
        assert quantize_columns(w).packed is None
        with pytest.raises(ValueError, match="fused way needs"):
            quantize_columns(w, fused=True)
    finally:
        torch.backends.quantized.engine = before
    assert quantize_columns(w).packed is not None or not fused_mm_available()
