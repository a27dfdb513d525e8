"""The paper's object-detection study (section 4.2, appendix C): an energy box head on a frozen Faster R-CNN.

``python ltr/run_training.py detection <setting> [key=value ...]``

Paper settings (COCO 2017 via ``COCO_DIR``, torchvision's COCO Faster R-CNN ResNet50-FPN from the local
hub cache): ``ml_is, kld_is, ml_mcmc_1, ml_mcmc_4, ml_mcmc_8, nce, dsm, nce_plus``. ``<setting>_tiny``: the
same method on the embedded synthetic COCO-format set with a small CPU detector (minutes on CPU).

Each run trains the head, picks the refinement step lengths on ``val_split`` (if ``tune_steps``), evaluates
detector vs refined boxes with COCOeval on ``test_split`` and writes config.json, head.pth,
results.json and results.md to ``<workspace>/checkpoints/detection/<setting>/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from ltr.admin.registry import Registry
from ltr.detection.config import IS_SIGMAS, NCE_SIGMAS, DetectionConfig

#: base setting name (the detection study's ``--methods``) -> its method's :class:`DetectionConfig` fields.
METHOD_FIELDS: Registry[dict] = Registry(
    "detection method",
    {
        "ml_is": {"method": "ml_is", "sigmas": IS_SIGMAS},
        "kld_is": {"method": "kld_is", "sigmas": IS_SIGMAS, "label_sigma": 0.0225},
        "ml_mcmc_1": {"method": "ml_mcmc", "mcmc_steps": 1, "mcmc_alpha": 1e-5},
        "ml_mcmc_4": {"method": "ml_mcmc", "mcmc_steps": 4, "mcmc_alpha": 1e-5},
        "ml_mcmc_8": {"method": "ml_mcmc", "mcmc_steps": 8, "mcmc_alpha": 1e-5},
        "nce": {"method": "nce", "sigmas": NCE_SIGMAS},
        "dsm": {"method": "dsm", "dsm_sigma": 0.075},
        "nce_plus": {"method": "nce_plus", "sigmas": NCE_SIGMAS, "beta": 0.1},
    },
)

#: The embedded default: synthetic COCO-format data, the tiny detector, a small head, a short schedule.
TINY_FIELDS: dict = {
    "data": "synthetic",
    "detector": "tiny",
    "val_split": "val",
    "test_split": "test",
    "pool_size": 5,
    "hidden": 256,
    "iterations": 1000,
    "batch_images": 4,
    "max_boxes_per_image": 8,
    "lr": 1e-3,
    "lr_step": 800,
    "log_every": 100,
    "eval_batch_images": 8,
    "detector_iters": 500,
    "threads": 1,
}


def _setting(name: str, tiny: bool) -> Callable[[], DetectionConfig]:
    def make() -> DetectionConfig:
        fields = dict(METHOD_FIELDS[name])
        if tiny:
            fields.update(TINY_FIELDS)
        return dataclasses.replace(DetectionConfig(), **fields)

    make.__doc__ = f"{name} ({'synthetic data, tiny detector' if tiny else 'COCO 2017, ResNet50-FPN'})"
    return make


#: setting name -> config factory: each method on COCO, then each on the synthetic set (``<method>_tiny``).
SETTINGS: Registry[Callable[[], DetectionConfig]] = Registry(
    "detection train setting",
    {
        **{name: _setting(name, tiny=False) for name in METHOD_FIELDS},
        **{f"{name}_tiny": _setting(name, tiny=True) for name in METHOD_FIELDS},
    },
)


def train(
    config: DetectionConfig,
    *,
    setting: str,
    workspace: Path,
    resume: bool = False,
    device: str = "auto",
    visdom: bool = False,
) -> dict:
    """Train and evaluate one setting; returns the results dict also written to results.json."""
    from ltr.detection.run import run_setting

    return run_setting(config, setting=setting, workspace=Path(workspace), resume=resume, device=device)
