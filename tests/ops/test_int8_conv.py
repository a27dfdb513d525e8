"""Int8 convolution: the same numbers as a float convolution with the quantised weights and input, and close
to the float32 convolution."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ltr.ops.int8_conv import Int8Conv2d, int8_available, quantize_uint8

pytestmark = pytest.mark.skipif(not int8_available(), reason="no oneDNN int8 convolution in this torch build")


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_quantize_uint8_represents_zero_exactly_and_spans_the_range() -> None:
    x = torch.tensor([[-1.0, 0.0, 0.5, 3.0]])
    q, scale, zero_point = quantize_uint8(x)
    assert q.dtype == torch.uint8
    assert scale == pytest.approx(4.0 / 255.0)
    assert zero_point == round(1.0 / scale)  # 0 maps to the zero point, exactly
    back = scale * (q.float() - zero_point)
    assert back[0, 1] == 0.0
    assert torch.allclose(back, x, atol=scale / 2 + 1e-7)
    assert int(q.min()) == 0 and int(q.max()) == 255
    # non-negative input: zero point 0, all 256 levels for [0, max]
    q, scale, zero_point = quantize_uint8(torch.tensor([0.0, 2.55]))
    assert zero_point == 0 and scale == pytest.approx(0.01) and q.tolist() == [0, 255]
    assert quantize_uint8(torch.tensor([0.0, float("nan")])) is None


@pytest.mark.parametrize(
    ("in_ch", "out_ch", "padding", "relu", "signed"),
    [
        (32, 16, 1, False, False),
        (32, 16, 0, True, False),
        (24, 8, 1, False, True),
        (24, 8, (0, 1), True, True),
    ],
)
def test_int8_conv_matches_the_float_conv_of_the_quantised_operands(
    in_ch, out_ch, padding, relu, signed
) -> None:
    torch.manual_seed(0)
    conv = nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=True)
    x = torch.randn(2, in_ch, 9, 11)
    if not signed:
        x = torch.relu(x)
    int8 = Int8Conv2d(conv, padding=padding, relu=relu)
    out = int8(x)

    # the exact computation it stands for: float conv of the dequantised weights and input
    q, scale, zero_point = quantize_uint8(x)
    x_hat = scale * (q.double() - zero_point)
    pad = [padding, padding] if isinstance(padding, int) else list(padding)
    expected = F.conv2d(x_hat, int8.dequantized_weight().double(), conv.bias.detach().double(), padding=pad)
    if relu:
        expected = torch.relu(expected)
    assert out.shape == expected.shape and out.dtype == torch.float32
    assert torch.allclose(out.double(), expected, atol=1e-4, rtol=1e-4)

    # and it is close to the float32 convolution: quantisation noise of about a percent
    reference = F.conv2d(x, conv.weight.detach(), conv.bias.detach(), padding=pad)
    if relu:
        reference = torch.relu(reference)
    assert _relative(out, reference) < 0.02
    assert _relative(out, reference) > 1e-5  # it really is quantised (this bound fails for a float path)


def test_int8_weights_are_per_output_channel() -> None:
    conv = nn.Conv2d(4, 2, 3, bias=False)
    with torch.no_grad():
        conv.weight[0] = 1e-3 * torch.randn(4, 3, 3)  # a small channel keeps its own scale
        conv.weight[1] = 10.0 * torch.randn(4, 3, 3)
    int8 = Int8Conv2d(conv)
    assert int8.weight_int8.abs().amax(dim=(1, 2, 3)).tolist() == [127, 127]
    assert torch.allclose(
        int8.dequantized_weight(), conv.weight, rtol=0.0, atol=float(int8.weight_scale.max())
    )
    assert _relative(int8.dequantized_weight()[0], conv.weight[0].detach()) < 0.01


def test_non_finite_input_falls_back_to_the_float_convolution() -> None:
    conv = nn.Conv2d(3, 2, 3, padding=1)
    x = torch.rand(1, 3, 5, 5)
    x[0, 0, 2, 2] = float("inf")
    out = Int8Conv2d(conv)(x)
    assert torch.equal(torch.isfinite(out), torch.isfinite(conv(x)))


def test_bad_inputs_name_the_problem() -> None:
    conv = nn.Conv2d(3, 2, 3, padding=1)
    with pytest.raises(ValueError, match="float32"):
        Int8Conv2d(conv)(torch.rand(1, 3, 5, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="zero padding"):
        Int8Conv2d(nn.Conv2d(3, 2, 3, padding="same"))
    with pytest.raises(TypeError, match="nn.Conv2d"):
        Int8Conv2d(nn.Linear(3, 2))  # type: ignore[arg-type]
