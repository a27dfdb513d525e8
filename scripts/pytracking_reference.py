"""Import a pytracking checkout on the CPU, for the golden-file scripts (``scripts/pytracking_golden*.py``).

pytracking's package is also called ``ltr``, its PrRoIPool is a CUDA extension and its package ``__init__``
files import optional dependencies (jpeg4py, timm, an old torchvision name). :func:`import_reference` takes
this repository's exact PrRoIPool first, removes this repository's ``ltr`` from ``sys.modules``, puts the
checkout first on ``sys.path`` and installs stand-ins for exactly those imports: a PrRoIPool2D module that
calls ours, and empty modules for the optional dependencies the tracker never calls. Run it once per process,
after this repository's own modules are imported (they stay usable through the references already taken).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]

_PRROI = "ltr.external.PreciseRoIPooling.pytorch.prroi_pool"


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    module.__path__ = []  # a package: submodule imports resolve through sys.modules
    sys.modules[name] = module
    return module


def import_reference(checkout: str | Path) -> None:
    """Make ``import ltr`` / ``import pytracking`` load the pytracking checkout at ``checkout`` (see module
    docstring). Raises FileNotFoundError when it does not look like one."""
    root = Path(checkout).resolve()
    if not (root / "pytracking" / "tracker" / "dimp" / "dimp.py").is_file():
        raise FileNotFoundError(f"{root} is not a pytracking checkout (no pytracking/tracker/dimp/dimp.py)")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from ltr.ops.prroi_pool import prroi_pool

    class PrRoIPool2D(torch.nn.Module):
        """pytracking's PrRoIPool2D(pooled_height, pooled_width, spatial_scale) on this repository's pooling."""

        def __init__(self, pooled_height: int, pooled_width: int, spatial_scale: float) -> None:
            super().__init__()
            self.size = (int(pooled_height), int(pooled_width))
            self.scale = float(spatial_scale)

        def forward(self, features: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
            return prroi_pool(features, rois, self.size, self.scale)

    for name in [n for n in sys.modules if n.split(".")[0] in ("ltr", "pytracking", "tests")]:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO]
    sys.path.insert(0, str(root))
    _module(_PRROI, PrRoIPool2D=PrRoIPool2D)
    _module("jpeg4py")
    _module("timm")
    _module("timm.models")
    _module(
        "timm.models.layers", DropPath=object, to_2tuple=lambda x: (x, x), trunc_normal_=lambda *a, **k: None
    )
    import torchvision.models.resnet as tv_resnet

    if not hasattr(tv_resnet, "model_urls"):
        tv_resnet.model_urls = {}
