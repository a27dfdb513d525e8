"""Optional dependencies (the extras of setup.py): import one, or fail with the command that installs it.

The package installs without them; only the features that use one import it, through :func:`import_extra`,
so that a user without it gets one line naming ``pip install 'ebmtrack[<extra>]'`` instead of a bare
``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingExtra", "import_extra"]


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def import_extra(module: str, extra: str) -> ModuleType:
    """``importlib.import_module(module)``; :class:`MissingExtra` if ``module`` itself is not installed.

    Args:
        module: the module to import (e.g. ``"visdom"``).
        extra: the setup.py extra that installs it (e.g. ``"visdom"``).

    A module that is installed but fails to import (one of *its* dependencies missing, say) raises its own
    error unchanged.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is None or err.name.split(".")[0] != module.split(".")[0]:
            raise
        raise MissingExtra(
            f"the optional package {module!r} is not installed; install it with: pip install 'ebmtrack[{extra}]'"
        ) from None
