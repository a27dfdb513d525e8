"""The paper's published 1D-regression numbers (Table 1 and Figure 2), for side-by-side reporting."""

from __future__ import annotations

#: Table 1 columns in the paper's order: setting name -> column title.
COLUMNS: dict[str, str] = {
    "ml_is": "ML-IS",
    "ml_mcmc_1": "ML-MCMC-1",
    "ml_mcmc_16": "ML-MCMC-16",
    "ml_mcmc_256": "ML-MCMC-256",
    "kld_is": "KLD-IS",
    "nce": "NCE",
    "sm": "SM",
    "dsm": "DSM",
    "nce_plus": "NCE+",
}

#: Table 1, D_KL (mean of the 5 best of 20 runs, averaged over the two datasets).
DKL: dict[str, float] = {
    "ml_is": 0.062,
    "ml_mcmc_1": 0.865,
    "ml_mcmc_16": 0.449,
    "ml_mcmc_256": 0.106,
    "kld_is": 0.088,
    "nce": 0.068,
    "sm": 0.781,
    "dsm": 0.395,
    "nce_plus": 0.066,
}

#: Table 1, training cost in seconds per epoch (the authors' GPU).
SEC_PER_EPOCH_GPU: dict[str, float] = {
    "ml_is": 0.44,
    "ml_mcmc_1": 0.54,
    "ml_mcmc_16": 2.41,
    "ml_mcmc_256": 30.8,
    "kld_is": 0.44,
    "nce": 0.45,
    "sm": 0.60,
    "dsm": 0.47,
    "nce_plus": 0.46,
}

#: Figure 2: D_KL versus the number of samples M.
SWEEP_M: dict[str, dict[int, float]] = {
    "ml_is": {1: 3.1431, 4: 1.449767, 16: 0.13682405, 64: 0.07923745, 256: 0.06401, 1024: 0.0623260},
    "kld_is": {1: 2.512175, 4: 0.9612085, 16: 0.4151015, 64: 0.2180275, 256: 0.12049625, 1024: 0.0882635},
    "nce": {1: 0.487957, 4: 0.222217, 16: 0.12022195, 64: 0.07445745, 256: 0.0630213, 1024: 0.0681872},
    "nce_plus": {1: 0.417108, 4: 0.1957025, 16: 0.10278555, 64: 0.0797574, 256: 0.0631705, 1024: 0.06565895},
}
