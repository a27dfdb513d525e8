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

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ltr.ebm import Candidates
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
) -> Tensor:
    """Per-member mean loss of one batch, (R,).

    Args:
        ens: the ensemble.
        method: an :mod:`ltr.ebm` method object (``ltr.ebm.build_method``).
        x, y: (R, B, 1) member r's batch in row r.
        generator: sampling generator.
        shared_samples: one set of offsets per member and batch (sampling methods only).
        runs: restrict to a slice of the members (x, y then hold only those rows).
    """
    r, b, _ = x.shape
    feat = ens.x_features(x, runs=runs)

    def score_fn(candidates: Tensor) -> Tensor:  # (R*B, S, 1) -> (R*B, S)
        s = candidates.shape[1]
        return ens.score_from_features(feat, candidates.view(r, b, s, 1), runs=runs).reshape(r * b, s)

    if shared_samples and hasattr(method, "sample"):  # each member draws its own set, in member order
        cands = _cat_candidates([method.sample(y[k], generator=generator) for k in range(r)])
        result = method.loss_from_scores(score_fn(cands.y), cands, reduction="none")
    else:
        result = method(score_fn, y.reshape(r * b, 1), generator=generator, reduction="none")
    return result.loss.view(r, b).mean(1)


@dataclass
class EnsembleTraining:
    """The outcome of :func:`train_ensemble`.

    ensemble: trained members; losses: (epochs, R) mean training loss per epoch and member;
    seconds: training wall time (no evaluation); sec_per_epoch: seconds / (epochs * R), per model;
    extra: ``models_per_chunk`` and ``cpu_seconds`` (process CPU time of the training).
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
    epoch_callback: Callable[[int, Tensor], None] | None = None,
    progress: bool = False,
    desc: str = "",
) -> EnsembleTraining:
    """Train runs first_run .. first_run + num_runs - 1 of ``config`` at once.

    Args:
        config: the training config (method, dataset, epochs, ...).
        num_runs: R.
        models_per_chunk: members per forward/backward pass (None: all of them). Smaller chunks need less
            memory; each chunk draws its samples in turn, so another chunk size gives other (identically
            distributed) samples.
        epoch_callback: called with (epoch, (R,) mean losses) after every epoch.
        progress: show a tqdm bar over epochs.
    """
    device = torch.device(device)
    x_all, y_all = generate(config.dataset, num=config.num_train, data_seed=config.data_seed)
    x_all, y_all = x_all.to(device), y_all.to(device)
    runs = range(first_run, first_run + num_runs)
    ens = Toy1DEnsemble(num_runs, generators=[generator(config.seed, r, "init") for r in runs]).to(device)
    shuffle_gens = [generator(config.seed, r, "shuffle") for r in runs]
    sample_gen = generator(config.seed, first_run, num_runs, "sample")
    method = config.build_method()
    opt = torch.optim.Adam(ens.parameters(), lr=config.lr)
    chunk = models_per_chunk or num_runs
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
    extra = {"models_per_chunk": chunk, "cpu_seconds": time.process_time() - start_cpu}
    return EnsembleTraining(ens, losses, seconds, config, first_run, extra)
