"""The seven EBM training methods as objectives: draw samples, evaluate f, return the loss.

A method is called with a *score function* and the labels::

    score_fn(candidates: Tensor (N, S, D)) -> Tensor (N, S)   # f(x_i, y) for S candidate y per example

The score function must treat examples independently (no batch statistics across examples) and, for
``sm``, ``dsm`` and ``ml_mcmc``, be differentiable w.r.t. the candidates. Every method evaluates all
candidates of a batch in one call (label first, then the samples), so a network computes its x-features
once per example.

Sample counts: ``num_samples`` is M in the paper's equations: M proposal samples for ML-IS/KLD-IS, M noise
samples (plus the positive, M + 1 candidates) for NCE/NCE+, M Langevin chains for ML-MCMC, M noisy copies
for DSM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ltr.admin.registry import Registry
from ltr.ebm import losses
from ltr.ebm.densities import BetaMode, GaussianMixture

ScoreFn = Callable[[Tensor], Tensor]


class LossResult(NamedTuple):
    """loss: scalar (``reduction="mean"``) or (N,); stats: detached scalars for logging."""

    loss: Tensor
    stats: dict[str, Tensor]


def _stats(score_pos: Tensor, score_other: Tensor) -> dict[str, Tensor]:
    pos = score_pos.detach().mean()
    other = score_other.detach().mean()
    return {"score_pos": pos, "score_samples": other, "score_gap": pos - other}


def _score_with_label(score_fn: ScoreFn, labels: Tensor, samples: Tensor) -> tuple[Tensor, Tensor]:
    """f at the label (N,) and at the samples (N, M), in one call."""
    scores = score_fn(torch.cat([labels.unsqueeze(1), samples], dim=1))
    return scores[:, 0], scores[:, 1:]


def _grad_y(score_fn: ScoreFn, y: Tensor, *, create_graph: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(y with grad, f(y), df/dy) for candidates y (N, S, D)."""
    y = y.detach().requires_grad_(True)
    f = score_fn(y)
    (g,) = torch.autograd.grad(f.sum(), y, create_graph=create_graph)
    return y, f, g


class Candidates(NamedTuple):
    """Pre-drawn candidates for the sampling methods (ML-IS, KLD-IS, NCE, NCE+).

    y: (N, S, D) candidate targets; log_q: (N, S) their proposal/noise log density; log_p: (N, S) the
    label-noise log density (KLD-IS only). Which column means what is the method's business: ML-IS and NCE
    put the label/positive in column 0.
    """

    y: Tensor
    log_q: Tensor
    log_p: Tensor | None = None


class _SamplingMethod:
    """Shared shape of the methods that only need f at drawn candidates.

    ``sample`` draws candidates (so a data loader can do it in worker processes), ``loss_from_scores`` turns
    f at those candidates into the loss; calling the method does both around one score-function call.
    """

    def sample(self, labels: Tensor, *, generator: torch.Generator | None = None) -> Candidates:
        raise NotImplementedError

    def loss_from_scores(self, scores: Tensor, candidates: Candidates, *, reduction="mean") -> LossResult:
        raise NotImplementedError

    def __call__(
        self, score_fn: ScoreFn, labels: Tensor, *, generator: torch.Generator | None = None, reduction="mean"
    ) -> LossResult:
        candidates = self.sample(labels, generator=generator)
        return self.loss_from_scores(score_fn(candidates.y), candidates, reduction=reduction)


@dataclass
class MLIS(_SamplingMethod):
    """ML with importance sampling. Proposal: Gaussian mixture with ``sigmas`` centred at the label.

    Candidates: column 0 the label, columns 1..M the proposal samples.
    """

    sigmas: Sequence[float] | Sequence[Sequence[float]] = (0.2, 1.6)
    num_samples: int = 1024
    shared_samples: bool = False

    def sample(self, labels: Tensor, *, generator: torch.Generator | None = None) -> Candidates:
        q = GaussianMixture(self.sigmas)
        samples = q.sample(labels, self.num_samples, shared=self.shared_samples, generator=generator)
        y = torch.cat([labels.unsqueeze(1), samples], dim=1)
        return Candidates(y, q.log_prob(y, labels))

    def loss_from_scores(self, scores: Tensor, candidates: Candidates, *, reduction="mean") -> LossResult:
        s0, s = scores[:, 0], scores[:, 1:]
        loss = losses.ml_is_loss(s0, s, candidates.log_q[:, 1:], reduction=reduction)
        return LossResult(loss, _stats(s0, s))


@dataclass
class KLDIS(_SamplingMethod):
    """KL divergence with importance sampling; label-noise density N(y_i, label_sigma^2 I).

    Candidates: the M proposal samples, with log q and log p.
    """

    sigmas: Sequence[float] | Sequence[Sequence[float]] = (0.2, 1.6)
    label_sigma: float | Sequence[float] = 0.025
    num_samples: int = 1024
    shared_samples: bool = False

    def sample(self, labels: Tensor, *, generator: torch.Generator | None = None) -> Candidates:
        q = GaussianMixture(self.sigmas)
        p = GaussianMixture([self.label_sigma])
        y = q.sample(labels, self.num_samples, shared=self.shared_samples, generator=generator)
        return Candidates(y, q.log_prob(y, labels), p.log_prob(y, labels))

    def loss_from_scores(self, scores: Tensor, candidates: Candidates, *, reduction="mean") -> LossResult:
        loss = losses.kld_is_loss(scores, candidates.log_q, candidates.log_p, reduction=reduction)
        return LossResult(loss, {"score_samples": scores.detach().mean()})


@dataclass
class NCE(_SamplingMethod):
    """Ranking NCE: discriminate the label from M noise samples of a Gaussian mixture around it.

    Candidates: column 0 the positive, columns 1..M the noise samples; log q of every candidate under the
    (unscaled) noise mixture.
    """

    sigmas: Sequence[float] | Sequence[Sequence[float]] = (0.1, 0.8)
    num_samples: int = 1024
    shared_samples: bool = False

    def _positive(self, labels: Tensor, noise: GaussianMixture, generator: torch.Generator | None) -> Tensor:
        return labels

    def sample(self, labels: Tensor, *, generator: torch.Generator | None = None) -> Candidates:
        q = GaussianMixture(self.sigmas)
        samples = q.sample(labels, self.num_samples, shared=self.shared_samples, generator=generator)
        positive = self._positive(labels, q, generator)
        y = torch.cat([positive.unsqueeze(1), samples], dim=1)
        return Candidates(y, q.log_prob(y, labels))

    def loss_from_scores(self, scores: Tensor, candidates: Candidates, *, reduction="mean") -> LossResult:
        loss = losses.nce_loss(scores, candidates.log_q, reduction=reduction)
        return LossResult(loss, _stats(scores[:, 0], scores[:, 1:]))


@dataclass
class NCEPlus(NCE):
    """NCE+: as NCE, but the positive is y_i + nu, nu ~ p_beta (the noise mixture scaled by beta).

    ``beta_mode="std"`` scales the component stds by beta (the authors' code, our default); ``"variance"``
    scales the variances (the paper's eq. 13). The noise samples are drawn before nu, so with the same
    generator state NCE+ and NCE see the same noise samples.
    """

    beta: float = 0.025
    beta_mode: BetaMode = "std"

    def _positive(self, labels: Tensor, noise: GaussianMixture, generator: torch.Generator | None) -> Tensor:
        p_beta = noise.scaled(self.beta, mode=self.beta_mode)
        n, d = labels.shape
        nu = p_beta.sample_offsets(
            n, 1, d, shared=self.shared_samples, generator=generator, device=labels.device, dtype=labels.dtype
        )
        return labels + nu[:, 0]


@dataclass
class MLMCMC:
    """ML with MCMC: M unadjusted Langevin chains of L steps, started at the label, step length alpha.

    y <- y + alpha^2/2 df/dy + alpha eps. The samples are detached (no second-order graph).
    """

    num_steps: int = 1
    step_length: float = 0.05
    num_samples: int = 1024

    def __call__(
        self, score_fn: ScoreFn, labels: Tensor, *, generator: torch.Generator | None = None, reduction="mean"
    ) -> LossResult:
        n, d = labels.shape
        y = labels.detach().unsqueeze(1).expand(n, self.num_samples, d).contiguous()
        a = self.step_length
        for _ in range(self.num_steps):
            y, _, g = _grad_y(score_fn, y, create_graph=False)
            eps = torch.randn(y.shape, generator=generator, device="cpu").to(y)
            y = (y + 0.5 * a * a * g + a * eps).detach()
        s0, s = _score_with_label(score_fn, labels, y)
        loss = losses.ml_mcmc_loss(s0, s, reduction=reduction)
        return LossResult(loss, _stats(s0, s))


@dataclass
class SM:
    """Score matching with the exact Hessian diagonal (one extra autograd pass per target dimension)."""

    def __call__(
        self, score_fn: ScoreFn, labels: Tensor, *, generator: torch.Generator | None = None, reduction="mean"
    ) -> LossResult:
        y, f, g = _grad_y(score_fn, labels.unsqueeze(1), create_graph=True)  # g: (N, 1, D)
        hess = []
        for k in range(labels.shape[1]):
            (h,) = torch.autograd.grad(g[..., k].sum(), y, create_graph=True)
            hess.append(h[..., k])
        hess_diag = torch.stack(hess, dim=-1)[:, 0]
        loss = losses.sm_loss(g[:, 0], hess_diag, reduction=reduction)
        return LossResult(loss, {"score_pos": f.detach().mean(), "grad_norm": g.detach().norm(dim=-1).mean()})


@dataclass
class DSM:
    """Denoising score matching with M noisy copies y~ ~ N(y_i, sigma^2 I) of each label."""

    sigma: float = 0.2
    num_samples: int = 1024
    shared_samples: bool = False

    def __call__(
        self, score_fn: ScoreFn, labels: Tensor, *, generator: torch.Generator | None = None, reduction="mean"
    ) -> LossResult:
        noise = GaussianMixture([self.sigma])
        noisy = noise.sample(labels, self.num_samples, shared=self.shared_samples, generator=generator)
        _, f, g = _grad_y(score_fn, noisy, create_graph=True)
        loss = losses.dsm_loss(g, noisy, labels, self.sigma, reduction=reduction)
        return LossResult(
            loss, {"score_samples": f.detach().mean(), "grad_norm": g.detach().norm(dim=-1).mean()}
        )


#: method name (the configs' ``method`` / ``box_method``) -> its dataclass.
METHODS: Registry[type] = Registry(
    "EBM training method",
    {
        "ml_is": MLIS,
        "kld_is": KLDIS,
        "ml_mcmc": MLMCMC,
        "nce": NCE,
        "sm": SM,
        "dsm": DSM,
        "nce_plus": NCEPlus,
    },
)


def build_method(name: str, **kwargs) -> Callable[..., LossResult]:
    """The method object for ``name`` (one of :data:`METHODS`) with its hyperparameters as keyword args.

    Raises :class:`ltr.admin.registry.UnknownName` (a ValueError) for an unknown name and ValueError for an
    unknown hyperparameter."""
    cls = METHODS[name]
    known = set(cls.__dataclass_fields__)
    unknown = set(kwargs) - known
    if unknown:
        raise ValueError(
            f"method {name!r} has no hyperparameter(s) {sorted(unknown)}; known: {sorted(known)}"
        )
    return cls(**kwargs)


__all__ = [
    "DSM",
    "Candidates",
    "KLDIS",
    "METHODS",
    "MLIS",
    "MLMCMC",
    "NCE",
    "SM",
    "LossResult",
    "NCEPlus",
    "build_method",
]
