"""What to run: a picklable description of a tracker (name, parameter set, network, device, live view), and
building the tracker from it in whichever process runs the sequences."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ltr.admin.device import resolve_device
from pytracking.parameter.dimp import NAMES as DIMP_PARAMS
from pytracking.parameter.dimp import get_parameters
from pytracking.tracker.baselines import BASELINE_PARAMS, BASELINES, make_baseline
from pytracking.tracker.dimp import DiMPTracker, LoadedNet, default_checkpoint, load_network

#: tracker name -> its parameter sets (``dimp`` and the classical baselines of ``pytracking.tracker.baselines``)
TRACKER_PARAMS: dict[str, tuple[str, ...]] = {"dimp": DIMP_PARAMS, **{b: BASELINE_PARAMS for b in BASELINES}}
TRACKERS = tuple(TRACKER_PARAMS)


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
    int8: DiMP only, turns on the parameter set's ``int8_heads`` (the heads' convolutions and the
    refinement's per-box products in int8, CPU)."""

    name: str
    param: str
    net: str | None = None
    device: str = "auto"
    visdom: VisdomSpec | None = None
    debug: bool = False
    compile: bool = False
    int8: bool = False

    def __post_init__(self) -> None:
        if self.name not in TRACKERS:
            raise ValueError(f"unknown tracker {self.name!r}; choose one of {list(TRACKERS)}")
        if self.param not in TRACKER_PARAMS[self.name]:
            raise ValueError(
                f"tracker {self.name!r} has no parameter set {self.param!r}; "
                f"choose one of {list(TRACKER_PARAMS[self.name])}"
            )

    @property
    def needs_network(self) -> bool:
        return self.name == "dimp"


_NET_CACHE: dict[tuple[str, str], LoadedNet] = {}


def network_path(spec: TrackerSpec) -> str:
    """The checkpoint the spec names, or the default one of its parameter set (NoCheckpointError if none)."""
    if spec.net is not None:
        return spec.net
    return str(default_checkpoint(get_parameters(spec.param).train_setting))


def build_tracker(spec: TrackerSpec, **tracker_kwargs: Any) -> Any:
    """A fresh tracker for ``spec``; a DiMP network is loaded once per process and shared."""
    if not spec.needs_network:
        return make_baseline(spec.name, spec.param)
    params = get_parameters(spec.param)
    if spec.compile:
        params = dataclasses.replace(params, compile=True)
    if spec.int8:
        params = dataclasses.replace(params, int8_heads=True)
    device = resolve_device(spec.device)
    path = network_path(spec)
    key = (path, str(device))
    if key not in _NET_CACHE:
        _NET_CACHE[key] = load_network(path, device)
    loaded = _NET_CACHE[key]
    return DiMPTracker(loaded.net, loaded.geometry, params, **tracker_kwargs)
