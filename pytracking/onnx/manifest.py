"""The manifest of an ONNX export folder (``manifest.json``): what was exported, from what, at which shapes.

Fields: ``format`` / ``version``; ``tracker``, ``param``; ``checkpoint`` (the source file's path and sha256)
and ``weights_sha256`` (a digest of the loaded, BatchNorm-folded network's tensors, so that a tracker handed a
network can check that the models are this network's); ``geometry`` (the crop geometry,
:class:`~pytracking.tracker.dimp.params.Geometry` fields); ``num_boxes`` (the refinement's fixed number of
candidate boxes); ``precision`` (``float32`` or ``int8``); ``opset``; ``versions`` (torch, onnx, ...);
``box_window``: the box layers' ``strides`` and the test branches' ``halos``
(:class:`~pytracking.tracker.dimp.box_window.WindowRule`), for the window of the maps the refinement reads;
``models``: name -> file, its sha256, and its inputs and outputs as name -> shape (a string for a dynamic
axis). Written atomically; :func:`read_manifest` raises :class:`OnnxExportError` with a one-line message.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltr.admin.io import atomic_write_text
from pytracking.tracker.dimp.box_window import WindowRule
from pytracking.tracker.dimp.params import Geometry

__all__ = [
    "FORMAT",
    "MANIFEST",
    "VERSION",
    "Manifest",
    "ModelEntry",
    "OnnxExportError",
    "file_sha256",
    "read_manifest",
    "weights_sha256",
    "write_manifest",
]

FORMAT = "ebmtrack-onnx"
#: 2: the refinement's model pools from summed-area tables made by the ``box_tables`` model; 3: the box test
#: features and their tables take any map size (a window of the maps), and ``box_window`` says how to cut it
VERSION = 3
MANIFEST = "manifest.json"


class OnnxExportError(ValueError):
    """An export folder that is missing, unreadable or does not fit the network or parameters at hand."""


Shape = list[int | str]


@dataclass
class ModelEntry:
    """One exported model: its file (relative to the folder), sha256, inputs and outputs (name -> shape)."""

    file: str
    sha256: str
    inputs: dict[str, Shape]
    outputs: dict[str, Shape]


@dataclass
class Manifest:
    tracker: str
    param: str
    checkpoint: dict[str, str]
    weights_sha256: str
    geometry: dict[str, Any]
    num_boxes: int
    precision: str
    opset: int
    versions: dict[str, str]
    box_window: dict[str, list[int]]
    models: dict[str, ModelEntry] = field(default_factory=dict)
    calibration: dict[str, Any] | None = None
    format: str = FORMAT
    version: int = VERSION

    def geometry_object(self) -> Geometry:
        return Geometry(**{k: tuple(v) if isinstance(v, list) else v for k, v in self.geometry.items()})

    def window_rule(self) -> WindowRule:
        """How to cut the box maps' window for the refinement (``box_window``)."""
        return WindowRule(strides=tuple(self.box_window["strides"]), halos=tuple(self.box_window["halos"]))


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def weights_sha256(module: torch.nn.Module) -> str:
    """Hex sha256 over a module's state dict (names, dtypes, shapes and float32 bytes, in key order)."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.numpy().tobytes())
    return digest.hexdigest()


def write_manifest(folder: str | os.PathLike, manifest: Manifest) -> Path:
    return atomic_write_text(Path(folder) / MANIFEST, json.dumps(asdict(manifest), indent=2) + "\n")


def read_manifest(folder: str | os.PathLike) -> Manifest:
    """The manifest of export folder ``folder``; :class:`OnnxExportError` (one line) when there is none or
    it is not one of this format and version."""
    path = Path(folder) / MANIFEST
    if not Path(folder).is_dir():
        raise OnnxExportError(
            f"{folder}: no such ONNX export folder (make one with python -m pytracking.export_onnx)"
        )
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise OnnxExportError(
            f"{path}: missing (not a folder written by python -m pytracking.export_onnx)"
        ) from None
    except (OSError, json.JSONDecodeError) as err:
        raise OnnxExportError(f"{path}: unreadable ({err})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise OnnxExportError(f"{path}: not an {FORMAT} manifest")
    if data.get("version") != VERSION:
        raise OnnxExportError(
            f"{path}: an {FORMAT} manifest of version {data.get('version')!r}, this ebmtrack reads version "
            f"{VERSION}; export again: python -m pytracking.export_onnx dimp {data.get('param', 'PARAM')} "
            "--net CHECKPOINT --out DIR"
        )
    try:
        models = {name: ModelEntry(**entry) for name, entry in data.pop("models").items()}
        manifest = Manifest(**data, models=models)
        manifest.window_rule()
        return manifest
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise OnnxExportError(f"{path}: malformed manifest ({err})") from None
