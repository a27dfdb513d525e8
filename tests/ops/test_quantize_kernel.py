"""The uint8 quantisation kernel against the PyTorch quantiser it replaces, and in the int8 convolution."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr.ops import quantize_kernel
from ltr.ops.int8_conv import Int8Conv2d, int8_available, quantize_uint8
from ltr.ops.quantize_kernel import quantize_window

pytestmark = pytest.mark.skipif(not quantize_kernel.available(), reason="no C++ compiler for the kernel")


def _map(seed: int, shape, shift: float = 0.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) + shift).contiguous(memory_format=torch.channels_last)


def _assert_same_quantisation(got, want) -> None:
    q, scale, zero_point = got
    q_want, scale_want, zero_point_want = want
    assert scale == scale_want and zero_point == zero_point_want
    assert q.is_contiguous(memory_format=torch.channels_last) and q.shape == q_want.shape
    # the kernel may fuse x / scale + zero point: a value within an ulp of a rounding boundary moves one step
    diff = (q.int() - q_want.int()).abs()
    assert int(diff.max()) <= 1 and float((diff > 0).float().mean()) < 1e-3


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    shape=st.tuples(st.integers(1, 3), st.integers(1, 70), st.integers(1, 9), st.integers(1, 9)),
    shift=st.sampled_from([0.0, 3.0, -3.0]),
)
def test_whole_maps_quantise_as_the_pytorch_quantiser(seed, shape, shift):
    x = _map(seed, shape, shift)
    _assert_same_quantisation(quantize_window(x), quantize_uint8(x))


@pytest.mark.parametrize("window", [(2, 3, 5, 4), (-3, -2, 9, 8), (4, 6, 6, 7), (-2, 8, 3, 3), (7, 9, 2, 2)])
def test_a_window_is_the_zero_padded_cells_quantised(window):
    """Cells beyond the map are zeros (the convolution's padding): quantised to the zero point."""
    x = _map(1, (1, 19, 7, 9), 1.0)
    row0, col0, rows, cols = window
    padded = torch.zeros(1, 19, 7 + 20, 9 + 20)
    padded[:, :, 10:17, 10:19] = x
    reference = padded[:, :, row0 + 10 : row0 + 10 + rows, col0 + 10 : col0 + 10 + cols]
    want = quantize_uint8(reference.contiguous(memory_format=torch.channels_last))
    got = quantize_window(x, window)
    _assert_same_quantisation(got, want)
    outside = reference == 0
    assert (got[0][outside] == got[2]).all()  # zeros are exact: the zero point


def test_an_empty_window():
    q, scale, zero_point = quantize_window(_map(0, (1, 5, 4, 4)), (1, 1, 0, 3))
    assert q.shape == (1, 5, 0, 3) and scale == 1.0 and zero_point == 0


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_value_in_the_window_gives_none(value):
    x = _map(2, (1, 21, 6, 5))
    x[0, 20, 5, 4] = value
    assert quantize_window(x) is None
    assert quantize_window(x, (3, 2, 4, 4)) is None
    assert quantize_window(x, (0, 0, 4, 4)) is not None  # the value is outside this window


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="channels_last"):
        quantize_window(torch.zeros(1, 3, 4, 5))
    with pytest.raises(ValueError, match="float32"):
        quantize_window(torch.zeros(1, 3, 4, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="one image"):
        quantize_window(_map(0, (2, 3, 4, 5)), (0, 0, 2, 2))


@pytest.mark.skipif(not int8_available(), reason="no oneDNN int8 convolution")
def test_int8_convolution_takes_the_kernel_for_channels_last_inputs():
    torch.manual_seed(3)
    conv = torch.nn.Conv2d(48, 40, 3, padding=1)
    x = torch.relu(_map(4, (1, 48, 11, 13)))
    int8 = Int8Conv2d(conv)
    got = int8(x)  # channels_last: the kernel
    want = int8(x.contiguous())  # NCHW: the PyTorch quantiser
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4 * float(want.abs().max()))
    with torch.no_grad():
        reference = conv(x)
    assert float((got - reference).norm() / reference.norm()) < 0.02


def test_a_view_of_a_map_quantises_as_its_copy():
    """The refinement window inside the map is a view (rows of whole cells, strided): read in place."""
    x = _map(5, (1, 24, 12, 14), 0.5)
    view = x[:, :, 3:10, 2:11]
    assert quantize_kernel.rows_of_cells(view) and not view.is_contiguous(memory_format=torch.channels_last)
    assert not quantize_kernel.rows_of_cells(x.contiguous()[:, :, 3:10, 2:11])  # NCHW: channels not innermost
    assert not quantize_kernel.rows_of_cells(_map(5, (2, 24, 12, 14))[:, :, 3:10, 2:11])  # two images
    got = quantize_window(view)
    want = quantize_window(view.contiguous(memory_format=torch.channels_last))
    assert got[1:] == want[1:] and torch.equal(got[0], want[0])
    # a window of the view is the same window of the map (the view's cells beyond it would be zeros)
    assert torch.equal(quantize_window(view, (1, 2, 5, 6))[0], quantize_window(x, (4, 4, 5, 6))[0])
