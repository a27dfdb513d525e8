"""A fused CPU kernel for the score-matching (SM) loss of the 1D network: f's first and second y-derivatives
and the loss's gradients in one pass.

SM evaluates ``d2f/dy2 + 1/2 (df/dy)^2`` at each label (one candidate per example) and needs its gradient
w.r.t. every parameter (a third derivative of the network). The PyTorch path builds a triple-backward graph of
small ops; this kernel does it by hand, 16 examples per block (one per lane, each with its own x features):

- second-order forward mode: each activation h carries h' and h'' (w.r.t. y); for ``t = tanh(u)``,
  ``t' = (1 - t^2) u'`` and ``t'' = (1 - t^2) u'' - 2 t t' u'``; linear layers map (u, u', u'') alike;
- the loss ``k + g^2 / 2`` with ``g = w4 . h3'``, ``k = w4 . h3''``;
- reverse mode over all of it (adjoints of h, h', h''), see ``tanh_reverse`` in the source.

Same function as ``ltr.ebm.losses.sm_loss`` on ``Toy1DEnsemble.score_from_features`` (float32; tested
against a float64 PyTorch reference), per example, differentiable once w.r.t. the x features and every
per-candidate parameter (not w.r.t. the labels). Each example's gradient is saved by the forward and weighted
by the incoming gradient in the backward, as in :mod:`ltr.regression_1d.fused_dsm`.
"""

from __future__ import annotations

import ctypes
import functools

import torch
from torch import Tensor

from ltr.models.toy1d import Toy1DEnsemble
from ltr.regression_1d.fused import PRELUDE, check_input, compile_library, kernel_params, loads, ptr_array
from ltr.regression_1d.fused_dsm import NUM_PARAMS, weighted_grads

_SOURCE = (
    PRELUDE
    + r"""
namespace {
// One block of 16 examples (one per lane): activations h, first and second y-derivatives d, e; for each
// tanh layer also t = tanh(u) and the derivatives v = u', w = u''.
struct Tang2 {
  float h0[H][B], d0[H][B], e0[H][B];
  float h1[H][B], v1[H][B], w1[H][B], d1[H][B], e1[H][B];
  float t2[H][B], v2[H][B], w2[H][B], h2[H][B], d2[H][B], e2[H][B];
  float t3[H][B], v3[H][B], w3[H][B], h3[H][B], d3[H][B], e3[H][B];
};

// Lane-wise gradients (one example per lane), kernel parameter order, then the x features.
struct Grads {
  float w1[H][B], b1[H][B], wy[H][H][B], w2[H][H][B], b2[H][B], w3[H][H][B], b3[H][B], w4[H][B], b4[B];
  float feat[H][B];
};

// Forward of t = tanh(u) with t' = s v and t'' = s w - 2 t t' v (s = 1 - t^2).
inline void tanh_forward(float u, float v, float w, float& t, float& d, float& e) {
  t = fast_tanh(u);
  d = (1.f - t * t) * v;
  e = (1.f - t * t) * w - 2.f * t * d * v;
}

// Reverse of tanh_forward: adjoints T, P, Q of t, t', t'' -> adjoints U, V, W of u, v = u', w = u''.
inline void tanh_reverse(float t, float v, float w, float T, float P, float Q, float& U, float& V, float& W) {
  const float s = 1.f - t * t;
  const float p = s * v;
  W = s * Q;
  const float P_tot = P - 2.f * t * v * Q;
  V = s * P_tot - 2.f * t * p * Q;
  const float T_tot = T - 2.f * (t * w + p * v) * Q - 2.f * t * v * P_tot;
  U = s * T_tot;
}

// h_out = tanh(b + W^T h_in) + h_in and its first and second y-derivatives.
inline void residual_forward(const float (&W)[H][H], const float* bias, const float (&hin)[H][B],
                             const float (&din)[H][B], const float (&ein)[H][B], float (&t)[H][B],
                             float (&v)[H][B], float (&w)[H][B], float (&hout)[H][B], float (&dout)[H][B],
                             float (&eout)[H][B]) {
  for (int j = 0; j < H; ++j) {
    float acc[B], accd[B], acce[B];
#pragma omp simd
    for (int l = 0; l < B; ++l) { acc[l] = bias[j]; accd[l] = 0.f; acce[l] = 0.f; }
    for (int i = 0; i < H; ++i) {
#pragma omp simd
      for (int l = 0; l < B; ++l) {
        acc[l] += W[i][j] * hin[i][l];
        accd[l] += W[i][j] * din[i][l];
        acce[l] += W[i][j] * ein[i][l];
      }
    }
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      float tj, dj, ej;
      tanh_forward(acc[l], accd[l], acce[l], tj, dj, ej);
      t[j][l] = tj; v[j][l] = accd[l]; w[j][l] = acce[l];
      hout[j][l] = tj + hin[j][l]; dout[j][l] = dj + din[j][l]; eout[j][l] = ej + ein[j][l];
    }
  }
}

// g = df/dy and k = d2f/dy2 of a block of examples (featb: each lane's x features).
inline void forward_block(const Params& p, const float (&featb)[H][B], const float* y, Tang2& a, float* g,
                          float* k) {
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l)
      tanh_forward(p.w1[j] * y[l] + p.b1[j], p.w1[j], 0.f, a.h0[j][l], a.d0[j][l], a.e0[j][l]);
  }
  for (int j = 0; j < H; ++j) {
    float acc[B], accd[B], acce[B];
#pragma omp simd
    for (int l = 0; l < B; ++l) { acc[l] = featb[j][l]; accd[l] = 0.f; acce[l] = 0.f; }
    for (int i = 0; i < H; ++i) {
#pragma omp simd
      for (int l = 0; l < B; ++l) {
        acc[l] += p.wy[i][j] * a.h0[i][l];
        accd[l] += p.wy[i][j] * a.d0[i][l];
        acce[l] += p.wy[i][j] * a.e0[i][l];
      }
    }
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      a.v1[j][l] = accd[l]; a.w1[j][l] = acce[l];
      tanh_forward(acc[l], accd[l], acce[l], a.h1[j][l], a.d1[j][l], a.e1[j][l]);
    }
  }
  residual_forward(p.w2, p.b2, a.h1, a.d1, a.e1, a.t2, a.v2, a.w2, a.h2, a.d2, a.e2);
  residual_forward(p.w3, p.b3, a.h2, a.d2, a.e2, a.t3, a.v3, a.w3, a.h3, a.d3, a.e3);
#pragma omp simd
  for (int l = 0; l < B; ++l) { g[l] = 0.f; k[l] = 0.f; }
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) { g[l] += p.w4[j] * a.d3[j][l]; k[l] += p.w4[j] * a.e3[j][l]; }
  }
}

// Reverse of a linear map u = W^T h_in (and of its derivatives) given the adjoints U, V, Wa of u, u', u'':
// accumulates gW and adds W U, W V, W Wa to the adjoints A, D, E of h_in, h_in', h_in''.
inline void linear_reverse(const float (&W)[H][H], const float (&hin)[H][B], const float (&din)[H][B],
                           const float (&ein)[H][B], const float (&U)[H][B], const float (&V)[H][B],
                           const float (&Wa)[H][B], float (&A)[H][B], float (&D)[H][B], float (&E)[H][B],
                           float (&gW)[H][H][B]) {
  for (int i = 0; i < H; ++i) {
    for (int j = 0; j < H; ++j) {
#pragma omp simd
      for (int l = 0; l < B; ++l) {
        gW[i][j][l] += hin[i][l] * U[j][l] + din[i][l] * V[j][l] + ein[i][l] * Wa[j][l];
        A[i][l] += W[i][j] * U[j][l];
        D[i][l] += W[i][j] * V[j][l];
        E[i][l] += W[i][j] * Wa[j][l];
      }
    }
  }
}

// Reverse of residual_forward: A, D, E hold the adjoints of h_out, d_out, e_out on entry and of h_in,
// d_in, e_in on exit (the skip connection passes them through).
inline void residual_reverse(const float (&W)[H][H], const float (&t)[H][B], const float (&v)[H][B],
                             const float (&w)[H][B], const float (&hin)[H][B], const float (&din)[H][B],
                             const float (&ein)[H][B], float (&A)[H][B], float (&D)[H][B], float (&E)[H][B],
                             float (&gW)[H][H][B], float (&gb)[H][B]) {
  float U[H][B], V[H][B], Wa[H][B];
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      tanh_reverse(t[j][l], v[j][l], w[j][l], A[j][l], D[j][l], E[j][l], U[j][l], V[j][l], Wa[j][l]);
      gb[j][l] += U[j][l];
    }
  }
  linear_reverse(W, hin, din, ein, U, V, Wa, A, D, E, gW);
}

// Gradient (per lane) of bg * g + ck * k w.r.t. the parameters and the lane's x features, written into gr.
inline void reverse_block(const Params& p, const float* y, const Tang2& a, const float* bg, const float* ck,
                          Grads& gr) {
  float A[H][B], D[H][B], E[H][B];
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      gr.w4[j][l] = bg[l] * a.d3[j][l] + ck[l] * a.e3[j][l];
      A[j][l] = 0.f;
      D[j][l] = bg[l] * p.w4[j];
      E[j][l] = ck[l] * p.w4[j];
    }
  }
#pragma omp simd
  for (int l = 0; l < B; ++l) gr.b4[l] = 0.f;  // f itself is not in the loss
  std::fill(&gr.w3[0][0][0], &gr.w3[0][0][0] + H * H * B, 0.f);
  std::fill(&gr.w2[0][0][0], &gr.w2[0][0][0] + H * H * B, 0.f);
  std::fill(&gr.wy[0][0][0], &gr.wy[0][0][0] + H * H * B, 0.f);
  std::fill(&gr.b3[0][0], &gr.b3[0][0] + H * B, 0.f);
  std::fill(&gr.b2[0][0], &gr.b2[0][0] + H * B, 0.f);
  residual_reverse(p.w3, a.t3, a.v3, a.w3, a.h2, a.d2, a.e2, A, D, E, gr.w3, gr.b3);
  residual_reverse(p.w2, a.t2, a.v2, a.w2, a.h1, a.d1, a.e1, A, D, E, gr.w2, gr.b2);
  // concat layer: u1 = feat + Wy^T h0 (no skip connection)
  float U[H][B], V[H][B], Wa[H][B], A0[H][B], D0[H][B], E0[H][B];
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      tanh_reverse(a.h1[j][l], a.v1[j][l], a.w1[j][l], A[j][l], D[j][l], E[j][l], U[j][l], V[j][l], Wa[j][l]);
      gr.feat[j][l] = U[j][l];
      A0[j][l] = 0.f; D0[j][l] = 0.f; E0[j][l] = 0.f;
    }
  }
  linear_reverse(p.wy, a.h0, a.d0, a.e0, U, V, Wa, A0, D0, E0, gr.wy);
  // y branch: u0 = w1 y + b1, u0' = w1, u0'' = 0
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      float u0, v0, w0;
      tanh_reverse(a.h0[j][l], p.w1[j], 0.f, A0[j][l], D0[j][l], E0[j][l], u0, v0, w0);
      gr.w1[j][l] = u0 * y[l] + v0;
      gr.b1[j][l] = u0;
    }
  }
}
}  // namespace

// SM loss per example, loss[r, n] = k + g^2 / 2 at y[r, n] (g, k: first and second y-derivative of f).
// If g_feat is not null, also each example's gradient of its loss w.r.t. its x features, g_feat (R, N, H),
// and w.r.t. the member's parameters, g_params (R, N, P) in kernel order.
extern "C" void ltr_fused_sm(int64_t R, int64_t N, const float* pf, const float* py,
                             const float* const* params, float* loss, float* g_feat, float* g_params) {
  constexpr int P = (int)(sizeof(Grads) / sizeof(float) / B) - H;
  const bool need_grad = g_feat != nullptr;
  static thread_local Grads gr;
  static thread_local Tang2 a;
  for (int64_t r = 0; r < R; ++r) {
    Params p = load(params[0], params[1], params[2], params[3], params[4], params[5], params[6], params[7],
                    params[8], r);
    for (int64_t n0 = 0; n0 < N; n0 += B) {
      const int cnt = (int)std::min<int64_t>(B, N - n0);
      float featb[H][B], yb[B], gb[B], kb[B], ones[B];
      load_block(py + r * N, n0, N, yb);
      for (int l = 0; l < B; ++l)
        for (int j = 0; j < H; ++j) featb[j][l] = l < cnt ? pf[(r * N + n0 + l) * H + j] : 0.f;
      forward_block(p, featb, yb, a, gb, kb);
      for (int l = 0; l < cnt; ++l) loss[r * N + n0 + l] = kb[l] + 0.5f * gb[l] * gb[l];
      if (!need_grad) continue;
#pragma omp simd
      for (int l = 0; l < B; ++l) ones[l] = 1.f;
      reverse_block(p, yb, a, gb, ones, gr);
      const float* acc = reinterpret_cast<const float*>(&gr);
      for (int l = 0; l < cnt; ++l) {
        const int64_t rn = r * N + n0 + l;
        for (int q = 0; q < P; ++q) g_params[rn * P + q] = acc[q * B + l];
        for (int j = 0; j < H; ++j) g_feat[rn * H + j] = gr.feat[j][l];
      }
    }
  }
}

extern "C" int64_t ltr_fused_sm_num_params() { return (int64_t)(sizeof(Grads) / sizeof(float) / B - H); }
"""
)


@functools.cache
def _library() -> ctypes.CDLL:
    lib = compile_library("toy1d_fused_sm", _SOURCE)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.ltr_fused_sm.argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr, ptr]
    lib.ltr_fused_sm.restype = None
    lib.ltr_fused_sm_num_params.argtypes = []
    lib.ltr_fused_sm_num_params.restype = i64
    if lib.ltr_fused_sm_num_params() != NUM_PARAMS:
        raise RuntimeError("the SM kernel's parameter layout does not match NUM_PARAMS")
    return lib


@functools.cache
def available() -> bool:
    """Whether the SM kernel builds (or is cached) here."""
    return loads(_library)


class _FusedSM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feat, y, *params):
        if ctx.needs_input_grad[1]:
            raise ValueError("the fused SM loss is not differentiable w.r.t. the labels")
        for i, t in enumerate((feat, y, *params)):
            check_input(t, f"SM kernel input {i}")
        need_grad = any(ctx.needs_input_grad)
        r, n = y.shape
        loss = torch.empty(r, n)
        g_feat = torch.empty(r, n, feat.shape[-1]) if need_grad else None
        g_params = torch.empty(r, n, NUM_PARAMS) if need_grad else None
        _library().ltr_fused_sm(
            r,
            n,
            feat.data_ptr(),
            y.data_ptr(),
            ptr_array(params),
            loss.data_ptr(),
            g_feat.data_ptr() if need_grad else None,
            g_params.data_ptr() if need_grad else None,
        )
        if need_grad:
            ctx.save_for_backward(g_feat, g_params)
            ctx.param_shapes = [t.shape for t in params]
        return loss

    @staticmethod
    def backward(ctx, grad):  # grad: (R, N)
        g_feat, g_params = ctx.saved_tensors
        grad_feat, grads = weighted_grads(grad, g_feat, g_params, ctx.param_shapes)
        return (grad_feat, None, *grads)


def fused_sm_loss(ens: Toy1DEnsemble, feat: Tensor, labels: Tensor, *, runs: slice | None = None) -> Tensor:
    """Per-example SM loss ``d2f/dy2 + 1/2 (df/dy)^2`` at the labels via the fused kernel.

    Equals ``ltr.ebm.losses.sm_loss(g, h, reduction="none")`` with g, h the first and second y-derivatives of
    ``ens.score_from_features(feat, labels.unsqueeze(2), runs=runs)``.

    Args:
        ens: the ensemble (CPU, float32).
        feat: (R, N, 10) from ``ens.x_features``.
        labels: (R, N, 1) (data: no gradient flows to them).
        runs: restrict to a slice of the members (as in ``score_from_features``).
    Returns:
        (R, N) losses, differentiable w.r.t. ``feat`` and the ensemble's parameters.
    """
    r, n, d = labels.shape
    if d != 1 or feat.shape[:2] != (r, n):
        raise ValueError(f"expected feat (R, N, 10) and labels (R, N, 1), got {feat.shape}, {labels.shape}")
    return _FusedSM.apply(feat.contiguous(), labels.reshape(r, n).contiguous(), *kernel_params(ens, runs))
