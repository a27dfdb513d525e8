"""PrRoIPool of a few boxes over one feature map, and its box gradient, as a CPU kernel (float32).

The tracker's refinement scores about ten boxes per ascent step with
:class:`ltr.models.box_score_grad.BoxScorer`. In PyTorch the pooling is dense matrix products over the cells
of all boxes plus about a hundred small operations for the bins' weights and the box gradient; each bin,
though, weighs on only the 3-4 cells per axis its tent-smoothed edges touch. This kernel loops over exactly
those cells, box by box, with the channels innermost (vectorised), and computes the bins' weights and the box
gradient in the same pass: a scorer call costs two kernel calls per level instead of dozens of operations.

The arithmetic is :class:`BoxScorer`'s (see :mod:`ltr.models.box_score_grad` for the derivation): bin edges
``e[p] = s + L p / B`` in float64 from the float32 box corners, weights ``(K(e[p+1] - j) - K(e[p] - j)) / b``
cast to float32 for the products, the box gradient in float64 from the float32 weight gradients. Only the
products' summation order differs, so the numbers agree to float32 rounding.

Layouts: a map is (H, W, C) float32, contiguous; boxes (S, 4) float32 xyxy in image pixels (the map's origin
at its first cell); pooled bins (S, B * B * C) in (column p, row q, channel c) order, the order of
:class:`ltr.models.box_score_grad.FoldedBoxLayers`' inputs; box gradients (S, 4) float64 as
d f / d (x, y, w, h) (x moves both edges, w the far one), accumulated over the calls (both levels).
"""

from __future__ import annotations

import ctypes
import functools

import torch
from torch import Tensor

from ltr.ops.cpp_kernel import compile_library, loads

__all__ = ["MAX_BINS", "available", "head_output", "pool_backward", "pool_forward"]

#: most bins per axis the kernel takes (the box head pools 5 x 5 and 3 x 3)
MAX_BINS = 16

_SOURCE = r"""
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {
constexpr int MAX_BINS = 16;

// One box's bins along one axis of one level (cells 0 .. n-1).
struct Axis {
  int bins;
  bool valid;                 // length > 0: else every weight and gradient is 0
  double step[MAX_BINS + 1];  // p / B
  double edge[MAX_BINS + 1];  // e[p] on the grid
  double inverse;             // 1 / bin length
  double factor;              // scale / length
  int lo[MAX_BINS], hi[MAX_BINS];  // per bin, the cells with a non-zero weight (inclusive; lo > hi: none)
  int first, last;                 // their union
};

inline double cumulative(double t) {  // K(t), the antiderivative of the tent max(0, 1 - |t|), from -1
  const double u = std::min(1.0, std::max(-1.0, t));
  return 0.5 + u - 0.5 * u * std::fabs(u);
}

inline double tent(double t) {  // k(t) = K'(t)
  const double u = std::min(1.0, std::max(-1.0, t));
  return 1.0 - std::fabs(u);
}

inline int clamp_cell(double v, int n) {  // a cell index in [-1, n], safe for any finite v
  return static_cast<int>(std::min(static_cast<double>(n), std::max(-1.0, v)));
}

// the corners (lo, hi) in image pixels, as BoxScorer: start = lo * scale, length = max(hi * scale - start, 0)
void make_axis(Axis& a, float lo, float hi, double scale, int bins, int n) {
  a.bins = bins;
  const double start = static_cast<double>(lo) * scale;
  const double length = std::max(static_cast<double>(hi) * scale - start, 0.0);
  a.valid = length > 0.0;
  for (int p = 0; p <= bins; ++p) {
    a.step[p] = static_cast<double>(p) / bins;
    a.edge[p] = start + length * a.step[p];
  }
  a.inverse = a.valid ? 1.0 / (length / bins) : 0.0;
  a.factor = a.valid ? scale / length : 0.0;
  a.first = n;
  a.last = -1;
  for (int p = 0; p < bins; ++p) {
    // a weight is non-zero only for e[p] - 1 < j < e[p+1] + 1: j in floor(e[p]) .. ceil(e[p+1])
    a.lo[p] = std::max(clamp_cell(std::floor(a.edge[p]), n), 0);
    a.hi[p] = std::min(clamp_cell(std::ceil(a.edge[p + 1]), n), n - 1);
    if (a.valid && a.lo[p] <= a.hi[p]) {
      a.first = std::min(a.first, a.lo[p]);
      a.last = std::max(a.last, a.hi[p]);
    }
  }
}

inline bool empty(const Axis& a) { return !a.valid || a.first > a.last; }

// weights[p * span + (j - first)] for the bins' cells (0 elsewhere), float64 and their float32 cast
void weights(const Axis& a, std::vector<double>& wide, std::vector<float>& narrow) {
  const int span = a.last - a.first + 1;
  wide.assign(static_cast<size_t>(a.bins) * span, 0.0);
  narrow.assign(wide.size(), 0.0f);
  for (int p = 0; p < a.bins; ++p) {
    for (int j = a.lo[p]; j <= a.hi[p]; ++j) {
      const double w = (cumulative(a.edge[p + 1] - j) - cumulative(a.edge[p] - j)) * a.inverse;
      wide[p * span + (j - a.first)] = w;
      narrow[p * span + (j - a.first)] = static_cast<float>(w);
    }
  }
}

// cols[p][h][c] = sum_w wx[p][w] F[h][w][c] over the rows h of ay's union and the columns of bin p
void column_products(const float* __restrict maps, int64_t width, int64_t channels, const Axis& ax,
                     const std::vector<float>& wx, const Axis& ay, float* __restrict cols) {
  const int xspan = ax.last - ax.first + 1, yspan = ay.last - ay.first + 1;
  for (int p = 0; p < ax.bins; ++p) {
    for (int h = ay.first; h <= ay.last; ++h) {
      float* __restrict out = cols + (static_cast<int64_t>(p) * yspan + (h - ay.first)) * channels;
      std::fill(out, out + channels, 0.0f);
      for (int w = ax.lo[p]; w <= ax.hi[p]; ++w) {
        const float weight = wx[p * xspan + (w - ax.first)];
        const float* __restrict f = maps + (static_cast<int64_t>(h) * width + w) * channels;
#pragma omp simd
        for (int64_t c = 0; c < channels; ++c) out[c] += weight * f[c];
      }
    }
  }
}

// the gradient of one axis' weights (float32, as BoxScorer: cast to float64 here) onto the box start and
// length
void axis_gradient(const Axis& a, const std::vector<float>& grad, const std::vector<double>& wide,
                   double scale, double& d_start, double& d_length) {
  const int span = a.last - a.first + 1;
  for (int p = 0; p < a.bins; ++p) {
    double upper = 0.0, lower = 0.0, through_weights = 0.0;
    for (int j = a.lo[p]; j <= a.hi[p]; ++j) {
      const double g = static_cast<double>(grad[p * span + (j - a.first)]);
      const double scaled = g * a.inverse;
      upper += scaled * tent(a.edge[p + 1] - j);
      lower += scaled * tent(a.edge[p] - j);
      through_weights += g * wide[p * span + (j - a.first)];
    }
    d_start += (upper - lower) * scale;
    d_length += (upper * a.step[p + 1] - lower * a.step[p]) * scale - through_weights * a.factor;
  }
}

bool finite_boxes(int64_t num_boxes, const float* boxes) {
  for (int64_t i = 0; i < 4 * num_boxes; ++i)
    if (!std::isfinite(boxes[i])) return false;
  return true;
}
}  // namespace

// pooled (S, B, B, C) of boxes (S, 4) xyxy over maps (H, W, C); 1 (nothing written) for a non-finite box
extern "C" int ltr_box_pool_forward(int64_t num_boxes, const float* boxes, const float* maps, int64_t height,
                                    int64_t width, int64_t channels, double scale, int bins, float* pooled) {
  if (bins < 1 || bins > MAX_BINS || !finite_boxes(num_boxes, boxes)) return 1;
  Axis ax, ay;
  std::vector<double> wide_x, wide_y;
  std::vector<float> wx, wy, cols;
  const int64_t per_box = static_cast<int64_t>(bins) * bins * channels;
  for (int64_t s = 0; s < num_boxes; ++s) {
    const float* box = boxes + 4 * s;
    float* __restrict out = pooled + s * per_box;
    std::fill(out, out + per_box, 0.0f);
    make_axis(ax, box[0], box[2], scale, bins, static_cast<int>(width));
    make_axis(ay, box[1], box[3], scale, bins, static_cast<int>(height));
    if (empty(ax) || empty(ay)) continue;
    weights(ax, wide_x, wx);
    weights(ay, wide_y, wy);
    const int yspan = ay.last - ay.first + 1;
    cols.resize(static_cast<size_t>(bins) * yspan * channels);
    column_products(maps, width, channels, ax, wx, ay, cols.data());
    for (int p = 0; p < bins; ++p) {
      for (int q = 0; q < bins; ++q) {
        float* __restrict bin = out + (static_cast<int64_t>(p) * bins + q) * channels;
        for (int h = ay.lo[q]; h <= ay.hi[q]; ++h) {
          const float weight = wy[q * yspan + (h - ay.first)];
          const float* __restrict col = cols.data() + (int64_t{p} * yspan + (h - ay.first)) * channels;
#pragma omp simd
          for (int64_t c = 0; c < channels; ++c) bin[c] += weight * col[c];
        }
      }
    }
  }
  return 0;
}

// The per-box layers' outputs: h = raw + bias per level (written back into raw), scores (S) =
// predictor_bias + sum over both levels of relu(h) . u, and with grads, d score / d h = u * (h > 0) per level
// (relu'(0) = 0)
extern "C" void ltr_box_head_output(int64_t num_boxes, int64_t out2, int64_t out3, float* raw2, float* raw3,
                                    const float* bias2, const float* bias3, const float* u2, const float* u3,
                                    float predictor_bias, float* scores, float* grad2, float* grad3) {
  for (int64_t s = 0; s < num_boxes; ++s) {
    float score = 0.0f;
    const int64_t outs[2] = {out2, out3};
    float* raws[2] = {raw2 + s * out2, raw3 + s * out3};
    const float* biases[2] = {bias2, bias3};
    const float* us[2] = {u2, u3};
    float* grads[2] = {grad2 ? grad2 + s * out2 : nullptr, grad3 ? grad3 + s * out3 : nullptr};
    for (int level = 0; level < 2; ++level) {
      float* __restrict h = raws[level];
      const float* __restrict b = biases[level];
      const float* __restrict u = us[level];
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t o = 0; o < outs[level]; ++o) {
        h[o] += b[o];
        sum += (h[o] > 0.0f ? h[o] : 0.0f) * u[o];
      }
      score += sum;
      if (grads[level] != nullptr) {
        float* __restrict g = grads[level];
#pragma omp simd
        for (int64_t o = 0; o < outs[level]; ++o) g[o] = h[o] > 0.0f ? u[o] : 0.0f;
      }
    }
    scores[s] = score + predictor_bias;
  }
}

// grad_boxes (S, 4) float64 += d f / d (x, y, w, h) from d f / d pooled (S, B, B, C); 1 for a non-finite box
extern "C" int ltr_box_pool_backward(int64_t num_boxes, const float* boxes, const float* maps, int64_t height,
                                     int64_t width, int64_t channels, double scale, int bins,
                                     const float* grad_pooled, double* grad_boxes) {
  if (bins < 1 || bins > MAX_BINS || !finite_boxes(num_boxes, boxes)) return 1;
  Axis ax, ay;
  std::vector<double> wide_x, wide_y;
  std::vector<float> wx, wy, cols, through_rows, grad_x, grad_y;
  const int64_t per_box = static_cast<int64_t>(bins) * bins * channels;
  for (int64_t s = 0; s < num_boxes; ++s) {
    const float* box = boxes + 4 * s;
    make_axis(ax, box[0], box[2], scale, bins, static_cast<int>(width));
    make_axis(ay, box[1], box[3], scale, bins, static_cast<int>(height));
    if (empty(ax) || empty(ay)) continue;  // every weight of an axis is 0: so is every gradient
    // the forward call's weights and column products, recomputed: nothing is kept between the two calls
    weights(ax, wide_x, wx);
    weights(ay, wide_y, wy);
    const int xspan = ax.last - ax.first + 1, yspan = ay.last - ay.first + 1;
    const float* gp = grad_pooled + s * per_box;  // [p][q][c]
    cols.resize(static_cast<size_t>(bins) * yspan * channels);
    column_products(maps, width, channels, ax, wx, ay, cols.data());
    // the row weights: d f / d wy[q][h] = sum_p sum_c gp[p][q][c] cols[p][h][c]
    grad_y.assign(static_cast<size_t>(bins) * yspan, 0.0f);
    for (int q = 0; q < bins; ++q) {
      for (int h = ay.lo[q]; h <= ay.hi[q]; ++h) {
        float sum = 0.0f;
        for (int p = 0; p < bins; ++p) {
          const float* __restrict g = gp + (static_cast<int64_t>(p) * bins + q) * channels;
          const float* __restrict col = cols.data() + (int64_t{p} * yspan + (h - ay.first)) * channels;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < channels; ++c) sum += g[c] * col[c];
        }
        grad_y[q * yspan + (h - ay.first)] = sum;
      }
    }
    // the column weights through t[p][h][c] = sum_q wy[q][h] gp[p][q][c]:
    // d f / d wx[p][w] = sum_h sum_c t[p][h][c] F[h][w][c]
    through_rows.assign(static_cast<size_t>(bins) * yspan * channels, 0.0f);
    for (int p = 0; p < bins; ++p) {
      for (int q = 0; q < bins; ++q) {
        const float* __restrict g = gp + (static_cast<int64_t>(p) * bins + q) * channels;
        for (int h = ay.lo[q]; h <= ay.hi[q]; ++h) {
          const float weight = wy[q * yspan + (h - ay.first)];
          float* __restrict t = through_rows.data() + (int64_t{p} * yspan + (h - ay.first)) * channels;
#pragma omp simd
          for (int64_t c = 0; c < channels; ++c) t[c] += weight * g[c];
        }
      }
    }
    grad_x.assign(static_cast<size_t>(bins) * xspan, 0.0f);
    for (int p = 0; p < bins; ++p) {
      for (int w = ax.lo[p]; w <= ax.hi[p]; ++w) {
        float sum = 0.0f;
        for (int h = ay.first; h <= ay.last; ++h) {
          const float* __restrict t = through_rows.data() + (int64_t{p} * yspan + (h - ay.first)) * channels;
          const float* __restrict f = maps + (static_cast<int64_t>(h) * width + w) * channels;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < channels; ++c) sum += t[c] * f[c];
        }
        grad_x[p * xspan + (w - ax.first)] = sum;
      }
    }
    double* out = grad_boxes + 4 * s;
    axis_gradient(ax, grad_x, wide_x, scale, out[0], out[2]);
    axis_gradient(ay, grad_y, wide_y, scale, out[1], out[3]);
  }
  return 0;
}
"""


@functools.cache
def _library() -> ctypes.CDLL:
    lib = compile_library("box_pool", _SOURCE)
    i64, ptr, f64, i32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double, ctypes.c_int
    common = [i64, ptr, ptr, i64, i64, i64, f64, i32]
    lib.ltr_box_pool_forward.argtypes = [*common, ptr]
    lib.ltr_box_pool_forward.restype = i32
    lib.ltr_box_pool_backward.argtypes = [*common, ptr, ptr]
    lib.ltr_box_pool_backward.restype = i32
    lib.ltr_box_head_output.argtypes = [
        i64,
        i64,
        i64,
        ptr,
        ptr,
        ptr,
        ptr,
        ptr,
        ptr,
        ctypes.c_float,
        ptr,
        ptr,
        ptr,
    ]
    lib.ltr_box_head_output.restype = None
    return lib


@functools.cache
def available() -> bool:
    """Whether the kernel builds (or is cached) here."""
    return loads(_library)


def _check(maps_hwc: Tensor, boxes_xyxy: Tensor, bins: int) -> None:
    if maps_hwc.dtype != torch.float32 or maps_hwc.dim() != 3 or not maps_hwc.is_contiguous():
        raise ValueError(
            f"box pool kernel: maps must be a contiguous float32 (H, W, C), got {maps_hwc.dtype} "
            f"{tuple(maps_hwc.shape)}"
        )
    if boxes_xyxy.dtype != torch.float32 or boxes_xyxy.dim() != 2 or boxes_xyxy.shape[1] != 4:
        raise ValueError(
            f"box pool kernel: boxes must be float32 (S, 4), got {boxes_xyxy.dtype} {tuple(boxes_xyxy.shape)}"
        )
    if not boxes_xyxy.is_contiguous() or maps_hwc.device.type != "cpu" or boxes_xyxy.device.type != "cpu":
        raise ValueError("box pool kernel: contiguous CPU tensors only")
    if not 1 <= bins <= MAX_BINS:
        raise ValueError(f"box pool kernel: 1 to {MAX_BINS} bins per axis, got {bins}")


def _common_args(maps_hwc: Tensor, boxes_xyxy: Tensor, scale: float, bins: int) -> tuple:
    """Both entry points' leading arguments: boxes, their pointer, the map's pointer and shape, scale, bins."""
    height, width, channels = maps_hwc.shape
    return (
        boxes_xyxy.shape[0],
        boxes_xyxy.data_ptr(),
        maps_hwc.data_ptr(),
        height,
        width,
        channels,
        float(scale),
        bins,
    )


def pool_forward(maps_hwc: Tensor, boxes_xyxy: Tensor, scale: float, bins: int) -> Tensor | None:
    """Pooled bins (S, bins * bins * C) float32, (p, q, c) order, of boxes (S, 4) float32 xyxy image pixels
    over ``maps_hwc`` (H, W, C) float32 with ``scale`` = 1 / stride; None if a box has a non-finite
    coordinate."""
    _check(maps_hwc, boxes_xyxy, bins)
    channels = maps_hwc.shape[2]
    out = torch.empty(boxes_xyxy.shape[0], bins * bins * channels, dtype=torch.float32)
    failed = _library().ltr_box_pool_forward(*_common_args(maps_hwc, boxes_xyxy, scale, bins), out.data_ptr())
    return None if failed else out


def pool_backward(
    maps_hwc: Tensor, boxes_xyxy: Tensor, scale: float, bins: int, grad_pooled: Tensor, grad_boxes: Tensor
) -> bool:
    """Add d f / d (x, y, w, h) to ``grad_boxes`` (S, 4) float64, contiguous, from ``grad_pooled``
    (S, bins * bins * C) float32 (d f / d the bins of :func:`pool_forward`); False (nothing added) if a box
    has a non-finite coordinate."""
    _check(maps_hwc, boxes_xyxy, bins)
    channels = maps_hwc.shape[2]
    s = boxes_xyxy.shape[0]
    if grad_pooled.dtype != torch.float32 or tuple(grad_pooled.shape) != (s, bins * bins * channels):
        raise ValueError(
            f"box pool kernel: grad_pooled must be float32 ({s}, {bins * bins * channels}), got "
            f"{grad_pooled.dtype} {tuple(grad_pooled.shape)}"
        )
    if (
        grad_boxes.dtype != torch.float64
        or tuple(grad_boxes.shape) != (s, 4)
        or not grad_boxes.is_contiguous()
    ):
        raise ValueError(f"box pool kernel: grad_boxes must be contiguous float64 ({s}, 4)")
    grad_pooled = grad_pooled.contiguous()
    failed = _library().ltr_box_pool_backward(
        *_common_args(maps_hwc, boxes_xyxy, scale, bins), grad_pooled.data_ptr(), grad_boxes.data_ptr()
    )
    return not failed


def head_output(
    raw: tuple[Tensor, Tensor],
    biases: tuple[Tensor, Tensor],
    predictor: tuple[Tensor, Tensor],
    predictor_bias: float,
    grads: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    """Scores (S,) float32 of the box head's per-box layers: per level ``raw`` (S, O) float32, the Linear
    products without bias, gets its bias (O,) added in place (then the pre-ReLU activations h), and
    ``score = predictor_bias + sum_levels relu(h) . predictor`` with ``predictor`` (O,) per level. ``grads``:
    (S, O) float32 per level, filled with d score / d h = predictor * (h > 0). All contiguous, on the CPU."""
    tensors = [*raw, *biases, *predictor, *(grads or ())]
    if any(t.dtype != torch.float32 or not t.is_contiguous() or t.device.type != "cpu" for t in tensors):
        raise ValueError("box head output kernel: contiguous float32 CPU tensors only")
    s = raw[0].shape[0]
    outs = [r.shape[1] for r in raw]
    if raw[1].shape[0] != s or any(
        b.shape != (o,) or u.shape != (o,) for b, u, o in zip(biases, predictor, outs, strict=True)
    ):
        raise ValueError("box head output kernel: per level raw (S, O), bias (O,) and predictor (O,)")
    if grads is not None and any(g.shape != r.shape for g, r in zip(grads, raw, strict=True)):
        raise ValueError("box head output kernel: grads must be shaped as raw")
    scores = torch.empty(s, dtype=torch.float32)
    _library().ltr_box_head_output(
        s,
        outs[0],
        outs[1],
        raw[0].data_ptr(),
        raw[1].data_ptr(),
        biases[0].data_ptr(),
        biases[1].data_ptr(),
        predictor[0].data_ptr(),
        predictor[1].data_ptr(),
        float(predictor_bias),
        scores.data_ptr(),
        None if grads is None else grads[0].data_ptr(),
        None if grads is None else grads[1].data_ptr(),
    )
    return scores
