"""Per-tensor uint8 quantisation of a float32 channels-last map (or a window of it) as a CPU kernel.

The int8 convolutions (:mod:`ltr.ops.int8_conv`) quantise their input at every call over
[min(x, 0), max(x, 0)]. As PyTorch operations that is two reductions and four elementwise passes (scale,
shift, clamp, cast), about 220 us for a 512 x 32 x 24 map here; this kernel reads the map twice (range, then
values) and writes the uint8 map once (66 us).

A window may reach beyond the map: its cells outside count as zeros (the zero padding the full map's
convolution would see) and are written as the zero point, so a window of the map is gathered, masked and
quantised in one pass.

The arithmetic is :func:`ltr.ops.int8_conv.quantize_uint8`'s: ``scale = (hi - lo) / 255`` (1 if hi == lo) and
``zero_point = round(-lo / scale)`` in Python from the kernel's range, then
``q = trunc(clamp(x * (1 / scale) + zero_point + 0.5, 0, 255))`` in float32; the compiler may fuse the
multiply and add, so a value within an ulp of a rounding boundary can land one step apart.
"""

from __future__ import annotations

import ctypes
import functools

import torch
from torch import Tensor

from ltr.ops.cpp_kernel import compile_library, loads

__all__ = ["available", "quantize_window", "rows_of_cells"]

_SOURCE = r"""
#include <algorithm>
#include <cmath>
#include <cstdint>

// The window rows row0 .. row0 + rows - 1, cols col0 .. col0 + cols - 1 of src (H, W, C) float32 with rows
// row_stride elements apart (each row's W * C values contiguous); it may reach beyond the map, whose cells
// there count as zeros.

// range[0] = min over the window's cells in the map, range[1] = max (both 0 if none); returns 1 for a NaN or
// an infinity among them
extern "C" int ltr_window_range(const float* src, int64_t height, int64_t width, int64_t channels,
                                int64_t row_stride, int64_t row0, int64_t col0, int64_t rows, int64_t cols,
                                float* range) {
  const int64_t r_lo = std::max<int64_t>(row0, 0), r_hi = std::min<int64_t>(row0 + rows, height);
  const int64_t c_lo = std::max<int64_t>(col0, 0), c_hi = std::min<int64_t>(col0 + cols, width);
  float lo = 0.0f, hi = 0.0f;
  uint32_t special = 0;  // a NaN or an infinity has every exponent bit set
  for (int64_t r = r_lo; r < r_hi && c_lo < c_hi; ++r) {
    const float* row = src + r * row_stride + c_lo * channels;
    const uint32_t* bits = reinterpret_cast<const uint32_t*>(row);
    const int64_t n = (c_hi - c_lo) * channels;
    float row_lo = lo, row_hi = hi;
#pragma omp simd reduction(min : row_lo) reduction(max : row_hi) reduction(| : special)
    for (int64_t i = 0; i < n; ++i) {
      row_lo = row[i] < row_lo ? row[i] : row_lo;
      row_hi = row[i] > row_hi ? row[i] : row_hi;
      special |= static_cast<uint32_t>((bits[i] & 0x7f800000u) == 0x7f800000u);
    }
    lo = row_lo;
    hi = row_hi;
  }
  range[0] = lo;
  range[1] = hi;
  return special != 0;
}

// out (rows, cols, C) uint8 = trunc(clamp(x * inverse + shift, 0, 255)), the cells beyond the map = zero
extern "C" void ltr_quantize_window(const float* src, int64_t height, int64_t width, int64_t channels,
                                    int64_t row_stride, int64_t row0, int64_t col0, int64_t rows,
                                    int64_t cols, float inverse, float shift, uint8_t zero, uint8_t* out) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t r = row0 + i;
    uint8_t* dst = out + i * cols * channels;
    if (r < 0 || r >= height) {
      std::fill(dst, dst + cols * channels, zero);
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t c = col0 + j;
      uint8_t* cell = dst + j * channels;
      if (c < 0 || c >= width) {
        std::fill(cell, cell + channels, zero);
        continue;
      }
      const float* x = src + r * row_stride + c * channels;
#pragma omp simd
      for (int64_t k = 0; k < channels; ++k) {
        float v = x[k] * inverse + shift;
        v = v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v);
        cell[k] = static_cast<uint8_t>(static_cast<int32_t>(v));
      }
    }
  }
}
"""


@functools.cache
def _library() -> ctypes.CDLL:
    lib = compile_library("quantize_uint8", _SOURCE)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    window = [ptr, i64, i64, i64, i64, i64, i64, i64, i64]
    lib.ltr_window_range.argtypes = [*window, ptr]
    lib.ltr_window_range.restype = ctypes.c_int
    lib.ltr_quantize_window.argtypes = [*window, ctypes.c_float, ctypes.c_float, ctypes.c_uint8, ptr]
    lib.ltr_quantize_window.restype = None
    return lib


@functools.cache
def available() -> bool:
    """Whether the kernel builds (or is cached) here."""
    return loads(_library)


def rows_of_cells(x: Tensor) -> bool:
    """Whether x (N, C, H, W) is channels_last-contiguous, or one image whose rows each hold W * C contiguous
    values (a window of a channels_last map, e.g. ``map[:, :, r0:r1, c0:c1]``): the layouts the kernel
    reads."""
    if x.dim() != 4:
        return False
    if x.is_contiguous(memory_format=torch.channels_last):
        return True
    _, channels, height, width = x.shape
    return (
        x.shape[0] == 1 and x.stride(1) == 1 and x.stride(3) == channels and x.stride(2) >= width * channels
    )


def quantize_window(
    x: Tensor, window: tuple[int, int, int, int] | None = None
) -> tuple[Tensor, float, int] | None:
    """x (N, C, H, W) float32 CPU (:func:`rows_of_cells`) -> (uint8 (N, C, rows, cols) channels_last, scale,
    zero point) with ``x ~ scale * (q - zero_point)`` over [min(x, 0), max(x, 0)] of the window's cells in the
    map; None if one of them is non-finite.

    ``window``: (row0, col0, rows, cols) of a window of x (N = 1), which may reach beyond the map (its cells
    there are zeros, quantised to the zero point); None: all of x.
    """
    if x.dtype != torch.float32 or x.device.type != "cpu" or x.dim() != 4:
        raise ValueError(
            f"quantize_window: needs a float32 (N, C, H, W) CPU tensor, got {x.dtype} {tuple(x.shape)}"
        )
    if not rows_of_cells(x):
        raise ValueError("quantize_window: the map must be channels_last (or one image's rows of cells)")
    n, channels, height, width = x.shape
    row_stride = x.stride(2) if n == 1 else width * channels
    if window is None:
        row0, col0, rows, cols = 0, 0, n * height, width  # the images' rows one after another
        out = torch.empty(n, channels, height, width, dtype=torch.uint8, memory_format=torch.channels_last)
        height = n * height
    else:
        if n != 1:
            raise ValueError(f"quantize_window: a window needs one image, got {n}")
        row0, col0, rows, cols = (int(v) for v in window)
        if rows < 0 or cols < 0:
            raise ValueError(f"quantize_window: negative window size {rows} x {cols}")
        out = torch.empty(1, channels, rows, cols, dtype=torch.uint8, memory_format=torch.channels_last)
    lib = _library()
    geometry = (x.data_ptr(), height, width, channels, row_stride, row0, col0, rows, cols)
    extremes = (ctypes.c_float * 2)()
    if lib.ltr_window_range(*geometry, extremes):
        return None
    # scale and zero point in Python, exactly as quantize_uint8 (the kernel's flags let C reassociate)
    lo, hi = float(extremes[0]), float(extremes[1])
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zero_point = int(round(-lo / scale))
    lib.ltr_quantize_window(
        *geometry, 1.0 / scale, zero_point + 0.5, min(max(zero_point, 0), 255), out.data_ptr()
    )
    return out, scale, zero_point
