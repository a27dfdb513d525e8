"""Import a pytracking checkout on the CPU, for the subcommands of ``scripts/pytracking_golden.py``.

pytracking's package is also called ``ltr``, its PrRoIPool is a CUDA extension and its package ``__init__``
files import optional dependencies (jpeg4py, timm, tensorboard, an old torchvision name, the per-user
``ltr/admin/local.py`` it generates). :func:`import_reference` takes this repository's exact PrRoIPool first,
removes this repository's ``ltr`` / ``pytracking`` from ``sys.modules``, puts the checkout first on
``sys.path`` and installs stand-ins for exactly those imports: a PrRoIPool2D module that calls ours (so the
pooling is the same code on both sides and everything else is pytracking's), and empty modules for the
optional dependencies the golden runs never call. Run it once per process, after this repository's own
modules are imported (objects imported from them stay usable through the references already taken).
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    module.__path__ = []  # a package: submodule imports resolve through sys.modules
    sys.modules[name] = module
    return module


def _unused(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a stand-in for an optional pytracking dependency was used")


def import_reference(checkout: str | Path, **modules: str) -> types.SimpleNamespace:
    """Make ``import ltr`` / ``import pytracking`` load the pytracking checkout at ``checkout`` (see the
    module docstring) and import ``modules`` (attribute name -> dotted module name) from it. Exits with an
    error line when ``checkout`` does not look like one; raises RuntimeError when a module came from
    elsewhere."""
    root = Path(checkout).resolve()
    if not (root / "pytracking" / "tracker" / "dimp" / "dimp.py").is_file():
        raise SystemExit(f"error: {root} is not a pytracking checkout (no pytracking/tracker/dimp/dimp.py)")
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

    for name in [n for n in sys.modules if n.split(".")[0] in ("ltr", "pytracking")]:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO]
    sys.path.insert(0, str(root))
    _module("ltr.external.PreciseRoIPooling.pytorch.prroi_pool", PrRoIPool2D=PrRoIPool2D)
    _module("ltr.admin.tensorboard", TensorboardWriter=_unused)
    env_class = type("EnvironmentSettings", (), {"__module__": "ltr.admin.local"})
    _module("ltr.admin.local", EnvironmentSettings=env_class)
    _module("jpeg4py")
    _module("timm")
    _module("timm.models")
    _module(
        "timm.models.layers", DropPath=object, to_2tuple=lambda x: (x, x), trunc_normal_=lambda *a, **k: None
    )
    import torchvision.models.resnet as tv_resnet

    if not hasattr(tv_resnet, "model_urls"):
        tv_resnet.model_urls = {}
    imported = {key: importlib.import_module(name) for key, name in modules.items()}
    for module in imported.values():
        origin = getattr(module, "__file__", None)  # None: one of the stand-ins above
        if origin is not None and root not in Path(origin).resolve().parents:
            raise RuntimeError(f"imported {origin}, not pytracking's file under {root}")
    return types.SimpleNamespace(**imported)
