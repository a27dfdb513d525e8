"""The tracker's network stages run by ONNX Runtime on the CPU (``DiMPParams(backend="onnxruntime")``).

:class:`OrtStages` implements :class:`pytracking.tracker.dimp.stages.NetworkStages` with the models of an
export folder (:mod:`.export`); the tracker's Python logic (crops, localisation, refinement, sample memory) is
unchanged. The refinement takes f and df/dbox from the ``box_score_grad`` model (:meth:`OrtStages.box_score_grad`,
one ONNX Runtime call per ascent step), and :mod:`pytracking.tracker.dimp.refine` runs as it is. Every step
pools its boxes from the summed-area tables (``box_tables``) of the frame's modulated box test features
(``box_features``), which are computed once per frame and only on the window of the maps that the boxes read
(:mod:`pytracking.tracker.dimp.box_window`; the whole maps when a step's boxes leave it).

:func:`check_export` is every check of a folder against a checkpoint file, a network, its geometry and the
parameters, each failure one line (:class:`OnnxExportError`): no folder or manifest, another checkpoint
(sha256) or network (weights digest), another crop geometry or number of refinement boxes, a missing model.
ONNX Runtime uses as many threads as torch (``torch.get_num_threads()``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ltr.admin.extras import import_extra
from ltr.models.tracking import BOX_LAYERS, CLF_LAYER, DiMPNet
from pytracking.onnx.manifest import (
    MANIFEST,
    Manifest,
    OnnxExportError,
    file_sha256,
    read_manifest,
    weights_sha256,
)
from pytracking.tracker.dimp.box_window import BoxWindow
from pytracking.tracker.dimp.params import DiMPParams, Geometry
from pytracking.tracker.dimp.refine import AscentOptions, ascend

__all__ = ["OrtStages", "check_backend", "check_export", "make_session"]

Pair = tuple[Tensor, Tensor]


def check_export(
    folder: str | os.PathLike | None,
    *,
    params: DiMPParams,
    geometry: Geometry | None = None,
    checkpoint: str | os.PathLike | None = None,
    net: DiMPNet | None = None,
) -> Manifest:
    """The manifest of export ``folder`` after checking it fits (see the module docstring); the checkpoint
    file, the network and the geometry are checked when given."""
    if not folder:
        raise OnnxExportError(
            "backend=onnxruntime needs onnx_dir=DIR (made by python -m pytracking.export_onnx)"
        )
    manifest = read_manifest(folder)
    source = manifest.checkpoint
    if checkpoint is not None:
        digest = file_sha256(checkpoint)
        if digest != source["sha256"]:
            raise OnnxExportError(
                f"{folder}: exported from {source['path'] or 'a network without a file'} "
                f"(sha256 {source['sha256'][:12] or '-'}), not from {checkpoint} (sha256 {digest[:12]}); "
                f"export it again: python -m pytracking.export_onnx dimp {manifest.param} --net {checkpoint} --out DIR"
            )
    if net is not None and weights_sha256(net) != manifest.weights_sha256:
        raise OnnxExportError(f"{folder}: the models were exported from another network than the one given")
    if geometry is not None and manifest.geometry_object() != geometry:
        raise OnnxExportError(
            f"{folder}: exported for crop geometry {manifest.geometry_object()}, the network's is {geometry}"
        )
    if manifest.num_boxes != params.num_random_boxes + 1:
        raise OnnxExportError(
            f"{folder}: the refinement model scores {manifest.num_boxes} boxes, the parameters ask for "
            f"{params.num_random_boxes + 1} (num_random_boxes + 1); export with the same parameters"
        )
    for name, entry in manifest.models.items():
        if not (Path(folder) / entry.file).is_file():
            raise OnnxExportError(f"{Path(folder) / entry.file}: missing (model {name!r} of the manifest)")
    return manifest


def check_backend(
    params: DiMPParams,
    device: torch.device | str,
    *,
    geometry: Geometry | None = None,
    checkpoint: str | os.PathLike | None = None,
    net: DiMPNet | None = None,
) -> Manifest:
    """Everything ``backend=onnxruntime`` needs before tracking: onnxruntime installed (``MissingExtra``
    otherwise), the CPU, no ``compile``, and an export folder that fits (:func:`check_export`)."""
    import_extra("onnxruntime", "onnx")
    if params.compile:
        raise OnnxExportError("compile applies to backend=torch only, not to backend=onnxruntime")
    if torch.device(device).type != "cpu":
        raise OnnxExportError("backend=onnxruntime runs on the CPU: use --device cpu")
    return check_export(params.onnx_dir, params=params, geometry=geometry, checkpoint=checkpoint, net=net)


def make_session(path: str | os.PathLike, threads: int | None = None) -> Any:
    """An ONNX Runtime CPU session of model ``path`` with all graph optimisations and ``threads`` intra-op
    threads (default: torch's number) that sleep when idle."""
    ort = import_extra("onnxruntime", "onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    # idle pool threads sleep instead of spinning: spinning ones take the cores from torch's threads and from
    # the other sessions between the tracker's many short calls (measured in docs/results/2026-11-26-onnx.md)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only: no constant-folding notes on every session
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


#: sessions opened in this process, by (folder, its manifest's time and size, network, threads, boxes): the trackers of one run (a new one
#: per sequence) share them instead of each optimising every model again
_OPENED: dict[tuple[Any, ...], tuple[DiMPNet, OrtStages]] = {}


def _numpy(t: Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).contiguous().numpy()


class OrtStages:
    """:class:`~pytracking.tracker.dimp.stages.NetworkStages` on the models of an export folder.

    Use :meth:`open` (which checks the folder, and returns the stages already opened in this process for the
    same folder and network); ``sessions`` maps model names to ONNX Runtime sessions. The stages hold no
    per-sequence state, so trackers may share them.
    """

    #: the exported per-frame models take one crop
    batched = False

    def __init__(self, folder: str | os.PathLike, manifest: Manifest, threads: int | None = None) -> None:
        self.folder = Path(folder)
        self.manifest = manifest
        self.sessions = {
            name: make_session(self.folder / entry.file, threads) for name, entry in manifest.models.items()
        }
        self.window_rule = manifest.window_rule()
        self._box_inputs = [arg.name for arg in self.sessions["box_features"].get_inputs()]
        self._table_inputs = [arg.name for arg in self.sessions["box_tables"].get_inputs()]
        #: box windows cut (one per refinement) and the refinements whose boxes left theirs for the whole maps
        self.windows = {"refinements": 0, "whole": 0}

    @classmethod
    def open(
        cls, folder: str | os.PathLike | None, net: DiMPNet, geometry: Geometry, params: DiMPParams
    ) -> OrtStages:
        """Check ``folder`` against ``net``, ``geometry`` and ``params`` (:func:`check_export`) and open it."""
        params = dataclasses.replace(params, onnx_dir=None if folder is None else str(folder))
        try:  # a rewritten manifest (a new export, or quantised in place) is another key
            stat = (Path(folder) / MANIFEST).stat() if folder else None
        except OSError:
            stat = None
        key = (
            str(Path(folder).resolve()) if folder else "",
            (stat.st_mtime_ns, stat.st_size) if stat else None,
            id(net),
            torch.get_num_threads(),
            params.num_random_boxes,
        )
        cached = _OPENED.get(key)
        if cached is not None and cached[0] is net and not params.compile and stat is not None:
            return cached[1]
        manifest = check_backend(params, next(net.parameters()).device, geometry=geometry, net=net)
        stages = cls(str(folder), manifest)
        _OPENED[key] = (net, stages)
        return stages

    def run(self, name: str, *inputs: Tensor) -> list[Tensor]:
        """Model ``name`` on torch tensors (float32, CPU); its outputs as torch tensors."""
        session = self.sessions[name]
        feeds = {arg.name: _numpy(t) for arg, t in zip(session.get_inputs(), inputs, strict=True)}
        return [torch.from_numpy(out) for out in session.run(None, feeds)]

    # ------------------------------------------------------------------------------------- NetworkStages
    def backbone(self, images: Tensor) -> dict[str, Tensor]:
        layer2, layer3 = self.run("backbone", images)
        return {BOX_LAYERS[0]: layer2, CLF_LAYER: layer3}

    init_backbone = backbone

    def clf_features(self, layer3: Tensor) -> Tensor:
        return self.run("clf_features", layer3)[0]

    init_clf_features = clf_features

    def classify(self, filters: Tensor, clf: Tensor) -> Tensor:
        return self.run("clf_scores", filters, clf)[0][0]

    def box_features(self, feats: dict[str, Tensor], modulation: Pair) -> tuple[Tensor, ...]:
        """The box test features' inputs (layer2, layer3, mod2, mod3), which :meth:`box_score_grad` and
        :meth:`ascend` take in their place: the features and their tables are made there, on the window of the
        maps that the boxes read (:mod:`~pytracking.tracker.dimp.box_window`)."""
        return (feats[BOX_LAYERS[0]], feats[BOX_LAYERS[1]], *modulation)

    def box_score_grad(self, inputs: tuple[Tensor, ...], boxes: Tensor) -> tuple[Tensor, Tensor]:
        """f (1, S) and df/dboxes (1, S, 4) from ``box_score_grad`` (one model call, no autograd)."""
        return self._score_grad(inputs, boxes)(boxes)

    def ascend(
        self, inputs: tuple[Tensor, ...], boxes: Tensor, options: AscentOptions
    ) -> tuple[Tensor, Tensor]:
        return ascend(self._score_grad(inputs, boxes), boxes, **options._asdict())

    def _score_grad(
        self, inputs: tuple[Tensor, ...], boxes: Tensor
    ) -> Callable[[Tensor], tuple[Tensor, Tensor]]:
        """``box_score_grad`` on one frame's box test features, computed on the window that ``boxes`` (the
        ascent's start) need; a step whose boxes leave it takes the whole maps from then on (the same scores
        and gradients either way, up to float rounding)."""
        session = self.sessions["box_score_grad"]
        names = [arg.name for arg in session.get_inputs()]
        arrays = [_numpy(t) for t in inputs]
        sizes = [a.shape[-2:] for a in arrays[:2]]
        window = self.window_rule.window(_numpy(boxes), sizes)
        feeds = dict(zip(names[:-1], self._tables(arrays, window), strict=True))
        self.windows["refinements"] += 1

        def run(boxes: Tensor) -> tuple[Tensor, Tensor]:
            nonlocal window, feeds
            array = _numpy(boxes)
            if not window.holds(array):
                window = BoxWindow.whole(sizes, self.window_rule.strides)
                feeds = dict(zip(names[:-1], self._tables(arrays, window), strict=True))
                self.windows["whole"] += 1
            scores, grad = session.run(None, {**feeds, names[-1]: array})
            return torch.from_numpy(scores), torch.from_numpy(grad)

        return run

    def _tables(self, arrays: list[np.ndarray], window: BoxWindow) -> list[np.ndarray]:
        """``box_tables``' outputs for the box test features' inputs ``arrays`` (layer2, layer3, mod2, mod3) on
        ``window``: the features of its input cells, cut to its cells, and their tables placed at the cells'
        place in whole-map tables (zeros elsewhere, which the window's boxes do not read)."""
        cut = [
            np.ascontiguousarray(a[..., r0:r1, c0:c1])
            for a, (r0, c0, r1, c1) in zip(arrays[:2], window.inputs, strict=True)
        ]
        mods = self.sessions["box_features"].run(
            None, dict(zip(self._box_inputs, [*cut, *arrays[2:]], strict=True))
        )
        mods = [
            np.ascontiguousarray(m[..., r0 - i0 : r1 - i0, c0 - j0 : c1 - j0])
            for m, (r0, c0, r1, c1), (i0, j0, _, _) in zip(mods, window.cells, window.inputs, strict=True)
        ]
        tables = self.sessions["box_tables"].run(None, dict(zip(self._table_inputs, mods, strict=True)))
        if window.is_whole:
            return tables
        out = []
        for table, mean, (r0, c0, r1, c1), (h, w) in zip(
            tables[0::2], tables[1::2], window.cells, window.sizes, strict=True
        ):
            whole = np.zeros((table.shape[0], h + 1, w + 1, table.shape[-1]), dtype=table.dtype)
            # entry t of the window's table (its sums before window cell t) is entry r0 + t of the map's
            whole[:, r0 : r1 + 1, c0 : c1 + 1] = table
            out += [whole, mean]
        return out

    def modulation(self, feats: dict[str, Tensor], box: Tensor) -> Pair:
        mod2, mod3 = self.run("modulation", feats[BOX_LAYERS[0]], feats[BOX_LAYERS[1]], box)
        return mod2, mod3

    def initial_filter(self, clf: Tensor, boxes: Tensor, num_iter: int) -> Tensor:
        filters = self.run("initial_filter", clf, boxes)[0]
        weights = torch.full((clf.shape[0],), 1.0 / clf.shape[0])
        return self._optimize_one(filters, clf, boxes, weights, num_iter)

    def optimize(self, filters: Tensor, clf: Tensor, boxes: Tensor, weights: Tensor, num_iter: int) -> Tensor:
        """The exported ``filter_step`` takes one sequence: the B sequences one after another."""
        return torch.cat(
            [
                self._optimize_one(filters[b : b + 1], clf[:, b], boxes[:, b], weights[:, b], num_iter)
                for b in range(filters.shape[0])
            ]
        )

    def _optimize_one(
        self, filters: Tensor, clf: Tensor, boxes: Tensor, weights: Tensor, num_iter: int
    ) -> Tensor:
        """``num_iter`` steps from (1, C, k, k) on (S, C, h, w) samples, (S, 4) boxes, (S,) weights."""
        session = self.sessions["filter_step"]
        names = [arg.name for arg in session.get_inputs()]
        feeds = dict(zip(names[1:], [_numpy(clf), _numpy(boxes), _numpy(weights)], strict=True))
        w = _numpy(filters)
        for _ in range(num_iter):
            (w,) = session.run(None, {names[0]: w, **feeds})
        return torch.from_numpy(w)
