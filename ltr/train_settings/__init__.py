"""Train settings, found by name in one explicit table.

``python ltr/run_training.py <module> <setting> [key=value ...]``. Each module listed here exposes
``SETTINGS`` (a :class:`~ltr.admin.registry.Registry` of setting name -> config factory) and
``train(config, *, setting, workspace, resume, device, visdom)``.
"""

from __future__ import annotations

from types import ModuleType

from ltr.admin.registry import Registry

#: train module name -> the Python module implementing it (imported on lookup).
MODULES: Registry[ModuleType] = Registry(
    "train module",
    {
        "regression_1d": "ltr.train_settings.regression_1d",
        "dimp": "ltr.train_settings.dimp",
        "detection": "ltr.train_settings.detection",
    },
)
