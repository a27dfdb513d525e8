"""Train R independent 1D-regression models at once (an ensemble with stacked weights).

Every member has its own initial weights, its own data shuffling, its own samples and (in effect) its own
Adam state: the per-member losses are summed, so the gradient w.r.t. member r's weights is that of member r's
loss alone, and Adam is elementwise, so one Adam over the stacked weights equals R independent Adams.

The losses and samplers are those of :mod:`ltr.ebm`: the R x B examples of a step are handed to the method
as one batch of R*B independent examples, with a score function that routes example (r, i) to member r.

Sample draws. ``shared_samples=False`` (default) draws every example's M proposal/noise samples (and the
NCE+ perturbation) independently. ``shared_samples=True`` reproduces the reference code, which draws one
set of M offsets per batch and shares it by all examples of the batch; here each member draws its own set.
Per-example draws are the default because they are the estimator the paper writes down (M samples from
q(y | y_i) for each i) and give every batch B times more distinct sample positions at no extra cost, i.e. a
less noisy estimate of each example's normaliser. Both estimators are unbiased in the same way, so the
converged models should agree; we did not have the CPU time to run the full study in both modes (see
docs/study_1d.md), and the mode is recorded in every result file (``config.shared_samples``).

Seeds: member r's initial weights come from ``generator(seed, r, "init")`` and its shuffling from
``generator(seed, r, "shuffle")`` (so member r of any ensemble starts like ``Toy1DNet`` run with the same
seed and run index); the ensemble's samples come from ``generator(seed, first_run, num_runs, "sample")``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ltr.ebm import DSM, KLDIS, MLIS, MLMCMC, NCE, SM, Candidates, NCEPlus, ml_mcmc_loss
from ltr.ebm.densities import GaussianMixture
from ltr.models.toy1d import Toy1DEnsemble
from ltr.regression_1d.config import Regression1DConfig
from ltr.regression_1d.data import generate, generator


def _cat_candidates(parts: list[Candidates]) -> Candidates:
    log_p = None if parts[0].log_p is None else torch.cat([c.log_p for c in parts], 0)
    return Candidates(torch.cat([c.y for c in parts], 0), torch.cat([c.log_q for c in parts], 0), log_p)


def ensemble_loss(
    ens: Toy1DEnsemble,
    method,
    x: Tensor,
    y: Tensor,
    *,
    generator: torch.Generator | None,
    shared_samples: bool = False,
    runs: slice | None = None,
    fused: bool = False,
) -> Tensor:
    """Per-member mean loss of one batch, (R,).

    Args:
        ens: the ensemble.
        method: an :mod:`ltr.ebm` method object (``ltr.ebm.build_method``).
        x, y: (R, B, 1) member r's batch in row r.
        generator: sampling generator.
        shared_samples: one set of offsets per member and batch (sampling methods only).
        runs: restrict to a slice of the members (x, y then hold only those rows).
        fused: evaluate the per-candidate layers with :mod:`ltr.regression_1d.fused` (CPU; first derivatives
            only) and, for ML-IS, KLD-IS, NCE and NCE+, the loss from the scores with
            :mod:`ltr.regression_1d.fused_is`; or for ``dsm`` / ``sm`` the whole loss with
            :mod:`ltr.regression_1d.fused_dsm` / :mod:`ltr.regression_1d.fused_sm`; for ML-MCMC the
            Langevin chains with :mod:`ltr.regression_1d.fused_mcmc` (same eps draws as the PyTorch path).
    """
    r, b, _ = x.shape
    feat = ens.x_features(x, runs=runs)
    if fused and isinstance(method, DSM):
        return _fused_dsm_loss(ens, method, feat, y, generator=generator, runs=runs)
    if fused and isinstance(method, SM):
        from ltr.regression_1d.fused_sm import fused_sm_loss

        return fused_sm_loss(ens, feat, y, runs=runs).mean(1)
    if fused and isinstance(method, MLMCMC):
        return _fused_mcmc_loss(ens, method, feat, y, generator=generator, runs=runs)
    if fused and isinstance(method, (MLIS, KLDIS, NCE)) and _fused_is_applies(method):
        return _fused_sampling_loss(
            ens, method, feat, y, generator=generator, shared=shared_samples, runs=runs
        )

    if fused:
        from ltr.regression_1d.fused import fused_score

        score = functools.partial(fused_score, ens)
    else:
        score = ens.score_from_features

    def score_fn(candidates: Tensor) -> Tensor:  # (R*B, S, 1) -> (R*B, S)
        s = candidates.shape[1]
        return score(feat, candidates.view(r, b, s, 1), runs=runs).reshape(r * b, s)

    labels = y.reshape(r * b, 1)
    if hasattr(method, "sample"):
        if shared_samples:
            cands = _cat_candidates([method.sample(y[k], generator=generator) for k in range(r)])
        else:
            cands = method.sample(labels, generator=generator)
        result = method.loss_from_scores(score_fn(cands.y), cands, reduction="none")
    else:
        result = method(score_fn, labels, generator=generator, reduction="none")
    return result.loss.view(r, b).mean(1)


def _fused_is_applies(method: MLIS | KLDIS | NCE) -> bool:
    """Whether :mod:`ltr.regression_1d.fused_is` handles this method's densities (1D, few components)."""
    from ltr.regression_1d import fused_is

    sigmas = GaussianMixture(method.sigmas).sigmas(1)
    label_ok = not isinstance(method, KLDIS) or torch.as_tensor(method.label_sigma).numel() == 1
    return sigmas.shape[0] <= fused_is.MAX_COMPONENTS and label_ok and fused_is.available()


def _draw_candidates(
    method: MLIS | KLDIS | NCE, labels: Tensor, shared: bool, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """Offsets from the label and candidates, both (N, S), for labels (N,).

    The random numbers are those of ``method.sample``, drawn by the same calls in the same order
    (:meth:`GaussianMixture.sample_offsets`: component indices, then standard normals; for NCE+ then the
    positive's p_beta offset); :func:`ltr.regression_1d.fused_is.assemble_candidates` turns them into
    candidates in one pass. ML-IS / NCE: column 0 is the label (offset 0); NCE+: column 0 is the positive;
    KLD-IS: the M samples only.
    """
    from ltr.regression_1d import fused_is

    q = GaussianMixture(method.sigmas)
    n_draw = 1 if shared else labels.shape[0]
    comp = torch.randint(q.num_components, (n_draw, method.num_samples), generator=generator)
    eps = torch.randn((n_draw, method.num_samples), generator=generator)
    first = None
    if isinstance(method, NCEPlus):
        p_beta = q.scaled(method.beta, mode=method.beta_mode)
        first = p_beta.sample_offsets(labels.shape[0], 1, 1, shared=shared, generator=generator).reshape(-1)
    return fused_is.assemble_candidates(
        labels, comp, eps, q.sigmas(1), first=first, first_column=not isinstance(method, KLDIS)
    )


def _fused_sampling_loss(
    ens: Toy1DEnsemble,
    method: MLIS | KLDIS | NCE,
    feat: Tensor,
    y: Tensor,
    *,
    generator: torch.Generator | None,
    shared: bool,
    runs: slice | None,
) -> Tensor:
    """Per-member mean loss (R,) of ML-IS, KLD-IS, NCE or NCE+ with the fused score and loss kernels.

    feat (R, B, 10), y (R, B, 1). The candidates are the ones ``method.sample`` draws (same generator calls,
    per member when ``shared``, with ``method.shared_samples``, as the PyTorch path does); f at them comes from :mod:`.fused`, the loss
    (proposal log density, logsumexp, linear term) and its score gradient from :mod:`.fused_is`.
    """
    from ltr.regression_1d import fused_is
    from ltr.regression_1d.fused import fused_score

    r, b, _ = y.shape
    if shared:  # one draw per member, as ``_cat_candidates`` of per-member ``method.sample`` calls
        parts = [_draw_candidates(method, y[k, :, 0], method.shared_samples, generator) for k in range(r)]
        offsets, cands = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    else:
        offsets, cands = _draw_candidates(method, y.reshape(r * b), method.shared_samples, generator)
    s = offsets.shape[1]
    scores = fused_score(ens, feat, cands.view(r, b, s, 1), runs=runs).view(r * b, s)
    sigmas = GaussianMixture(method.sigmas).sigmas(1).reshape(-1)
    if isinstance(method, KLDIS):
        label_sigma = float(torch.as_tensor(method.label_sigma).reshape(-1)[0])
        loss = fused_is.is_loss(scores, offsets, sigmas, mode=fused_is.KLD, label_sigma=label_sigma)
    elif isinstance(method, NCE):
        loss = fused_is.is_loss(scores, offsets, sigmas, mode=fused_is.POSITIVE)
    else:
        loss = fused_is.is_loss(scores, offsets, sigmas, mode=fused_is.LABEL, start=1)
    return loss.view(r, b).mean(1)


def _fused_dsm_loss(
    ens: Toy1DEnsemble,
    method: DSM,
    feat: Tensor,
    y: Tensor,
    *,
    generator: torch.Generator | None,
    runs: slice | None,
) -> Tensor:
    """Per-member mean DSM loss (R,) with the fused DSM kernel; feat (R, B, 10), y (R, B, 1).

    The noise is drawn as :class:`ltr.ebm.DSM` draws it (the same call, so for the same members and generator
    state both paths see the same samples); the loss is ``ltr.ebm.losses.dsm_loss`` of the y-gradient,
    computed in the kernel.
    """
    from ltr.regression_1d.fused_dsm import fused_dsm_loss

    r, b, _ = y.shape
    labels = y.reshape(r * b, 1)
    noisy = GaussianMixture([method.sigma]).sample(
        labels, method.num_samples, shared=method.shared_samples, generator=generator
    )
    loss = fused_dsm_loss(ens, feat, noisy.view(r, b, -1, 1), y, method.sigma, runs=runs)
    return loss.mean(1)


def _fused_mcmc_loss(
    ens: Toy1DEnsemble,
    method: MLMCMC,
    feat: Tensor,
    y: Tensor,
    *,
    generator: torch.Generator | None,
    runs: slice | None,
) -> Tensor:
    """Per-member mean ML-MCMC loss (R,): chains by :mod:`.fused_mcmc`, f at label and samples by :mod:`.fused`.

    feat (R, B, 10), y (R, B, 1). The chains start at the labels and draw their eps by the same per-step
    ``torch.randn`` calls as :class:`ltr.ebm.MLMCMC`, so for the same generator state both paths use the same
    noise; the loss is ``ltr.ebm.losses.ml_mcmc_loss`` of f at [label, samples] (one score call, as there).
    """
    from ltr.regression_1d.fused import fused_score
    from ltr.regression_1d.fused_mcmc import fused_langevin

    r, b, _ = y.shape
    m = method.num_samples
    start = y.detach().unsqueeze(2).expand(r, b, m, 1)
    samples = fused_langevin(
        ens,
        feat,
        start,
        num_steps=method.num_steps,
        step_length=method.step_length,
        generator=generator,
        runs=runs,
    )
    scores = fused_score(ens, feat, torch.cat([y.unsqueeze(2), samples], dim=2), runs=runs)  # (R, B, M + 1)
    return ml_mcmc_loss(scores[..., 0], scores[..., 1:], reduction="none").mean(1)


@dataclass
class EnsembleTraining:
    """The outcome of :func:`train_ensemble`.

    ensemble: trained members; losses: (epochs, R) mean training loss per epoch and member;
    seconds: training wall time (no evaluation); sec_per_epoch: seconds / (epochs * R), per model;
    extra: ``fused``, ``models_per_chunk`` and ``cpu_seconds`` (process CPU time of the training).
    """

    ensemble: Toy1DEnsemble
    losses: Tensor
    seconds: float
    config: Regression1DConfig
    first_run: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def sec_per_epoch(self) -> float:
        return self.seconds / (self.config.epochs * self.ensemble.num_models)


def train_ensemble(
    config: Regression1DConfig,
    num_runs: int,
    *,
    first_run: int = 0,
    device: str | torch.device = "cpu",
    models_per_chunk: int | None = None,
    fused: bool | None = None,
    epoch_callback: Callable[[int, Tensor], None] | None = None,
    progress: bool = False,
    desc: str = "",
) -> EnsembleTraining:
    """Train runs first_run .. first_run + num_runs - 1 of ``config`` at once.

    Args:
        config: the training config (method, dataset, epochs, ...).
        num_runs: R.
        models_per_chunk: members per forward/backward pass; only changes speed and memory. None = all
            of them with the fused kernel or on a GPU, one at a time for the plain PyTorch path on a CPU
            (measured fastest there: bigger tensors fall out of the caches).
        fused: use the fused CPU kernels (:mod:`ltr.regression_1d.fused`; :mod:`ltr.regression_1d.fused_dsm`
            and :mod:`ltr.regression_1d.fused_sm` for DSM and SM); None = whenever one applies (CPU, a method
            in :data:`FUSED_METHODS`, the kernel builds).
        epoch_callback: called with (epoch, (R,) mean losses) after every epoch.
        progress: show a tqdm bar over epochs.
    """
    device = torch.device(device)
    if fused is None:
        fused = use_fused(config.method, device)
    x_all, y_all = generate(config.dataset, num=config.num_train, data_seed=config.data_seed)
    x_all, y_all = x_all.to(device), y_all.to(device)
    runs = range(first_run, first_run + num_runs)
    ens = Toy1DEnsemble(num_runs, generators=[generator(config.seed, r, "init") for r in runs]).to(device)
    shuffle_gens = [generator(config.seed, r, "shuffle") for r in runs]
    sample_gen = generator(config.seed, first_run, num_runs, "sample")
    method = config.build_method()
    opt = torch.optim.Adam(ens.parameters(), lr=config.lr)
    chunk = models_per_chunk or (num_runs if fused or device.type != "cpu" else 1)
    n, bsz = config.num_train, config.batch_size
    losses = torch.zeros(config.epochs, num_runs)

    epochs = range(config.epochs)
    if progress:
        from tqdm import tqdm

        epochs = tqdm(epochs, desc=desc or f"{config.method} d{config.dataset} x{num_runs}", leave=False)
    start, start_cpu = time.perf_counter(), time.process_time()
    for epoch in epochs:
        perms = torch.stack([torch.randperm(n, generator=g) for g in shuffle_gens]).to(device)  # (R, n)
        total = torch.zeros(num_runs, device=device)
        for i in range(0, n, bsz):
            idx = perms[:, i : i + bsz]  # (R, B)
            xb, yb = x_all[idx], y_all[idx]  # (R, B, 1)
            opt.zero_grad(set_to_none=False)
            for r0 in range(0, num_runs, chunk):
                sl = slice(r0, min(r0 + chunk, num_runs))
                per_model = ensemble_loss(
                    ens,
                    method,
                    xb[sl],
                    yb[sl],
                    generator=sample_gen,
                    shared_samples=config.shared_samples,
                    runs=None if chunk == num_runs else sl,
                    fused=fused,
                )
                per_model.sum().backward()
                total[sl] += per_model.detach() * idx.shape[1]
            opt.step()
        losses[epoch] = (total / n).cpu()
        if epoch_callback is not None:
            epoch_callback(epoch, losses[epoch])
        if progress:
            epochs.set_postfix(loss=f"{losses[epoch].mean():.3f}")
    seconds = time.perf_counter() - start
    extra = {"fused": fused, "models_per_chunk": chunk, "cpu_seconds": time.process_time() - start_cpu}
    return EnsembleTraining(ens, losses, seconds, config, first_run, extra)


FIRST_ORDER_METHODS = ("ml_is", "kld_is", "nce", "nce_plus", "ml_mcmc")
#: Methods with a fused CPU kernel: the first-order ones (:mod:`.fused`; ML-MCMC's chains also
#: :mod:`.fused_mcmc`), DSM (:mod:`.fused_dsm`) and SM (:mod:`.fused_sm`).
FUSED_METHODS = (*FIRST_ORDER_METHODS, "dsm", "sm")


def use_fused(method: str, device: torch.device | str) -> bool:
    """Whether a fused kernel applies: CPU, a method that has one (:data:`FUSED_METHODS`), it builds here."""
    if torch.device(device).type != "cpu" or method not in FUSED_METHODS:
        return False
    if method == "dsm":
        from ltr.regression_1d import fused_dsm

        return fused_dsm.available()
    if method == "sm":
        from ltr.regression_1d import fused_sm

        return fused_sm.available()
    if method == "ml_mcmc":
        from ltr.regression_1d import fused, fused_mcmc

        return fused.available() and fused_mcmc.available()
    from ltr.regression_1d import fused

    return fused.available()
