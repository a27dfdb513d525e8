"""Train settings, found by name in one explicit table.

``python ltr/run_training.py <module> <setting> [key=value ...]``. Each module listed here exposes
``SETTINGS: dict[str, Callable[[], config]]`` and ``train(config, *, workspace, resume, ...)``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: module name -> Python module implementing it.
MODULES: dict[str, str] = {
    "regression_1d": "ltr.train_settings.regression_1d",
    "dimp": "ltr.train_settings.dimp",
    "detection": "ltr.train_settings.detection",
}


def load_module(name: str) -> ModuleType:
    if name not in MODULES:
        raise KeyError(f"unknown train module {name!r}; choose one of {sorted(MODULES)}")
    return importlib.import_module(MODULES[name])
