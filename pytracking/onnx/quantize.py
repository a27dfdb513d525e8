"""int8 models by ONNX Runtime's quantisation: static, calibrated on frames of a dataset, for the convolutions;
dynamic for the box score's linear layers.

The convolutional models (:data:`QUANTIZED`: the backbone, the classifier feature head, the box head's test
branches) get int8 weights (per output channel, signed) and int8 activations (unsigned) with ranges calibrated
on the tensors they see when the float32 models track the first frames of the calibration dataset's
sequences. Weights use the reduced 7-bit range, which keeps x86 CPUs without VNNI from saturating their int8
products. The refinement's score-and-gradient model (:data:`DYNAMIC`) gets int8 weights (per output channel)
for the products with the box head's per-box linear layers, in its forward and its backward part, with the
activations quantised per call (:func:`quantize_linear_layers`): those products read the largest weights of
the ten calls per frame, while the pooling, the differences and the rest stay float32. The scoring, the
modulation and the filter optimizer stay float32: they are small, and the optimizer's line search is sensitive
to rounding.

:func:`quantize_export` turns a float32 export folder into an int8 one in place: the manifest's precision
becomes ``int8`` with the calibration source (dataset, frames), the models quantised either way and the new
files' checksums.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from ltr.admin.extras import import_extra
from ltr.admin.io import atomic_write
from ltr.dataset.registry import BENCHMARKS, parse_dataset_spec
from ltr.models.tracking import CLF_LAYER
from pytracking.onnx.manifest import Manifest, file_sha256, read_manifest, write_manifest
from pytracking.onnx.runtime import OrtStages
from pytracking.tracker.dimp.network import LoadedNet
from pytracking.tracker.dimp.params import DiMPParams
from pytracking.tracker.dimp.tracker import DiMPTracker

__all__ = ["DYNAMIC", "QUANTIZED", "calibration_inputs", "quantize_export", "quantize_linear_layers"]

#: models quantised statically (calibrated activations)
QUANTIZED = ("backbone", "clf_features", "box_features")
#: models whose large constant-weight products are quantised dynamically (:func:`quantize_linear_layers`)
DYNAMIC = ("box_score_grad",)
#: a product's constant weight matrix with at least this many entries is a linear layer worth int8 (the box
#: head's per-box layers have 2 304-6 400 x 256; the predictor's 512 and the bins' differences stay float32)
MIN_LINEAR_WEIGHTS = 65_536


class _Recorder:
    """OrtStages that also keep the inputs of the models in :data:`QUANTIZED` (per-frame calls only)."""

    def __init__(self, stages: OrtStages) -> None:
        self.stages = stages
        self.inputs: dict[str, list[dict[str, np.ndarray]]] = {name: [] for name in QUANTIZED}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stages, name)

    def _keep(self, model: str, *tensors: Tensor) -> None:
        names = [arg.name for arg in self.stages.sessions[model].get_inputs()]
        self.inputs[model].append(
            {n: t.detach().float().contiguous().numpy().copy() for n, t in zip(names, tensors)}
        )

    def backbone(self, images: Tensor) -> dict[str, Tensor]:
        self._keep("backbone", images)
        return self.stages.backbone(images)

    def clf_features(self, layer3: Tensor) -> Tensor:
        self._keep("clf_features", layer3)
        return self.stages.clf_features(layer3)

    def box_features(
        self, feats: dict[str, Tensor], modulation: tuple[Tensor, Tensor]
    ) -> tuple[Tensor, Tensor]:
        self._keep("box_features", feats["layer2"], feats["layer3"], *modulation)
        return self.stages.box_features(feats, modulation)


def calibration_inputs(
    folder: str | os.PathLike,
    loaded: LoadedNet,
    params: DiMPParams,
    *,
    dataset: str = "synthetic:val",
    root: str | None = None,
    num_frames: int = 64,
) -> dict[str, list[dict[str, np.ndarray]]]:
    """The inputs (model name -> list of input feeds) of the :data:`QUANTIZED` models when the float32 models
    of ``folder`` track ``dataset`` (``name[:split]``): about ``num_frames`` frames, the first frames of up to
    8 sequences (fewer frames each when the dataset has more sequences)."""
    name, split = parse_dataset_spec(dataset)
    data = BENCHMARKS[name].open(root, split)
    names = data.sequence_names()
    if not names:
        raise ValueError(f"calibration dataset {dataset!r} has no sequences")
    sequences = names[: min(len(names), 8)]
    per_sequence = max(1, math.ceil(num_frames / len(sequences)))
    float_params = dataclasses.replace(params, backend="onnxruntime", onnx_dir=str(folder), compile=False)
    tracker = DiMPTracker(loaded.net, loaded.geometry, float_params)
    recorder = _Recorder(tracker.stages)  # type: ignore[arg-type]
    tracker.stages = recorder  # type: ignore[assignment]
    for seq_name in sequences:
        sequence = data.get_sequence(seq_name)
        tracker.initialize(sequence.frame(0), sequence.init_box)
        for i in range(1, min(len(sequence), per_sequence + 1)):
            tracker.track(sequence.frame(i))
            if len(recorder.inputs["backbone"]) >= num_frames:
                return recorder.inputs
    return recorder.inputs


def _reader(feeds: list[dict[str, np.ndarray]]) -> Any:
    ort_quant = import_extra("onnxruntime.quantization", "onnx")

    class Reader(ort_quant.CalibrationDataReader):
        def __init__(self) -> None:
            self._it: Iterator[dict[str, np.ndarray]] = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

        def rewind(self) -> None:
            self._it = iter(feeds)

    return Reader()


def appended_branch(model: Any, output: str) -> list[str]:
    """Names of the nodes of ONNX ``model`` that compute only the second input of the two-input Concat
    producing graph output ``output`` (and that Concat); empty when another node produces it."""
    producer = {o: n for n in model.graph.node for o in n.output}
    last = producer.get(output)
    if last is None or last.op_type != "Concat" or len(last.input) != 2:
        return []

    def ancestors(name: str) -> set[str]:
        seen: set[str] = set()
        stack = [name]
        while stack:
            node = producer.get(stack.pop())
            if node is not None and node.name not in seen:
                seen.add(node.name)
                stack.extend(node.input)
        return seen

    return sorted(ancestors(last.input[1]) - ancestors(last.input[0])) + [last.name]


def quantize_model(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    feeds: list[dict[str, np.ndarray]],
    *,
    float_outputs: Sequence[str] = (),
) -> None:
    """Statically quantise ONNX model ``src`` into ``dst`` (atomically) with activation ranges from ``feeds``;
    the :func:`appended_branch` of each of ``float_outputs`` stays float32."""
    ort_quant = import_extra("onnxruntime.quantization", "onnx")
    onnx = import_extra("onnx", "onnx")
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp:
        pre, out = Path(tmp) / "pre.onnx", Path(tmp) / "int8.onnx"
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
        model = onnx.load(str(pre))
        exclude = [name for output in float_outputs for name in appended_branch(model, output)]
        ort_quant.quantize_static(
            str(pre),
            str(out),
            _reader(feeds),
            nodes_to_exclude=exclude,
            quant_format=ort_quant.QuantFormat.QDQ,
            per_channel=True,
            reduce_range=True,
            activation_type=ort_quant.QuantType.QUInt8,
            weight_type=ort_quant.QuantType.QInt8,
            calibrate_method=ort_quant.CalibrationMethod.MinMax,
            # an InstanceNormalization's scale (C,) has its channels on axis 0; ORT's default axis 1 is out of
            # range there and falls back to one scale per tensor, with a warning per node (IBN-a backbones)
            extra_options={"QDQOpTypePerChannelSupportToAxis": {"InstanceNormalization": 0}},
        )
        data = out.read_bytes()
    atomic_write(dst, lambda f: f.write(data))


def _constant_weights(model: Any) -> Any:
    """``model`` with the constant right operands of its products as plain initializers: a ``Gemm``
    (``A @ B' + C``, B constant, possibly transposed) becomes ``MatMul`` + ``Add`` and a ``MatMul`` of a
    transposed initializer takes the transposed copy, since the dynamic quantiser takes only a ``MatMul`` whose
    weight is an initializer. The values computed are the same."""
    onnx = import_extra("onnx", "onnx")
    from onnx import helper, numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}

    def constant(name: str) -> np.ndarray | None:
        if name in inits:
            return numpy_helper.to_array(inits[name])
        node = producer.get(name)
        if node is None or node.op_type != "Transpose" or node.input[0] not in inits:
            return None
        perm = [list(a.ints) for a in node.attribute if a.name == "perm"]
        return numpy_helper.to_array(inits[node.input[0]]).transpose(*(perm[0] if perm else []))

    nodes = []
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Gemm":
            rewrite = attrs.get("transA", 0) == 0 and attrs.get("alpha", 1.0) == attrs.get("beta", 1.0) == 1.0
        else:  # a MatMul whose weight is already an initializer stays
            rewrite = node.op_type == "MatMul" and node.input[1] not in inits
        weight = constant(node.input[1]) if rewrite else None
        if weight is None or weight.ndim != 2:
            nodes.append(node)
            continue
        if attrs.get("transB", 0):
            weight = weight.T
        name = f"{node.name}_weight"
        model.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(weight), name))
        if node.op_type == "MatMul" or len(node.input) < 3 or not node.input[2]:
            nodes.append(helper.make_node("MatMul", [node.input[0], name], list(node.output), name=node.name))
        else:
            product = f"{node.name}_product"
            nodes.append(helper.make_node("MatMul", [node.input[0], name], [product], name=node.name))
            nodes.append(
                helper.make_node("Add", [product, node.input[2]], list(node.output), name=f"{node.name}_bias")
            )
    # the transposes of weights that no node reads any more, and those weights, go
    outputs = {o.name for o in model.graph.output}
    used = {name for n in nodes for name in n.input} | outputs
    nodes = [n for n in nodes if n.op_type != "Transpose" or any(o in used for o in n.output)]
    used = {name for n in nodes for name in n.input} | outputs
    kept = [i for i in model.graph.initializer if i.name in used]
    del model.graph.node[:], model.graph.initializer[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    return model


def quantize_linear_layers(src: str | os.PathLike, dst: str | os.PathLike) -> list[str]:
    """Dynamically quantise the products of ONNX model ``src`` with constant weight matrices of at least
    :data:`MIN_LINEAR_WEIGHTS` entries (int8 weights per output channel in the 7-bit range, uint8 activations
    quantised per call) into ``dst`` (atomically); returns the names of the quantised nodes."""
    ort_quant = import_extra("onnxruntime.quantization", "onnx")
    onnx = import_extra("onnx", "onnx")
    model = _constant_weights(onnx.load(str(src)))
    sizes = {i.name: math.prod(i.dims) for i in model.graph.initializer}
    nodes = [
        n.name
        for n in model.graph.node
        if n.op_type == "MatMul" and sizes.get(n.input[1], 0) >= MIN_LINEAR_WEIGHTS
    ]
    with tempfile.TemporaryDirectory() as tmp:
        pre, out = Path(tmp) / "pre.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(pre))
        # ORT's dynamic quantiser logs a suggestion to pre-process the model through the root logger; its
        # pre-processing would fuse the products back into Gemm, so the suggestion is silenced here
        previous = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            ort_quant.quantize_dynamic(
                str(pre),
                str(out),
                op_types_to_quantize=["MatMul"],
                nodes_to_quantize=nodes,
                per_channel=True,
                reduce_range=True,  # 7-bit weights, as the static models': no saturation without VNNI
                weight_type=ort_quant.QuantType.QInt8,
            )
        finally:
            logging.disable(previous)
        data = out.read_bytes()
    atomic_write(dst, lambda f: f.write(data))
    return nodes


def quantize_export(
    folder: str | os.PathLike,
    loaded: LoadedNet,
    params: DiMPParams,
    *,
    dataset: str = "synthetic:val",
    root: str | None = None,
    num_frames: int = 64,
) -> Manifest:
    """Quantise the float32 export in ``folder`` to int8 in place (module docstring); returns the manifest."""
    manifest = read_manifest(folder)
    if manifest.precision != "float32":
        raise ValueError(f"{folder}: already {manifest.precision}; quantise a float32 export")
    feeds = calibration_inputs(folder, loaded, params, dataset=dataset, root=root, num_frames=num_frames)
    (Path(folder) / "manifest.json").unlink()  # the folder is not a finished export while files change
    models = dict(manifest.models)
    # fixed features (NetConfig.fixed_clf_features / fixed_box_features), appended to layers by the backbone
    # (the classifier layer's also normalised on their own by the feature head), stay float32: their divisions
    # and square roots lose too much in int8
    fixed = tuple(loaded.net.backbone.fixed_channels)
    keep = {"backbone": fixed, "clf_features": ("features",) if CLF_LAYER in fixed else ()}
    for name in QUANTIZED:
        path = Path(folder) / manifest.models[name].file
        quantize_model(path, path, feeds[name], float_outputs=keep.get(name, ()))
        models[name] = dataclasses.replace(models[name], sha256=file_sha256(path))
    for name in DYNAMIC:
        path = Path(folder) / manifest.models[name].file
        quantize_linear_layers(path, path)
        models[name] = dataclasses.replace(models[name], sha256=file_sha256(path))
    manifest = dataclasses.replace(
        manifest,
        models=models,
        precision="int8",
        calibration={
            "dataset": dataset,
            "frames": len(feeds["backbone"]),
            "models": list(QUANTIZED),
            "dynamic": list(DYNAMIC),
        },
    )
    write_manifest(folder, manifest)
    return manifest
