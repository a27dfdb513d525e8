"""A fused CPU kernel for the DSM loss of the 1D network: f, df/dy and the loss's gradients in one pass.

Denoising score matching needs df/dy at every noisy sample and then the gradient of a loss on that
derivative w.r.t. every parameter (a second derivative). The PyTorch path gets it by double backward through
a graph of ~100 small ops per layer stack; this kernel does it by hand per block of 16 candidates, like
:mod:`ltr.regression_1d.fused` does for f:

- forward mode: each activation h is carried with its y-derivative h' (``h0' = (1 - h0^2) w1``,
  ``u' = W^T h'_in``, ``h' = (1 - t^2) u' (+ h'_in)`` through the residual blocks), so ``g = w4 . h3'``;
- the loss per candidate, ``(g + (y~ - y_i) / sigma^2)^2``, and its derivative ``b = dloss/dg``;
- reverse mode over that forward-mode computation (adjoints of every h and every h'): for a tanh layer
  ``t = tanh(u)``, ``t' = (1 - t^2) u'`` the adjoints are ``u'_bar = (1 - t^2) t'_bar`` and
  ``u_bar = (1 - t^2) (t_bar - 2 t u' t'_bar)``; the weights collect ``h_in u_bar + h'_in u'_bar``.

It computes exactly what ``ltr.ebm.losses.dsm_loss`` computes on ``Toy1DEnsemble.score_from_features`` and its
y-gradient (float32; tested against a float64 PyTorch reference), per example, differentiable once w.r.t. the
x features and every parameter of the per-candidate layers (not w.r.t. the noisy samples or the labels, which
are data). Loss and gradients come out of the same pass: the forward saves each example's gradient (351
parameters + 10 features, summed over its M samples) and the backward weights them by the incoming gradient.
"""

from __future__ import annotations

import ctypes
import functools

import torch
from torch import Tensor

from ltr.models.toy1d import Toy1DEnsemble
from ltr.regression_1d.fused import PRELUDE, check_input, compile_library, kernel_params, loads, ptr_array

#: Number of per-candidate parameters of one member, in kernel order (see ``kernel_params``).
NUM_PARAMS = 10 + 10 + 100 + 100 + 10 + 100 + 10 + 10 + 1

_SOURCE = (
    PRELUDE
    + r"""
namespace {
// One block's activations h and their y-derivatives d = dh/dy; v = du/dy before each tanh.
struct Tang {
  float h0[H][B], d0[H][B];
  float h1[H][B], v1[H][B], d1[H][B];
  float t2[H][B], v2[H][B], h2[H][B], d2[H][B];
  float t3[H][B], v3[H][B], h3[H][B], d3[H][B];
};

// Lane-wise gradient accumulators of one example (summed over lanes when the example is done).
struct Grads {
  float w1[H][B], b1[H][B], wy[H][H][B], w2[H][H][B], b2[H][B], w3[H][H][B], b3[H][B], w4[H][B], b4[B];
  float feat[H][B];
};

// h_out = tanh(b + W^T h_in) + h_in (residual) with its y-derivative.
inline void residual_forward(const float (&W)[H][H], const float* bias, const float (&hin)[H][B],
                             const float (&din)[H][B], float (&t)[H][B], float (&v)[H][B], float (&hout)[H][B],
                             float (&dout)[H][B]) {
  for (int j = 0; j < H; ++j) {
    float acc[B], accd[B];
#pragma omp simd
    for (int l = 0; l < B; ++l) { acc[l] = bias[j]; accd[l] = 0.f; }
    for (int i = 0; i < H; ++i) {
#pragma omp simd
      for (int l = 0; l < B; ++l) { acc[l] += W[i][j] * hin[i][l]; accd[l] += W[i][j] * din[i][l]; }
    }
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const float tj = fast_tanh(acc[l]);
      t[j][l] = tj;
      v[j][l] = accd[l];
      hout[j][l] = tj + hin[j][l];
      dout[j][l] = (1.f - tj * tj) * accd[l] + din[j][l];
    }
  }
}

// f and g = df/dy of a block, keeping everything the reverse pass needs in a.
inline void forward_tangent_block(const Params& p, const float* feat, const float* y, Tang& a, float* f,
                                  float* g) {
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const float h = fast_tanh(p.w1[j] * y[l] + p.b1[j]);
      a.h0[j][l] = h;
      a.d0[j][l] = (1.f - h * h) * p.w1[j];
    }
  }
  for (int j = 0; j < H; ++j) {
    float acc[B], accd[B];
#pragma omp simd
    for (int l = 0; l < B; ++l) { acc[l] = feat[j]; accd[l] = 0.f; }
    for (int i = 0; i < H; ++i) {
#pragma omp simd
      for (int l = 0; l < B; ++l) { acc[l] += p.wy[i][j] * a.h0[i][l]; accd[l] += p.wy[i][j] * a.d0[i][l]; }
    }
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const float h = fast_tanh(acc[l]);
      a.h1[j][l] = h;
      a.v1[j][l] = accd[l];
      a.d1[j][l] = (1.f - h * h) * accd[l];
    }
  }
  residual_forward(p.w2, p.b2, a.h1, a.d1, a.t2, a.v2, a.h2, a.d2);
  residual_forward(p.w3, p.b3, a.h2, a.d2, a.t3, a.v3, a.h3, a.d3);
#pragma omp simd
  for (int l = 0; l < B; ++l) { f[l] = p.b4; g[l] = 0.f; }
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) { f[l] += p.w4[j] * a.h3[j][l]; g[l] += p.w4[j] * a.d3[j][l]; }
  }
}

// Reverse of residual_forward: A, D hold the adjoints of h_out, d_out on entry and of h_in, d_in on exit.
inline void residual_reverse(const float (&W)[H][H], const float (&t)[H][B], const float (&v)[H][B],
                             const float (&hin)[H][B], const float (&din)[H][B], float (&A)[H][B],
                             float (&D)[H][B], float (&gW)[H][H][B], float (&gb)[H][B]) {
  float ub[H][B], vb[H][B];
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const float s = 1.f - t[j][l] * t[j][l];
      vb[j][l] = s * D[j][l];
      ub[j][l] = s * (A[j][l] - 2.f * t[j][l] * v[j][l] * D[j][l]);
      gb[j][l] += ub[j][l];
    }
  }
  for (int i = 0; i < H; ++i) {
    for (int j = 0; j < H; ++j) {
#pragma omp simd
      for (int l = 0; l < B; ++l) {
        gW[i][j][l] += hin[i][l] * ub[j][l] + din[i][l] * vb[j][l];
        A[i][l] += W[i][j] * ub[j][l];
        D[i][l] += W[i][j] * vb[j][l];
      }
    }
  }
}

// Accumulate the gradient of sum_l (a_l f_l + b_l g_l) over the block into gr (lane-wise).
inline void reverse_block(const Params& p, const float* y, const Tang& a, const float* af, const float* bg,
                          Grads& gr) {
  float A[H][B], D[H][B];
#pragma omp simd
  for (int l = 0; l < B; ++l) gr.b4[l] += af[l];
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      gr.w4[j][l] += af[l] * a.h3[j][l] + bg[l] * a.d3[j][l];
      A[j][l] = af[l] * p.w4[j];
      D[j][l] = bg[l] * p.w4[j];
    }
  }
  residual_reverse(p.w3, a.t3, a.v3, a.h2, a.d2, A, D, gr.w3, gr.b3);
  residual_reverse(p.w2, a.t2, a.v2, a.h1, a.d1, A, D, gr.w2, gr.b2);
  // concat layer: h1 = tanh(feat + Wy^T h0), d1 = (1 - h1^2) Wy^T d0
  float ub[H][B], vb[H][B];
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const float h = a.h1[j][l];
      const float s = 1.f - h * h;
      vb[j][l] = s * D[j][l];
      ub[j][l] = s * (A[j][l] - 2.f * h * a.v1[j][l] * D[j][l]);
      gr.feat[j][l] += ub[j][l];
    }
  }
  for (int i = 0; i < H; ++i) {
    float a0[B], d0[B];
#pragma omp simd
    for (int l = 0; l < B; ++l) { a0[l] = 0.f; d0[l] = 0.f; }
    for (int j = 0; j < H; ++j) {
#pragma omp simd
      for (int l = 0; l < B; ++l) {
        gr.wy[i][j][l] += a.h0[i][l] * ub[j][l] + a.d0[i][l] * vb[j][l];
        a0[l] += p.wy[i][j] * ub[j][l];
        d0[l] += p.wy[i][j] * vb[j][l];
      }
    }
    // y branch: h0 = tanh(w1 y + b1), d0 = (1 - h0^2) w1
#pragma omp simd
    for (int l = 0; l < B; ++l) {
      const float h = a.h0[i][l];
      const float s = 1.f - h * h;
      const float u0 = s * (a0[l] - 2.f * h * p.w1[i] * d0[l]);
      gr.w1[i][l] += u0 * y[l] + s * d0[l];
      gr.b1[i][l] += u0;
    }
  }
}

inline float lane_sum(const float* v) {
  float s = 0.f;
  for (int l = 0; l < B; ++l) s += v[l];
  return s;
}
}  // namespace

// DSM loss per example, loss[r, n] = 1/S sum_s (g[r, n, s] + off[r, n, s])^2 with g = df/dy at y[r, n, s].
// If g_feat is not null, also each example's gradient of its loss w.r.t. its x features, g_feat (R, N, H),
// and w.r.t. the member's parameters, g_params (R, N, P) in kernel order.
extern "C" void ltr_fused_dsm(int64_t R, int64_t N, int64_t S, const float* pf, const float* py,
                              const float* poff, const float* const* params, float* loss, float* g_feat,
                              float* g_params) {
  const bool need_grad = g_feat != nullptr;
  const float inv_s = 1.f / (float)S;
  static thread_local Grads gr;
  static thread_local Tang a;
  for (int64_t r = 0; r < R; ++r) {
    Params p = load(params[0], params[1], params[2], params[3], params[4], params[5], params[6], params[7],
                    params[8], r);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t rn = r * N + n;
      const float* feat_n = pf + rn * H;
      const float* y_n = py + rn * S;
      const float* off_n = poff + rn * S;
      if (need_grad) gr = Grads{};
      float lsum[B];
#pragma omp simd
      for (int l = 0; l < B; ++l) lsum[l] = 0.f;
      for (int64_t s0 = 0; s0 < S; s0 += B) {
        float yb[B], ob[B], fb[B], gb[B], af[B], bg[B];
        const int cnt = load_block(y_n, s0, S, yb);
        load_block(off_n, s0, S, ob);
        forward_tangent_block(p, feat_n, yb, a, fb, gb);
#pragma omp simd
        for (int l = 0; l < B; ++l) {
          const float res = l < cnt ? gb[l] + ob[l] : 0.f;  // padded lanes contribute nothing
          lsum[l] += res * res;
          af[l] = 0.f;
          bg[l] = 2.f * inv_s * res;
        }
        if (need_grad) reverse_block(p, yb, a, af, bg, gr);
      }
      loss[rn] = lane_sum(lsum) * inv_s;
      if (need_grad) {
        float* out = g_params + rn * (int64_t)(sizeof(Grads) / sizeof(float) / B - H);
        const float* acc = reinterpret_cast<const float*>(&gr);
        for (size_t k = 0; k < sizeof(Grads) / sizeof(float) / B - H; ++k) out[k] = lane_sum(acc + k * B);
        for (int j = 0; j < H; ++j) g_feat[rn * H + j] = lane_sum(gr.feat[j]);
      }
    }
  }
}

extern "C" int64_t ltr_fused_dsm_num_params() { return (int64_t)(sizeof(Grads) / sizeof(float) / B - H); }
"""
)


@functools.cache
def _library() -> ctypes.CDLL:
    lib = compile_library("toy1d_fused_dsm", _SOURCE)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.ltr_fused_dsm.argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr]
    lib.ltr_fused_dsm.restype = None
    lib.ltr_fused_dsm_num_params.argtypes = []
    lib.ltr_fused_dsm_num_params.restype = i64
    if lib.ltr_fused_dsm_num_params() != NUM_PARAMS:
        raise RuntimeError("the DSM kernel's parameter layout does not match NUM_PARAMS")
    return lib


@functools.cache
def available() -> bool:
    """Whether the DSM kernel builds (or is cached) here."""
    return loads(_library)


def _run(feat: Tensor, y: Tensor, off: Tensor, params: tuple[Tensor, ...], need_grad: bool):
    for i, t in enumerate((feat, y, off, *params)):
        check_input(t, f"DSM kernel input {i}")
    r, n, s = y.shape
    loss = torch.empty(r, n)
    g_feat = torch.empty(r, n, feat.shape[-1]) if need_grad else None
    g_params = torch.empty(r, n, NUM_PARAMS) if need_grad else None
    _library().ltr_fused_dsm(
        r,
        n,
        s,
        feat.data_ptr(),
        y.data_ptr(),
        off.data_ptr(),
        ptr_array(params),
        loss.data_ptr(),
        g_feat.data_ptr() if need_grad else None,
        g_params.data_ptr() if need_grad else None,
    )
    return loss, g_feat, g_params


class _FusedDSM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feat, y, off, *params):
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            raise ValueError("the fused DSM loss is not differentiable w.r.t. the noisy samples or offsets")
        need_grad = any(ctx.needs_input_grad)
        loss, g_feat, g_params = _run(feat, y, off, params, need_grad)
        if need_grad:
            ctx.save_for_backward(g_feat, g_params)
            ctx.param_shapes = [t.shape for t in params]
        return loss

    @staticmethod
    def backward(ctx, grad):  # grad: (R, N)
        g_feat, g_params = ctx.saved_tensors
        grad_feat, grads = weighted_grads(grad, g_feat, g_params, ctx.param_shapes)
        return (grad_feat, None, None, *grads)


def weighted_grads(
    grad: Tensor, g_feat: Tensor, g_params: Tensor, param_shapes: list[torch.Size]
) -> tuple[Tensor, list[Tensor]]:
    """Backward of a per-example loss from the per-example gradients its forward saved.

    Args:
        grad: (R, N) incoming gradient of the per-example losses.
        g_feat: (R, N, 10) each example's loss gradient w.r.t. its x features.
        g_params: (R, N, P) each example's loss gradient w.r.t. its member's parameters (kernel order).
        param_shapes: the shapes of the kernel parameters, each (R, ...), together P numbers per member.
    Returns:
        (R, N, 10) gradient w.r.t. the features and one gradient per parameter, sum_n grad[r, n] * g[r, n].
    """
    grad_feat = g_feat * grad.unsqueeze(-1)
    flat = torch.bmm(grad.unsqueeze(1), g_params).squeeze(1)  # (R, P)
    sizes = [shape[1:].numel() for shape in param_shapes]
    parts = flat.split(sizes, dim=1)
    return grad_feat, [part.reshape(shape) for part, shape in zip(parts, param_shapes, strict=True)]


def dsm_offsets(noisy: Tensor, labels: Tensor, sigma: float | Tensor) -> Tensor:
    """(y~ - y_i) / sigma^2 as ``ltr.ebm.losses.dsm_loss`` computes it: noisy (..., M, 1), labels (..., 1)."""
    sigma_t = torch.as_tensor(sigma, dtype=noisy.dtype, device=noisy.device)
    return (noisy - labels.unsqueeze(-2)) / sigma_t**2


def fused_dsm_loss(
    ens: Toy1DEnsemble,
    feat: Tensor,
    noisy: Tensor,
    labels: Tensor,
    sigma: float,
    *,
    runs: slice | None = None,
) -> Tensor:
    """Per-example DSM loss ``1/M sum_m (df/dy(x_i, y~_m) + (y~_m - y_i) / sigma^2)^2`` via the fused kernel.

    Equals ``ltr.ebm.losses.dsm_loss(g, noisy, labels, sigma, reduction="none")`` with g the y-gradient of
    ``ens.score_from_features(feat, noisy, runs=runs)``.

    Args:
        ens: the ensemble (CPU, float32).
        feat: (R, N, 10) from ``ens.x_features``.
        noisy: (R, N, M, 1) noisy copies y~ of the labels (data: no gradient flows to them).
        labels: (R, N, 1).
        sigma: the DSM noise std.
        runs: restrict to a slice of the members (as in ``score_from_features``).
    Returns:
        (R, N) losses, differentiable w.r.t. ``feat`` and the ensemble's parameters.
    """
    r, n, m, d = noisy.shape
    if d != 1 or labels.shape != (r, n, 1):
        raise ValueError(
            f"expected noisy (R, N, M, 1) and labels (R, N, 1), got {noisy.shape}, {labels.shape}"
        )
    off = dsm_offsets(noisy, labels, sigma).reshape(r, n, m).contiguous()
    y = noisy.reshape(r, n, m).contiguous()
    return _FusedDSM.apply(feat.contiguous(), y, off, *kernel_params(ens, runs))
