"""Int8 convolutions for inference on a CPU: float32 in and out, int8 arithmetic inside (oneDNN).

The weights are quantised once, symmetrically per output channel (scale = max |w| / 127). The input is
quantised at every call, per tensor, asymmetrically to uint8 over [min(x, 0), max(x, 0)], so that 0 is exact
and zero padding stays zero. The convolution runs as oneDNN's ``qconv2d_pointwise`` (what Inductor's int8
path calls; plain uint8 / int8 tensors, not the deprecated quantised-tensor type) with a float32 output and
the bias added in float32, optionally with the ReLU fused.

Why: on this project's 2-core CPU (AVX512-VNNI, no AMX) the paper heads' 3x3 convolutions run 3.2-5.4x
faster this way than in float32, and bfloat16 runs them 0.5-0.7x as fast (``python benchmarks/int8_heads.py``,
2 threads). The cost is quantisation noise: 0.6-0.7% of the output's norm for those shapes on random
non-negative inputs, under 2% in ``tests/ops/test_int8_conv.py``.
Small convolutions (tens of channels) are slower in int8: the per-call quantisation and oneDNN's set-up
dominate.

The input's range is read on the host once per call, which is free on a CPU; the op is CPU-only. A
non-finite input falls back to the float32 convolution (its range cannot be quantised). A channels_last
input (or a window of one) is quantised by a C++ kernel (:mod:`ltr.ops.quantize_kernel`: 225 -> 66 us for a
512 x 32 x 24 map in a one-off timing), any other by :func:`quantize_uint8`.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ltr.ops import quantize_kernel

__all__ = ["Int8Conv2d", "int8_available", "quantize_symmetric", "quantize_uint8"]


def _pair(value: int | tuple[int, ...]) -> list[int]:
    return [int(value), int(value)] if isinstance(value, int) else [int(v) for v in value]


@functools.cache
def int8_available() -> bool:
    """Whether this torch build runs oneDNN int8 convolutions on this CPU (tried once on a tiny problem)."""
    if not hasattr(torch.ops, "onednn") or not hasattr(torch.ops.onednn, "qconv2d_pointwise"):
        return False
    try:
        conv = nn.Conv2d(4, 2, 3)
        Int8Conv2d(conv)(torch.rand(1, 4, 5, 5))
    except (RuntimeError, NotImplementedError):
        return False
    return True


def quantize_uint8(x: Tensor) -> tuple[Tensor, float, int] | None:
    """x (any shape, float) -> (uint8 tensor of x's shape and memory format, scale, zero point) with
    ``x ~ scale * (q - zero_point)`` over [min(x, 0), max(x, 0)]; None if x has a non-finite value."""
    # amin and amax, not torch.aminmax: that ran 6x slower here (a one-off timing on a 1024 x 18 x 18 map)
    lo, hi = (float(v) for v in torch.stack([x.amin(), x.amax()]).tolist())
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zero_point = int(round(-lo / scale))
    # x / scale + zero_point is in [0, 255]: adding 0.5 and truncating rounds it (halves up), in one pass less
    q = (x * (1.0 / scale)).add_(zero_point + 0.5).clamp_(0, 255).to(torch.uint8)
    return q, scale, zero_point


def quantize_symmetric(w: Tensor, dims: int | tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Fixed weights w (float) -> (int8 values of w's shape, float scales of w's shape with ``dims`` reduced to
    1) with ``w ~ values * scale``: per slice over ``dims``, scale = max |w| / 127 (1 for an all-zero slice).

    The per-channel (convolution) and per-column (matrix product) weight quantiser of both int8 ops."""
    amax = w.abs().amax(dim=dims, keepdim=True)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    return torch.round(w / scale).clamp_(-127, 127).to(torch.int8), scale


class Int8Conv2d:
    """A frozen ``nn.Conv2d`` (float32, CPU) evaluated in int8; not an ``nn.Module`` (no state dict entry).

    Args:
        conv: the float convolution (weights read once: later changes to it are not seen).
        padding: zero padding (int or (ph, pw)) instead of the convolution's own, e.g. 0 for the tracker's
            unpadded window convolutions; string paddings ('same') are not supported.
        relu: apply ReLU to the output (fused into the convolution).

    Call: x (N, C_in, H, W) float32 -> (N, C_out, H', W') float32, channels_last, H' and W' as
    ``F.conv2d`` gives them. The weights' int8 values and scales are kept (``weight_int8``, ``weight_scale``)
    for tests and for :meth:`dequantized_weight`.
    """

    def __init__(
        self, conv: nn.Conv2d, padding: int | tuple[int, int] | None = None, relu: bool = False
    ) -> None:
        if not isinstance(conv, nn.Conv2d):
            raise TypeError(f"Int8Conv2d: needs an nn.Conv2d, got {type(conv).__name__}")
        padding = conv.padding if padding is None else padding
        if isinstance(padding, str) or conv.padding_mode != "zeros":
            raise ValueError(
                f"Int8Conv2d: only numeric zero padding is supported, got padding={padding!r}, "
                f"padding_mode={conv.padding_mode!r}"
            )
        weight = conv.weight.detach().to(device="cpu", dtype=torch.float32)
        out_channels = weight.shape[0]
        self.weight_int8, scale = quantize_symmetric(weight, (1, 2, 3))  # per output channel
        self.weight_scale = scale.reshape(out_channels)
        self.weight_zero_point = torch.zeros(out_channels, dtype=torch.long)
        self.bias = None if conv.bias is None else conv.bias.detach().to(device="cpu", dtype=torch.float32)
        self.float_weight = weight  # the fallback for non-finite inputs
        self.stride, self.padding = _pair(conv.stride), _pair(padding)
        self.dilation, self.groups = _pair(conv.dilation), int(conv.groups)
        self.relu = relu
        self._packed = torch.ops.onednn.qconv_prepack(
            self.weight_int8,
            self.weight_scale,
            1.0,
            0,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            None,
        )

    def dequantized_weight(self) -> Tensor:
        """(C_out, C_in / groups, kh, kw) float32: the weights the int8 convolution multiplies by."""
        return self.weight_int8.float() * self.weight_scale[:, None, None, None]

    def __call__(self, x: Tensor) -> Tensor:
        if x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() != 4:
            raise ValueError(
                f"Int8Conv2d: input must be a float32 (N, C, H, W) CPU tensor, got {x.dtype} "
                f"{tuple(x.shape)} on {x.device}"
            )
        if quantize_kernel.rows_of_cells(x) and quantize_kernel.available():
            # the same numbers in one read of the range and one of the values
            quantized = quantize_kernel.quantize_window(x)
        else:
            quantized = quantize_uint8(x)
        if quantized is None:
            y = F.conv2d(
                x, self.float_weight, self.bias, self.stride, self.padding, self.dilation, self.groups
            )
            return torch.relu(y) if self.relu else y
        q, scale, zero_point = quantized
        return torch.ops.onednn.qconv2d_pointwise(
            q.contiguous(memory_format=torch.channels_last),
            scale,
            zero_point,
            self._packed,
            self.weight_scale,
            self.weight_zero_point,
            self.bias,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            1.0,
            0,
            torch.float32,
            "relu" if self.relu else "none",
            [],
            None,
        )
