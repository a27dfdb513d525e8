"""One 1D-regression training run: its config and the ltr.ebm method it trains with.

Hyperparameters that the paper tuned per dataset (ML-MCMC step length, DSM sigma) default to None, meaning
"the paper's value for this dataset" (:data:`PER_DATASET`); any explicit value overrides both datasets.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ltr.admin.config import ConfigError
from ltr.ebm import build_method
from ltr.regression_1d.data import DATASETS

#: Hyperparameters that differ between the datasets (appendix B and the reference code).
PER_DATASET: dict[str, dict[int, float]] = {
    "mcmc_step_length": {1: 0.05, 2: 0.0125},
    "dsm_sigma": {1: 0.2, 2: 0.075},
}

EBM_METHODS = ("ml_is", "kld_is", "ml_mcmc", "nce", "nce_plus", "sm", "dsm")


@dataclass(frozen=True)
class Regression1DConfig:
    """Training config of one model (or one ensemble of identically configured models).

    Attributes:
        method: the ltr.ebm method name (ml_is, kld_is, ml_mcmc, nce, nce_plus, sm, dsm).
        dataset: 1 or 2.
        epochs, batch_size, lr: Adam training schedule (75 epochs, 32, 1e-3 in the paper).
        seed: model init, data shuffling and sampling streams derive from it (and from the run index).
        data_seed: the training set is a function of (dataset, data_seed).
        num_train: training set size (2000).
        num_samples: M.
        sigmas: proposal / noise mixture stds for ML-IS, KLD-IS (0.2, 1.6) and NCE, NCE+ (0.1, 0.8).
        label_sigma: KLD-IS label-noise std.
        beta: NCE+ beta (scales the noise stds, the reference's convention).
        mcmc_steps: ML-MCMC Langevin steps L.
        mcmc_step_length: ML-MCMC alpha; None = per dataset (0.05 / 0.0125).
        dsm_sigma: DSM noise std; None = per dataset (0.2 / 0.075).
        shared_samples: one set of M offsets per batch and model (the reference code) instead of per example.
        eval_grid: D_KL grid size per axis (2048).
    """

    method: str = "nce_plus"
    dataset: int = 1
    epochs: int = 75
    batch_size: int = 32
    lr: float = 1e-3
    seed: int = 0
    data_seed: int = 0
    num_train: int = 2000
    num_samples: int = 1024
    sigmas: tuple[float, ...] = (0.1, 0.8)
    label_sigma: float = 0.025
    beta: float = 0.025
    mcmc_steps: int = 1
    mcmc_step_length: float | None = None
    dsm_sigma: float | None = None
    shared_samples: bool = False
    eval_grid: int = 2048

    def __post_init__(self) -> None:
        if self.method not in EBM_METHODS:
            raise ConfigError(f"method={self.method!r}: must be one of {list(EBM_METHODS)}")
        if self.dataset not in DATASETS:
            raise ConfigError(f"dataset={self.dataset!r}: must be one of {list(DATASETS)}")
        for key in ("epochs", "batch_size", "num_train", "num_samples", "mcmc_steps", "eval_grid"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key}={getattr(self, key)!r}: must be >= 1")
        if self.seed < 0 or self.data_seed < 0:
            raise ConfigError(f"seed={self.seed}, data_seed={self.data_seed}: seeds must be non-negative")
        if self.method == "dsm" and self.shared_samples:
            raise ConfigError(
                "shared_samples=true is not supported for dsm (its noise is drawn inside the loss)"
            )

    def resolved(self, key: str) -> float:
        """The value of a per-dataset hyperparameter (``mcmc_step_length`` or ``dsm_sigma``)."""
        value = getattr(self, key)
        return PER_DATASET[key][self.dataset] if value is None else value

    def method_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`ltr.ebm.build_method` for this config."""
        m = self.method
        if m == "ml_is":
            return dict(sigmas=self.sigmas, num_samples=self.num_samples, shared_samples=self.shared_samples)
        if m == "kld_is":
            return dict(
                sigmas=self.sigmas,
                label_sigma=self.label_sigma,
                num_samples=self.num_samples,
                shared_samples=self.shared_samples,
            )
        if m == "nce":
            return dict(sigmas=self.sigmas, num_samples=self.num_samples, shared_samples=self.shared_samples)
        if m == "nce_plus":
            return dict(
                sigmas=self.sigmas,
                beta=self.beta,
                num_samples=self.num_samples,
                shared_samples=self.shared_samples,
            )
        if m == "ml_mcmc":
            return dict(
                num_steps=self.mcmc_steps,
                step_length=self.resolved("mcmc_step_length"),
                num_samples=self.num_samples,
            )
        if m == "dsm":
            return dict(sigma=self.resolved("dsm_sigma"), num_samples=self.num_samples)
        return {}  # sm

    def build_method(self):
        """The ltr.ebm method object (callable ``method(score_fn, labels, ...)``)."""
        return build_method(self.method, **self.method_kwargs())

    def replace(self, **changes: Any) -> Regression1DConfig:
        return dataclasses.replace(self, **changes)
