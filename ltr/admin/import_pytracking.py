"""Convert pytracking's published DiMP checkpoints into this toolkit's safe checkpoint format.

``python -m ltr.admin.import_pytracking SRC DST [--preset dimp50|super_dimp|prdimp50]``

pytracking's files (``dimp50.pth``, ``super_dimp.pth.tar``, ``prdimp50.pth.tar``) are pickles of a dict:
``net`` (the state dict), ``constructor`` (a ``NetConstructor`` object: ``fun_name``, ``fun_module``,
``args``, ``kwds`` of the function that built the network) and optionally the trainer's records ``epoch``,
``actor_type``, ``net_type``, ``net_info``, ``optimizer``, ``stats``, ``settings`` (and ``lr_scheduler`` in
old files). Reading them never runs pickled code: the file is loaded with ``torch.load(weights_only=True)``
and only the classes such files hold are allow-listed, each under its exact global name and bound to a
data-only stand-in defined here (:data:`ALLOWED_GLOBALS`), so a global such as
``ltr.admin.model_constructor.NetConstructor`` resolves to that stand-in and to nothing else (no module is
imported; this package is also called ``ltr`` but has no such module). The stand-ins only store the state
the pickle gives them; the trainer's records (``Settings``, ``EnvironmentSettings``, ``AverageMeter``,
``StatValue``) are read that way and dropped. Module paths: pytracking's ``ltr.admin.*`` and the
``dlframework.common.utils.*`` of files written before its rename (pytracking's own loader maps those).
Any other class or callable in the file is refused before it is created.

The constructor is checked against the preset (:data:`PRESETS`): its function and module, no positional
arguments, and every keyword argument either one that fixes the network's structure (it must equal the
preset's value; a missing one takes pytracking's default) or one that only sets initial values or training
options (recorded, not checked). The state dict is renamed onto :func:`ltr.models.tracking.build_dimpnet`'s
keys (every tensor must be there with its shape; ``num_batches_tracked`` of files older than PyTorch 0.4.1
is filled with 0), the parts the tracker never runs (the backbone's ``layer4`` and ``fc``) are dropped, and
the result is written atomically as an :mod:`ltr.admin.checkpoint` file whose config is a full
``to_dict(DiMPTrainConfig)``: its ``net`` section describes the network and its ``data`` section holds the
preset's crop geometry (the training fields are this toolkit's ``kld_is`` setting, SuperDiMP's box loss, so
the file can also start a training run). Floating-point tensors are stored as float32.

Anything else (another architecture, a missing, mis-shaped or unexpected tensor, a file holding other
objects, a file that is not a PyTorch checkpoint) raises :class:`PytrackingFormatError` naming the file and
the key or class; the command prints it as one ``error: ...`` line and exits with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ltr.admin.checkpoint import FORMAT, VERSION, save_checkpoint
from ltr.admin.config import to_dict
from ltr.admin.registry import Registry
from ltr.models.tracking import NetConfig, build_dimpnet
from ltr.train_settings.dimp import SETTINGS, DiMPTrainConfig


class PytrackingFormatError(ValueError):
    """A file that is not a convertible pytracking checkpoint; the message names the file and the reason."""


# --------------------------------------------------------------------------------------------------------
# Data-only stand-ins for the classes pytracking's checkpoints hold


class _StandIn:
    """An object of a pytracking class, as plain data: it keeps the state its pickle sets and nothing else.

    Unpickling creates it with ``cls.__new__(cls)`` and hands the state to :meth:`__setstate__`; it has no
    other behaviour (no constructor arguments, no methods that act on the state).
    """

    __slots__ = ("state",)
    #: the pytracking class it stands for (set on each subclass)
    pytracking_class = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            f"the file calls pytracking's {self.pytracking_class}(...); it is only ever restored as data"
        )

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _NetConstructor(_StandIn):
    __slots__ = ()
    pytracking_class = "NetConstructor"


class _Settings(_StandIn):
    __slots__ = ()
    pytracking_class = "Settings"


class _EnvironmentSettings(_StandIn):
    __slots__ = ()
    pytracking_class = "EnvironmentSettings"


class _AverageMeter(_StandIn):
    __slots__ = ()
    pytracking_class = "AverageMeter"


class _StatValue(_StandIn):
    __slots__ = ()
    pytracking_class = "StatValue"


#: pytracking's module prefixes for its admin classes: the current one and the pre-rename one.
_ADMIN_PACKAGES = ("ltr.admin", "dlframework.common.utils")
_ADMIN_CLASSES: dict[str, type[_StandIn]] = {
    "model_constructor.NetConstructor": _NetConstructor,
    "settings.Settings": _Settings,
    "local.EnvironmentSettings": _EnvironmentSettings,
    "stats.AverageMeter": _AverageMeter,
    "stats.StatValue": _StatValue,
}
#: Global name -> stand-in: exactly the classes pytracking's checkpoints hold (besides tensors and plain data).
ALLOWED_GLOBALS: dict[str, type[_StandIn]] = {
    f"{package}.{name}": cls for package in _ADMIN_PACKAGES for name, cls in _ADMIN_CLASSES.items()
}

#: Top-level keys of pytracking's checkpoints (``ltr/trainers/base_trainer.py``); all but these two are the
#: trainer's records, which the tracker never needs.
REQUIRED_KEYS = ("net", "constructor")
RECORD_KEYS = (
    "epoch",
    "actor_type",
    "net_type",
    "net_info",
    "optimizer",
    "stats",
    "settings",
    "lr_scheduler",
)


# --------------------------------------------------------------------------------------------------------
# Presets


@dataclass(frozen=True)
class Preset:
    """What a pytracking model is and how it maps onto this toolkit.

    Attributes:
        name: the preset's name (``--preset``).
        file_names: names pytracking publishes the model under (pick the preset when ``--preset`` is absent).
        fun_module, fun_names: the constructor function the file must name (module without pytracking's old
            ``dlframework.`` prefix).
        structure: keyword arguments that fix the network's structure and must have these values.
        defaults: pytracking's default of every keyword argument of the function (a missing one has it).
        free: keyword arguments that only set initial values or training options (not checked).
        key_map: (pytracking prefix, our prefix) renames of state-dict keys, first match wins.
        dropped: pytracking state-dict prefixes the tracker never uses.
        net: :class:`NetConfig` fields of the network (the rest keep their defaults).
        data: :class:`ltr.data.config.DataConfig` fields: the preset's crop geometry.
        train_setting: the ``ltr.train_settings.dimp`` setting the config's other fields come from.
    """

    name: str
    file_names: tuple[str, ...]
    fun_module: str
    fun_names: tuple[str, ...]
    structure: Mapping[str, Any]
    defaults: Mapping[str, Any]
    free: frozenset[str]
    key_map: tuple[tuple[str, str], ...]
    dropped: tuple[str, ...]
    net: Mapping[str, Any]
    data: Mapping[str, Any]
    train_setting: str = "kld_is"


#: pytracking's ``dimpnet50`` (``ltr/models/tracking/dimpnet.py``): its keyword defaults.
DIMPNET50_DEFAULTS: dict[str, Any] = {
    "filter_size": 1,
    "optim_iter": 5,
    "optim_init_step": 1.0,
    "optim_init_reg": 0.01,
    "classification_layer": "layer3",
    "feat_stride": 16,
    "backbone_pretrained": True,
    "clf_feat_blocks": 0,
    "clf_feat_norm": True,
    "init_filter_norm": False,
    "final_conv": True,
    "out_feature_dim": 512,
    "init_gauss_sigma": 1.0,
    "num_dist_bins": 5,
    "bin_displacement": 1.0,
    "mask_init_factor": 4.0,
    "iou_input_dim": (256, 256),
    "iou_inter_dim": (256, 256),
    "score_act": "relu",
    "act_param": None,
    "target_mask_act": "sigmoid",
    "detach_length": math.inf,
    "frozen_backbone_layers": (),
}
#: The structure of DiMP-50 and SuperDiMP (both ``dimpnet50`` with these arguments): what
#: :func:`build_dimpnet` builds from :data:`DIMP50_NET`.
DIMPNET50_STRUCTURE: dict[str, Any] = {
    "filter_size": 4,
    "classification_layer": "layer3",
    "feat_stride": 16,
    "clf_feat_blocks": 0,
    "clf_feat_norm": True,
    "init_filter_norm": False,
    "final_conv": True,
    "out_feature_dim": 512,
    "num_dist_bins": 100,
    "bin_displacement": 0.1,
    "iou_input_dim": (256, 256),
    "iou_inter_dim": (256, 256),
    "score_act": "relu",
    "act_param": None,
    "target_mask_act": "sigmoid",
}
DIMPNET50_FREE = frozenset(
    {
        "optim_iter",
        "optim_init_step",
        "optim_init_reg",
        "init_gauss_sigma",
        "mask_init_factor",
        "backbone_pretrained",
        "detach_length",
        "frozen_backbone_layers",
    }
)
#: pytracking DiMPnet state-dict prefixes -> DiMPNet's.
DIMPNET_KEY_MAP: tuple[tuple[str, str], ...] = (
    ("feature_extractor.conv1.", "backbone.conv1."),
    ("feature_extractor.bn1.", "backbone.bn1."),
    ("feature_extractor.layer1.", "backbone.layer1."),
    ("feature_extractor.layer2.", "backbone.layer2."),
    ("feature_extractor.layer3.", "backbone.layer3."),
    ("classifier.feature_extractor.0.", "classifier.feature_head.conv."),
    ("classifier.filter_initializer.filter_conv.", "classifier.initializer.conv."),
    ("classifier.filter_optimizer.log_step_length", "classifier.optimizer.log_step_length"),
    ("classifier.filter_optimizer.filter_reg", "classifier.optimizer.filter_reg"),
    ("classifier.filter_optimizer.label_map_predictor.", "classifier.optimizer.label_predictor."),
    ("classifier.filter_optimizer.target_mask_predictor.0.", "classifier.optimizer.mask_predictor."),
    ("classifier.filter_optimizer.spatial_weight_predictor.", "classifier.optimizer.weight_predictor."),
    ("bb_regressor.conv3_1r.", "box_head.ref_conv2."),
    ("bb_regressor.fc3_1r.", "box_head.ref_fc2."),
    ("bb_regressor.conv4_1r.", "box_head.ref_conv3."),
    ("bb_regressor.fc34_3r.", "box_head.mod2."),
    ("bb_regressor.fc34_4r.", "box_head.mod3."),
    ("bb_regressor.conv3_1t.", "box_head.test_conv2.0."),
    ("bb_regressor.conv3_2t.", "box_head.test_conv2.1."),
    ("bb_regressor.conv4_1t.", "box_head.test_conv3.0."),
    ("bb_regressor.conv4_2t.", "box_head.test_conv3.1."),
    ("bb_regressor.fc3_rt.", "box_head.box_fc2."),
    ("bb_regressor.fc4_rt.", "box_head.box_fc3."),
    ("bb_regressor.iou_predictor.", "box_head.predictor."),
)
#: The backbone's layer4 and ImageNet classifier: DiMP reads layer2 and layer3 only.
DIMPNET_DROPPED = ("feature_extractor.layer4.", "feature_extractor.fc.")
#: DiMPNet fields of both models (initial values as in their train settings; the weights replace them).
DIMP50_NET: dict[str, Any] = {
    "backbone": "resnet50",
    "backbone_width": 64,
    "pretrained": False,
    "frozen_layers": ("conv1", "layer1", "layer2"),
    "clf_feature_dim": 512,
    "filter_size": 4,
    "num_optim_iter": 5,
    "optim_init_step": 0.9,
    "optim_init_reg": 0.1,
    "optim_min_reg": 1e-3,
    "num_dist_bins": 100,
    "bin_displacement": 0.1,
    "mask_init_factor": 3.0,
    "box_ref_channels": (128, 256),
    "box_mod_channels": (256, 256),
    "box_linear_channels": (256, 256),
}

#: pytracking's ``klcedimpnet50`` (PrDiMP-50, same file): its keyword defaults.
KLCEDIMPNET50_DEFAULTS: dict[str, Any] = {
    "filter_size": 1,
    "optim_iter": 5,
    "optim_init_step": 1.0,
    "optim_init_reg": 0.01,
    "classification_layer": "layer3",
    "feat_stride": 16,
    "backbone_pretrained": True,
    "clf_feat_blocks": 0,
    "clf_feat_norm": True,
    "init_filter_norm": False,
    "final_conv": True,
    "out_feature_dim": 512,
    "gauss_sigma": 1.0,
    "iou_input_dim": (256, 256),
    "iou_inter_dim": (256, 256),
    "detach_length": math.inf,
    "alpha_eps": 0.0,
    "train_feature_extractor": True,
    "init_uni_weight": None,
    "optim_min_reg": 1e-3,
    "init_initializer": "default",
    "normalize_label": False,
    "label_shrink": 0,
    "softmax_reg": None,
    "label_threshold": 0,
    "final_relu": False,
    "frozen_backbone_layers": (),
}
#: PrDiMP-50's structure, plus the values of its Newton optimizer's fixed hyper-parameters (they act at
#: tracking time, so a file trained with others is refused rather than tracked with PrDiMP-50's).
KLCEDIMPNET50_STRUCTURE: dict[str, Any] = {
    "filter_size": 4,
    "classification_layer": "layer3",
    "feat_stride": 16,
    "clf_feat_blocks": 0,
    "clf_feat_norm": True,
    "init_filter_norm": False,
    "final_conv": True,
    "out_feature_dim": 512,
    "iou_input_dim": (256, 256),
    "iou_inter_dim": (256, 256),
    "final_relu": False,
    "gauss_sigma": 0.25 / 5.0 * 18,
    "alpha_eps": 0.05,
    "optim_min_reg": 0.05,
    "normalize_label": True,
    "init_uni_weight": None,
    "label_shrink": 0,
    "softmax_reg": None,
    "label_threshold": 0,
}
KLCEDIMPNET50_FREE = frozenset(
    {
        "optim_iter",
        "optim_init_step",
        "optim_init_reg",
        "backbone_pretrained",
        "detach_length",
        "train_feature_extractor",
        "init_initializer",
        "frozen_backbone_layers",
    }
)


def _dimpnet50_preset(
    name: str, file_names: tuple[str, ...], *, label_init_sigma: float, data: dict[str, Any]
) -> Preset:
    """A ``dimpnet50`` model (DiMP-50, SuperDiMP): the same structure and tensors, its own geometry."""
    return Preset(
        name=name,
        file_names=file_names,
        fun_module="ltr.models.tracking.dimpnet",
        fun_names=("dimpnet50",),
        structure=DIMPNET50_STRUCTURE,
        defaults=DIMPNET50_DEFAULTS,
        free=DIMPNET50_FREE,
        key_map=DIMPNET_KEY_MAP,
        dropped=DIMPNET_DROPPED,
        net={**DIMP50_NET, "label_init_sigma": label_init_sigma},
        data=data,
    )


#: preset name (``--preset``) -> the preset.
PRESETS: Registry[Preset] = Registry(
    "pytracking preset",
    {
        "dimp50": _dimpnet50_preset(
            "dimp50",
            ("dimp50.pth", "dimp50.pth.tar"),
            # label sigma: output sigma factor 1/4 / search area factor 5 x feature size 18 cells
            label_init_sigma=18 * 0.25 / 5.0,
            # 18 x 16 pixel crops of 5 x the target's size, borders replicated (no shrinking, so no limit on it)
            data={
                "crop_size": 288,
                "search_area_factor": 5.0,
                "crop_mode": "replicate",
                "max_scale_change": math.inf,
            },
        ),
        "super_dimp": _dimpnet50_preset(
            "super_dimp",
            ("super_dimp.pth.tar", "super_dimp.pth"),
            label_init_sigma=22 * 0.25 / 6.0,
            data={
                "crop_size": 352,
                "search_area_factor": 6.0,
                "crop_mode": "inside_major",
                "max_scale_change": 1.5,
            },
        ),
        "prdimp50": Preset(
            name="prdimp50",
            file_names=("prdimp50.pth.tar", "prdimp50.pth"),
            fun_module="ltr.models.tracking.dimpnet",
            fun_names=("klcedimpnet50",),
            structure=KLCEDIMPNET50_STRUCTURE,
            defaults=KLCEDIMPNET50_DEFAULTS,
            free=KLCEDIMPNET50_FREE,
            # DiMP-50's names; the optimizer has only log_step_length and filter_reg (no label/mask/weight maps)
            key_map=DIMPNET_KEY_MAP,
            dropped=DIMPNET_DROPPED,
            net={
                **DIMP50_NET,
                "label_init_sigma": 18 * 0.25 / 5.0,
                "filter_optimizer": "newton_kl",
                "optim_init_step": 1.0,
                "optim_init_reg": 0.05,
                "optim_min_reg": 0.05,
                "kl_label_sigma": 0.25 / 5.0 * 18,
                "kl_alpha_eps": 0.05,
                "kl_normalize_label": True,
                "kl_label_threshold": 0.0,
                "kl_label_shrink": 0.0,
                "kl_uniform_weight": 0.0,
                "kl_softmax_reg": None,
            },
            # the crops of pytracking's PrDiMP-50 parameter file (it trains on DiMP-50's 288-pixel crops of 5x
            # the target, but tracks with SuperDiMP's)
            data={
                "crop_size": 352,
                "search_area_factor": 6.0,
                "crop_mode": "inside_major",
                "max_scale_change": 1.5,
            },
        ),
    },
)


# --------------------------------------------------------------------------------------------------------
# Reading


class Constructor(NamedTuple):
    """The data of a pytracking ``NetConstructor``."""

    fun_name: str
    fun_module: str
    args: tuple[Any, ...]
    kwds: dict[str, Any]


class PytrackingFile(NamedTuple):
    """What a pytracking checkpoint holds that the conversion uses: the state dict, the constructor, the
    trainer's epoch (None if absent) and the names of the trainer's records that were read and dropped."""

    state: dict[str, torch.Tensor]
    constructor: Constructor
    epoch: int | None
    dropped_records: tuple[str, ...]


def read_pytracking_file(path: str | Path) -> PytrackingFile:
    """Load pytracking checkpoint ``path`` safely (see the module docstring) and check its layout.

    Raises :class:`PytrackingFormatError` naming ``path`` and the key or class for a missing file, a file
    that is not a PyTorch checkpoint, one holding any class besides :data:`ALLOWED_GLOBALS` (refused before it
    is created), or a layout other than pytracking's.
    """
    path = Path(path)
    if not path.is_file():
        raise PytrackingFormatError(f"{path}: no such file")
    data = _safe_load(path)
    if not isinstance(data, dict):
        raise PytrackingFormatError(
            f"{path}: not a pytracking checkpoint (top level is {_describe(data)}, not a dict)"
        )
    unknown = [k for k in data if k not in REQUIRED_KEYS + RECORD_KEYS]
    if unknown:
        raise PytrackingFormatError(
            f"{path}: unexpected key {unknown[0]!r} (a pytracking checkpoint holds {list(REQUIRED_KEYS)} and "
            f"optionally {list(RECORD_KEYS)})"
        )
    for key in REQUIRED_KEYS:
        if key not in data:
            raise PytrackingFormatError(f"{path}: no {key!r} entry (not a pytracking network checkpoint)")
    state = data["net"]
    if not isinstance(state, dict) or not state:
        raise PytrackingFormatError(f"{path}: 'net' is {_describe(state)}, not a state dict")
    for key, value in state.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise PytrackingFormatError(
                f"{path}: 'net' entry {key!r} is {_describe(value)}, not a tensor (not a state dict)"
            )
    constructor = _constructor(data["constructor"], path)
    epoch = data.get("epoch")
    if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool)):
        raise PytrackingFormatError(f"{path}: 'epoch' is {_describe(epoch)}, not an integer")
    records = tuple(k for k in RECORD_KEYS if k in data and k != "epoch")
    return PytrackingFile(dict(state), constructor, epoch, records)


def _safe_load(path: Path) -> Any:
    allowed = [(cls, name) for name, cls in ALLOWED_GLOBALS.items()]
    try:
        with torch.serialization.safe_globals(allowed), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about pickle protocols of foreign files
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a refused class, a corrupt or foreign file: one message naming the file
        raise PytrackingFormatError(f"{path}: {_load_failure(err)}") from err


def _load_failure(err: BaseException) -> str:
    """Why ``torch.load(weights_only=True)`` failed, in words (torch's message is long and generic)."""
    text = str(err)
    glob = re.search(r"GLOBAL (\S+)", text)
    if glob:
        return (
            f"refused: the file holds an object of class or function {glob.group(1)}, which a pytracking "
            "DiMP checkpoint does not hold (it was not loaded and no code of the file ran)"
        )
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for marker in ("Can only create", "Can only build", "call reduce"):
        line = next((line for line in lines if marker in line), None)
        if line is not None:
            what = line.split("WeightsUnpickler error:")[-1].strip()
            return f"refused: the file builds objects in a way a pytracking checkpoint does not ({what})"
    if isinstance(err, TypeError) and "only ever restored as data" in text:
        return f"refused: {text}"
    what = lines[0] if lines else ""
    for i, line in enumerate(lines):
        if "WeightsUnpickler error:" in line:  # torch's detail follows the marker (or the next line)
            what = line.split("WeightsUnpickler error:")[-1].strip() or (
                lines[i + 1] if i + 1 < len(lines) else ""
            )
            break
    if isinstance(err, EOFError):
        what = what or "the file ends early"
    return f"not a PyTorch checkpoint file ({type(err).__name__}: {what or 'no details'})"


def _constructor(obj: Any, path: Path) -> Constructor:
    if not isinstance(obj, _NetConstructor):
        raise PytrackingFormatError(
            f"{path}: 'constructor' is {_describe(obj)}, not pytracking's NetConstructor (the file names no "
            "network function to check)"
        )
    state = getattr(obj, "state", None)
    fields = ("fun_name", "fun_module", "args", "kwds")
    if not isinstance(state, dict) or sorted(state) != sorted(fields):
        found = sorted(state) if isinstance(state, dict) else _describe(state)
        raise PytrackingFormatError(
            f"{path}: the NetConstructor holds {found}, expected the attributes {list(fields)}"
        )
    fun_name, fun_module, args, kwds = (state[f] for f in fields)
    if not isinstance(fun_name, str) or not isinstance(fun_module, str):
        raise PytrackingFormatError(f"{path}: the NetConstructor's fun_name/fun_module are not strings")
    if not isinstance(args, (tuple, list)) or not isinstance(kwds, dict):
        raise PytrackingFormatError(f"{path}: the NetConstructor's args/kwds are not a tuple and a dict")
    for key, value in kwds.items():
        if not isinstance(key, str):
            raise PytrackingFormatError(f"{path}: constructor keyword {key!r} is not a string")
        _check_plain(value, path, f"constructor keyword {key!r}")
    for i, value in enumerate(args):
        _check_plain(value, path, f"constructor argument {i}")
    return Constructor(fun_name, fun_module, tuple(args), dict(kwds))


def _check_plain(value: Any, path: Path, where: str) -> None:
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            _check_plain(v, path, where)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _check_plain(k, path, where)
            _check_plain(v, path, where)
        return
    raise PytrackingFormatError(f"{path}: {where} is {_describe(value)}, not plain data")


def _describe(value: Any) -> str:
    if isinstance(value, _StandIn):
        return f"a pytracking {value.pytracking_class} object"
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


# --------------------------------------------------------------------------------------------------------
# Checking and mapping


def _plain_equal(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_plain_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def check_constructor(constructor: Constructor, preset: Preset, path: str | Path) -> None:
    """Raise :class:`PytrackingFormatError` unless ``constructor`` builds ``preset``'s network."""
    module = constructor.fun_module.removeprefix("dlframework.")
    if constructor.fun_name not in preset.fun_names or module != preset.fun_module:
        raise PytrackingFormatError(
            f"{path}: the file's network is {constructor.fun_module}.{constructor.fun_name}, not preset "
            f"{preset.name!r}'s {preset.fun_module}.{'/'.join(preset.fun_names)} (another architecture)"
        )
    if constructor.args:
        raise PytrackingFormatError(
            f"{path}: the constructor has {len(constructor.args)} positional argument(s); preset "
            f"{preset.name!r} expects keyword arguments only"
        )
    for key in constructor.kwds:
        if key not in preset.structure and key not in preset.free:
            raise PytrackingFormatError(
                f"{path}: constructor keyword {key!r} is unknown to preset {preset.name!r} (another "
                "architecture or pytracking version)"
            )
    for key, expected in preset.structure.items():
        value = constructor.kwds.get(key, preset.defaults.get(key))
        if not _plain_equal(value, expected):
            given = "given" if key in constructor.kwds else "pytracking's default"
            raise PytrackingFormatError(
                f"{path}: constructor keyword {key}={value!r} ({given}) differs from preset "
                f"{preset.name!r}'s {key}={expected!r} (another architecture)"
            )


def net_config(preset: Preset) -> NetConfig:
    """The :class:`NetConfig` of ``preset``'s network."""
    return dataclasses.replace(NetConfig(), **preset.net)


def train_config(preset: Preset) -> DiMPTrainConfig:
    """The full train config stored with a converted checkpoint: ``preset.train_setting``'s config with the
    preset's network and crop geometry."""
    config = SETTINGS[preset.train_setting]()
    return dataclasses.replace(
        config, net=net_config(preset), data=dataclasses.replace(config.data, **preset.data)
    )


def expected_state(preset: Preset) -> dict[str, torch.Tensor]:
    """Our network's state-dict entries (shapes and dtypes only: built on the meta device)."""
    return _meta_net(preset).state_dict()


def _meta_net(preset: Preset) -> torch.nn.Module:
    with torch.device("meta"):
        return build_dimpnet(net_config(preset))


def _rename(key: str, preset: Preset) -> str | None:
    for theirs, ours in preset.key_map:
        if key.startswith(theirs):
            return ours + key[len(theirs) :]
    return None


def map_state(
    state: Mapping[str, torch.Tensor],
    preset: Preset,
    path: str | Path,
    expected: Mapping[str, torch.Tensor] | None = None,
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """pytracking state dict -> (our state dict, the pytracking keys dropped).

    ``expected``: :func:`expected_state` of ``preset`` if already at hand. Raises
    :class:`PytrackingFormatError` naming the key for an unexpected, missing or mis-shaped tensor.
    """
    expected = expected_state(preset) if expected is None else expected
    out: dict[str, torch.Tensor] = {}
    dropped: list[str] = []
    source_of: dict[str, str] = {}
    for key, tensor in state.items():
        if key.startswith(preset.dropped):
            dropped.append(key)
            continue
        ours = _rename(key, preset)
        if ours is None or ours not in expected:
            raise PytrackingFormatError(
                f"{path}: unexpected tensor {key!r} of shape {tuple(tensor.shape)} (not part of preset "
                f"{preset.name!r}'s network)"
            )
        if ours in out:
            raise PytrackingFormatError(
                f"{path}: tensors {source_of[ours]!r} and {key!r} map to the same entry"
            )
        want = expected[ours]
        if tuple(tensor.shape) != tuple(want.shape):
            raise PytrackingFormatError(
                f"{path}: tensor {key!r} has shape {tuple(tensor.shape)}, preset {preset.name!r} needs "
                f"{tuple(want.shape)}"
            )
        if want.is_floating_point() != tensor.is_floating_point() or tensor.is_complex():
            raise PytrackingFormatError(
                f"{path}: tensor {key!r} has dtype {tensor.dtype}, preset {preset.name!r} needs {want.dtype}"
            )
        value = tensor.detach().to(device="cpu", dtype=want.dtype).contiguous()
        if value.untyped_storage().nbytes() != value.numel() * value.element_size():
            value = value.clone()  # a view into a larger storage: save only its own elements
        out[ours] = value
        source_of[ours] = key
    inverse = {ours: theirs for theirs, ours in preset.key_map}
    for ours, want in expected.items():
        if ours in out:
            continue
        if ours.endswith("num_batches_tracked"):  # absent before PyTorch 0.4.1; unused in eval mode
            out[ours] = torch.zeros((), dtype=want.dtype)
            continue
        theirs = next((t + ours[len(o) :] for o, t in inverse.items() if ours.startswith(o)), ours)
        raise PytrackingFormatError(
            f"{path}: missing tensor {theirs!r} of shape {tuple(want.shape)} (preset {preset.name!r})"
        )
    return {k: out[k] for k in expected}, dropped


# --------------------------------------------------------------------------------------------------------
# Converting


def preset_for_file(path: str | Path) -> Preset:
    """The preset whose published file name ``path`` has; raises :class:`PytrackingFormatError` otherwise."""
    name = Path(path).name
    for preset in PRESETS.values():
        if name in preset.file_names:
            return preset
    raise PytrackingFormatError(
        f"{path}: cannot tell the model from the file name; pass --preset ({'|'.join(PRESETS)})"
    )


def convert(src: str | Path, dst: str | Path, preset: str | Preset | None = None) -> Path:
    """Convert pytracking checkpoint ``src`` into this toolkit's checkpoint ``dst`` (written atomically).

    ``preset``: a name in :data:`PRESETS` (or a :class:`Preset`); None picks it from ``src``'s file name.
    Returns ``dst``. Raises :class:`PytrackingFormatError` (see the module docstring), or
    :class:`ltr.admin.registry.UnknownName` (a ValueError) for an unknown preset name.
    """
    src = Path(src)
    if not src.is_file():
        raise PytrackingFormatError(f"{src}: no such file")
    if preset is None:
        preset = preset_for_file(src)
    elif isinstance(preset, str):
        preset = PRESETS[preset]
    loaded = read_pytracking_file(src)
    check_constructor(loaded.constructor, preset, src)
    net = _meta_net(preset)
    state, dropped = map_state(loaded.state, preset, src, net.state_dict())
    num_parameters = sum(p.numel() for p in net.parameters())
    config = train_config(preset)
    checkpoint = {
        "format": FORMAT,
        "version": VERSION,
        "setting": f"pytracking/{preset.name}",
        "epoch": loaded.epoch if loaded.epoch is not None else 0,
        "config": to_dict(config),
        "net": state,
        "num_parameters": num_parameters,
        "imported_from": {
            "format": "pytracking",
            "file": src.name,
            "preset": preset.name,
            "fun_name": loaded.constructor.fun_name,
            "fun_module": loaded.constructor.fun_module,
            "kwds": _plain_copy(loaded.constructor.kwds),
            "dropped_tensors": len(dropped),
            "dropped_records": list(loaded.dropped_records),
        },
    }
    return save_checkpoint(dst, checkpoint)


def _plain_copy(value: Any) -> Any:
    """Tuples as lists, recursively (checked plain data)."""
    if isinstance(value, (list, tuple)):
        return [_plain_copy(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain_copy(v) for k, v in value.items()}
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ltr.admin.import_pytracking",
        description=(
            "Convert a pytracking DiMP checkpoint (dimp50.pth, super_dimp.pth.tar, prdimp50.pth.tar) into an "
            "ebmtrack checkpoint. "
            "The file is read without running any of its pickled code."
        ),
    )
    parser.add_argument("src", metavar="SRC", help="pytracking checkpoint file")
    parser.add_argument("dst", metavar="DST", help="ebmtrack checkpoint to write")
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="the model (default: from SRC's file name, e.g. super_dimp.pth.tar -> super_dimp)",
    )
    args = parser.parse_args(argv)
    try:
        out = convert(args.src, args.dst, args.preset)
    except (PytrackingFormatError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
