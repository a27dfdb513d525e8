"""A fused CPU kernel for the losses of the 1D sampling methods (ML-IS, KLD-IS, NCE, NCE+) given the scores.

Why: with :mod:`ltr.regression_1d.fused` evaluating the network, about half of an ensemble step of these
methods was the PyTorch code around it: the Gaussian-mixture log density of every candidate (a logsumexp
over K = 2 components, i.e. a reduction over a size-2 axis, plus the broadcasts around it), the loss's
logsumexp over the M candidates and the backward of both -- some 30 passes over (N, S) tensors. This kernel
does all of it in one pass per example row: for candidate offsets o = y - y_i (1D) it computes

    log q(o) = log(1/K sum_k N(o; 0, sigma_k^2))                          (the proposal / noise mixture)
    loss_i   = log sum_{j >= start} exp(s_ij - log q_ij) - c - lin_i

with ``lin_i = s_i0`` (ML-IS: column 0 is the label, the sum runs over the M samples, c = log M),
``lin_i = s_i0 - log q_i0`` (NCE, NCE+: column 0 is the positive, c = 0) or
``lin_i = 1/M sum_j s_ij p_ij / q_ij`` with p = N(0, label_sigma^2) (KLD-IS, c = log M), exactly the losses of
:mod:`ltr.ebm.losses`, and the loss's gradient w.r.t. the scores (softmax weights minus the linear term's
coefficients), which the backward only scales. The samples are drawn by the :mod:`ltr.ebm` code itself
(:meth:`ltr.ebm.densities.GaussianMixture.sample_offsets`, the same calls in the same order as the methods'
``sample``), so for the same generator state this path sees the same candidates as the PyTorch one.

exp and log are vectorisable polynomial approximations (Cephes' expf / logf, ~1 ulp). Softmax and importance
weights whose exponent is below -80 (< 2e-35) are set to zero, so no subnormal numbers (slow on x86) arise.
"""

from __future__ import annotations

import ctypes
import functools
import math

import torch
from torch import Tensor

from ltr.regression_1d.fused import check_input, compile_library, loads

#: Most mixture components the kernel handles (the 1D study uses 2).
MAX_COMPONENTS = 8

#: Linear-term modes of the kernel.
LABEL, POSITIVE, KLD = 0, 1, 2

_SOURCE = r"""
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {
constexpr int KMAX = 8;

// Cephes expf: range reduction to r in [-ln2/2, ln2/2], degree-5 polynomial, 2^n via the exponent bits.
inline float fast_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

// Cephes logf for positive normal x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), polynomial in m - 1.
inline float fast_log(float x) {
  int32_t bits;
  std::memcpy(&bits, &x, 4);
  int32_t e = ((bits >> 23) & 0xff) - 126;
  bits = (bits & 0x807fffff) | 0x3f000000;
  float m;
  std::memcpy(&m, &bits, 4);  // in [0.5, 1)
  const bool small = m < 0.707106781186547524f;
  e -= small ? 1 : 0;
  m = small ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  const float fe = (float)e;
  y += fe * -2.12194440e-4f;
  y -= 0.5f * z;
  return m + y + fe * 0.693359375f;
}

// log of the equal-weight mixture at n offsets: logsumexp_k(a_k o^2 + c_k), a_k = -1/(2 sigma_k^2),
// c_k = -log sigma_k - log(2 pi)/2 - log K. Loops over the offsets innermost (vectorised); tmp: n floats.
inline void mixture_log_prob(int64_t n, const float* o, int K, const float* a, const float* c, float* out,
                             float* tmp) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] = a[0] * o[j] * o[j] + c[0];
  for (int k = 1; k < K; ++k) {
    const float ak = a[k], ck = c[k];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float l = ak * o[j] * o[j] + ck;
      out[j] = l > out[j] ? l : out[j];
    }
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) tmp[j] = 0.f;
  for (int k = 0; k < K; ++k) {
    const float ak = a[k], ck = c[k];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) tmp[j] += fast_exp(ak * o[j] * o[j] + ck - out[j]);
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] += fast_log(tmp[j]);
}
}  // namespace

extern "C" void ltr_mixture_log_prob(int64_t n, const float* off, int64_t K, const float* a, const float* c,
                                     float* out, float* tmp) {
  mixture_log_prob(n, off, (int)K, a, c, out, tmp);
}

// Candidates of N examples from the mixture draws: column 0 (if first_cols == 1) has offset first[i] (or 0
// when first is null), columns first_cols.. have offset eps * sigma[comp]; off and cand (N, S) get the
// offsets and label + offset. comp / eps: (N, M), or one shared row when row_stride == 0. Returns the number
// of component indices outside [0, K) (those are clamped, so memory is never read out of bounds).
extern "C" int64_t ltr_assemble_candidates(int64_t N, int64_t M, int64_t first_cols, const float* first,
                                           const int64_t* comp, const float* eps, int64_t row_stride,
                                           const float* sig, int64_t K, const float* labels, float* off,
                                           float* cand) {
  const int64_t S = first_cols + M;
  int64_t bad = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int64_t* c = comp + i * row_stride;
    const float* e = eps + i * row_stride;
    float* o = off + i * S;
    float* y = cand + i * S;
    const float label = labels[i];
    if (first_cols == 1) {
      o[0] = first != nullptr ? first[i] : 0.f;
      y[0] = label + o[0];
    }
    o += first_cols;
    y += first_cols;
#pragma omp simd reduction(+ : bad)
    for (int64_t j = 0; j < M; ++j) {
      const int64_t k = c[j] < 0 ? 0 : (c[j] >= K ? K - 1 : c[j]);
      bad += k != c[j] ? 1 : 0;
      o[j] = e[j] * sig[k];
      y[j] = label + o[j];
    }
  }
  return bad;
}

// scores, off: (N, S); loss: (N,); grad: (N, S) = dloss_i / ds_ij. mode 0: lin = s_0; 1: lin = s_0 - log q_0;
// 2: lin = 1/M sum_j s_j exp(log p_j - log q_j), log p_j = pa o_j^2 + pc. work: 2 S floats of scratch.
extern "C" void ltr_is_loss(int64_t N, int64_t S, int64_t start, int64_t mode, const float* scores,
                            const float* off, int64_t K, const float* a, const float* c, float pa, float pc,
                            float loss_offset, float* loss, float* grad, float* work) {
  const float log_m = std::log((float)(S - start));
  for (int64_t i = 0; i < N; ++i) {
    const float* s = scores + i * S;
    const float* o = off + i * S;
    float* g = grad + i * S;
    mixture_log_prob(S, o, (int)K, a, c, work, work + S);  // log q
#pragma omp simd
    for (int64_t j = 0; j < S; ++j) work[j] = s[j] - work[j];  // logits s - log q
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = start; j < S; ++j) mx = work[j] > mx ? work[j] : mx;
    float sum = 0.f;
    for (int64_t j = 0; j < start; ++j) g[j] = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = start; j < S; ++j) {
      const float d = work[j] - mx;
      const float e = d < -80.f ? 0.f : fast_exp(d);  // exact zero instead of a subnormal-prone tiny value
      g[j] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = start; j < S; ++j) g[j] *= inv;
    float lin = 0.f;
    if (mode == 2) {
#pragma omp simd reduction(+ : lin)
      for (int64_t j = 0; j < S; ++j) {
        const float lq = s[j] - work[j];
        const float d = pa * o[j] * o[j] + pc - lq - log_m;
        const float w = d < -80.f ? 0.f : fast_exp(d);  // p/q/M; zero, not subnormal, far in the tails
        lin += s[j] * w;
        g[j] -= w;
      }
    } else {
      lin = mode == 1 ? work[0] : s[0];
      g[0] -= 1.0f;
    }
    loss[i] = mx + std::log(sum) - loss_offset - lin;
  }
}
"""


@functools.cache
def _library() -> ctypes.CDLL:
    lib = compile_library("toy1d_fused_is", _SOURCE)
    i64, ptr, f32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
    lib.ltr_mixture_log_prob.argtypes = [i64, ptr, i64, ptr, ptr, ptr, ptr]
    lib.ltr_mixture_log_prob.restype = None
    lib.ltr_is_loss.argtypes = [i64, i64, i64, i64, ptr, ptr, i64, ptr, ptr, f32, f32, f32, ptr, ptr, ptr]
    lib.ltr_is_loss.restype = None
    lib.ltr_assemble_candidates.argtypes = [i64, i64, i64, ptr, ptr, ptr, i64, ptr, i64, ptr, ptr, ptr]
    lib.ltr_assemble_candidates.restype = i64
    return lib


@functools.cache
def available() -> bool:
    """Whether the kernel builds (or is cached) here."""
    return loads(_library)


def mixture_coefficients(sigmas: Tensor) -> tuple[Tensor, Tensor]:
    """(K,) float32 a_k = -1/(2 sigma_k^2) and c_k = -log sigma_k - log(2 pi)/2 - log K for K 1D sigmas."""
    sig = sigmas.reshape(-1).to(torch.float64)
    k = sig.numel()
    if not 1 <= k <= MAX_COMPONENTS:
        raise ValueError(f"the fused mixture handles 1..{MAX_COMPONENTS} components, got {k}")
    a = -0.5 / sig**2
    c = -torch.log(sig) - 0.5 * math.log(2 * math.pi) - math.log(k)
    return a.float().contiguous(), c.float().contiguous()


def mixture_log_prob(offsets: Tensor, sigmas: Tensor) -> Tensor:
    """log q of zero-centred 1D offsets under the equal-weight mixture of ``sigmas`` (K,): any shape -> same.

    Same function as ``GaussianMixture(sigmas).log_prob_offsets(offsets.unsqueeze(-1))`` (float32).
    """
    check_input(offsets, "offsets")
    a, c = mixture_coefficients(sigmas)
    out, tmp = torch.empty_like(offsets), torch.empty_like(offsets)
    _library().ltr_mixture_log_prob(
        offsets.numel(),
        offsets.data_ptr(),
        a.numel(),
        a.data_ptr(),
        c.data_ptr(),
        out.data_ptr(),
        tmp.data_ptr(),
    )
    return out


def assemble_candidates(
    labels: Tensor, comp: Tensor, eps: Tensor, sigmas: Tensor, *, first: Tensor | None, first_column: bool
) -> tuple[Tensor, Tensor]:
    """Offsets and candidates (N, S) from mixture draws: ``eps * sigmas[comp]`` around each label.

    Args:
        labels: (N,) 1D labels.
        comp, eps: (N, M) component indices (int64) and standard-normal draws, or (1, M) shared by all
            examples -- what :meth:`ltr.ebm.densities.GaussianMixture.sample_offsets` draws.
        sigmas: (K,) the mixture's standard deviations.
        first: (N,) offsets of an extra column 0 (the NCE+ positive), or None for offset 0 there.
        first_column: whether S = 1 + M (column 0 the label / positive) or S = M.
    Returns:
        offsets (N, S), candidates = label + offsets (N, S).
    """
    n, m = labels.shape[0], comp.shape[1]
    if comp.shape != eps.shape or comp.shape[0] not in (1, n) or comp.dtype != torch.int64:
        raise ValueError(f"comp (int64) and eps must both be (N, M) or (1, M), got {comp.shape}, {eps.shape}")
    sig = sigmas.reshape(-1).to(torch.float32).contiguous()
    tensors = [labels.contiguous(), eps.contiguous()] + ([first.contiguous()] if first is not None else [])
    for i, t in enumerate(tensors):
        check_input(t, f"candidate input {i}")
    comp = comp.contiguous()
    s = m + int(first_column)
    off, cand = torch.empty(n, s), torch.empty(n, s)
    bad = _library().ltr_assemble_candidates(
        n,
        m,
        int(first_column),
        tensors[2].data_ptr() if first is not None else None,
        comp.data_ptr(),
        tensors[1].data_ptr(),
        m if comp.shape[0] == n else 0,
        sig.data_ptr(),
        sig.numel(),
        tensors[0].data_ptr(),
        off.data_ptr(),
        cand.data_ptr(),
    )
    if bad:
        raise ValueError(f"{bad} component indices outside [0, {sig.numel()})")
    return off, cand


class _ISLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, offsets, start, mode, sigmas, label_sigma):
        check_input(scores, "scores")
        check_input(offsets, "offsets")
        n, s = scores.shape
        a, c = mixture_coefficients(sigmas)
        if mode == KLD:
            pa, pc = -0.5 / label_sigma**2, -math.log(label_sigma) - 0.5 * math.log(2 * math.pi)
        else:
            pa = pc = 0.0
        loss_offset = 0.0 if mode == POSITIVE else math.log(s - start)
        loss = torch.empty(n)
        grad = torch.empty(n, s)
        work = torch.empty(2 * s)
        _library().ltr_is_loss(
            n,
            s,
            start,
            mode,
            scores.data_ptr(),
            offsets.data_ptr(),
            a.numel(),
            a.data_ptr(),
            c.data_ptr(),
            pa,
            pc,
            loss_offset,
            loss.data_ptr(),
            grad.data_ptr(),
            work.data_ptr(),
        )
        ctx.save_for_backward(grad)
        return loss

    @staticmethod
    def backward(ctx, g):
        (grad,) = ctx.saved_tensors
        return grad * g.unsqueeze(1), None, None, None, None, None


def is_loss(
    scores: Tensor,
    offsets: Tensor,
    sigmas: Tensor,
    *,
    mode: int,
    start: int = 0,
    label_sigma: float = 1.0,
) -> Tensor:
    """Per-example loss (N,) of a sampling method from the scores of its candidates; differentiable in scores.

    Args:
        scores: (N, S) f at the candidates (float32, CPU).
        offsets: (N, S) candidate minus label (1D), float32.
        sigmas: (K,) the proposal / noise mixture's standard deviations.
        mode: :data:`LABEL` (ML-IS: column 0 the label, the partition sum over columns ``start``..),
            :data:`POSITIVE` (NCE / NCE+: column 0 the positive) or :data:`KLD` (KLD-IS, with ``label_sigma``).
        start: first column of the partition sum (1 for ML-IS, else 0).
    """
    if scores.shape != offsets.shape or scores.ndim != 2:
        raise ValueError(f"scores and offsets must both be (N, S), got {scores.shape} and {offsets.shape}")
    return _ISLoss.apply(scores.contiguous(), offsets.contiguous(), start, mode, sigmas, float(label_sigma))
