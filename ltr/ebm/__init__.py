"""Task-agnostic EBM regression: sampling densities, the seven training methods, gradient-ascent prediction.

p(y | x) = exp f(x, y) / Z(x). See :mod:`ltr.ebm.methods` for the score-function convention.
"""

from ltr.ebm.densities import GaussianMixture
from ltr.ebm.losses import dsm_loss, kld_is_loss, ml_is_loss, ml_mcmc_loss, nce_loss, sm_loss
from ltr.ebm.methods import (
    DSM,
    KLDIS,
    METHODS,
    MLIS,
    MLMCMC,
    NCE,
    SM,
    Candidates,
    LossResult,
    NCEPlus,
    build_method,
)
from ltr.ebm.predict import AscentResult, gradient_ascent

__all__ = [
    "DSM",
    "KLDIS",
    "METHODS",
    "MLIS",
    "MLMCMC",
    "NCE",
    "SM",
    "AscentResult",
    "Candidates",
    "GaussianMixture",
    "LossResult",
    "NCEPlus",
    "build_method",
    "dsm_loss",
    "gradient_ascent",
    "kld_is_loss",
    "ml_is_loss",
    "ml_mcmc_loss",
    "nce_loss",
    "sm_loss",
]
