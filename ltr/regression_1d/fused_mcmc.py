"""A fused CPU kernel for ML-MCMC's Langevin chains on the 1D network: all L steps per block of candidates.

ML-MCMC (:class:`ltr.ebm.MLMCMC`) moves M candidates per example by L unadjusted Langevin steps
``y <- y + (a^2 / 2) df/dy + a eps``, starting at the label, and detaches the result. Through autograd every
step is a full forward and backward pass of the network (the backward also computing the parameter and
feature gradients that the chain never uses) over (R, N, M) tensors streamed through memory. This kernel
instead takes one block of candidates of one example at a time, keeps their y in registers/L1 and runs all L
steps on them: per step only f's y-derivative, computed in forward mode (each activation h carried with its
y-derivative h', as in :mod:`ltr.regression_1d.fused_dsm`): ``h0' = (1 - h0^2) w1``, ``u' = W^T h'_in``,
``h' = (1 - t^2) u' (+ h'_in)``, ``df/dy = w4 . h3'``. No f, no parameter gradients, nothing stored.

The random numbers are not drawn in the kernel: the caller passes the standard normals eps as an (L, R, N, S)
tensor (step-major, so that each step's draw is one contiguous PyTorch call and a block reads 64 contiguous
bytes per step), which keeps the kernel deterministic and testable. :func:`fused_langevin` draws them step by
step with the same ``torch.randn`` call per step as :class:`ltr.ebm.MLMCMC` does, so for the same generator
state both paths use the same eps; it bounds the noise buffer by running the steps in chunks.

Float32, with the prelude's ``fast_tanh`` (like every 1D kernel); tested against a float64 PyTorch
reference of the same recursion on ``Toy1DEnsemble.score_from_features``.
"""

from __future__ import annotations

import ctypes
import functools

import torch
from torch import Tensor

from ltr.models.toy1d import HIDDEN, Toy1DEnsemble
from ltr.regression_1d.fused import PRELUDE, check_input, compile_library, kernel_params, loads, ptr_array

#: Upper bound on the floats of the pre-drawn noise buffer (steps are run in chunks that fit in it): 64 MB.
NOISE_BUFFER_FLOATS = 1 << 24

_SOURCE = (
    PRELUDE
    + r"""
namespace {
// Lanes per chain block: 32 (two AVX-512 registers per activation row) amortises every weight load over
// more candidates than B = 16; the h and h' rows of all layers (8 x 10 x 32 floats) stay in L1.
constexpr int LN = 32;

// acc_j = bias_j + sum_i W[i][j] hin[i], accd_j = sum_i W[i][j] din[i]; then
// t = tanh(acc), hout = t (+ hin), dout = (1 - t^2) accd (+ din).
template <bool Residual>
inline void layer_tangent(const float (&W)[H][H], const float* bias, const float (&hin)[H][LN],
                          const float (&din)[H][LN], float (&hout)[H][LN], float (&dout)[H][LN]) {
  for (int j = 0; j < H; ++j) {
    float acc[LN], accd[LN];
#pragma omp simd
    for (int l = 0; l < LN; ++l) { acc[l] = bias[j]; accd[l] = 0.f; }
    for (int i = 0; i < H; ++i) {
      const float w = W[i][j];
#pragma omp simd
      for (int l = 0; l < LN; ++l) { acc[l] += w * hin[i][l]; accd[l] += w * din[i][l]; }
    }
#pragma omp simd
    for (int l = 0; l < LN; ++l) {
      const float t = fast_tanh(acc[l]);
      const float dt = (1.f - t * t) * accd[l];
      hout[j][l] = Residual ? t + hin[j][l] : t;
      dout[j][l] = Residual ? dt + din[j][l] : dt;
    }
  }
}

// g = df/dy for a block of LN candidates y.
inline void grad_y_block(const Params& p, const float* feat, const float* y, float* g) {
  float h0[H][LN], d0[H][LN], h1[H][LN], d1[H][LN], h2[H][LN], d2[H][LN], h3[H][LN], d3[H][LN];
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < LN; ++l) {
      const float h = fast_tanh(p.w1[j] * y[l] + p.b1[j]);
      h0[j][l] = h;
      d0[j][l] = (1.f - h * h) * p.w1[j];
    }
  }
  layer_tangent<false>(p.wy, feat, h0, d0, h1, d1);
  layer_tangent<true>(p.w2, p.b2, h1, d1, h2, d2);
  layer_tangent<true>(p.w3, p.b3, h2, d2, h3, d3);
#pragma omp simd
  for (int l = 0; l < LN; ++l) g[l] = 0.f;
  for (int j = 0; j < H; ++j) {
#pragma omp simd
    for (int l = 0; l < LN; ++l) g[l] += p.w4[j] * d3[j][l];
  }
}
}  // namespace

// L Langevin steps y <- y + c g(y) + a eps_l, g = df/dy, for every candidate y[r, n, s] (in place).
// noise: (L, R, N, S) standard normals, step-major. c = a^2 / 2 is passed in (the caller's rounding).
extern "C" void ltr_fused_langevin(int64_t R, int64_t N, int64_t S, int64_t L, const float* pf,
                                   const float* const* params, const float* noise, float c, float a,
                                   float* py) {
  const int64_t step_stride = R * N * S;
  for (int64_t r = 0; r < R; ++r) {
    const Params p = load(params[0], params[1], params[2], params[3], params[4], params[5], params[6],
                          params[7], params[8], r);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t rn = r * N + n;
      const float* feat_n = pf + rn * H;
      float* y_n = py + rn * S;
      for (int64_t s0 = 0; s0 < S; s0 += LN) {
        const int cnt = (int)std::min<int64_t>(LN, S - s0);
        float yb[LN], gb[LN], eb[LN];
        for (int l = 0; l < LN; ++l) yb[l] = l < cnt ? y_n[s0 + l] : 0.f;
        const float* e = noise + rn * S + s0;
        for (int64_t k = 0; k < L; ++k, e += step_stride) {
          grad_y_block(p, feat_n, yb, gb);
          if (cnt == LN) {
#pragma omp simd
            for (int l = 0; l < LN; ++l) eb[l] = e[l];
          } else {
            for (int l = 0; l < LN; ++l) eb[l] = l < cnt ? e[l] : 0.f;
          }
#pragma omp simd
          for (int l = 0; l < LN; ++l) yb[l] = (yb[l] + c * gb[l]) + a * eb[l];
        }
        for (int l = 0; l < cnt; ++l) y_n[s0 + l] = yb[l];
      }
    }
  }
}
"""
)


@functools.cache
def _library() -> ctypes.CDLL:
    lib = compile_library("toy1d_fused_mcmc", _SOURCE)
    i64, ptr, f32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
    lib.ltr_fused_langevin.argtypes = [i64, i64, i64, i64, ptr, ptr, ptr, f32, f32, ptr]
    lib.ltr_fused_langevin.restype = None
    return lib


@functools.cache
def available() -> bool:
    """Whether the Langevin kernel builds (or is cached) here."""
    return loads(_library)


def langevin_steps(
    ens: Toy1DEnsemble,
    feat: Tensor,
    y_start: Tensor,
    noise: Tensor,
    step_length: float,
    *,
    runs: slice | None = None,
) -> Tensor:
    """Run ``noise.shape[0]`` Langevin steps with the given standard normals (deterministic).

    ``y <- y + (a^2 / 2) df/dy(x, y) + a eps_l`` for l = 0 .. L-1, with f = ``ens.score_from_features``.

    Args:
        ens: the ensemble (CPU, float32).
        feat: (R, N, 10) from ``ens.x_features``.
        y_start: (R, N, S, 1) chain starts.
        noise: (L, R, N, S) standard normals eps, step l in ``noise[l]``.
        step_length: a.
        runs: restrict to a slice of the members (as in ``score_from_features``).
    Returns:
        (R, N, S, 1) the chains after L steps (a new tensor, no autograd graph).
    """
    r, n, s, d = y_start.shape
    if d != 1 or feat.shape != (r, n, HIDDEN) or noise.dim() != 4 or noise.shape[1:] != (r, n, s):
        raise ValueError(
            f"expected feat (R, N, {HIDDEN}), y_start (R, N, S, 1), noise (L, R, N, S); got "
            f"{tuple(feat.shape)}, {tuple(y_start.shape)}, {tuple(noise.shape)}"
        )
    with torch.no_grad():
        params = tuple(t.detach() for t in kernel_params(ens, runs))
        feat = feat.detach().contiguous()
        noise = noise.contiguous()
        y = y_start.detach().reshape(r, n, s).clone(memory_format=torch.contiguous_format)
        for i, t in enumerate((feat, y, noise, *params)):
            check_input(t, f"Langevin kernel input {i}")
        a = float(step_length)
        _library().ltr_fused_langevin(
            r,
            n,
            s,
            noise.shape[0],
            feat.data_ptr(),
            ptr_array(params),
            noise.data_ptr(),
            0.5 * a * a,
            a,
            y.data_ptr(),
        )
    return y.view(r, n, s, 1)


def fused_langevin(
    ens: Toy1DEnsemble,
    feat: Tensor,
    y_start: Tensor,
    *,
    num_steps: int,
    step_length: float,
    generator: torch.Generator | None,
    runs: slice | None = None,
) -> Tensor:
    """ML-MCMC's Langevin chains: ``num_steps`` steps from ``y_start``, noise drawn from ``generator``.

    Step l's standard normals are drawn by one ``torch.randn((R * N, S, 1), generator=generator)`` call, the
    call :class:`ltr.ebm.MLMCMC` makes per step for its (R * N) examples, and the steps draw in order, so for
    the same generator state the chains see exactly the eps that the autograd path sees (the draws are only
    batched: up to :data:`NOISE_BUFFER_FLOATS` of them are drawn ahead and run in one kernel call).

    Args:
        ens: the ensemble (CPU, float32).
        feat: (R, N, 10) from ``ens.x_features`` (only its values are used).
        y_start: (R, N, S, 1) chain starts (ML-MCMC: the label repeated M times).
        num_steps: L >= 0.
        step_length: a.
        generator: the sampling generator (None: PyTorch's global one).
        runs: restrict to a slice of the members (as in ``score_from_features``).
    Returns:
        (R, N, S, 1) detached samples.
    """
    if num_steps < 0:
        raise ValueError(f"num_steps must be >= 0, got {num_steps}")
    r, n, s, _ = y_start.shape
    y = y_start.detach()
    chunk = max(1, min(num_steps, NOISE_BUFFER_FLOATS // max(1, r * n * s)))
    buffer = torch.empty(chunk, r, n, s)
    for k0 in range(0, num_steps, chunk):
        k = min(chunk, num_steps - k0)
        for i in range(k):
            torch.randn((r * n, s, 1), generator=generator, out=buffer[i].view(r * n, s, 1))
        y = langevin_steps(ens, feat, y, buffer[:k], step_length, runs=runs)
    return y if num_steps > 0 else y.clone()
