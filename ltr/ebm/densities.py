"""Sampling densities for EBM training: equal-weight Gaussian mixtures centred at the labels.

All densities work on targets of any dimension D. Shapes used throughout:

- ``labels``: (N, D), one label per example.
- ``samples``: (N, M, D), M samples per example.
- log densities: (N, M).

The NCE+ density p_beta is the zero-centred mixture whose component widths are scaled by beta. The paper
(eq. 13) scales the *variance*: N(0, beta * sigma_k^2). The authors' public code scales the *standard
deviation*: N(0, (beta * sigma_k)^2). The published hyperparameters (beta = 0.025 in the 1D study, 0.1 for
detection and tracking) were tuned with the code, so ``beta_mode="std"`` is our default; pass
``beta_mode="variance"`` for the paper's formula.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

BetaMode = Literal["std", "variance"]


def _as_sigma_table(sigmas: Sequence[float] | Sequence[Sequence[float]] | Tensor, dim: int | None) -> Tensor:
    table = torch.as_tensor(sigmas, dtype=torch.float64)
    if table.ndim == 0:
        table = table.reshape(1, 1)
    elif table.ndim == 1:
        table = table.unsqueeze(1)
    if table.ndim != 2:
        raise ValueError(
            f"sigmas must be a list of K floats or a (K, D) table, got shape {tuple(table.shape)}"
        )
    if dim is not None and table.shape[1] not in (1, dim):
        raise ValueError(f"sigmas have {table.shape[1]} columns but the target dimension is {dim}")
    if (table <= 0).any():
        raise ValueError(f"every sigma must be positive, got {table.tolist()}")
    return table


class GaussianMixture:
    """Equal-weight mixture of K axis-aligned Gaussians centred at each label.

    q(y | y_i) = 1/K sum_k N(y; y_i + mean_offset, diag(sigma_k^2)), sigma_k given per component and
    optionally per dimension.

    Args:
        sigmas: K standard deviations (shared by all dimensions) or a (K, D) table of per-dimension ones.
    """

    def __init__(self, sigmas: Sequence[float] | Sequence[Sequence[float]] | Tensor) -> None:
        self._sigmas = _as_sigma_table(sigmas, None)

    @property
    def num_components(self) -> int:
        return self._sigmas.shape[0]

    def sigmas(
        self, dim: int, *, device: torch.device | None = None, dtype: torch.dtype | None = None
    ) -> Tensor:
        """(K, D) standard deviations, broadcast to target dimension ``dim``."""
        table = _as_sigma_table(self._sigmas, dim).expand(self.num_components, dim)
        return table.to(device=device, dtype=dtype or torch.get_default_dtype())

    def scaled(self, beta: float, *, mode: BetaMode = "std") -> GaussianMixture:
        """This mixture with each std scaled by beta (``mode="std"``) or sqrt(beta) (``"variance"``)."""
        if beta <= 0:
            raise ValueError(f"beta must be positive, got {beta}")
        if mode not in ("std", "variance"):
            raise ValueError(f"beta mode must be 'std' or 'variance', got {mode!r}")
        factor = beta if mode == "std" else math.sqrt(beta)
        return GaussianMixture(self._sigmas * factor)

    def sample_offsets(
        self,
        num_examples: int,
        num_samples: int,
        dim: int,
        *,
        shared: bool = False,
        generator: torch.Generator | None = None,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> Tensor:
        """Zero-centred draws, (N, M, D). Each draw picks a component uniformly at random.

        With ``shared=True`` one set of M offsets is drawn and used by every example (the 1D reference
        code's behaviour); the default draws independently per example.
        """
        n_draw = 1 if shared else num_examples
        sig = self.sigmas(dim, device=device, dtype=dtype)
        comp = torch.randint(self.num_components, (n_draw, num_samples), generator=generator, device="cpu")
        eps = torch.randn((n_draw, num_samples, dim), generator=generator, device="cpu")
        eps = eps.to(device=sig.device, dtype=sig.dtype)
        offsets = eps * sig[comp.to(sig.device)]
        if shared:
            offsets = offsets.expand(num_examples, num_samples, dim)
        return offsets

    def sample(
        self,
        labels: Tensor,
        num_samples: int,
        *,
        shared: bool = False,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Draw M samples around each label. labels (N, D) -> samples (N, M, D)."""
        n, d = labels.shape
        offsets = self.sample_offsets(
            n, num_samples, d, shared=shared, generator=generator, device=labels.device, dtype=labels.dtype
        )
        return labels.unsqueeze(1) + offsets

    def log_prob(self, samples: Tensor, labels: Tensor) -> Tensor:
        """log q(samples | labels): samples (N, M, D), labels (N, D) -> (N, M)."""
        return self.log_prob_offsets(samples - labels.unsqueeze(1))

    def log_prob_offsets(self, offsets: Tensor) -> Tensor:
        """Log density of zero-centred offsets (..., D) -> (...). Numerically stable (logsumexp over K)."""
        d = offsets.shape[-1]
        sig = self.sigmas(d, device=offsets.device, dtype=offsets.dtype)  # (K, D)
        z = offsets.unsqueeze(-2) / sig  # (..., K, D)
        log_comp = -0.5 * (z * z).sum(-1) - torch.log(sig).sum(-1) - 0.5 * d * math.log(2 * math.pi)
        return torch.logsumexp(log_comp, dim=-1) - math.log(self.num_components)
