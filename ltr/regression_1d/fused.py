"""A fused CPU kernel for the 1D network's per-candidate layers (forward and backward in one pass).

Why: on a CPU the per-model cost of the straightforward PyTorch network is bound by memory traffic, not by
arithmetic: each of its ~40 elementwise and 10-wide matrix ops streams (N*S, 10) activations through the
caches, and stacking R models (the GPU trick) only makes those tensors bigger. This kernel keeps a block
of 16 candidates' activations in registers/L1 and runs the whole y branch + concat layer + residual blocks +
output layer, and their backward pass, per block. It computes exactly the function of
:meth:`ltr.models.toy1d.Toy1DEnsemble.score_from_features` (same parameters, float32), differentiable once
(w.r.t. the x features, the candidates and every parameter) -- enough for ML-IS, KLD-IS, NCE, NCE+ and
ML-MCMC. DSM and SM need second (third) derivatives: :mod:`ltr.regression_1d.fused_dsm` and
:mod:`ltr.regression_1d.fused_sm` compute their whole losses and gradients in kernels of their own, built
from the same C++ prelude with :func:`compile_library`.

Backward recomputes the forward activations instead of storing them (nothing but the inputs is saved).
The kernel is plain C++ (no PyTorch headers, so it compiles in about a second): it is built on first use
(:func:`ltr.ops.cpp_kernel.compile_library`) and called through ctypes with the tensors' data pointers.
:func:`available` says whether it could be built.
"""

from __future__ import annotations

import ctypes
import functools

import torch
from torch import Tensor

from ltr.models.toy1d import HIDDEN, Toy1DEnsemble
from ltr.ops.cpp_kernel import compile_library, loads

#: Shared C++ prelude of the 1D kernels: the layer width H, the lane block B, tanh, the parameter block
#: of one member and the zero-padded block load.
PRELUDE = r"""
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {
constexpr int H = 10;
constexpr int B = 16;

// tanh as a clamped odd rational function (the coefficients of Eigen's float tanh; max error ~1 ulp).
// Plain arithmetic, so the compiler vectorises it across the block's lanes.
inline float fast_tanh(float x) {
  const float c = 7.90531110763549805f;
  x = x > c ? c : (x < -c ? -c : x);
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 - 8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p / q;
}

struct Params {
  float w1[H], b1[H], wy[H][H], w2[H][H], b2[H], w3[H][H], b3[H], w4[H], b4;
};

Params load(const float* w1, const float* b1, const float* wy, const float* w2, const float* b2,
            const float* w3, const float* b3, const float* w4, const float* b4, int64_t r) {
  Params p;
  for (int j = 0; j < H; ++j) {
    p.w1[j] = w1[r * H + j]; p.b1[j] = b1[r * H + j]; p.b2[j] = b2[r * H + j];
    p.b3[j] = b3[r * H + j]; p.w4[j] = w4[r * H + j];
    for (int i = 0; i < H; ++i) {
      p.wy[i][j] = wy[r * H * H + i * H + j];
      p.w2[i][j] = w2[r * H * H + i * H + j];
      p.w3[i][j] = w3[r * H * H + i * H + j];
    }
  }
  p.b4 = b4[r];
  return p;
}

// In-block copy of S candidates starting at s0 (zero-padded).
inline int load_block(const float* src, int64_t s0, int64_t S, float* dst) {
  int cnt = (int)std::min<int64_t>(B, S - s0);
  for (int l = 0; l < B; ++l) dst[l] = l < cnt ? src[s0 + l] : 0.f;
  return cnt;
}
}  // namespace
"""

_SOURCE = (
    PRELUDE
    + r"""
namespace {
// Activations of a block of L candidates (L = B in the backward pass; the forward-only pass uses 2 B lanes,
// which amortises each weight load over more lanes -- the backward's lane-wise gradient accumulators would
// no longer fit in L1 at that width).
template <int L>
struct Acts {
  float h0[H][L], h1[H][L], t2[H][L], h2[H][L], t3[H][L], h3[H][L];
};

template <int L>
inline void forward_block(const Params& p, const float* feat, const float* y, Acts<L>& a, float* f) {
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < L; ++l) a.h0[j][l] = fast_tanh(p.w1[j] * y[l] + p.b1[j]);
  }
  for (int j = 0; j < H; ++j) {
    float acc[L];
#pragma omp simd
    for (int l = 0; l < L; ++l) acc[l] = feat[j];
    for (int i = 0; i < H; ++i) {
#pragma omp simd
      for (int l = 0; l < L; ++l) acc[l] += p.wy[i][j] * a.h0[i][l];
    }
#pragma omp simd
    for (int l = 0; l < L; ++l) a.h1[j][l] = fast_tanh(acc[l]);
  }
  for (int j = 0; j < H; ++j) {
    float acc[L];
#pragma omp simd
    for (int l = 0; l < L; ++l) acc[l] = p.b2[j];
    for (int i = 0; i < H; ++i) {
#pragma omp simd
      for (int l = 0; l < L; ++l) acc[l] += p.w2[i][j] * a.h1[i][l];
    }
#pragma omp simd
    for (int l = 0; l < L; ++l) {
      a.t2[j][l] = fast_tanh(acc[l]);
      a.h2[j][l] = a.t2[j][l] + a.h1[j][l];
    }
  }
  for (int j = 0; j < H; ++j) {
    float acc[L];
#pragma omp simd
    for (int l = 0; l < L; ++l) acc[l] = p.b3[j];
    for (int i = 0; i < H; ++i) {
#pragma omp simd
      for (int l = 0; l < L; ++l) acc[l] += p.w3[i][j] * a.h2[i][l];
    }
#pragma omp simd
    for (int l = 0; l < L; ++l) {
      a.t3[j][l] = fast_tanh(acc[l]);
      a.h3[j][l] = a.t3[j][l] + a.h2[j][l];
    }
  }
#pragma omp simd
  for (int l = 0; l < L; ++l) f[l] = p.b4;
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < L; ++l) f[l] += p.w4[j] * a.h3[j][l];
  }
}

}  // namespace

extern "C" void ltr_fused_forward(int64_t R, int64_t N, int64_t S, const float* pf, const float* py,
                                  const float* const* params, float* po) {
  for (int64_t r = 0; r < R; ++r) {
    Params p = load(params[0], params[1], params[2], params[3], params[4], params[5], params[6], params[7],
                    params[8], r);
    constexpr int L = 2 * B;
    Acts<L> a;
    for (int64_t n = 0; n < N; ++n) {
      const float* feat_n = pf + (r * N + n) * H;
      const float* y_n = py + (r * N + n) * S;
      float* o_n = po + (r * N + n) * S;
      for (int64_t s0 = 0; s0 < S; s0 += L) {
        float yb[L], fb[L];
        const int cnt = (int)std::min<int64_t>(L, S - s0);
        for (int l = 0; l < L; ++l) yb[l] = l < cnt ? y_n[s0 + l] : 0.f;
        forward_block(p, feat_n, yb, a, fb);
        for (int l = 0; l < cnt; ++l) o_n[s0 + l] = fb[l];
      }
    }
  }
}

// grads: g_feat (R,N,H), g_y (R,N,S) or null, then the 9 parameter gradients (written, not accumulated).
extern "C" void ltr_fused_backward(int64_t R, int64_t N, int64_t S, const float* pf, const float* py,
                                   const float* const* params, const float* pg, float* g_feat, float* g_y,
                                   float* const* g_params) {
  const bool need_grad_y = g_y != nullptr;
  for (int64_t r = 0; r < R; ++r) {
    Params p = load(params[0], params[1], params[2], params[3], params[4], params[5], params[6], params[7],
                    params[8], r);
    // Lane-wise gradient accumulators (summed over lanes at the end of the member).
    static thread_local float gw1[H][B], gb1[H][B], gwy[H][H][B], gw2[H][H][B], gb2[H][B], gw3[H][H][B],
        gb3[H][B], gw4[H][B], gb4[B];
    std::fill(&gw1[0][0], &gw1[0][0] + H * B, 0.f); std::fill(&gb1[0][0], &gb1[0][0] + H * B, 0.f);
    std::fill(&gwy[0][0][0], &gwy[0][0][0] + H * H * B, 0.f);
    std::fill(&gw2[0][0][0], &gw2[0][0][0] + H * H * B, 0.f);
    std::fill(&gw3[0][0][0], &gw3[0][0][0] + H * H * B, 0.f);
    std::fill(&gb2[0][0], &gb2[0][0] + H * B, 0.f);
    std::fill(&gb3[0][0], &gb3[0][0] + H * B, 0.f); std::fill(&gw4[0][0], &gw4[0][0] + H * B, 0.f);
    std::fill(gb4, gb4 + B, 0.f);
    Acts<B> a;
    float* gfeat_r = g_feat + r * N * H;
    for (int64_t n = 0; n < N; ++n) {
      const float* feat_n = pf + (r * N + n) * H;
      const float* y_n = py + (r * N + n) * S;
      const float* g_n = pg + (r * N + n) * S;
      float gfeat_acc[H][B];
      std::fill(&gfeat_acc[0][0], &gfeat_acc[0][0] + H * B, 0.f);
      for (int64_t s0 = 0; s0 < S; s0 += B) {
        float yb[B], fb[B], gf[B];
        int cnt = load_block(y_n, s0, S, yb);
        load_block(g_n, s0, S, gf);  // padded lanes get zero gradient
        forward_block(p, feat_n, yb, a, fb);
        float gh[H][B], ga[H][B], gprev[H][B];
        // output layer
#pragma omp simd
        for (int l = 0; l < B; ++l) gb4[l] += gf[l];
        for (int j = 0; j < H; ++j) {
#pragma omp simd
          for (int l = 0; l < B; ++l) {
            gw4[j][l] += gf[l] * a.h3[j][l];
            gh[j][l] = gf[l] * p.w4[j];
          }
        }
        // residual block 2: h3 = tanh(W3 h2 + b3) + h2
        for (int j = 0; j < H; ++j) {
#pragma omp simd
          for (int l = 0; l < B; ++l) {
            ga[j][l] = gh[j][l] * (1.f - a.t3[j][l] * a.t3[j][l]);
            gb3[j][l] += ga[j][l];
          }
        }
        for (int i = 0; i < H; ++i) {
#pragma omp simd
          for (int l = 0; l < B; ++l) gprev[i][l] = gh[i][l];
          for (int j = 0; j < H; ++j) {
#pragma omp simd
            for (int l = 0; l < B; ++l) {
              gw3[i][j][l] += a.h2[i][l] * ga[j][l];
              gprev[i][l] += p.w3[i][j] * ga[j][l];
            }
          }
        }
        // residual block 1: h2 = tanh(W2 h1 + b2) + h1
        for (int j = 0; j < H; ++j) {
#pragma omp simd
          for (int l = 0; l < B; ++l) {
            ga[j][l] = gprev[j][l] * (1.f - a.t2[j][l] * a.t2[j][l]);
            gb2[j][l] += ga[j][l];
          }
        }
        for (int i = 0; i < H; ++i) {
#pragma omp simd
          for (int l = 0; l < B; ++l) gh[i][l] = gprev[i][l];
          for (int j = 0; j < H; ++j) {
#pragma omp simd
            for (int l = 0; l < B; ++l) {
              gw2[i][j][l] += a.h1[i][l] * ga[j][l];
              gh[i][l] += p.w2[i][j] * ga[j][l];
            }
          }
        }
        // concat layer: h1 = tanh(feat + Wy h0)
        for (int j = 0; j < H; ++j) {
#pragma omp simd
          for (int l = 0; l < B; ++l) {
            ga[j][l] = gh[j][l] * (1.f - a.h1[j][l] * a.h1[j][l]);
            gfeat_acc[j][l] += ga[j][l];
          }
        }
        for (int i = 0; i < H; ++i) {
#pragma omp simd
          for (int l = 0; l < B; ++l) gprev[i][l] = 0.f;
          for (int j = 0; j < H; ++j) {
#pragma omp simd
            for (int l = 0; l < B; ++l) {
              gwy[i][j][l] += a.h0[i][l] * ga[j][l];
              gprev[i][l] += p.wy[i][j] * ga[j][l];
            }
          }
        }
        // y branch: h0 = tanh(w1 y + b1)
        float gyb[B];
#pragma omp simd
        for (int l = 0; l < B; ++l) gyb[l] = 0.f;
        for (int j = 0; j < H; ++j) {
#pragma omp simd
          for (int l = 0; l < B; ++l) {
            float g0 = gprev[j][l] * (1.f - a.h0[j][l] * a.h0[j][l]);
            gw1[j][l] += g0 * yb[l];
            gb1[j][l] += g0;
            gyb[l] += g0 * p.w1[j];
          }
        }
        if (need_grad_y) {
          float* gy_n = g_y + (r * N + n) * S;
          for (int l = 0; l < cnt; ++l) gy_n[s0 + l] = gyb[l];
        }
      }
      for (int j = 0; j < H; ++j) {
        float s = 0.f;
        for (int l = 0; l < B; ++l) s += gfeat_acc[j][l];
        gfeat_r[n * H + j] = s;
      }
    }
    auto lane_sum = [](const float* v) { float s = 0.f; for (int l = 0; l < B; ++l) s += v[l]; return s; };
    float* o_w1 = g_params[0] + r * H; float* o_b1 = g_params[1] + r * H;
    float* o_wy = g_params[2] + r * H * H; float* o_w2 = g_params[3] + r * H * H;
    float* o_b2 = g_params[4] + r * H; float* o_w3 = g_params[5] + r * H * H;
    float* o_b3 = g_params[6] + r * H; float* o_w4 = g_params[7] + r * H;
    for (int j = 0; j < H; ++j) {
      o_w1[j] = lane_sum(gw1[j]); o_b1[j] = lane_sum(gb1[j]); o_b2[j] = lane_sum(gb2[j]);
      o_b3[j] = lane_sum(gb3[j]); o_w4[j] = lane_sum(gw4[j]);
      for (int i = 0; i < H; ++i) {
        o_wy[i * H + j] = lane_sum(gwy[i][j]); o_w2[i * H + j] = lane_sum(gw2[i][j]);
        o_w3[i * H + j] = lane_sum(gw3[i][j]);
      }
    }
    g_params[8][r] = lane_sum(gb4);
  }
}
"""
)


@functools.cache
def _library() -> ctypes.CDLL:
    """The first-derivative kernel library, with its entry points' signatures set."""
    lib = compile_library("toy1d_fused", _SOURCE)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.ltr_fused_forward.argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr]
    lib.ltr_fused_forward.restype = None
    lib.ltr_fused_backward.argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr]
    lib.ltr_fused_backward.restype = None
    return lib


@functools.cache
def available() -> bool:
    """Whether the kernel builds (or is cached) here; :func:`build` raises the compiler's error instead."""
    return loads(_library)


def build() -> None:
    """Compile (or load from the cache) the kernel, raising the compiler's error if that fails."""
    _library()


def ptr_array(tensors) -> ctypes.Array:
    return (ctypes.c_void_p * len(tensors))(*[t.data_ptr() for t in tensors])


def check_input(t: Tensor, name: str) -> None:
    if t.device.type != "cpu" or t.dtype != torch.float32 or not t.is_contiguous():
        raise ValueError(f"{name} must be a contiguous float32 CPU tensor, got {t.dtype} on {t.device}")


def _forward(feat: Tensor, y: Tensor, params: tuple[Tensor, ...]) -> Tensor:
    for i, t in enumerate((feat, y, *params)):
        check_input(t, f"fused kernel input {i}")
    r, n, s = y.shape
    out = torch.empty(r, n, s)
    _library().ltr_fused_forward(r, n, s, feat.data_ptr(), y.data_ptr(), ptr_array(params), out.data_ptr())
    return out


def _backward(feat, y, params, grad, need_grad_y: bool):
    r, n, s = y.shape
    g_feat = torch.empty_like(feat)
    g_y = torch.empty_like(y) if need_grad_y else None
    g_params = [torch.empty_like(t) for t in params]
    _library().ltr_fused_backward(
        r,
        n,
        s,
        feat.data_ptr(),
        y.data_ptr(),
        ptr_array(params),
        grad.data_ptr(),
        g_feat.data_ptr(),
        g_y.data_ptr() if g_y is not None else None,
        ptr_array(g_params),
    )
    return g_feat, g_y, g_params


class _FusedScore(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feat, y, *params):
        ctx.save_for_backward(feat, y, *params)
        return _forward(feat, y, params)

    @staticmethod
    def backward(ctx, grad):
        feat, y, *params = ctx.saved_tensors
        g_feat, g_y, g_params = _backward(
            feat, y, tuple(params), grad.contiguous(), bool(ctx.needs_input_grad[1])
        )
        return (g_feat, g_y, *g_params)


def kernel_params(ens: Toy1DEnsemble, runs: slice | None = None) -> tuple[Tensor, ...]:
    """The 9 per-candidate parameter tensors in the kernels' order and layout (contiguous, differentiable).

    (R, 10) fc1_y weight and bias, (R, 10, 10) y half of the concat weight, (R, 10, 10) / (R, 10) fc2_xy and
    fc3_xy weight / bias, (R, 10) fc4_xy weight, (R,) fc4_xy bias; R is the length of ``runs`` if given.
    """
    p = ens._param
    r = p("fc1_y_w", runs).shape[0]
    params = (
        p("fc1_y_w", runs).reshape(r, HIDDEN),
        p("fc1_y_b", runs).reshape(r, HIDDEN),
        p("fc1_xy_w", runs)[:, HIDDEN:],
        p("fc2_xy_w", runs),
        p("fc2_xy_b", runs).reshape(r, HIDDEN),
        p("fc3_xy_w", runs),
        p("fc3_xy_b", runs).reshape(r, HIDDEN),
        p("fc4_xy_w", runs).reshape(r, HIDDEN),
        p("fc4_xy_b", runs).reshape(r),
    )
    return tuple(t.contiguous() for t in params)


def fused_score(ens: Toy1DEnsemble, feat: Tensor, y: Tensor, *, runs: slice | None = None) -> Tensor:
    """Same as ``ens.score_from_features(feat, y, runs=runs)`` via the fused kernel (CPU, float32).

    Args:
        feat: (R, N, 10) from ``ens.x_features``.
        y: (R, N, S, 1) candidates.
    Returns:
        (R, N, S) scores, differentiable once w.r.t. feat, y and the ensemble's parameters.
    """
    r, n, s, _ = y.shape
    params = kernel_params(ens, runs)
    return _FusedScore.apply(feat.contiguous(), y.reshape(r, n, s).contiguous(), *params)
