"""Export a DiMP network's tracking parts (:mod:`.parts`) to ONNX models and a manifest (:mod:`.manifest`).

Models (file ``<name>.onnx``; S = dynamic number of samples, N = dynamic batch, B = ``num_boxes``):

==================  =======================================================  =================================
name                inputs                                                   outputs
==================  =======================================================  =================================
backbone            images (N, 3, H, W)                                      layer2, layer3
clf_features        layer3 (N, C3, h, w)                                     features (N, C, h, w)
clf_scores          filters (1, C, k, k), features (1, C, h, w)              scores (1, 1, H', W')
box_features        layer2, layer3 (1, C, h, w), mod2 (1, M2), mod3 (1, M3)  mod_feat2, mod_feat3 (1, M, h, w)
box_tables          mod_feat2, mod_feat3 (1, M, h, w)                        table2, mean2, table3, mean3
box_score_grad      table2, mean2, table3, mean3, boxes (1, B, 4)            scores (1, B), grad (1, B, 4)
modulation          layer2, layer3 (1, ...), box (1, 4)                      mod2, mod3
initial_filter      features (S, C, h, w), boxes (S, 4)                      filters (1, C, k, k)
filter_step         filters, features (S, C, h, w), boxes (S, 4),            filters
                    weights (S,)
==================  =======================================================  =================================

The box features and their tables take maps of any size (h, w per layer): the runtime computes them on the
window of the maps that the refinement's boxes read (:mod:`pytracking.tracker.dimp.box_window`; the manifest's
``box_window`` says how to cut it), and ``box_score_grad`` takes the tables at the whole maps' size.

Each model is exported with ``torch.onnx.export`` (the dynamo exporter), checked with ``onnx.checker`` and
written atomically as one self-contained file; the manifest is removed first and written last, so a folder
whose export stopped half-way has no manifest and is refused by the runtime.
"""

from __future__ import annotations

import os
import platform
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ltr.admin.extras import import_extra
from ltr.admin.io import atomic_write
from pytracking.onnx import parts
from pytracking.onnx.manifest import (
    MANIFEST,
    Manifest,
    ModelEntry,
    file_sha256,
    weights_sha256,
    write_manifest,
)
from pytracking.tracker.dimp.box_window import WindowRule
from pytracking.tracker.dimp.network import LoadedNet
from pytracking.tracker.dimp.params import DiMPParams

__all__ = ["MODEL_NAMES", "OPSET", "TABLES", "export_dimp", "export_model", "example_inputs"]

OPSET = 18
MODEL_NAMES = (
    "backbone",
    "clf_features",
    "clf_scores",
    "box_features",
    "box_tables",
    "box_score_grad",
    "modulation",
    "initial_filter",
    "filter_step",
)
#: the outputs of ``box_tables``, the per-frame inputs of ``box_score_grad``
TABLES = ("table2", "mean2", "table3", "mean3")


def _shape(value_info: Any) -> list[int | str]:
    dims = value_info.type.tensor_type.shape.dim
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]


def export_model(
    module: nn.Module,
    args: Sequence[Tensor],
    path: str | os.PathLike,
    *,
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_axes: dict[str, dict[int, str]] | None = None,
) -> ModelEntry:
    """Export ``module(*args)`` to ONNX file ``path`` (self-contained, written atomically) and check it.

    ``dynamic_axes``: input name -> {axis: dimension name}; inputs that share a name share the dimension.
    Returns the manifest entry (file name, sha256, input and output shapes as the model states them).
    """
    onnx = import_extra("onnx", "onnx")
    dims: dict[str, Any] = {}
    dynamic_shapes = None
    if dynamic_axes:
        # in the order of the inputs: torch keys a dict by the forward's argument names, not ``input_names``
        dynamic_shapes = tuple(
            {axis: dims.setdefault(dim, torch.export.Dim(dim, min=1)) for axis, dim in axes.items()}
            if (axes := dynamic_axes.get(name))
            else None
            for name in input_names
        )
    with warnings.catch_warnings():
        # inputs that share a dynamic dimension make torch name it once and warn about the others
        warnings.filterwarnings("ignore", message=".*will not be used, since it shares the same shape")
        program = torch.onnx.export(
            module,
            tuple(args),
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_shapes=dynamic_shapes,
            opset_version=OPSET,
            dynamo=True,
            verbose=False,
        )
    proto = program.model_proto
    onnx.checker.check_model(proto, full_check=True)
    data = proto.SerializeToString()
    path = Path(path)
    atomic_write(path, lambda f: f.write(data))
    return ModelEntry(
        file=path.name,
        sha256=file_sha256(path),
        inputs={v.name: _shape(v) for v in proto.graph.input},
        outputs={v.name: _shape(v) for v in proto.graph.output},
    )


def example_inputs(loaded: LoadedNet, num_boxes: int, seed: int = 0) -> dict[str, Tensor]:
    """Random inputs at the network's shapes (crops of the geometry's size), for export and for tests.

    Keys: ``images`` (2, 3, H, W), ``layer2``, ``layer3`` (1, ...), ``features`` (1, C, h, w), ``filters``,
    ``mod2``, ``mod3``, ``mod_feat2``, ``mod_feat3``, their summed-area tables ``table2``, ``mean2``,
    ``table3``, ``mean3``, ``boxes`` (1, num_boxes, 4) and ``box`` (1, 4) inside the crop, ``samples``
    (3, C, h, w) with ``sample_boxes`` (3, 4) and ``weights`` (3,).
    """
    net = loaded.net
    crop = loaded.geometry.crop_size
    gen = torch.Generator().manual_seed(seed)
    device = next(net.parameters()).device

    def rand(*shape: int) -> Tensor:
        return torch.rand(*shape, generator=gen).to(device)

    images = torch.randn(2, 3, crop, crop, generator=gen).to(device)
    centre = crop / 2 + crop / 8 * (rand(1, num_boxes, 2) - 0.5)
    size = crop / 6 * (0.5 + rand(1, num_boxes, 2))
    boxes = torch.cat([centre - size / 2, size], dim=-1)
    with torch.no_grad():
        layer2, layer3 = (f[:1] for f in parts.BackboneFeatures(net).eval()(images))
        features = parts.ClassifierFeatures(net).eval()(layer3)
        k = net.classifier.filter_size
        filters = 0.1 * (rand(1, features.shape[1], k, k) - 0.5)
        mod2, mod3 = parts.Modulation(net).eval()(layer2, layer3, boxes[0, :1])
        mod_feat2, mod_feat3 = parts.BoxTestFeatures(net).eval()(layer2, layer3, mod2, mod3)
        table2, mean2, table3, mean3 = parts.BoxTables()(mod_feat2, mod_feat3)
    samples = torch.cat([features, features.roll(1, -1), features.roll(1, -2)])
    sample_boxes = boxes[0, :1].repeat(3, 1) + rand(3, 4)
    return {
        "images": images,
        "layer2": layer2,
        "layer3": layer3,
        "features": features,
        "filters": filters,
        "mod2": mod2,
        "mod3": mod3,
        "mod_feat2": mod_feat2,
        "mod_feat3": mod_feat3,
        "table2": table2,
        "mean2": mean2,
        "table3": table3,
        "mean3": mean3,
        "boxes": boxes,
        "box": boxes[0, :1],
        "samples": samples,
        "sample_boxes": sample_boxes,
        "weights": torch.tensor([0.5, 0.3, 0.2], device=device),
    }


def _specs(
    loaded: LoadedNet, x: dict[str, Tensor]
) -> dict[
    str, tuple[Callable[[], nn.Module], list[str], list[str], list[str], dict[str, dict[int, str]] | None]
]:
    """name -> (module factory, its example-input keys, input names, output names, dynamic axes)."""
    net = loaded.net
    batch = {0: "batch"}
    samples = {0: "samples"}
    maps = {"layer2": {2: "h2", 3: "w2"}, "layer3": {2: "h3", 3: "w3"}}
    return {
        "backbone": (
            lambda: parts.BackboneFeatures(net),
            ["images"],
            ["images"],
            ["layer2", "layer3"],
            {"images": batch},
        ),
        "clf_features": (
            lambda: parts.ClassifierFeatures(net),
            ["layer3"],
            ["layer3"],
            ["features"],
            {"layer3": batch},
        ),
        "clf_scores": (
            lambda: parts.ClassifierScores(net),
            ["filters", "features"],
            ["filters", "features"],
            ["scores"],
            None,
        ),
        "box_features": (
            lambda: parts.BoxTestFeatures(net),
            ["layer2", "layer3", "mod2", "mod3"],
            ["layer2", "layer3", "mod2", "mod3"],
            ["mod_feat2", "mod_feat3"],
            maps,
        ),
        "box_tables": (
            parts.BoxTables,
            ["mod_feat2", "mod_feat3"],
            ["mod_feat2", "mod_feat3"],
            list(TABLES),
            {"mod_feat2": maps["layer2"], "mod_feat3": maps["layer3"]},
        ),
        "box_score_grad": (
            lambda: parts.box_score_and_grad(net, [x[k] for k in TABLES], x["boxes"]),
            [*TABLES, "boxes"],
            [*TABLES, "boxes"],
            ["scores", "grad"],
            None,
        ),
        "modulation": (
            lambda: parts.Modulation(net),
            ["layer2", "layer3", "box"],
            ["layer2", "layer3", "box"],
            ["mod2", "mod3"],
            None,
        ),
        "initial_filter": (
            lambda: parts.InitialFilter(net),
            ["samples", "sample_boxes"],
            ["features", "boxes"],
            ["filters"],
            {"features": samples, "boxes": samples},
        ),
        "filter_step": (
            lambda: parts.FilterSteps(net, 1),
            ["filters", "samples", "sample_boxes", "weights"],
            ["filters", "features", "boxes", "weights"],
            ["filters_out"],
            {"features": samples, "boxes": samples, "weights": samples},
        ),
    }


def _versions() -> dict[str, str]:
    import onnx

    return {"torch": torch.__version__, "onnx": onnx.__version__, "python": platform.python_version()}


def export_dimp(
    loaded: LoadedNet,
    params: DiMPParams,
    out_dir: str | os.PathLike,
    *,
    param_name: str,
    checkpoint: str | os.PathLike | None,
    models: Sequence[str] = MODEL_NAMES,
    progress: Callable[[str], None] | None = None,
) -> Manifest:
    """Export ``loaded``'s tracking parts for parameter set ``params`` into ``out_dir``; returns the manifest
    (also written there). ``checkpoint``: the file ``loaded`` came from (its sha256 goes into the manifest;
    None for a network that has none, e.g. a random one). ``models``: a subset of :data:`MODEL_NAMES`."""
    unknown = [m for m in models if m not in MODEL_NAMES]
    if unknown:
        raise ValueError(f"unknown ONNX model(s) {unknown}; choose from {list(MODEL_NAMES)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # the manifest marks a finished export
    num_boxes = params.num_random_boxes + 1
    rule = WindowRule.of_head(loaded.net.box_head)
    x = example_inputs(loaded, num_boxes)
    entries: dict[str, ModelEntry] = {}
    specs = _specs(loaded, x)
    for name in models:
        factory, keys, inputs, outputs, dynamic = specs[name]
        if progress is not None:
            progress(name)
        module = factory().eval()
        entries[name] = export_model(
            module,
            [x[k] for k in keys],
            out / f"{name}.onnx",
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=dynamic,
        )
    manifest = Manifest(
        tracker="dimp",
        param=param_name,
        checkpoint={
            "path": "" if checkpoint is None else str(checkpoint),
            "sha256": "" if checkpoint is None else file_sha256(checkpoint),
        },
        weights_sha256=weights_sha256(loaded.net),
        geometry=asdict(loaded.geometry),
        num_boxes=num_boxes,
        precision="float32",
        opset=OPSET,
        versions=_versions(),
        box_window={"strides": list(rule.strides), "halos": list(rule.halos)},
        models=entries,
    )
    write_manifest(out, manifest)
    return manifest
