"""Write files in pytracking's checkpoint format without pytracking.

pytracking's trainer saves ``torch.save({'epoch', 'actor_type', 'net_type', 'net', 'net_info', 'constructor',
'optimizer', 'stats', 'settings'})`` where ``constructor`` is an ``ltr.admin.model_constructor.NetConstructor``
and ``stats`` / ``settings`` hold ``ltr.admin.stats.AverageMeter`` / ``ltr.admin.settings.Settings`` objects
(``ltr/trainers/base_trainer.py``). Pickle names a class by its module and name, which it would look up in
``sys.modules``; :func:`pickle_module` gives ``torch.save`` a pickler that writes pytracking's names for the
plain classes below (same attributes as pytracking's), so no module of those names ever exists here.
"""

from __future__ import annotations

import pickle
import types
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

#: The keyword arguments pytracking's train settings pass to ``dimpnet50``
#: (``ltr/train_settings/dimp/dimp50.py``, ``super_dimp.py``; ``backbone_pretrained`` as trained).
DIMP50_KWDS: dict[str, Any] = {
    "filter_size": 4,
    "backbone_pretrained": True,
    "optim_iter": 5,
    "clf_feat_norm": True,
    "clf_feat_blocks": 0,
    "final_conv": True,
    "out_feature_dim": 512,
    "optim_init_step": 0.9,
    "optim_init_reg": 0.1,
    "init_gauss_sigma": 0.25 / 5.0 * 18,
    "num_dist_bins": 100,
    "bin_displacement": 0.1,
    "mask_init_factor": 3.0,
    "target_mask_act": "sigmoid",
    "score_act": "relu",
}
#: ``klcedimpnet50``'s arguments in ``ltr/train_settings/dimp/prdimp50.py`` (PrDiMP-50).
PRDIMP50_KWDS: dict[str, Any] = {
    "filter_size": 4,
    "backbone_pretrained": True,
    "optim_iter": 5,
    "clf_feat_norm": True,
    "clf_feat_blocks": 0,
    "final_conv": True,
    "out_feature_dim": 512,
    "optim_init_step": 1.0,
    "optim_init_reg": 0.05,
    "optim_min_reg": 0.05,
    "gauss_sigma": 0.25 / 5.0 * 18,
    "alpha_eps": 0.05,
    "normalize_label": True,
    "init_initializer": "zero",
}
SUPER_DIMP_KWDS: dict[str, Any] = {
    **DIMP50_KWDS,
    "init_gauss_sigma": 0.25 / 6.0 * 22,
    "frozen_backbone_layers": ["conv1", "bn1", "layer1", "layer2"],
}


class NetConstructor:
    fun_name: str
    fun_module: str
    args: tuple
    kwds: dict


class Settings:
    pass


class EnvironmentSettings:
    pass


class AverageMeter:
    pass


class StatValue:
    pass


#: pytracking's module (after its package) of each class.
_MODULES = {
    NetConstructor: "model_constructor",
    Settings: "settings",
    EnvironmentSettings: "local",
    AverageMeter: "stats",
    StatValue: "stats",
}


class _Pickler(pickle._Pickler):
    """The pure-Python pickler, naming the classes above by pytracking's global names (``GLOBAL`` opcodes,
    as protocol 2 writes them) instead of looking their names up in ``sys.modules``."""

    package = "ltr.admin"

    def save_global(self, obj: Any, name: str | None = None) -> None:
        module = _MODULES.get(obj) if isinstance(obj, type) else None
        if module is None:
            super().save_global(obj, name)
            return
        self.write(pickle.GLOBAL + f"{self.package}.{module}\n{obj.__name__}\n".encode("ascii"))
        self.memoize(obj)


def pickle_module(package: str = "ltr.admin") -> types.ModuleType:
    """A ``pickle_module`` for ``torch.save`` that writes the classes above as ``<package>.<module>.<Class>``
    (``ltr.admin`` or pytracking's old ``dlframework.common.utils``)."""
    module = types.ModuleType("pytracking_names_pickle")
    module.Pickler = type("Pickler", (_Pickler,), {"package": package})
    module.dump = lambda obj, f, protocol=None: module.Pickler(f, protocol).dump(obj)
    return module


def net_constructor(
    fun_name: str, fun_module: str, kwds: Mapping[str, Any], args: tuple = ()
) -> NetConstructor:
    constructor = NetConstructor()
    constructor.fun_name = fun_name
    constructor.fun_module = fun_module
    constructor.args = tuple(args)
    constructor.kwds = dict(kwds)
    return constructor


def trainer_records() -> dict[str, Any]:
    """The trainer's records of a checkpoint: ``stats`` and ``settings`` objects, as pytracking saves them."""
    env = EnvironmentSettings()
    env.workspace_dir = "/home/user/workspace"
    env.lasot_dir = "/data/lasot"
    settings = Settings()
    settings.env = env
    settings.use_gpu = True
    settings.batch_size = 10
    settings.normalize_mean = [0.485, 0.456, 0.406]
    settings.center_jitter_factor = {"train": 3, "test": 4.5}
    settings.project_path = "ltr/dimp/dimp50"
    meter = AverageMeter()
    meter.__dict__.update(avg=0.5, val=0.4, sum=5.0, count=10, history=[0.6, 0.5], has_new_data=False)
    lr = StatValue()
    lr.__dict__.update(val=2e-4, history=[2e-4])
    stats = OrderedDict(train=OrderedDict({"Loss/total": meter, "LearningRate/group0": lr}), val=None)
    return {"stats": stats, "settings": settings}


def write_pytracking_checkpoint(
    path: str | Path,
    state: Mapping[str, torch.Tensor],
    kwds: Mapping[str, Any] = DIMP50_KWDS,
    *,
    fun_name: str = "dimpnet50",
    fun_module: str = "ltr.models.tracking.dimpnet",
    args: tuple = (),
    package: str = "ltr.admin",
    records: bool = True,
    legacy: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Save ``state`` as pytracking's trainer does (``legacy``: PyTorch's pre-1.6 file format); ``records``
    adds the trainer's epoch / stats / settings / optimizer entries, ``extra`` more top-level entries."""
    path = Path(path)
    data: dict[str, Any] = {"net": OrderedDict(state)}
    data["constructor"] = net_constructor(fun_name, fun_module, kwds, args)
    if records:
        data.update(epoch=50, actor_type="DiMPActor", net_type="DiMPnet", net_info=None)
        data["optimizer"] = {"state": {}, "param_groups": [{"lr": 2e-4, "params": [0, 1]}]}
        data.update(trainer_records())
    data.update(extra or {})
    save(data, path, package=package, legacy=legacy)
    return path


def save(data: Any, path: str | Path, *, package: str = "ltr.admin", legacy: bool = False) -> None:
    """``torch.save`` with pytracking's class names (:func:`pickle_module`)."""
    torch.save(data, path, pickle_module=pickle_module(package), _use_new_zipfile_serialization=not legacy)
