"""The paper's 1D regression study (appendix B): one setting per training method.

``python ltr/run_training.py regression_1d <setting> [dataset=1|2] [epochs=75] [seed=0] [key=value ...]``
trains one model on the generic trainer (:mod:`ltr.regression_1d.single`), prints its D_KL and writes
``<workspace>/regression_1d/<setting>/dataset<d>_seed<s>/`` (config.json, ``epNNNN.pth.tar`` checkpoints,
stats files, results.json, density.png). The many-run study is ``python ltr/run_study.py regression_1d ...``
(:mod:`ltr.cli.study`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ltr.admin.registry import Registry
from ltr.regression_1d.config import Regression1DConfig

IS_SIGMAS = (0.2, 1.6)
NCE_SIGMAS = (0.1, 0.8)


def _setting(method: str, **fields) -> Callable[[], Regression1DConfig]:
    def make() -> Regression1DConfig:
        return Regression1DConfig(method=method, **fields)

    make.__doc__ = f"{method} with the paper's hyperparameters ({fields or 'defaults'})"
    return make


#: setting name -> config factory. Per-dataset values (ML-MCMC alpha, DSM sigma) resolve from ``dataset``.
SETTINGS: Registry[Callable[[], Regression1DConfig]] = Registry(
    "regression_1d train setting",
    {
        "ml_is": _setting("ml_is", sigmas=IS_SIGMAS),
        "ml_mcmc_1": _setting("ml_mcmc", mcmc_steps=1),
        "ml_mcmc_16": _setting("ml_mcmc", mcmc_steps=16),
        "ml_mcmc_256": _setting("ml_mcmc", mcmc_steps=256),
        "kld_is": _setting("kld_is", sigmas=IS_SIGMAS, label_sigma=0.025),
        "nce": _setting("nce", sigmas=NCE_SIGMAS),
        "sm": _setting("sm"),
        "dsm": _setting("dsm"),
        "nce_plus": _setting("nce_plus", sigmas=NCE_SIGMAS, beta=0.025),
    },
)


def train(
    config: Regression1DConfig,
    *,
    setting: str,
    workspace: Path,
    resume: bool = False,
    device: str = "auto",
    visdom: bool = False,
) -> dict:
    """Train one model of ``config``; returns the results dict also written to results.json."""
    from ltr.regression_1d.single import run_single

    return run_single(
        config, setting=setting, workspace=Path(workspace), resume=resume, device=device, visdom=visdom
    )
