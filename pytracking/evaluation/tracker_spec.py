"""What to run: a picklable description of a tracker (name, parameter set, network, device, live view), its
checks before any work (:func:`prepare_spec`), and building the tracker from it in whichever process runs
the sequences."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ltr.admin.checkpoint import CheckpointError
from ltr.admin.config import apply_overrides
from ltr.admin.device import resolve_device
from ltr.admin.registry import Registry
from ltr.models.tracking import NetConfig
from pytracking.parameter.dimp import PARAMETERS, get_parameters
from pytracking.tracker.baselines import BASELINE_PARAMS, BASELINES, make_baseline
from pytracking.tracker.dimp import DiMPParams, DiMPTracker, LoadedNet, default_checkpoint, load_network
from pytracking.tracker.dimp.network import NoCheckpointError

#: tracker name -> its parameter sets (``dimp`` and the classical baselines of ``pytracking.tracker.baselines``)
TRACKERS: Registry[Registry[Any]] = Registry(
    "tracker", {"dimp": PARAMETERS, **dict.fromkeys(BASELINES, BASELINE_PARAMS)}
)


@dataclass(frozen=True)
class VisdomSpec:
    server: str = "http://127.0.0.1"
    port: int = 8097
    env: str = "tracking"


@dataclass(frozen=True)
class TrackerSpec:
    """name: tracker ("dimp"); param: parameter set; net: checkpoint path (None: the latest checkpoint of the
    parameter set's train setting in the workspace); device: ``auto``, ``cpu``, ``cuda`` or ``cuda:K``;
    compile: DiMP only, turns on the parameter set's ``compile`` (torch.compile of the per-frame stages);
    overrides: DiMP only, ``key=value`` changes of the parameter set's fields (dotted for nested ones, e.g.
    ``augmentation.dropout_num=0``; unknown keys are an error); name: the results folder's name instead of
    the parameter set's (required with overrides, so that their results never mix with the set's); cuda_graph:
    DiMP only, turns on the parameter set's ``cuda_graph`` (the refinement replayed as a CUDA graph on a GPU).
    ``compile`` and ``cuda_graph`` change how, not what, the tracker computes (boxes agree to float rounding),
    so they need no results name of their own."""

    name: str
    param: str
    net: str | None = None
    device: str = "auto"
    visdom: VisdomSpec | None = None
    debug: bool = False
    compile: bool = False
    overrides: tuple[str, ...] = ()
    name_in_results: str | None = None
    cuda_graph: bool = False

    def __post_init__(self) -> None:
        # an unknown tracker or parameter set: UnknownName (a ValueError) listing the choices
        TRACKERS[self.name][self.param]
        if self.overrides:
            if not self.needs_network:
                raise ValueError(f"tracker {self.name!r} takes no key=value overrides")
            tracker_params(self)  # unknown keys and bad values: a ConfigError (a ValueError) now

    @property
    def results_name(self) -> str:
        """The ``{param}`` part of the results folder."""
        return self.name_in_results or self.param

    @property
    def needs_network(self) -> bool:
        return self.name == "dimp"


_NET_CACHE: dict[tuple[str, str], LoadedNet] = {}


def network_path(spec: TrackerSpec) -> str:
    """The checkpoint the spec names, or the default one of its parameter set (NoCheckpointError if none)."""
    if spec.net is not None:
        return spec.net
    setting = get_parameters(spec.param).train_setting
    if setting is None:
        raise NoCheckpointError(
            f"parameter set {spec.param!r} is pytracking's trained model: pass --net PATH to its file converted "
            "with `python -m ltr.admin.import_pytracking SRC DST`"
        )
    return str(default_checkpoint(setting))


def _network(path: str, device: torch.device) -> LoadedNet:
    """The network of checkpoint ``path`` on ``device``, loaded once per process."""
    key = (path, str(device))
    if key not in _NET_CACHE:
        _NET_CACHE[key] = load_network(path, device)
    return _NET_CACHE[key]


def _describe(cfg: NetConfig) -> str:
    return f"{cfg.backbone} (width {cfg.backbone_width}, {cfg.clf_feature_dim} classifier channels)"


def _same_kind(a: NetConfig, b: NetConfig) -> bool:
    return (a.backbone, a.backbone_width, a.clf_feature_dim) == (
        b.backbone,
        b.backbone_width,
        b.clf_feature_dim,
    )


def _tuned_for(param: str) -> NetConfig | None:
    """The network config of the train setting parameter set ``param`` was tuned for (None: none named)."""
    from ltr.train_settings.dimp import SETTINGS

    setting = get_parameters(param).train_setting
    return SETTINGS[setting]().net if setting in SETTINGS else None


def parameter_mismatch(param: str, loaded: LoadedNet) -> str | None:
    """A warning when DiMP parameter set ``param`` was tuned for another kind of network than ``loaded``.

    The crop geometry always comes from the checkpoint, but a parameter set's thresholds are tuned to the
    score range of one network: the tiny CPU network under ``nce_plus``'s target-not-found threshold scores
    every frame "not found" and its box never moves. Networks are of one kind when backbone, backbone width
    and classifier channels agree; the warning names the parameter sets tuned for the checkpoint's kind.
    """
    own, theirs = _tuned_for(param), loaded.net_config
    if own is None or theirs is None or _same_kind(own, theirs):
        return None
    fitting = [
        name for name in PARAMETERS if (cfg := _tuned_for(name)) is not None and _same_kind(cfg, theirs)
    ]
    setting = get_parameters(param).train_setting
    advice = (
        f"parameter sets tuned for it: {', '.join(fitting)}"
        if fitting
        else "no parameter set here is tuned for it"
    )
    return (
        f"parameter set {param!r} is tuned for the {_describe(own)} network of dimp/{setting}, but "
        f"{loaded.source} holds a {_describe(theirs)} network ({loaded.setting or 'unknown setting'}): its "
        f"thresholds may not fit this network's scores (the box may never move); {advice}"
    )


def prepare_spec(spec: TrackerSpec, *, keep_loaded: bool = True) -> tuple[TrackerSpec, list[str]]:
    """Check everything about ``spec`` before any sequence is touched; returns it with ``net`` resolved to
    the checkpoint path, and warnings (one line each) to show the user.

    Raises (each with a one-line message naming the argument or file): ``DeviceError`` (a ValueError) for an
    unknown device or CUDA without a GPU, :class:`NoCheckpointError` when no ``--net`` is given and the
    workspace has no checkpoint of the parameter set's train setting, ``CheckpointError`` for a missing,
    foreign, corrupt or mismatched checkpoint (:func:`~pytracking.tracker.dimp.network.load_network`).
    With ``backend=onnxruntime`` the export folder is checked against the checkpoint and the parameters
    (``OnnxExportError``, a ValueError; ``MissingExtra`` without onnxruntime). The network is loaded on the
    device and kept for :func:`build_tracker` in this process, or, with
    ``keep_loaded=False`` (sequences tracked in other processes), checked on the CPU and dropped.
    """
    device = resolve_device(spec.device)
    if not spec.needs_network:
        return spec, []
    spec = dataclasses.replace(spec, net=network_path(spec))
    if not Path(spec.net).is_file():
        raise CheckpointError(f"{spec.net}: no such checkpoint file (--net)")
    loaded = _network(spec.net, device) if keep_loaded else load_network(spec.net, "cpu")
    params = tracker_params(spec)
    if params.backend == "onnxruntime":  # the export fits this checkpoint and these parameters
        from pytracking.onnx.runtime import check_backend

        check_backend(params, device, geometry=loaded.geometry, checkpoint=spec.net)
    warnings = [w for w in (parameter_mismatch(spec.param, loaded), _eager_refinement(params, device)) if w]
    return spec, warnings


def _eager_refinement(params: DiMPParams, device: torch.device) -> str | None:
    """Why ``cuda_graph`` has no effect with these parameters on ``device``, or None when it has."""
    if not params.cuda_graph:
        return None
    if device.type != "cuda":
        return f"cuda_graph (--cuda-graph) replays the refinement on a GPU; on {device} it runs eagerly"
    if params.refine_mode != "plain":
        return f"cuda_graph (--cuda-graph) graphs the plain ascent; refine_mode={params.refine_mode} runs eagerly"
    return None


def tracker_params(spec: TrackerSpec) -> DiMPParams:
    """The DiMP parameters of ``spec``: its parameter set with the overrides, ``compile`` and ``cuda_graph``
    applied."""
    params = apply_overrides(get_parameters(spec.param), spec.overrides)
    if spec.compile:
        params = dataclasses.replace(params, compile=True)
    return dataclasses.replace(params, cuda_graph=True) if spec.cuda_graph else params


def build_tracker(spec: TrackerSpec, **tracker_kwargs: Any) -> Any:
    """A fresh tracker for ``spec``; a DiMP network is loaded once per process and shared."""
    if not spec.needs_network:
        return make_baseline(spec.name, spec.param)
    params = tracker_params(spec)
    loaded = _network(network_path(spec), resolve_device(spec.device))
    return DiMPTracker(loaded.net, loaded.geometry, params, **tracker_kwargs)
